//! The Lua state a script runs in: Redis's library set, read-only globals,
//! the error handler, the memory limit and the kill hook.
//!
//! # How the sandbox is built
//!
//! Redis protects its globals with a patched Lua (`lua_enablereadonlytable`).
//! Darner runs the stock Lua 5.1 of the `mlua` crate, so read-only tables
//! are built the classic way: every table a script can reach from the
//! globals (the globals themselves, `string`, `math`, `redis`, `cjson`, ...)
//! is an empty *proxy* whose metatable reads through to the real table
//! (`__index`) and refuses writes (`__newindex` raises Redis's "Attempt to
//! modify a readonly table"); the metatable is hidden (`__metatable`), and
//! `rawset`, `setmetatable`, `next`, `pairs` and `rawget` see through or
//! refuse proxies. The globals proxy is installed as the thread's global
//! table (`setfenv(0, ...)`), so chunks made by `loadstring`, coroutines and
//! `getfenv` all see the proxy, never a real table. Reading a missing global
//! raises Redis's "Script attempted to access nonexistent global variable".
//!
//! Errors: every native function (and every prelude function a script can
//! call) answers a status code and is wrapped in the C closure of `tramp`,
//! which raises what Redis raises: a `{err=...}` table for `redis.call`, a
//! string with the caller's position for library functions. The error
//! handler records the error's `source` and `line` from the innermost script
//! frame, skipping C functions and the prelude (chunk `=darner`), as Redis's
//! handler skips C frames.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;

use bytes::Bytes;
use darner_resp::Frame;
use mlua::{
    ChunkMode, Function, HookTriggers, Lua, LuaOptions, MultiValue, StdLib, Table, Value, VmState,
};

use crate::convert::{error_table, lua_to_frame};
use crate::host::{Host, RunControl};
use crate::{libs, redislib, ScriptFlags};

/// The chunk name of Darner's internal Lua code (skipped in error positions).
pub(crate) const INTERNAL_CHUNK: &str = "=darner";

/// Instructions between two checks of the kill switch (Redis: 100000).
const HOOK_EVERY: u32 = 100_000;

/// The error a killed script stops with (after the handler's `ERR `).
pub(crate) const KILLED: &str = "Script killed by user with SCRIPT KILL...";

/// State shared by the native functions of one sandbox.
pub(crate) struct RunState {
    /// The protocol set by `redis.setresp` (2 or 3).
    pub resp: Cell<u8>,
    /// The running script's flags.
    pub flags: Cell<ScriptFlags>,
    /// Redis's drand48 state for `math.random`.
    pub rand: Cell<u64>,
    /// Functions registered by the library being loaded (FUNCTION LOAD).
    pub registering: RefCell<Option<Vec<crate::functions::Registered>>>,
    /// The kill switch and run clock.
    pub control: Arc<RunControl>,
    /// When a FUNCTION LOAD must stop (its 500 ms timeout).
    pub load_deadline: Cell<Option<std::time::Instant>>,
    /// Called from the hook while a script runs (see `EvalEngine::set_busy_callback`).
    pub busy_callback: RefCell<Option<BusyCallback>>,
}

/// A callback run every 100000 instructions with the run's elapsed ms.
pub(crate) type BusyCallback = Box<dyn FnMut(u64)>;

/// Which API the sandbox exposes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Kind {
    /// EVAL: `KEYS` and `ARGV` globals.
    Eval,
    /// FUNCTION: libraries loaded with a restricted environment.
    Function,
}

/// One Lua state with Redis's API.
pub(crate) struct Sandbox {
    pub lua: Lua,
    /// The real global table (behind the read-only proxy).
    pub globals: Table,
    pub state: Rc<RunState>,
    /// Internal: `run(f, nargs, a, b)` -> xpcall with Redis's error handler.
    runner: Function,
    /// Internal: `libenv(load_table)` -> a library environment proxy and its
    /// switch `done()` that points it at the runtime globals.
    pub libenv: Option<Function>,
}

/// The Lua prelude. Arguments: the real globals, the native helpers, the
/// tables to make read-only.
const PRELUDE: &str = r#"
local G, P, LOADG = ...
local error, type, tostring, unpack, select = G.error, G.type, G.tostring, G.unpack, G.select
local rawget, rawset, rawnext, rawpairs = G.rawget, G.rawset, G.next, G.pairs
local setmetatable, getmetatable, rawpcall, rawxpcall = G.setmetatable, G.getmetatable, G.pcall, G.xpcall
local rawloadstring, setfenv, getfenv = G.loadstring, G.setfenv, G.getfenv
local co_resume, co_wrap, co_create = G.coroutine.resume, G.coroutine.wrap, G.coroutine.create
local concat = G.table.concat
local killed, where, errobj = P.killed, P.where, P.errobj
local KILLED = P.KILLED
local RO = 'Attempt to modify a readonly table'
local real_of = setmetatable({}, {__mode = 'k'})

local function ro_newindex() error(RO, 2) end
local function freeze(t, shown_mt)
  local p = {}
  setmetatable(p, {__index = t, __newindex = ro_newindex, __metatable = shown_mt or false})
  real_of[p] = t
  return p
end
local function nonexistent(t, k)
  error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
end

local tramp = P.tramp
-- Argument errors as the C functions word them (a prelude function would
-- otherwise report its own position and local names).
local function tn(n, ...)
  if select('#', ...) < n then return 'no value' end
  return type((select(n, ...)))
end
local function bad(n, fname, msg)
  return "bad argument #" .. n .. " to '" .. fname .. "' (" .. msg .. ")"
end
local function need_table(fname, ...)
  if type((...)) ~= 'table' then
    return bad(1, fname, 'table expected, got ' .. tn(1, ...))
  end
end
local function fix_pcall(ok, ...)
  if killed() then return 2, KILLED end
  if ok then return 3, {ok, ...}, select('#', ...) + 1 end
  local e = ...
  if type(e) == 'table' then
    local m = e.err
    if type(m) == 'string' or type(m) == 'number' then return 3, {false, m}, 2 end
  end
  return 3, {false, e}, 2
end
local function after(...)
  if killed() then return 2, KILLED end
  return 3, {...}, select('#', ...)
end
-- A killed script cannot swallow the kill with pcall, xpcall or a coroutine.
G.pcall = tramp(function(...)
  if select('#', ...) == 0 then return 3, {false, 'attempt to call a nil value'}, 2 end
  return fix_pcall(rawpcall(...))
end)
G.xpcall = tramp(function(f, h) return after(rawxpcall(f, h)) end)
local hook_thread = P.hook_thread
local function new_co(f, fname)
  local ok, c = rawpcall(co_create, f)
  if not ok then return nil, bad(1, fname, 'Lua function expected') end
  hook_thread(c)
  return c
end
local co = {}
for k, v in rawnext, G.coroutine do co[k] = v end
co.create = tramp(function(f)
  local c, e = new_co(f, 'create')
  if not c then return 1, e end
  return 0, c
end)
co.resume = tramp(function(...)
  if type((...)) ~= 'thread' then return 1, bad(1, 'resume', 'coroutine expected') end
  return after(co_resume(...))
end)
co.wrap = tramp(function(f)
  local c, e = new_co(f, 'wrap')
  if not c then return 1, e end
  local function check(ok, ...)
    if killed() then return 2, KILLED end
    if not ok then
      local e = ...
      if type(e) == 'string' then return 1, e end
      return 2, e
    end
    return 3, {...}, select('#', ...)
  end
  return 0, tramp(function(...) return check(co_resume(c, ...)) end)
end)
G.coroutine = co

-- Text chunks only (bytecode can break the VM), always in the sandbox.
local function text_only(s, name)
  if type(s) ~= 'string' and type(s) ~= 'number' then
    return 1, bad(1, 'loadstring', 'string expected, got ' .. (s == nil and 'nil' or type(s)))
  end
  if type(s) == 'string' and s:byte(1) == 27 then
    return 3, {nil, 'binary chunks are not allowed'}, 2
  end
  return 3, {rawloadstring(s, name)}, 2
end
G.loadstring = tramp(function(...)
  if select('#', ...) == 0 then return 1, bad(1, 'loadstring', 'string expected, got no value') end
  return text_only(...)
end)
G.load = tramp(function(f, name)
  if type(f) ~= 'function' then return text_only(f, name) end
  local parts = {}
  while true do
    local s = f()
    if s == nil or s == '' then break end
    if type(s) ~= 'string' then return 3, {nil, 'reader function must return a string'}, 2 end
    parts[#parts + 1] = s
  end
  return text_only(concat(parts), name)
end)

-- Proxies are read-only for the raw functions too.
G.rawset = tramp(function(...)
  local e = need_table('rawset', ...)
  if e then return 1, e end
  local t, k, v = ...
  if real_of[t] then return 2, RO end
  return 0, rawset(t, k, v)
end)
G.setmetatable = tramp(function(...)
  local e = need_table('setmetatable', ...)
  if e then return 1, e end
  local t, m = ...
  if m ~= nil and type(m) ~= 'table' then return 1, bad(2, 'setmetatable', 'nil or table expected') end
  if real_of[t] then return 2, RO end
  return 0, setmetatable(t, m)
end)
G.rawget = tramp(function(...)
  local e = need_table('rawget', ...)
  if e then return 1, e end
  local t, k = ...
  return 0, rawget(real_of[t] or t, k)
end)
G.next = tramp(function(...)
  local e = need_table('next', ...)
  if e then return 1, e end
  local t, k = ...
  local k2, v2 = rawnext(real_of[t] or t, k)
  if k2 == nil then return 0, nil end
  return 3, {k2, v2}, 2
end)
G.pairs = tramp(function(...)
  local e = need_table('pairs', ...)
  if e then return 1, e end
  local t = ...
  return 3, {rawnext, real_of[t] or t, nil}, 3
end)
-- As Redis 7.0.15 / 7.2 with the 2025 sandbox fixes: no environment access.
G.getfenv, G.setfenv, G.newproxy = nil, nil, nil

-- Redis's error handler: errors become {err=..., source=..., line=...}.
local function handler(err)
  if type(err) == 'userdata' then err = errobj(err) end
  -- The shared kill error gets a position of its own.
  if err == KILLED then err = {err = KILLED.err} end
  if type(err) ~= 'table' then
    err = {err = 'ERR ' .. tostring(err)}
  end
  local src, line = where()
  if src then
    err.source = src
    err.line = line
  end
  return err
end
local function run(f, nargs, a, b)
  if nargs == 0 then return rawxpcall(f, handler) end
  return rawxpcall(function() return f(a, b) end, handler)
end

-- Redis's math.random / math.randomseed.
for k, v in rawnext, P.math do G.math[k] = v end

-- Freeze the libraries, then the globals.
for _, name in rawpairs(P.frozen) do G[name] = freeze(G[name]) end
local smt = getmetatable('')
smt.__index = G.string
smt.__metatable = freeze({__index = G.string})
local gproxy = freeze(G, {})
G._G = gproxy
setmetatable(G, {__index = nonexistent, __newindex = ro_newindex})
setfenv(0, gproxy)

-- FUNCTION LOAD: each library runs in its own environment proxy, reading the
-- load-time globals while it loads and the runtime globals afterwards.
local libenv
if LOADG then
  setmetatable(LOADG.redis, {__index = nonexistent})
  LOADG.redis = freeze(LOADG.redis)
  setmetatable(LOADG, {__index = nonexistent})
  libenv = function()
    local mt = {__index = LOADG, __newindex = ro_newindex, __metatable = false}
    local env = setmetatable({}, mt)
    real_of[env] = G
    return env, function() mt.__index = G end
  end
end
return run, libenv
"#;

impl Sandbox {
    pub fn new(kind: Kind, control: Arc<RunControl>, memory_limit: usize) -> mlua::Result<Sandbox> {
        let lua = Lua::new_with(
            StdLib::TABLE | StdLib::STRING | StdLib::MATH,
            LuaOptions::new(),
        )?;
        let state = Rc::new(RunState {
            resp: Cell::new(2),
            flags: Cell::new(ScriptFlags::default()),
            rand: Cell::new(redislib::RAND48_INITIAL),
            registering: RefCell::new(None),
            control,
            load_deadline: Cell::new(None),
            busy_callback: RefCell::new(None),
        });
        let g = lua.globals();
        for name in [
            "print", "dofile", "loadfile", "module", "require", "package", "os", "io", "debug",
        ] {
            g.raw_set(name, Value::Nil)?;
        }
        g.raw_set("cjson", libs::cjson::open(&lua)?)?;
        g.raw_set("struct", libs::structlib::open(&lua)?)?;
        g.raw_set("cmsgpack", libs::cmsgpack::open(&lua)?)?;
        g.raw_set("bit", libs::bit::open(&lua)?)?;
        g.raw_set("redis", redislib::open(&lua, &state, kind)?)?;
        // math.random / math.randomseed: Redis's deterministic drand48.
        let native_math = lua.create_table()?;
        redislib::add_math(&lua, &native_math, &state)?;

        let load_globals = if kind == Kind::Function {
            let t = lua.create_table()?;
            t.raw_set("redis", redislib::open_load(&lua, &state)?)?;
            Some(t)
        } else {
            None
        };

        let helpers = lua.create_table()?;
        helpers.raw_set(
            "tramp",
            lua.create_function(|lua, f: Function| crate::tramp::wrap(lua, f))?,
        )?;
        helpers.raw_set("math", native_math)?;
        helpers.raw_set(
            "frozen",
            lua.create_sequence_from([
                "string",
                "table",
                "math",
                "coroutine",
                "cjson",
                "struct",
                "cmsgpack",
                "bit",
                "redis",
            ])?,
        )?;
        helpers.raw_set("KILLED", error_table(&lua, KILLED.as_bytes())?)?;
        // Coroutines get the hook too (mlua's hook is per thread).
        let st = state.clone();
        helpers.raw_set(
            "hook_thread",
            lua.create_function(move |_, t: mlua::Thread| {
                t.set_hook(
                    HookTriggers::new().every_nth_instruction(HOOK_EVERY),
                    hook(&st),
                );
                Ok(())
            })?,
        )?;
        let st = state.clone();
        helpers.raw_set(
            "killed",
            lua.create_function(move |_, ()| Ok(st.control.kill_requested()))?,
        )?;
        helpers.raw_set(
            "where",
            lua.create_function(|lua, ()| Ok(error_position(lua)))?,
        )?;
        helpers.raw_set(
            "errobj",
            lua.create_function(|lua, v: Value| error_object(lua, v))?,
        )?;

        let (runner, libenv): (Function, Option<Function>) = lua
            .load(PRELUDE)
            .set_name(INTERNAL_CHUNK)
            .set_mode(ChunkMode::Text)
            .set_environment(lua.create_table()?)
            .call((g.clone(), helpers, load_globals.clone()))?;
        if kind == Kind::Eval {
            g.raw_set("KEYS", lua.create_table()?)?;
            g.raw_set("ARGV", lua.create_table()?)?;
        }
        if memory_limit > 0 {
            lua.gc_collect()?;
            lua.set_memory_limit(lua.used_memory() + memory_limit)?;
        }
        lua.set_hook(
            HookTriggers::new().every_nth_instruction(HOOK_EVERY),
            hook(&state),
        );
        Ok(Sandbox {
            lua,
            globals: g,
            state,
            runner,
            libenv,
        })
    }

    /// Compiles `code` (text only) as chunk `name` with the globals proxy as
    /// its environment.
    pub fn compile(&self, code: &[u8], name: &str, env: Option<Table>) -> Result<Function, String> {
        let mut chunk = self.lua.load(code).set_name(name).set_mode(ChunkMode::Text);
        if let Some(env) = env {
            chunk = chunk.set_environment(env);
        }
        chunk.into_function().map_err(|e| match e {
            mlua::Error::SyntaxError { message, .. } => message,
            mlua::Error::MemoryError(_) => {
                self.collect_garbage();
                "not enough memory".to_string()
            }
            other => other.to_string(),
        })
    }

    /// Runs `f` (with no arguments, or with `a` and `b`) under Redis's error
    /// handler, with `host` serving `redis.call` & co. Returns xpcall's
    /// outcome (`Ok` value or `Err` error object), and whether the script
    /// was killed.
    pub fn run_raw(
        &self,
        host: &mut dyn Host,
        f: &Function,
        args: Option<(Table, Table)>,
        flags: ScriptFlags,
    ) -> (Result<Value, Value>, bool, bool) {
        self.state.resp.set(2);
        self.state.flags.set(flags);
        let control = self.state.control.clone();
        control.begin();
        let result = self.lua.scope(|scope| {
            let st = self.state.clone();
            let hostfn = scope.create_function_mut(move |lua, args: MultiValue| {
                redislib::host_dispatch(lua, &st, host, args)
            })?;
            self.lua
                .set_named_registry_value(redislib::HOST_KEY, hostfn)?;
            let out: mlua::Result<MultiValue> = match args {
                None => self.runner.call((f.clone(), 0)),
                Some((a, b)) => self.runner.call((f.clone(), 2, a, b)),
            };
            self.lua
                .set_named_registry_value(redislib::HOST_KEY, Value::Nil)?;
            out
        });
        let killed = control.kill_requested();
        control.end();
        let resp3 = self.state.resp.get() == 3;
        self.state.resp.set(2);
        let out = match result {
            Ok(values) => {
                let mut it = values.into_iter();
                let ok = matches!(it.next(), Some(Value::Boolean(true)));
                let v = it.next().unwrap_or(Value::Nil);
                if ok {
                    Ok(v)
                } else {
                    Err(v)
                }
            }
            Err(e) => Err(self
                .lua
                .create_string(plain_error_message(&e))
                .map(Value::String)
                .unwrap_or(Value::Nil)),
        };
        (out, killed, resp3)
    }

    /// [`Sandbox::run_raw`], then the reply: the script's value converted,
    /// or the error reply Redis would send.
    pub fn run(
        &self,
        host: &mut dyn Host,
        f: &Function,
        args: Option<(Table, Table)>,
        name: &str,
        flags: ScriptFlags,
    ) -> Frame {
        let (out, killed, resp3) = self.run_raw(host, f, args, flags);
        let frame = match out {
            // Where it stopped, as Redis reports it ("... script: <name>, on @user_script:1.").
            Err(v) if killed && error_text(&v) == format!("ERR {KILLED}").as_bytes() => {
                error_reply(&v, name)
            }
            _ if killed => Frame::Error(Bytes::from(format!("ERR {KILLED}"))),
            Ok(v) => lua_to_frame(&v, resp3),
            Err(v) => error_reply(&v, name),
        };
        if matches!(&frame, Frame::Error(e) if e.ends_with(b"not enough memory")) {
            self.collect_garbage();
        }
        frame
    }

    /// A full garbage collection. Lua 5.1 has no emergency collection: after
    /// a memory error the garbage stays until a collection runs, and running
    /// one needs a little memory, so the limit is lifted meanwhile.
    pub fn collect_garbage(&self) {
        let prev = self.lua.set_memory_limit(0).unwrap_or(0);
        let _ = self.lua.gc_collect();
        let _ = self.lua.set_memory_limit(prev);
    }
}

/// The `err` text of an error object (a `{err=...}` table or a string).
pub(crate) fn error_text(v: &Value) -> Vec<u8> {
    match v {
        Value::Table(t) => match t.get::<Value>("err").unwrap_or(Value::Nil) {
            Value::String(s) => s.as_bytes().to_vec(),
            Value::Number(n) => crate::num::g_string(n, 14),
            Value::Integer(n) => crate::num::g_string(n as f64, 14),
            _ => Vec::new(),
        },
        Value::String(s) => s.as_bytes().to_vec(),
        _ => b"execution failure".to_vec(),
    }
}

/// Redis's reply for a script that raised `v` (after the handler).
fn error_reply(v: &Value, name: &str) -> Frame {
    match v {
        Value::Table(t) => {
            let mut out = error_text(v);
            let source = t.get::<Value>("source").unwrap_or(Value::Nil);
            let line = t.get::<Value>("line").unwrap_or(Value::Nil);
            let as_text = |v: &Value| match v {
                Value::String(s) => Some(s.as_bytes().to_vec()),
                Value::Number(n) => Some(crate::num::g_string(*n, 14)),
                Value::Integer(n) => Some(crate::num::g_string(*n as f64, 14)),
                _ => None,
            };
            if let (Some(src), Some(line)) = (as_text(&source), as_text(&line)) {
                out.extend_from_slice(b" script: ");
                out.extend_from_slice(name.as_bytes());
                out.extend_from_slice(b", on ");
                out.extend_from_slice(&src);
                out.push(b':');
                out.extend_from_slice(&line);
                out.push(b'.');
            }
            Frame::Error(Bytes::from(out))
        }
        Value::String(s) => {
            let msg = String::from_utf8_lossy(&s.as_bytes()).into_owned();
            Frame::Error(Bytes::from(format!(
                "ERR Error running script {name}, {msg:.100}"
            )))
        }
        _ => Frame::Error(Bytes::from(format!(
            "ERR Error running script {name}, execution failure"
        ))),
    }
}

/// The message of an `mlua` error without its decorations.
pub(crate) fn plain_error_message(e: &mlua::Error) -> String {
    match e {
        mlua::Error::RuntimeError(m) => m.clone(),
        mlua::Error::MemoryError(_) => "not enough memory".to_string(),
        mlua::Error::CallbackError { cause, .. } => plain_error_message(cause),
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

/// The instruction-count hook: stops a killed script, and a FUNCTION LOAD
/// past its deadline.
fn hook(st: &Rc<RunState>) -> impl Fn(&Lua, mlua::Debug) -> mlua::Result<VmState> + 'static {
    let st = st.clone();
    move |_, _| {
        if let Some(ms) = st.control.elapsed_ms() {
            if let Ok(mut cb) = st.busy_callback.try_borrow_mut() {
                if let Some(cb) = cb.as_mut() {
                    cb(ms);
                }
            }
        }
        if st.control.kill_requested() {
            return Err(mlua::Error::runtime(KILLED));
        }
        if let Some(d) = st.load_deadline.get() {
            if std::time::Instant::now() > d {
                return Err(mlua::Error::runtime("FUNCTION LOAD timeout"));
            }
        }
        Ok(VmState::Continue)
    }
}

/// The handler's view of a native error (an `mlua` error userdata).
fn error_object(lua: &Lua, v: Value) -> mlua::Result<Value> {
    match v {
        Value::Error(e) => {
            let msg = plain_error_message(&e);
            if msg == KILLED {
                return Ok(Value::Table(error_table(lua, KILLED.as_bytes())?));
            }
            if msg == "FUNCTION LOAD timeout" {
                return Ok(Value::Table(error_table(lua, msg.as_bytes())?));
            }
            Ok(Value::String(lua.create_string(msg)?))
        }
        other => Ok(other),
    }
}

/// `source, line` of the innermost script frame (skipping C functions and
/// Darner's prelude), as Redis's error handler records them.
fn error_position(lua: &Lua) -> (Value, Value) {
    for level in 2..64 {
        let Some(d) = lua.inspect_stack(level) else {
            break;
        };
        let src = d.source();
        if src.what == "C" {
            continue;
        }
        let Some(source) = src.source else { continue };
        if source == INTERNAL_CHUNK || source == "=(tail call)" {
            continue;
        }
        let line = d.curr_line();
        return (
            lua.create_string(source.as_bytes())
                .map(Value::String)
                .unwrap_or(Value::Nil),
            Value::Integer(line as _),
        );
    }
    (Value::Nil, Value::Nil)
}

/// Builds a fresh `{1 = ..., n = ...}` Lua array of byte strings.
pub(crate) fn string_array(lua: &Lua, items: &[&[u8]]) -> mlua::Result<Table> {
    let t = lua.create_table_with_capacity(items.len(), 0)?;
    for (i, s) in items.iter().enumerate() {
        t.raw_set(i + 1, lua.create_string(s)?)?;
    }
    Ok(t)
}
