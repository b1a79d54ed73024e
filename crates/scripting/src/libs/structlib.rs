//! `struct`: Roberto Ierusalimschy's struct library as Redis embeds it:
//! `struct.pack(fmt, ...)`, `struct.unpack(fmt, s [, pos])`,
//! `struct.size(fmt)`.
//!
//! Format: `>` big endian, `<` little endian, `!n` maximum alignment, `x`
//! pad byte, `b`/`B` char, `h`/`H` short, `l`/`L` long (8), `T` size_t
//! (8), `i`/`I` int of `n` bytes (default 4, at most 32), `f` float, `d`
//! double, `s` zero-terminated string, `cn` `n` chars (`c0`: the whole
//! string when packing, the previous value as length when unpacking).

use mlua::{Lua, Table, Value};

use crate::redislib::{fail, native, ret, ret_many, type_name, value_to_bytes, value_to_number};

const MAX_INT_SIZE: usize = 32;
const MAX_ALIGN: usize = 8;

struct Header {
    little: bool,
    align: usize,
}

/// One parsed option: its letter and size.
struct Opt {
    c: u8,
    size: usize,
}

struct Format<'a> {
    f: &'a [u8],
    i: usize,
}

fn getnum(f: &mut Format<'_>, default: usize) -> Result<usize, String> {
    if f.i >= f.f.len() || !f.f[f.i].is_ascii_digit() {
        return Ok(default);
    }
    let mut a: usize = 0;
    while f.i < f.f.len() && f.f[f.i].is_ascii_digit() {
        if a > (i32::MAX as usize) / 10 {
            return Err("integral size overflow".into());
        }
        a = a * 10 + (f.f[f.i] - b'0') as usize;
        f.i += 1;
    }
    Ok(a)
}

/// The next data option, applying control options to `h` on the way.
/// `Ok(None)` at the end of the format. Errors are (message, is_argerror).
fn next_opt(f: &mut Format<'_>, h: &mut Header, fname: &str) -> Result<Option<Opt>, String> {
    while f.i < f.f.len() {
        let c = f.f[f.i];
        f.i += 1;
        let size = match c {
            b'x' | b'b' | b'B' => 1,
            b'h' | b'H' => 2,
            b'l' | b'L' | b'T' | b'd' => 8,
            b'f' => 4,
            b's' => 0,
            b'c' => getnum(f, 1)?,
            b'i' | b'I' => {
                let sz = getnum(f, 4)?;
                if sz > MAX_INT_SIZE {
                    return Err(format!(
                        "integral size {sz} is larger than limit of {MAX_INT_SIZE}"
                    ));
                }
                sz
            }
            b' ' => continue,
            b'>' => {
                h.little = false;
                continue;
            }
            b'<' => {
                h.little = true;
                continue;
            }
            b'!' => {
                let a = getnum(f, MAX_ALIGN)?;
                if !a.is_power_of_two() {
                    return Err(format!("alignment {a} is not a power of 2"));
                }
                h.align = a;
                continue;
            }
            other => {
                return Err(format!(
                    "bad argument #1 to '{fname}' (invalid format option '{}')",
                    other as char
                ))
            }
        };
        return Ok(Some(Opt { c, size }));
    }
    Ok(None)
}

fn to_align(len: usize, h: &Header, opt: &Opt) -> usize {
    if opt.size == 0 || opt.c == b'c' {
        return 0;
    }
    let size = opt.size.min(h.align);
    (size - (len & (size - 1))) & (size - 1)
}

fn put_int(out: &mut Vec<u8>, n: f64, little: bool, size: usize) {
    let v: u64 = if n < 0.0 {
        crate::num::c_double_to_i64(n) as u64
    } else if n >= 18_446_744_073_709_551_616.0 || n.is_nan() {
        0x8000_0000_0000_0000
    } else {
        n as u64
    };
    let mut bytes = vec![0u8; size];
    for (i, b) in bytes.iter_mut().enumerate() {
        *b = if i < 8 { (v >> (8 * i)) as u8 } else { 0 };
    }
    if !little {
        bytes.reverse();
    }
    out.extend_from_slice(&bytes);
}

fn get_int(data: &[u8], little: bool, signed: bool, size: usize) -> f64 {
    let mut l: u64 = 0;
    for i in 0..size {
        let b = if little { data[size - 1 - i] } else { data[i] };
        l = (l << 8) | b as u64;
    }
    if !signed {
        return l as f64;
    }
    if size < 8 {
        let mask = 1u64 << (size * 8 - 1);
        return ((l ^ mask).wrapping_sub(mask)) as i64 as f64;
    }
    l as i64 as f64
}

fn pack(lua: &Lua, a: &[Value]) -> Result<Vec<u8>, String> {
    let fmt = value_to_bytes(a.first().unwrap_or(&Value::Nil)).ok_or_else(|| {
        format!(
            "bad argument #1 to 'pack' (string expected, got {})",
            type_name(a.first())
        )
    })?;
    let _ = lua;
    let mut f = Format { f: &fmt, i: 0 };
    let mut h = Header {
        little: true,
        align: 1,
    };
    let mut out = Vec::new();
    let mut arg = 1usize;
    while let Some(opt) = next_opt(&mut f, &mut h, "pack")? {
        let pad = to_align(out.len(), &h, &opt);
        out.extend(std::iter::repeat_n(0u8, pad));
        match opt.c {
            b'x' => out.push(0),
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' | b'f' | b'd' => {
                let v = a.get(arg);
                let n = v.and_then(value_to_number).ok_or_else(|| {
                    format!(
                        "bad argument #{} to 'pack' (number expected, got {})",
                        arg + 1,
                        type_name(Some(v.unwrap_or(&Value::Nil)))
                    )
                })?;
                arg += 1;
                match opt.c {
                    b'f' => {
                        let b = (n as f32).to_bits();
                        out.extend_from_slice(&if h.little {
                            b.to_le_bytes()
                        } else {
                            b.to_be_bytes()
                        });
                    }
                    b'd' => {
                        let b = n.to_bits();
                        out.extend_from_slice(&if h.little {
                            b.to_le_bytes()
                        } else {
                            b.to_be_bytes()
                        });
                    }
                    _ => put_int(&mut out, n, h.little, opt.size),
                }
            }
            b'c' | b's' => {
                let v = a.get(arg);
                let s = v.and_then(value_to_bytes).ok_or_else(|| {
                    format!(
                        "bad argument #{} to 'pack' (string expected, got {})",
                        arg + 1,
                        type_name(Some(v.unwrap_or(&Value::Nil)))
                    )
                })?;
                arg += 1;
                if opt.c == b's' {
                    out.extend_from_slice(&s);
                    out.push(0);
                } else {
                    let size = if opt.size == 0 { s.len() } else { opt.size };
                    if s.len() < size {
                        return Err(format!(
                            "bad argument #{} to 'pack' (string too short)",
                            arg + 1
                        ));
                    }
                    out.extend_from_slice(&s[..size]);
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

fn unpack(lua: &Lua, a: &[Value]) -> Result<Vec<Value>, String> {
    let fmt = value_to_bytes(a.first().unwrap_or(&Value::Nil)).ok_or_else(|| {
        format!(
            "bad argument #1 to 'unpack' (string expected, got {})",
            type_name(a.first())
        )
    })?;
    let data = a.get(1).and_then(value_to_bytes).ok_or_else(|| {
        format!(
            "bad argument #2 to 'unpack' (string expected, got {})",
            type_name(a.get(1))
        )
    })?;
    let init = match a.get(2) {
        None | Some(Value::Nil) => 1,
        Some(v) => match value_to_number(v) {
            Some(n) => crate::num::c_double_to_i64(n),
            None => {
                return Err(format!(
                    "bad argument #3 to 'unpack' (number expected, got {})",
                    type_name(Some(v))
                ))
            }
        },
    };
    if init <= 0 {
        return Err("bad argument #3 to 'unpack' (offset must be 1 or greater)".into());
    }
    let mut pos = (init - 1) as usize;
    let mut f = Format { f: &fmt, i: 0 };
    let mut h = Header {
        little: true,
        align: 1,
    };
    let mut vals: Vec<Value> = Vec::new();
    let short = || "bad argument #2 to 'unpack' (data string too short)".to_string();
    let mk = |b: &[u8]| {
        lua.create_string(b)
            .map(Value::String)
            .map_err(|e| e.to_string())
    };
    while let Some(opt) = next_opt(&mut f, &mut h, "unpack")? {
        pos = pos.saturating_add(to_align(pos, &h, &opt));
        if opt.c != b's' && opt.c != b'c' && pos.saturating_add(opt.size) > data.len() {
            return Err(short());
        }
        match opt.c {
            b'x' => pos += 1,
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let signed = opt.c.is_ascii_lowercase();
                vals.push(Value::Number(get_int(
                    &data[pos..],
                    h.little,
                    signed,
                    opt.size,
                )));
                pos += opt.size;
            }
            b'f' => {
                let b: [u8; 4] = data[pos..pos + 4].try_into().unwrap_or([0; 4]);
                let v = if h.little {
                    f32::from_le_bytes(b)
                } else {
                    f32::from_be_bytes(b)
                };
                vals.push(Value::Number(v as f64));
                pos += 4;
            }
            b'd' => {
                let b: [u8; 8] = data[pos..pos + 8].try_into().unwrap_or([0; 8]);
                let v = if h.little {
                    f64::from_le_bytes(b)
                } else {
                    f64::from_be_bytes(b)
                };
                vals.push(Value::Number(v));
                pos += 8;
            }
            b'c' => {
                let mut size = opt.size;
                if size == 0 {
                    let prev = vals.pop();
                    let n = prev.as_ref().and_then(value_to_number).ok_or_else(|| {
                        "bad argument #1 to 'unpack' (format 'c0' needs a previous size)"
                            .to_string()
                    })?;
                    size = crate::num::c_double_to_i64(n).max(0) as usize;
                }
                if pos.saturating_add(size) > data.len() {
                    return Err(short());
                }
                vals.push(mk(&data[pos..pos + size])?);
                pos += size;
            }
            b's' => {
                let rest = data.get(pos..).unwrap_or_default();
                let end = rest
                    .iter()
                    .position(|&c| c == 0)
                    .ok_or_else(|| "unfinished string in data".to_string())?;
                vals.push(mk(&rest[..end])?);
                pos += end + 1;
            }
            _ => {}
        }
    }
    vals.push(Value::Number((pos + 1) as f64));
    Ok(vals)
}

fn size(a: &[Value]) -> Result<usize, String> {
    let fmt = value_to_bytes(a.first().unwrap_or(&Value::Nil)).ok_or_else(|| {
        format!(
            "bad argument #1 to 'size' (string expected, got {})",
            type_name(a.first())
        )
    })?;
    let mut f = Format { f: &fmt, i: 0 };
    let mut h = Header {
        little: true,
        align: 1,
    };
    let mut pos = 0usize;
    while let Some(opt) = next_opt(&mut f, &mut h, "size")? {
        if opt.c == b's' || (opt.c == b'c' && opt.size == 0) {
            let name = if opt.c == b's' { "s" } else { "c0" };
            return Err(format!(
                "bad argument #1 to 'size' (option '{name}' has no fixed size)"
            ));
        }
        pos += to_align(pos, &h, &opt) + opt.size;
    }
    Ok(pos)
}

/// The `struct` table.
pub fn open(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set(
        "pack",
        native(lua, |lua, a| {
            let a: Vec<Value> = a.into_iter().collect();
            match pack(lua, &a) {
                Ok(b) => ret(Value::String(lua.create_string(&b)?)),
                Err(e) => fail(lua, e),
            }
        })?,
    )?;
    t.raw_set(
        "unpack",
        native(lua, |lua, a| {
            let a: Vec<Value> = a.into_iter().collect();
            match unpack(lua, &a) {
                Ok(v) => ret_many(lua, v),
                Err(e) => fail(lua, e),
            }
        })?,
    )?;
    t.raw_set(
        "size",
        native(lua, |lua, a| {
            let a: Vec<Value> = a.into_iter().collect();
            match size(&a) {
                Ok(n) => ret(Value::Number(n as f64)),
                Err(e) => fail(lua, e),
            }
        })?,
    )?;
    Ok(t)
}
