//! `bit`: LuaBitOp's API (`tobit`, `tohex`, `bnot`, `band`, `bor`, `bxor`,
//! `lshift`, `rshift`, `arshift`, `rol`, `ror`, `bswap`) on 32-bit integers.
//! Numbers become 32-bit integers the way LuaBitOp does it on Lua 5.1:
//! rounded to the nearest integer, modulo 2^32.

use mlua::{Lua, MultiValue, Table, Value};

use crate::redislib::{fail, native, ret, type_name, value_to_number};

/// LuaBitOp's `barg`: add 2^52 + 2^51 and keep the low word of the double.
pub fn tobit(x: f64) -> i32 {
    (x + 6_755_399_441_055_744.0).to_bits() as u32 as i32
}

fn arg(a: &[Value], n: usize, fname: &str) -> Result<i32, String> {
    let v = a.get(n);
    match v.and_then(value_to_number) {
        Some(x) => Ok(tobit(x)),
        None => Err(format!(
            "bad argument #{} to '{fname}' (number expected, got {})",
            n + 1,
            type_name(v)
        )),
    }
}

fn num(v: i32) -> mlua::Result<MultiValue> {
    ret(Value::Number(v as f64))
}

type Unary = fn(i32) -> i32;
type Shift = fn(i32, u32) -> i32;
type Fold = fn(i32, i32) -> i32;

/// The `bit` table.
pub fn open(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    let unary: [(&str, Unary); 3] = [
        ("tobit", |x| x),
        ("bnot", |x| !x),
        ("bswap", |x| x.swap_bytes()),
    ];
    for (name, f) in unary {
        t.raw_set(
            name,
            native(lua, move |lua, a| {
                let a: Vec<Value> = a.into_iter().collect();
                match arg(&a, 0, name) {
                    Ok(x) => num(f(x)),
                    Err(e) => fail(lua, e),
                }
            })?,
        )?;
    }
    let folds: [(&str, Fold); 3] = [
        ("band", |x, y| x & y),
        ("bor", |x, y| x | y),
        ("bxor", |x, y| x ^ y),
    ];
    for (name, f) in folds {
        t.raw_set(
            name,
            native(lua, move |lua, a| {
                let a: Vec<Value> = a.into_iter().collect();
                let mut acc = match arg(&a, 0, name) {
                    Ok(x) => x,
                    Err(e) => return fail(lua, e),
                };
                for i in 1..a.len() {
                    match arg(&a, i, name) {
                        Ok(y) => acc = f(acc, y),
                        Err(e) => return fail(lua, e),
                    }
                }
                num(acc)
            })?,
        )?;
    }
    let shifts: [(&str, Shift); 5] = [
        ("lshift", |x, n| ((x as u32) << n) as i32),
        ("rshift", |x, n| ((x as u32) >> n) as i32),
        ("arshift", |x, n| x >> n),
        ("rol", |x, n| (x as u32).rotate_left(n) as i32),
        ("ror", |x, n| (x as u32).rotate_right(n) as i32),
    ];
    for (name, f) in shifts {
        t.raw_set(
            name,
            native(lua, move |lua, a| {
                let a: Vec<Value> = a.into_iter().collect();
                let x = match arg(&a, 0, name) {
                    Ok(x) => x,
                    Err(e) => return fail(lua, e),
                };
                let n = match arg(&a, 1, name) {
                    Ok(n) => (n & 31) as u32,
                    Err(e) => return fail(lua, e),
                };
                num(f(x, n))
            })?,
        )?;
    }
    t.raw_set(
        "tohex",
        native(lua, |lua, a| {
            let a: Vec<Value> = a.into_iter().collect();
            let x = match arg(&a, 0, "tohex") {
                Ok(x) => x as u32,
                Err(e) => return fail(lua, e),
            };
            let mut n: i32 = if a.get(1).is_none_or(|v| v.is_nil()) {
                8
            } else {
                match arg(&a, 1, "tohex") {
                    Ok(n) => n,
                    Err(e) => return fail(lua, e),
                }
            };
            let upper = n < 0;
            if upper {
                n = n.wrapping_neg();
            }
            let n = n.clamp(0, 8) as usize;
            let s = if upper {
                format!("{x:08X}")
            } else {
                format!("{x:08x}")
            };
            ret(Value::String(lua.create_string(&s[8 - n..])?))
        })?,
    )?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::tobit;

    #[test]
    fn tobit_wraps_and_rounds() {
        assert_eq!(tobit(0xffff_ffffu32 as f64), -1);
        assert_eq!(tobit(4_294_967_296.0 + 5.0), 5);
        assert_eq!(tobit(1.5), 2);
        assert_eq!(tobit(2.5), 2);
        assert_eq!(tobit(-1.0), -1);
    }
}
