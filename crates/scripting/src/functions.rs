//! FUNCTION libraries: `#!lua name=<lib>` code that registers functions
//! with `redis.register_function` when loaded, and FCALL.
//!
//! A library's code runs once, at FUNCTION LOAD, in an environment where
//! only `redis.register_function`, `redis.log` and the version fields exist
//! (as in Redis); the functions it registers later run with the full API.
//! Each library gets its own environment proxy whose reads switch from the
//! load-time globals to the runtime globals when loading ends, so closures
//! created while loading see the runtime API when called.

use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use mlua::{Function, Lua, MultiValue, Table, Value};

use crate::dump::{self, RestorePolicy};
use crate::host::{Host, RunControl};
use crate::redislib::{flag_by_name, raise_err, ret_none, value_to_bytes};
use crate::sandbox::{self, error_text, Kind, RunState, Sandbox};
use crate::{Frame, ScriptFlags, DEFAULT_MEMORY_LIMIT};

/// How long a library's code may run at FUNCTION LOAD (Redis: 500 ms).
pub const LOAD_TIMEOUT: Duration = Duration::from_millis(500);

/// A function registered by the library being loaded.
pub(crate) struct Registered {
    pub name: String,
    pub description: Option<Bytes>,
    pub flags: ScriptFlags,
    pub func: Function,
}

/// A function, as FUNCTION LIST shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionInfo {
    /// Its name (what FCALL takes).
    pub name: String,
    /// Its description, if registered with one.
    pub description: Option<Bytes>,
    /// Its flags.
    pub flags: ScriptFlags,
}

/// A library, as FUNCTION LIST shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LibraryInfo {
    /// Its name.
    pub name: String,
    /// Its engine: always `LUA`.
    pub engine: &'static str,
    /// Its code, as loaded.
    pub code: Bytes,
    /// Its functions, by name.
    pub functions: Vec<FunctionInfo>,
}

struct Library {
    info: LibraryInfo,
    funcs: Vec<Function>,
}

/// The FUNCTION engine: a Lua state and its libraries.
pub struct FunctionEngine {
    sandbox: Sandbox,
    libs: BTreeMap<String, Library>,
    /// Function name → (library, index in its functions).
    index: HashMap<String, (String, usize)>,
    memory_limit: usize,
}

fn valid_name(name: &[u8]) -> bool {
    !name.is_empty() && name.iter().all(|&c| c.is_ascii_alphanumeric() || c == b'_')
}

/// Parses the library header `#!<engine> name=<lib>`: returns the engine,
/// the library name and the header's length.
pub fn parse_library_header(code: &[u8]) -> Result<(String, String, usize), String> {
    if !code.starts_with(b"#!") {
        return Err("ERR Missing library metadata".into());
    }
    let Some(end) = code.iter().position(|&c| c == b'\n') else {
        return Err("ERR Invalid library metadata".into());
    };
    let line = &code[..end];
    let mut parts = line
        .split(|c| c.is_ascii_whitespace())
        .filter(|p| !p.is_empty());
    let Some(first) = parts.next() else {
        return Err("ERR Invalid library metadata".into());
    };
    let engine = String::from_utf8_lossy(&first[2..]).into_owned();
    let mut name: Option<String> = None;
    for part in parts {
        if part.len() >= 5 && part[..5].eq_ignore_ascii_case(b"name=") {
            if name.is_some() {
                return Err(
                    "ERR Invalid metadata value, name argument was given multiple times".into(),
                );
            }
            name = Some(String::from_utf8_lossy(&part[5..]).into_owned());
            continue;
        }
        return Err(format!(
            "ERR Invalid metadata value given: {}",
            String::from_utf8_lossy(part)
        ));
    }
    let Some(name) = name else {
        return Err("ERR Library name was not given".into());
    };
    Ok((engine, name, end))
}

impl FunctionEngine {
    /// A new engine with [`DEFAULT_MEMORY_LIMIT`].
    pub fn new() -> FunctionEngine {
        FunctionEngine::with_memory_limit(DEFAULT_MEMORY_LIMIT)
    }

    /// A new engine whose Lua heap may grow by at most `limit` bytes past
    /// its initial size (0: unlimited).
    pub fn with_memory_limit(limit: usize) -> FunctionEngine {
        FunctionEngine {
            sandbox: Sandbox::new(Kind::Function, RunControl::new(), limit)
                .expect("building the Lua sandbox cannot fail"),
            libs: BTreeMap::new(),
            index: HashMap::new(),
            memory_limit: limit,
        }
    }

    /// The run clock and kill switch (FUNCTION KILL), shareable with other
    /// threads.
    pub fn control(&self) -> Arc<RunControl> {
        self.sandbox.state.control.clone()
    }

    /// As [`crate::EvalEngine::set_busy_callback`].
    pub fn set_busy_callback(&mut self, f: impl FnMut(u64) + 'static) {
        *self.sandbox.state.busy_callback.borrow_mut() = Some(Box::new(f));
    }

    /// As [`crate::EvalEngine::clear_busy_callback`].
    pub fn clear_busy_callback(&mut self) {
        *self.sandbox.state.busy_callback.borrow_mut() = None;
    }

    /// Compiles and runs a library's code, collecting what it registers.
    /// Changes no registry.
    fn build(&self, host: &mut dyn Host, code: &[u8]) -> Result<Library, String> {
        let (engine, name, header) = parse_library_header(code)?;
        if !valid_name(name.as_bytes()) {
            return Err("ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long".into());
        }
        if !engine.eq_ignore_ascii_case("lua") {
            return Err(format!("ERR Engine '{engine}' not found"));
        }
        let lua = &self.sandbox.lua;
        let libenv = self.sandbox.libenv.as_ref().expect("function sandbox");
        let (env, done): (Table, Function) = libenv.call(()).map_err(|e| e.to_string())?;
        let body = crate::cache::without_shebang(code, header);
        let compiled = self.sandbox.compile(&body, "@user_function", Some(env));
        let func = match compiled {
            Ok(f) => f,
            Err(e) => {
                let _ = done.call::<()>(());
                return Err(format!("ERR Error compiling function: {e}"));
            }
        };
        let st: &Rc<RunState> = &self.sandbox.state;
        *st.registering.borrow_mut() = Some(Vec::new());
        st.load_deadline.set(Some(Instant::now() + LOAD_TIMEOUT));
        let (out, _, _) = self
            .sandbox
            .run_raw(host, &func, None, ScriptFlags::default());
        st.load_deadline.set(None);
        let registered = st.registering.borrow_mut().take().unwrap_or_default();
        let _ = done.call::<()>(());
        if let Err(e) = out {
            return Err(format!(
                "ERR Error registering functions: {}",
                String::from_utf8_lossy(&error_text(&e))
            ));
        }
        if registered.is_empty() {
            return Err("ERR No functions registered".into());
        }
        let _ = lua;
        let mut funcs = Vec::with_capacity(registered.len());
        let mut infos = Vec::with_capacity(registered.len());
        for r in registered {
            infos.push(FunctionInfo {
                name: r.name,
                description: r.description,
                flags: r.flags,
            });
            funcs.push(r.func);
        }
        Ok(Library {
            info: LibraryInfo {
                name,
                engine: "LUA",
                code: Bytes::copy_from_slice(code),
                functions: infos,
            },
            funcs,
        })
    }

    /// Adds built libraries; `replace` lets them replace libraries of the
    /// same name. `quoted` picks FUNCTION LOAD's error text (`'name'`).
    fn commit(&mut self, new: Vec<Library>, replace: bool, quoted: bool) -> Result<(), String> {
        let replaced: Vec<&str> = new.iter().map(|l| l.info.name.as_str()).collect();
        let mut seen = HashMap::new();
        for lib in &new {
            if !replace && self.libs.contains_key(&lib.info.name) {
                return Err(if quoted {
                    format!("ERR Library '{}' already exists", lib.info.name)
                } else {
                    format!("ERR Library {} already exists", lib.info.name)
                });
            }
            for f in &lib.info.functions {
                let clash = match self.index.get(&f.name) {
                    Some((owner, _)) => !replace || !replaced.contains(&owner.as_str()),
                    None => false,
                };
                if clash || seen.insert(f.name.clone(), ()).is_some() {
                    return Err(format!("ERR Function {} already exists", f.name));
                }
            }
        }
        for lib in new {
            self.remove(&lib.info.name.clone());
            for (i, f) in lib.info.functions.iter().enumerate() {
                self.index
                    .insert(f.name.clone(), (lib.info.name.clone(), i));
            }
            self.libs.insert(lib.info.name.clone(), lib);
        }
        Ok(())
    }

    fn remove(&mut self, name: &str) -> bool {
        match self.libs.remove(name) {
            Some(lib) => {
                for f in &lib.info.functions {
                    self.index.remove(&f.name);
                }
                true
            }
            None => false,
        }
    }

    /// FUNCTION LOAD (`replace`: with REPLACE): returns the library name, or the error text.
    /// `host` only serves `redis.log` while the code runs.
    pub fn load(
        &mut self,
        host: &mut dyn Host,
        code: &[u8],
        replace: bool,
    ) -> Result<String, String> {
        // Redis checks the name clash before running the code.
        let (_, name, _) = parse_library_header(code)?;
        if !replace && valid_name(name.as_bytes()) && self.libs.contains_key(&name) {
            let (engine, _, _) = parse_library_header(code)?;
            if engine.eq_ignore_ascii_case("lua") {
                return Err(format!("ERR Library '{name}' already exists"));
            }
        }
        let lib = self.build(host, code)?;
        let name = lib.info.name.clone();
        self.commit(vec![lib], replace, true)?;
        Ok(name)
    }

    /// FUNCTION DELETE.
    pub fn delete(&mut self, name: &str) -> Result<(), String> {
        if self.remove(name) {
            Ok(())
        } else {
            Err("ERR Library not found".into())
        }
    }

    /// FUNCTION FLUSH: deletes every library and starts a fresh Lua state.
    pub fn flush(&mut self) {
        self.libs.clear();
        self.index.clear();
        let control = self.control();
        let callback = self.sandbox.state.busy_callback.borrow_mut().take();
        if let Ok(s) = Sandbox::new(Kind::Function, control, self.memory_limit) {
            self.sandbox = s;
        }
        *self.sandbox.state.busy_callback.borrow_mut() = callback;
    }

    /// The libraries (FUNCTION LIST), by name.
    pub fn libraries(&self) -> impl Iterator<Item = &LibraryInfo> {
        self.libs.values().map(|l| &l.info)
    }

    /// A function's flags (FCALL_RO needs `no-writes`), if it exists.
    pub fn function_flags(&self, name: &str) -> Option<ScriptFlags> {
        let (lib, i) = self.index.get(name)?;
        Some(self.libs[lib].info.functions[*i].flags)
    }

    /// Number of functions.
    pub fn function_count(&self) -> usize {
        self.index.len()
    }

    /// Bytes used by the Lua heap.
    pub fn used_memory(&self) -> usize {
        self.sandbox.lua.used_memory()
    }

    /// FCALL: runs function `name` with `keys` and `args` as its two
    /// arguments.
    pub fn fcall(
        &mut self,
        host: &mut dyn Host,
        name: &str,
        keys: &[&[u8]],
        args: &[&[u8]],
    ) -> Frame {
        let Some((lib, i)) = self.index.get(name) else {
            return Frame::Error(Bytes::from_static(b"ERR Function not found"));
        };
        let lib = &self.libs[lib];
        let f = lib.funcs[*i].clone();
        let flags = lib.info.functions[*i].flags;
        let lua = &self.sandbox.lua;
        let tables = (|| -> mlua::Result<(Table, Table)> {
            Ok((
                sandbox::string_array(lua, keys)?,
                sandbox::string_array(lua, args)?,
            ))
        })();
        match tables {
            Ok(t) => self.sandbox.run(host, &f, Some(t), name, flags),
            Err(e) => Frame::Error(Bytes::from(format!(
                "ERR Error running script {name}, {}",
                sandbox::plain_error_message(&e)
            ))),
        }
    }

    /// FUNCTION DUMP: every library in one payload.
    pub fn dump(&self) -> Vec<u8> {
        dump::encode(self.libs.values().map(|l| &l.info.code[..]))
    }

    /// FUNCTION RESTORE: loads the libraries of a DUMP payload.
    pub fn restore(
        &mut self,
        host: &mut dyn Host,
        payload: &[u8],
        policy: RestorePolicy,
    ) -> Result<(), String> {
        let codes = dump::decode(payload)?;
        let mut built = Vec::with_capacity(codes.len());
        let mut names = HashMap::new();
        for code in &codes {
            let lib = self.build(host, code)?;
            if names.insert(lib.info.name.clone(), ()).is_some() {
                return Err(format!("ERR Library {} already exists", lib.info.name));
            }
            built.push(lib);
        }
        match policy {
            RestorePolicy::Flush => {
                // The built functions belong to the current Lua state: keep
                // it, drop the libraries (back if the payload is refused).
                let libs = std::mem::take(&mut self.libs);
                let index = std::mem::take(&mut self.index);
                let r = self.commit(built, false, false);
                if r.is_err() {
                    self.libs = libs;
                    self.index = index;
                }
                r
            }
            RestorePolicy::Append => self.commit(built, false, false),
            RestorePolicy::Replace => self.commit(built, true, false),
        }
    }
}

impl Default for FunctionEngine {
    fn default() -> Self {
        FunctionEngine::new()
    }
}

/// `redis.register_function`, positional `(name, callback)` or named
/// `{function_name=, callback=, flags=, description=}`.
pub(crate) fn register_function(
    lua: &Lua,
    st: &Rc<RunState>,
    a: MultiValue,
) -> mlua::Result<MultiValue> {
    if st.registering.borrow().is_none() {
        return raise_err(
            lua,
            "redis.register_function can only be called on FUNCTION LOAD command",
        );
    }
    let args: Vec<Value> = a.into_iter().collect();
    let parsed = match args.len() {
        1 => named_args(&args[0]),
        2 => positional_args(&args[0], &args[1]),
        _ => Err("wrong number of arguments to redis.register_function"),
    };
    let r = match parsed {
        Ok(r) => r,
        Err(e) => return raise_err(lua, e),
    };
    if !valid_name(r.name.as_bytes()) {
        return raise_err(lua, "Function names can only contain letters, numbers, or underscores(_) and must be at least one character long");
    }
    let mut reg = st.registering.borrow_mut();
    let list = reg.as_mut().expect("checked above");
    if list.iter().any(|x| x.name == r.name) {
        return raise_err(lua, "Function already exists in the library");
    }
    list.push(r);
    ret_none()
}

fn positional_args(name: &Value, cb: &Value) -> Result<Registered, &'static str> {
    let name =
        value_to_bytes(name).ok_or("first argument to redis.register_function must be a string")?;
    let Value::Function(f) = cb else {
        return Err("second argument to redis.register_function must be a function");
    };
    Ok(Registered {
        name: String::from_utf8_lossy(&name).into_owned(),
        description: None,
        flags: ScriptFlags::default(),
        func: f.clone(),
    })
}

fn named_args(t: &Value) -> Result<Registered, &'static str> {
    let Value::Table(t) = t else {
        return Err("calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).");
    };
    let mut name = None;
    let mut description = None;
    let mut func = None;
    let mut flags = ScriptFlags::default();
    for kv in t.pairs::<Value, Value>() {
        let Ok((k, v)) = kv else { break };
        let Some(key) = value_to_bytes(&k) else {
            return Err("named argument key given to redis.register_function is not a string");
        };
        let key = key.to_ascii_lowercase();
        match &key[..] {
            b"function_name" => {
                name = Some(value_to_bytes(&v).ok_or(
                    "function_name argument given to redis.register_function must be a string",
                )?)
            }
            b"description" => {
                description = Some(value_to_bytes(&v).ok_or(
                    "description argument given to redis.register_function must be a string",
                )?)
            }
            b"callback" => match v {
                Value::Function(f) => func = Some(f),
                _ => {
                    return Err(
                        "callback argument given to redis.register_function must be a function",
                    )
                }
            },
            b"flags" => {
                let Value::Table(ft) = v else {
                    return Err("flags argument to redis.register_function must be a table representing function flags");
                };
                let mut i = 1;
                loop {
                    let fv: Value = ft.get(i).unwrap_or(Value::Nil);
                    if fv.is_nil() {
                        break;
                    }
                    let set = value_to_bytes(&fv)
                        .and_then(|b| flag_by_name(&b, true))
                        .ok_or("unknown flag given")?;
                    set(&mut flags);
                    i += 1;
                }
            }
            _ => return Err("unknown argument given to redis.register_function"),
        }
    }
    let name = name.ok_or("redis.register_function must get a function name argument")?;
    let func = func.ok_or("redis.register_function must get a callback argument")?;
    Ok(Registered {
        name: String::from_utf8_lossy(&name).into_owned(),
        description: description.map(Bytes::from),
        flags,
        func,
    })
}
