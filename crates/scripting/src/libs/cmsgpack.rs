//! `cmsgpack`: MessagePack as Redis's lua-cmsgpack 0.4.0 writes and reads
//! it: `pack(...)`, `unpack(s)`, `unpack_one(s [, offset])`,
//! `unpack_limit(s, limit [, offset])`.

use mlua::{Lua, Table, Value};

use crate::redislib::{check_int, fail, native, raise, ret, ret_many, type_name};

/// Tables nested deeper than this pack as nil (LUACMSGPACK_MAX_NESTING).
pub const MAX_PACK_NESTING: usize = 16;

/// Decoding deeper than this is refused as bad data (lua-cmsgpack has no
/// limit and would exhaust the C stack).
pub const MAX_UNPACK_NESTING: usize = 1000;

fn is_int(n: f64) -> bool {
    n.is_finite()
        && (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&n)
        && n.trunc() == n
}

fn pack_int(n: i64, out: &mut Vec<u8>) {
    if n >= 0 {
        if n <= 127 {
            out.push(n as u8);
        } else if n <= 0xff {
            out.extend_from_slice(&[0xcc, n as u8]);
        } else if n <= 0xffff {
            out.push(0xcd);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        } else if n <= 0xffff_ffff {
            out.push(0xce);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        } else {
            out.push(0xcf);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    } else if n >= -32 {
        out.push(n as i8 as u8);
    } else if n >= -128 {
        out.extend_from_slice(&[0xd0, n as i8 as u8]);
    } else if n >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= -2_147_483_648 {
        out.push(0xd2);
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn pack_number(n: f64, out: &mut Vec<u8>) {
    if is_int(n) {
        pack_int(n as i64, out);
    } else if (n as f32) as f64 == n {
        out.push(0xca);
        out.extend_from_slice(&(n as f32).to_be_bytes());
    } else {
        out.push(0xcb);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn pack_len(
    len: usize,
    fix: u8,
    fix_max: usize,
    b8: Option<u8>,
    b16: u8,
    b32: u8,
    out: &mut Vec<u8>,
) {
    if len <= fix_max {
        out.push(fix | len as u8);
    } else if let Some(b8) = b8.filter(|_| len <= 0xff) {
        out.extend_from_slice(&[b8, len as u8]);
    } else if len <= 0xffff {
        out.push(b16);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(b32);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    }
}

/// lua-cmsgpack's `table_is_an_array`: keys exactly 1..n.
fn array_len(t: &Table) -> mlua::Result<Option<usize>> {
    let mut count = 0usize;
    let mut max = 0f64;
    for kv in t.pairs::<Value, Value>() {
        let (k, _) = kv?;
        let n = match k {
            Value::Number(n) => n,
            Value::Integer(n) => n as f64,
            _ => return Ok(None),
        };
        if n <= 0.0 || !is_int(n) {
            return Ok(None);
        }
        count += 1;
        max = max.max(n);
    }
    Ok((max == count as f64).then_some(count))
}

/// Appends `v` in MessagePack.
pub fn pack_value(v: &Value, level: usize, out: &mut Vec<u8>) -> mlua::Result<()> {
    match v {
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Number(n) => pack_number(*n, out),
        Value::Integer(n) => pack_number(*n as f64, out),
        Value::String(s) => {
            let b = s.as_bytes();
            pack_len(b.len(), 0xa0, 31, Some(0xd9), 0xda, 0xdb, out);
            out.extend_from_slice(&b);
        }
        Value::Table(t) if level < MAX_PACK_NESTING => match array_len(t)? {
            Some(n) => {
                pack_len(n, 0x90, 15, None, 0xdc, 0xdd, out);
                for i in 1..=n {
                    let v: Value = t.raw_get(i)?;
                    let v = crate::tramp::exact_in(t, i, v);
                    pack_value(&v, level + 1, out)?;
                }
            }
            None => {
                let mut n = 0usize;
                for kv in t.pairs::<Value, Value>() {
                    kv?;
                    n += 1;
                }
                pack_len(n, 0x80, 15, None, 0xde, 0xdf, out);
                for kv in t.pairs::<Value, Value>() {
                    let (k, v) = kv?;
                    pack_value(&k, level + 1, out)?;
                    let v = crate::tramp::exact_in(t, k, v);
                    pack_value(&v, level + 1, out)?;
                }
            }
        },
        _ => out.push(0xc0),
    }
    Ok(())
}

enum DecodeError {
    Missing,
    Bad,
    NilIndex,
    Lua(mlua::Error),
}

impl From<mlua::Error> for DecodeError {
    fn from(e: mlua::Error) -> Self {
        DecodeError::Lua(e)
    }
}

struct Cursor<'a> {
    s: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], DecodeError> {
        if self.s.len() - self.pos < n {
            return Err(DecodeError::Missing);
        }
        let b = &self.s[self.pos..self.pos + n];
        self.pos += n;
        Ok(b)
    }

    fn uint(&mut self, n: usize) -> Result<u64, DecodeError> {
        let b = self.take(n)?;
        Ok(b.iter().fold(0u64, |acc, &x| (acc << 8) | x as u64))
    }
}

fn decode(lua: &Lua, c: &mut Cursor<'_>, depth: usize) -> Result<Value, DecodeError> {
    if depth > MAX_UNPACK_NESTING {
        return Err(DecodeError::Bad);
    }
    let t = c.take(1)?[0];
    let num = |n: f64| Ok(Value::Number(n));
    match t {
        0x00..=0x7f => num(t as f64),
        0xe0..=0xff => num(t as i8 as f64),
        0xc0 => Ok(Value::Nil),
        0xc2 => Ok(Value::Boolean(false)),
        0xc3 => Ok(Value::Boolean(true)),
        0xcc => num(c.uint(1)? as f64),
        0xcd => num(c.uint(2)? as f64),
        0xce => num(c.uint(4)? as f64),
        0xcf => num(c.uint(8)? as i64 as f64),
        0xd0 => num(c.uint(1)? as u8 as i8 as f64),
        0xd1 => num(c.uint(2)? as u16 as i16 as f64),
        0xd2 => num(c.uint(4)? as u32 as i32 as f64),
        0xd3 => num(c.uint(8)? as i64 as f64),
        0xca => num(f32::from_bits(c.uint(4)? as u32) as f64),
        0xcb => num(f64::from_bits(c.uint(8)?)),
        0xa0..=0xbf | 0xd9 | 0xda | 0xdb => {
            let n = match t {
                0xd9 => c.uint(1)? as usize,
                0xda => c.uint(2)? as usize,
                0xdb => c.uint(4)? as usize,
                _ => (t & 0x1f) as usize,
            };
            let b = c.take(n)?;
            Ok(Value::String(lua.create_string(b)?))
        }
        0x90..=0x9f | 0xdc | 0xdd => {
            let n = match t {
                0xdc => c.uint(2)? as usize,
                0xdd => c.uint(4)? as usize,
                _ => (t & 0x0f) as usize,
            };
            // Every element takes at least one byte: no reservation beyond that.
            let table = lua.create_table_with_capacity(n.min(c.s.len() - c.pos), 0)?;
            for i in 1..=n {
                let v = decode(lua, c, depth + 1)?;
                table.raw_set(i, v)?;
            }
            Ok(Value::Table(table))
        }
        0x80..=0x8f | 0xde | 0xdf => {
            let n = match t {
                0xde => c.uint(2)? as usize,
                0xdf => c.uint(4)? as usize,
                _ => (t & 0x0f) as usize,
            };
            let table = lua.create_table_with_capacity(0, n.min((c.s.len() - c.pos) / 2))?;
            for _ in 0..n {
                let k = decode(lua, c, depth + 1)?;
                let v = decode(lua, c, depth + 1)?;
                match &k {
                    Value::Nil => return Err(DecodeError::NilIndex),
                    Value::Number(x) if x.is_nan() => return Err(DecodeError::NilIndex),
                    _ => table.raw_set(k, v)?,
                }
            }
            Ok(Value::Table(table))
        }
        _ => Err(DecodeError::Bad),
    }
}

/// lua-cmsgpack's `mp_unpack_full`: up to `limit` values (0: all) from
/// byte `offset`; with a limit, the next offset (or -1) comes first.
fn unpack_full(lua: &Lua, s: &[u8], limit: i64, offset: i64) -> mlua::Result<mlua::MultiValue> {
    let len = s.len() as i64;
    if offset < 0 || limit < 0 {
        return fail(
            lua,
            format!("Invalid request to unpack with offset of {offset} and limit of {len}."),
        );
    }
    if offset > len {
        return fail(
            lua,
            format!("Start offset {offset} greater than input length {len}."),
        );
    }
    let mut c = Cursor {
        s,
        pos: offset as usize,
    };
    let mut vals = Vec::new();
    while c.pos < s.len() && (limit == 0 || (vals.len() as i64) < limit) {
        match decode(lua, &mut c, 0) {
            Ok(v) => vals.push(v),
            Err(DecodeError::Missing) => return fail(lua, "Missing bytes in input."),
            Err(DecodeError::Bad) => return fail(lua, "Bad data format in input."),
            Err(DecodeError::NilIndex) => {
                return raise(Value::String(lua.create_string("table index is nil")?))
            }
            Err(DecodeError::Lua(e)) => return Err(e),
        }
    }
    if limit > 0 {
        let next = if c.pos >= s.len() { -1 } else { c.pos as i64 };
        vals.insert(0, Value::Number(next as f64));
    }
    ret_many(lua, vals)
}

fn string_arg(a: &[Value], n: usize, fname: &str) -> Result<Vec<u8>, String> {
    match a.get(n - 1).and_then(crate::redislib::value_to_bytes) {
        Some(b) => Ok(b),
        None => Err(format!(
            "bad argument #{n} to '{fname}' (string expected, got {})",
            type_name(a.get(n - 1))
        )),
    }
}

fn opt_int(a: &[Value], n: usize, fname: &str) -> Result<i64, String> {
    match a.get(n - 1) {
        None | Some(Value::Nil) => Ok(0),
        Some(_) => check_int(a, n, fname),
    }
}

/// The `cmsgpack` table.
pub fn open(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set(
        "pack",
        native(lua, |lua, a| {
            if a.is_empty() {
                return fail(
                    lua,
                    "bad argument #0 to 'pack' (MessagePack pack needs input.)",
                );
            }
            let mut out = Vec::new();
            for v in a.iter() {
                pack_value(v, 0, &mut out)?;
            }
            ret(Value::String(lua.create_string(&out)?))
        })?,
    )?;
    t.raw_set(
        "unpack",
        native(lua, |lua, a| {
            let a: Vec<Value> = a.into_iter().collect();
            match string_arg(&a, 1, "unpack") {
                Ok(s) => unpack_full(lua, &s, 0, 0),
                Err(e) => fail(lua, e),
            }
        })?,
    )?;
    t.raw_set(
        "unpack_one",
        native(lua, |lua, a| {
            let a: Vec<Value> = a.into_iter().collect();
            let r = string_arg(&a, 1, "unpack_one")
                .and_then(|s| Ok((s, opt_int(&a, 2, "unpack_one")?)));
            match r {
                Ok((s, off)) => unpack_full(lua, &s, 1, off),
                Err(e) => fail(lua, e),
            }
        })?,
    )?;
    t.raw_set(
        "unpack_limit",
        native(lua, |lua, a| {
            let a: Vec<Value> = a.into_iter().collect();
            let r = string_arg(&a, 1, "unpack_limit").and_then(|s| {
                let limit = check_int(&a, 2, "unpack_limit")?;
                Ok((s, limit, opt_int(&a, 3, "unpack_limit")?))
            });
            match r {
                Ok((s, limit, off)) => unpack_full(lua, &s, limit, off),
                Err(e) => fail(lua, e),
            }
        })?,
    )?;
    t.raw_set("_NAME", "cmsgpack")?;
    t.raw_set("_VERSION", "lua-cmsgpack 0.4.0")?;
    t.raw_set("_COPYRIGHT", "Copyright (C) 2012, Salvatore Sanfilippo")?;
    t.raw_set("_DESCRIPTION", "MessagePack C implementation for Lua")?;
    Ok(t)
}
