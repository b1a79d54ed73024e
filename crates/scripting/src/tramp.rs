//! The one piece of raw Lua C API in the crate: a C closure that calls a
//! function answering the *status protocol* and raises or returns what the
//! status asks for.
//!
//! Why: Redis's errors are Lua values with meaning (`redis.call` raises an
//! `{err=...}` table, library functions raise a string prefixed with the
//! caller's position), but an `mlua` callback can only raise a wrapped
//! userdata. And the function a script calls must be a C function: a Lua
//! wrapper would be *tail-called* by `return redis.call(...)`, replacing the
//! script's frame, and the error would lose its `@user_script:<line>`.
//!
//! Protocol: the wrapped function returns `status, a, b`:
//! 0 → return `a`; 1 → raise `a` prefixed with the caller's position
//! (as `luaL_error`); 2 → raise `a` as it is; 3 → return `a[1..b]`;
//! 4 (or anything else) → return nothing.

use std::os::raw::{c_int, c_void};

use mlua::{ffi, Function, LightUserData, Lua, MultiValue, Table, Value};

/// Marks the exact-numbers table the trampoline puts before the arguments.
static EXACT_MARK: u8 = 0;

fn exact_mark() -> *mut c_void {
    &EXACT_MARK as *const u8 as *mut c_void
}

/// Whether `mlua` reads `n` as a different number: it turns a number within
/// `f64::EPSILON` of an integer into that integer, so `-0.0` and magnitudes
/// below `f64::EPSILON` arrive as `0`.
pub(crate) fn mlua_mangles(n: f64) -> bool {
    (n == 0.0 && n.is_sign_negative()) || (n != 0.0 && n.abs() < f64::EPSILON)
}

/// The exact value behind `v`, read from `t[k]` when `mlua` may have
/// mangled it (a `0`).
pub(crate) fn exact_in(t: &Table, k: impl mlua::IntoLua, v: Value) -> Value {
    if matches!(v, Value::Integer(0)) {
        if let Ok(n) = t.raw_get::<f64>(k) {
            if mlua_mangles(n) {
                return Value::Number(n);
            }
        }
    }
    v
}

/// Undoes `mlua`'s number mangling on a native's arguments: when the
/// trampoline saw an argument it mangles, the arguments start with the mark
/// and a table of their exact values.
pub(crate) fn exact_args(mut a: MultiValue) -> MultiValue {
    if !matches!(a.front(), Some(Value::LightUserData(LightUserData(p))) if *p == exact_mark()) {
        return a;
    }
    a.pop_front();
    let Some(Value::Table(t)) = a.pop_front() else {
        return a;
    };
    for (i, v) in a.iter_mut().enumerate() {
        let cur = std::mem::replace(v, Value::Nil);
        *v = exact_in(&t, i + 1, cur);
    }
    a
}

/// The C closure: upvalue 1 is the wrapped function.
unsafe extern "C-unwind" fn trampoline(l: *mut ffi::lua_State) -> c_int {
    // SAFETY: called by Lua with a valid state; every index used below is
    // checked against the stack top or was just pushed after checkstack;
    // the frame holds no Rust values with destructors, so a Lua error
    // (longjmp) through it skips nothing.
    unsafe {
        let mut nargs = ffi::lua_gettop(l);
        ffi::luaL_checkstack(l, 6, std::ptr::null());
        let mangled = (1..=nargs).any(|i| {
            ffi::lua_type(l, i) == ffi::LUA_TNUMBER && mlua_mangles(ffi::lua_tonumber(l, i))
        });
        if mangled {
            // The exact numbers go along in a table, behind a mark.
            ffi::lua_createtable(l, nargs, 0);
            for i in 1..=nargs {
                if ffi::lua_type(l, i) == ffi::LUA_TNUMBER {
                    ffi::lua_pushnumber(l, ffi::lua_tonumber(l, i));
                    ffi::lua_rawseti(l, -2, i as _);
                }
            }
            ffi::lua_insert(l, 1);
            ffi::lua_pushlightuserdata(l, exact_mark());
            ffi::lua_insert(l, 1);
            nargs += 2;
        }
        ffi::lua_pushvalue(l, ffi::lua_upvalueindex(1));
        ffi::lua_insert(l, 1);
        ffi::lua_call(l, nargs, ffi::LUA_MULTRET);
        let nres = ffi::lua_gettop(l);
        let status = if nres >= 1 {
            ffi::lua_tointeger(l, 1)
        } else {
            4
        };
        if nres < 2 {
            ffi::lua_pushnil(l);
        }
        match status {
            0 => {
                ffi::lua_settop(l, 2);
                1
            }
            1 => {
                ffi::lua_settop(l, 2);
                ffi::luaL_where(l, 1);
                ffi::lua_insert(l, 2);
                ffi::lua_concat(l, 2);
                ffi::lua_error(l)
            }
            2 => {
                ffi::lua_settop(l, 2);
                ffi::lua_error(l)
            }
            3 => {
                let n = if nres >= 3 {
                    ffi::lua_tointeger(l, 3) as c_int
                } else {
                    0
                };
                ffi::lua_settop(l, 2);
                if n < 0 || ffi::lua_checkstack(l, n) == 0 {
                    ffi::luaL_error(l, c"too many results to unpack".as_ptr());
                }
                for i in 1..=n {
                    ffi::lua_rawgeti(l, 2, i as _);
                }
                n
            }
            _ => 0,
        }
    }
}

/// Wraps `f` (a function answering the status protocol) in the C closure.
pub(crate) fn wrap(lua: &Lua, f: Function) -> mlua::Result<Function> {
    // SAFETY: `exec_raw` pushed `f` on the stack; `lua_pushcclosure` pops it
    // as the closure's upvalue and leaves the closure, which `exec_raw`
    // returns.
    unsafe {
        lua.exec_raw::<Function>(f, |l| {
            ffi::lua_pushcclosure(l, trampoline, 1);
        })
    }
}
