//! The `redis` table (`redis.call`, `redis.pcall`, `redis.log`, ...) and
//! Redis's `math.random`, as native functions answering the status protocol
//! of the sandbox prelude (see `sandbox.rs`).

use std::rc::Rc;

use mlua::{BorrowedBytes, Function, Lua, MultiValue, Table, Value};

use crate::convert::{error_table, error_table_coded, frame_to_lua};
use crate::host::{CallCtx, Host, LogLevel};
use crate::sandbox::{Kind, RunState};
use crate::ScriptFlags;

/// Registry key of the scoped function that reaches the running [`Host`].
pub(crate) const HOST_KEY: &str = "darner.host";

/// drand48's state after Redis's static initializer.
pub(crate) const RAND48_INITIAL: u64 = 0x1234_ABCD_330E;

/// The `redis.REDIS_VERSION` this engine reports.
pub const REDIS_VERSION: &str = "7.2.4";
/// `redis.REDIS_VERSION_NUM` (0x00MMmmpp).
pub const REDIS_VERSION_NUM: u32 = 0x0007_0204;

const OP_CALL: i64 = 0;
const OP_PCALL: i64 = 1;
const OP_LOG: i64 = 2;
const OP_REPL: i64 = 3;
const OP_ACL: i64 = 4;

// ---------------------------------------------------------------------------
// The status protocol.

/// Returns one value.
pub(crate) fn ret(v: Value) -> mlua::Result<MultiValue> {
    Ok(MultiValue::from_vec(vec![Value::Integer(0), v]))
}

/// Raises `msg` with the caller's position (as `luaL_error`).
pub(crate) fn fail(lua: &Lua, msg: impl AsRef<[u8]>) -> mlua::Result<MultiValue> {
    Ok(MultiValue::from_vec(vec![
        Value::Integer(1),
        Value::String(lua.create_string(msg)?),
    ]))
}

/// Raises `v` as it is (as `lua_error`).
pub(crate) fn raise(v: Value) -> mlua::Result<MultiValue> {
    Ok(MultiValue::from_vec(vec![Value::Integer(2), v]))
}

/// Raises Redis's `{err="ERR msg"}` table.
pub(crate) fn raise_err(lua: &Lua, msg: &str) -> mlua::Result<MultiValue> {
    raise(Value::Table(error_table(lua, msg.as_bytes())?))
}

/// Returns several values.
pub(crate) fn ret_many(lua: &Lua, vals: Vec<Value>) -> mlua::Result<MultiValue> {
    let n = vals.len();
    let t = lua.create_table_with_capacity(n, 0)?;
    for (i, v) in vals.into_iter().enumerate() {
        t.raw_set(i + 1, v)?;
    }
    Ok(MultiValue::from_vec(vec![
        Value::Integer(3),
        Value::Table(t),
        Value::Integer(n as _),
    ]))
}

/// Returns nothing.
pub(crate) fn ret_none() -> mlua::Result<MultiValue> {
    Ok(MultiValue::from_vec(vec![Value::Integer(4)]))
}

/// A native function for the status protocol.
pub(crate) fn native<F>(lua: &Lua, f: F) -> mlua::Result<Function>
where
    F: Fn(&Lua, MultiValue) -> mlua::Result<MultiValue> + 'static,
{
    let f = move |lua: &Lua, a: MultiValue| f(lua, crate::tramp::exact_args(a));
    crate::tramp::wrap(lua, lua.create_function(f)?)
}

// ---------------------------------------------------------------------------
// Lua value helpers with the C API's semantics.

/// `lua_tolstring`: a string, or a number as `%.14g`.
pub(crate) fn value_to_bytes(v: &Value) -> Option<Vec<u8>> {
    match v {
        Value::String(s) => Some(s.as_bytes().to_vec()),
        Value::Number(n) => Some(crate::num::g_string(*n, 14)),
        Value::Integer(n) => Some(crate::num::g_string(*n as f64, 14)),
        _ => None,
    }
}

/// `lua_tonumber`: a number, or a string Lua can read as one.
pub(crate) fn value_to_number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => Some(*n),
        Value::Integer(n) => Some(*n as f64),
        Value::String(s) => str_to_number(&s.as_bytes()),
        _ => None,
    }
}

/// Lua 5.1's `luaO_str2d`: decimal (via strtod) or hexadecimal, surrounded
/// by optional whitespace.
pub(crate) fn str_to_number(b: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(b).ok()?;
    let t = s.trim_matches(|c: char| c.is_ascii_whitespace());
    if t.is_empty() {
        return None;
    }
    let (neg, body) = match t.as_bytes()[0] {
        b'-' => (true, &t[1..]),
        b'+' => (false, &t[1..]),
        _ => (false, t),
    };
    if let Some(hex) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        let v = u64::from_str_radix(hex, 16).ok()? as f64;
        return Some(if neg { -v } else { v });
    }
    if !body
        .bytes()
        .all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'e' | b'E' | b'+' | b'-'))
        && !matches!(
            body.to_ascii_lowercase().as_str(),
            "inf" | "infinity" | "nan"
        )
    {
        return None;
    }
    t.parse::<f64>().ok()
}

/// Lua's type name of `v` (`luaL_typename`).
pub(crate) fn type_name(v: Option<&Value>) -> &'static str {
    match v {
        None => "no value",
        Some(Value::Nil) => "nil",
        Some(Value::Boolean(_)) => "boolean",
        Some(Value::Number(_)) | Some(Value::Integer(_)) => "number",
        Some(Value::String(_)) => "string",
        Some(Value::Table(_)) => "table",
        Some(Value::Function(_)) => "function",
        Some(Value::Thread(_)) => "thread",
        Some(Value::LightUserData(_)) => "userdata",
        Some(Value::UserData(_)) | Some(Value::Error(_)) => "userdata",
        Some(_) => "userdata",
    }
}

/// `luaL_checkint(L, n)` for the native `fname`: the integer, or the error.
pub(crate) fn check_int(args: &[Value], n: usize, fname: &str) -> Result<i64, String> {
    let v = args.get(n - 1);
    match v.and_then(value_to_number) {
        Some(x) => Ok(crate::num::c_double_to_i64(x)),
        None => Err(format!(
            "bad argument #{n} to '{fname}' (number expected, got {})",
            type_name(v)
        )),
    }
}

// ---------------------------------------------------------------------------
// The runtime `redis` table.

pub(crate) fn open(lua: &Lua, state: &Rc<RunState>, _kind: Kind) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set("call", native(lua, |lua, a| to_host(lua, OP_CALL, a))?)?;
    t.raw_set("pcall", native(lua, |lua, a| to_host(lua, OP_PCALL, a))?)?;
    add_log(lua, &t)?;
    add_version(&t)?;
    let st = state.clone();
    t.raw_set(
        "setresp",
        native(lua, move |lua, a| {
            if a.len() != 1 {
                return raise_err(lua, "redis.setresp() requires one argument.");
            }
            let resp = value_to_number(&a[0]).map_or(0, crate::num::c_double_to_i64);
            if resp != 2 && resp != 3 {
                return raise_err(lua, "RESP version must be 2 or 3.");
            }
            st.resp.set(resp as u8);
            ret_none()
        })?,
    )?;
    t.raw_set(
        "sha1hex",
        native(lua, |lua, a| {
            if a.len() != 1 {
                return raise_err(lua, "wrong number of arguments");
            }
            let data = value_to_bytes(&a[0]).unwrap_or_default();
            ret(Value::String(
                lua.create_string(crate::sha1::sha1_hex(&data))?,
            ))
        })?,
    )?;
    t.raw_set(
        "error_reply",
        native(lua, |lua, a| {
            let t = match (a.len(), a.front()) {
                (1, Some(Value::String(s))) => {
                    let b = s.as_bytes();
                    error_table_coded(lua, b.strip_prefix(b"-").unwrap_or(&b))?
                }
                _ => error_table(lua, b"wrong number or type of arguments")?,
            };
            ret(Value::Table(t))
        })?,
    )?;
    t.raw_set(
        "status_reply",
        native(lua, |lua, a| {
            let t = match (a.len(), a.front()) {
                (1, Some(Value::String(s))) => {
                    let t = lua.create_table()?;
                    t.raw_set("ok", s.clone())?;
                    t
                }
                _ => error_table(lua, b"wrong number or type of arguments")?,
            };
            ret(Value::Table(t))
        })?,
    )?;
    t.raw_set(
        "set_repl",
        native(lua, |lua, a| {
            if a.len() != 1 {
                return raise_err(lua, "redis.set_repl() requires two arguments.");
            }
            let flags = value_to_number(&a[0]).map_or(0, crate::num::c_double_to_i64);
            if flags & !3 != 0 {
                return raise_err(
                    lua,
                    "Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.",
                );
            }
            let out = host_fn(lua)?;
            match out {
                Some(f) => f.call::<MultiValue>((OP_REPL, flags)),
                None => ret_none(),
            }
        })?,
    )?;
    for (name, v) in [
        ("REPL_NONE", 0),
        ("REPL_AOF", 1),
        ("REPL_SLAVE", 2),
        ("REPL_REPLICA", 2),
        ("REPL_ALL", 3),
    ] {
        t.raw_set(name, v)?;
    }
    t.raw_set(
        "replicate_commands",
        native(lua, |_, _| ret(Value::Boolean(true)))?,
    )?;
    t.raw_set(
        "breakpoint",
        native(lua, |_, _| ret(Value::Boolean(false)))?,
    )?;
    t.raw_set("debug", native(lua, |_, _| ret_none())?)?;
    t.raw_set(
        "acl_check_cmd",
        native(lua, |lua, a| {
            if a.is_empty() {
                return raise_err(
                    lua,
                    "Please specify at least one argument for this redis lib call",
                );
            }
            if !args_ok(&a) {
                return raise_err(
                    lua,
                    "Lua redis lib command arguments must be strings or integers",
                );
            }
            match host_fn(lua)? {
                Some(f) => {
                    let mut v = vec![Value::Integer(OP_ACL as _)];
                    v.extend(a);
                    f.call::<MultiValue>(MultiValue::from_vec(v))
                }
                None => raise_err(
                    lua,
                    "redis.acl_check_cmd can only be called inside a script invocation",
                ),
            }
        })?,
    )?;
    Ok(t)
}

/// The `redis` table of FUNCTION LOAD: `register_function`, `log`, versions.
pub(crate) fn open_load(lua: &Lua, state: &Rc<RunState>) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    add_log(lua, &t)?;
    add_version(&t)?;
    let st = state.clone();
    t.raw_set(
        "register_function",
        native(lua, move |lua, a| {
            crate::functions::register_function(lua, &st, a)
        })?,
    )?;
    Ok(t)
}

fn add_version(t: &Table) -> mlua::Result<()> {
    t.raw_set("REDIS_VERSION", REDIS_VERSION)?;
    t.raw_set("REDIS_VERSION_NUM", REDIS_VERSION_NUM)?;
    Ok(())
}

fn add_log(lua: &Lua, t: &Table) -> mlua::Result<()> {
    t.raw_set(
        "log",
        native(lua, |lua, a| {
            if a.len() < 2 {
                return raise_err(lua, "redis.log() requires two arguments or more.");
            }
            let Some(level) = value_to_number(&a[0]) else {
                return raise_err(lua, "First argument must be a number (log level).");
            };
            let level = crate::num::c_double_to_i64(level);
            if LogLevel::from_num(level).is_none() {
                return raise_err(lua, "Invalid debug level.");
            }
            let mut msg = Vec::new();
            for (j, v) in a.iter().enumerate().skip(1) {
                if let Some(b) = value_to_bytes(v) {
                    if j != 1 {
                        msg.push(b' ');
                    }
                    msg.extend_from_slice(&b);
                }
            }
            match host_fn(lua)? {
                Some(f) => f.call::<MultiValue>((OP_LOG, level, lua.create_string(msg)?)),
                None => ret_none(),
            }
        })?,
    )?;
    for (name, v) in [
        ("LOG_DEBUG", 0),
        ("LOG_VERBOSE", 1),
        ("LOG_NOTICE", 2),
        ("LOG_WARNING", 3),
    ] {
        t.raw_set(name, v)?;
    }
    Ok(())
}

fn host_fn(lua: &Lua) -> mlua::Result<Option<Function>> {
    lua.named_registry_value::<Option<Function>>(HOST_KEY)
}

/// Whether every argument is a string or a number (`lua_tolstring` works).
fn args_ok(a: &MultiValue) -> bool {
    a.iter()
        .all(|v| matches!(v, Value::String(_) | Value::Number(_) | Value::Integer(_)))
}

fn to_host(lua: &Lua, op: i64, a: MultiValue) -> mlua::Result<MultiValue> {
    match host_fn(lua)? {
        Some(f) => {
            let mut v = Vec::with_capacity(a.len() + 1);
            v.push(Value::Integer(op as _));
            // Numbers become their %.17g text here, before they cross into
            // Lua again (where mlua would read -0 and tiny values as 0).
            for x in a {
                v.push(match x {
                    Value::Number(n) => {
                        Value::String(lua.create_string(crate::num::g_string(n, 17))?)
                    }
                    other => other,
                });
            }
            f.call::<MultiValue>(MultiValue::from_vec(v))
        }
        None => raise_err(
            lua,
            "redis.call/pcall can only be called inside a script invocation",
        ),
    }
}

/// An argument of `redis.call` as bytes: strings as they are, numbers as
/// `%.17g` (Redis avoids Lua's lossy `%.14g` here).
enum Arg<'a> {
    Str(BorrowedBytes<'a>),
    Num(Vec<u8>),
}

/// The scoped host function: `op, args...` from the natives above.
pub(crate) fn host_dispatch(
    lua: &Lua,
    st: &Rc<RunState>,
    host: &mut dyn Host,
    a: MultiValue,
) -> mlua::Result<MultiValue> {
    let op = match a.front() {
        Some(Value::Integer(n)) => *n,
        Some(Value::Number(n)) => *n as i64,
        _ => return ret_none(),
    };
    let args: Vec<&Value> = a.iter().skip(1).collect();
    match op {
        OP_CALL | OP_PCALL | OP_ACL => {
            let pcall = op == OP_PCALL;
            let fail_with = |lua: &Lua, msg: &str| -> mlua::Result<MultiValue> {
                let t = Value::Table(error_table(lua, msg.as_bytes())?);
                if pcall {
                    ret(t)
                } else {
                    raise(t)
                }
            };
            if args.is_empty() {
                return fail_with(
                    lua,
                    "Please specify at least one argument for this redis lib call",
                );
            }
            let mut owned: Vec<Arg<'_>> = Vec::with_capacity(args.len());
            for v in &args {
                match v {
                    Value::String(s) => owned.push(Arg::Str(s.as_bytes())),
                    Value::Number(n) => owned.push(Arg::Num(crate::num::g_string(*n, 17))),
                    Value::Integer(n) => owned.push(Arg::Num(crate::num::g_string(*n as f64, 17))),
                    _ => {
                        return fail_with(
                            lua,
                            "Lua redis lib command arguments must be strings or integers",
                        )
                    }
                }
            }
            let argv: Vec<&[u8]> = owned
                .iter()
                .map(|a| match a {
                    Arg::Str(b) => &b[..],
                    Arg::Num(v) => &v[..],
                })
                .collect();
            if op == OP_ACL {
                return match host.acl_check_cmd(&argv) {
                    Some(ok) => ret(Value::Boolean(ok)),
                    None => raise_err(lua, "Invalid command passed to redis.acl_check_cmd()"),
                };
            }
            let ctx = CallCtx {
                resp: st.resp.get(),
                pcall,
                flags: st.flags.get(),
            };
            let reply = host.call(&argv, &ctx);
            drop(argv);
            drop(owned);
            let is_err = matches!(reply, darner_resp::Frame::Error(_));
            let v = frame_to_lua(lua, &reply)?;
            if is_err && !pcall {
                raise(v)
            } else {
                ret(v)
            }
        }
        OP_LOG => {
            let level = args
                .first()
                .and_then(|v| value_to_number(v))
                .and_then(|n| LogLevel::from_num(n as i64));
            if let (Some(level), Some(Value::String(msg))) = (level, args.get(1)) {
                host.log(level, &msg.as_bytes());
            }
            ret_none()
        }
        OP_REPL => {
            let flags = args.first().and_then(|v| value_to_number(v)).unwrap_or(0.0);
            host.set_repl(flags as u8);
            ret_none()
        }
        _ => ret_none(),
    }
}

// ---------------------------------------------------------------------------
// math.random / math.randomseed (drand48, as Redis's rand.c).

const RAND48_A: u64 = 0x5_DEEC_E66D;
const RAND48_C: u64 = 0xB;
const RAND48_MASK: u64 = (1 << 48) - 1;

fn lrand48(state: &RunState) -> i32 {
    let x = (state
        .rand
        .get()
        .wrapping_mul(RAND48_A)
        .wrapping_add(RAND48_C))
        & RAND48_MASK;
    state.rand.set(x);
    (x >> 17) as i32
}

pub(crate) fn add_math(lua: &Lua, t: &Table, state: &Rc<RunState>) -> mlua::Result<()> {
    let st = state.clone();
    t.raw_set(
        "random",
        native(lua, move |lua, a| {
            let max = i32::MAX;
            let r = (lrand48(&st) % max) as f64 / max as f64;
            let args: Vec<Value> = a.into_iter().collect();
            match args.len() {
                0 => ret(Value::Number(r)),
                1 => {
                    let u = match check_int(&args, 1, "random") {
                        Ok(u) => u as i32,
                        Err(e) => return fail(lua, e),
                    };
                    if u < 1 {
                        return fail(lua, "bad argument #1 to 'random' (interval is empty)");
                    }
                    ret(Value::Number((r * u as f64).floor() + 1.0))
                }
                2 => {
                    let l = match check_int(&args, 1, "random") {
                        Ok(v) => v as i32,
                        Err(e) => return fail(lua, e),
                    };
                    let u = match check_int(&args, 2, "random") {
                        Ok(v) => v as i32,
                        Err(e) => return fail(lua, e),
                    };
                    if l > u {
                        return fail(lua, "bad argument #2 to 'random' (interval is empty)");
                    }
                    let span = u as f64 - l as f64 + 1.0;
                    ret(Value::Number((r * span).floor() + l as f64))
                }
                _ => fail(lua, "wrong number of arguments"),
            }
        })?,
    )?;
    let st = state.clone();
    t.raw_set(
        "randomseed",
        native(lua, move |lua, a| {
            let args: Vec<Value> = a.into_iter().collect();
            let seed = match check_int(&args, 1, "randomseed") {
                Ok(v) => v as i32,
                Err(e) => return fail(lua, e),
            };
            st.rand.set((((seed as u32) as u64) << 16) | 0x330E);
            ret_none()
        })?,
    )?;
    Ok(())
}

/// Flags a script or function may declare (shebang `flags=` / function
/// `flags`), by name.
/// Shebang flags are case-sensitive, function flags are not.
pub(crate) fn flag_by_name(name: &[u8], nocase: bool) -> Option<fn(&mut ScriptFlags)> {
    let lower = if nocase {
        name.to_ascii_lowercase()
    } else {
        name.to_vec()
    };
    Some(match &lower[..] {
        b"no-writes" => |f| f.no_writes = true,
        b"allow-oom" => |f| f.allow_oom = true,
        b"allow-stale" => |f| f.allow_stale = true,
        b"no-cluster" => |f| f.no_cluster = true,
        b"allow-cross-slot-keys" => |f| f.allow_cross_slot_keys = true,
        _ => return None,
    })
}
