//! Conversions between replies and Lua values, as Redis 7.2's
//! `script_lua.c` does them.
//!
//! Reply → Lua (what `redis.call` returns): integer → number, bulk → string,
//! RESP2 null bulk / null array → `false`, RESP3 null → `nil`, status →
//! `{ok=s}`, error → `{err=s}`, array → sequence, map → `{map={k=v}}`, set →
//! `{set={m=true}}`, double → `{double=n}`, boolean → boolean, big number →
//! `{big_number=s}`, verbatim → `{verbatim_string={format=f, string=s}}`.
//!
//! Lua → reply (what a script returns): number → integer (truncated, as a C
//! cast), string → bulk, boolean → `:1` / null (RESP2 script) or a boolean
//! (after `redis.setresp(3)`), and a table is, by the first field present,
//! `err`, `ok`, `double`, `big_number`, `verbatim_string`, `map`, `set`,
//! else an array that stops at the first `nil`.

use bytes::Bytes;
use darner_resp::{Frame, ReplyWriter};
use mlua::{Lua, Table, Value};

use crate::num::c_double_to_i64;

/// Deepest table nesting converted to a reply; deeper tables become the
/// error element Redis produces when its Lua stack runs out.
pub const MAX_REPLY_DEPTH: usize = 1000;

/// Redis's error for a reply nested beyond [`MAX_REPLY_DEPTH`].
pub const STACK_LIMIT_ERROR: &str = "reached lua stack limit";

/// Normalizes an error the way Redis's `luaPushErrorBuff` does for
/// `{err=...}` tables. `coded`: `msg` is an error reply (`CODE message`,
/// the `-` removed), whose first word is its code, or a lone word that gets
/// `ERR`; otherwise `msg` is a plain message that gets `ERR `. Leading and
/// trailing CR/LF of the message are trimmed.
pub fn error_table_text(msg: &[u8], coded: bool) -> Vec<u8> {
    let (code, rest): (&[u8], &[u8]) = match msg.iter().position(|&c| c == b' ') {
        Some(i) if coded => (&msg[..i], &msg[i + 1..]),
        _ => (b"ERR", msg),
    };
    let mut start = 0;
    let mut end = rest.len();
    while start < end && (rest[start] == b'\r' || rest[start] == b'\n') {
        start += 1;
    }
    while end > start && (rest[end - 1] == b'\r' || rest[end - 1] == b'\n') {
        end -= 1;
    }
    let mut out = Vec::with_capacity(code.len() + 1 + end - start);
    out.extend_from_slice(code);
    out.push(b' ');
    out.extend_from_slice(&rest[start..end]);
    out
}

/// A new `{err="ERR msg"}` table for a plain message (`luaPushError`).
pub fn error_table(lua: &Lua, msg: &[u8]) -> mlua::Result<Table> {
    let t = lua.create_table_with_capacity(0, 2)?;
    t.raw_set("err", lua.create_string(error_table_text(msg, false))?)?;
    Ok(t)
}

/// A new `{err=...}` table for an error reply `CODE message` (no `-`).
pub fn error_table_coded(lua: &Lua, msg: &[u8]) -> mlua::Result<Table> {
    let t = lua.create_table_with_capacity(0, 2)?;
    t.raw_set("err", lua.create_string(error_table_text(msg, true))?)?;
    Ok(t)
}

/// Converts a command's reply into the Lua value `redis.call` returns.
pub fn frame_to_lua(lua: &Lua, frame: &Frame) -> mlua::Result<Value> {
    Ok(match frame {
        Frame::Integer(n) => Value::Number(*n as f64),
        Frame::Bulk(b) => Value::String(lua.create_string(b)?),
        Frame::NullBulk | Frame::NullArray => Value::Boolean(false),
        Frame::Null | Frame::Attribute(_) => Value::Nil,
        Frame::Simple(s) => {
            let t = lua.create_table_with_capacity(0, 1)?;
            t.raw_set("ok", lua.create_string(s)?)?;
            Value::Table(t)
        }
        Frame::Error(e) => {
            let t = error_table_coded(lua, e)?;
            t.raw_set("ignore_error_stats_update", true)?;
            Value::Table(t)
        }
        Frame::Array(items) | Frame::Push(items) => {
            let t = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, item) in items.iter().enumerate() {
                let v = frame_to_lua(lua, item)?;
                if !v.is_nil() {
                    t.raw_set(i + 1, v)?;
                }
            }
            Value::Table(t)
        }
        Frame::Map(pairs) => {
            let inner = lua.create_table_with_capacity(0, pairs.len())?;
            for (k, v) in pairs {
                let k = frame_to_lua(lua, k)?;
                let v = frame_to_lua(lua, v)?;
                if !k.is_nil() && !v.is_nil() {
                    inner.raw_set(k, v)?;
                }
            }
            wrap(lua, "map", Value::Table(inner))?
        }
        Frame::Set(items) => {
            let inner = lua.create_table_with_capacity(0, items.len())?;
            for item in items {
                let k = frame_to_lua(lua, item)?;
                if !k.is_nil() {
                    inner.raw_set(k, true)?;
                }
            }
            wrap(lua, "set", Value::Table(inner))?
        }
        Frame::Double(d) => wrap(lua, "double", Value::Number(*d))?,
        Frame::Boolean(b) => Value::Boolean(*b),
        Frame::BigNumber(s) => wrap(lua, "big_number", Value::String(lua.create_string(s)?))?,
        Frame::Verbatim { format, text } => {
            let inner = lua.create_table_with_capacity(0, 2)?;
            inner.raw_set("string", lua.create_string(text)?)?;
            inner.raw_set("format", lua.create_string(format)?)?;
            wrap(lua, "verbatim_string", Value::Table(inner))?
        }
    })
}

fn wrap(lua: &Lua, field: &str, v: Value) -> mlua::Result<Value> {
    let t = lua.create_table_with_capacity(0, 1)?;
    t.raw_set(field, v)?;
    Ok(Value::Table(t))
}

fn sanitize(b: &[u8]) -> Bytes {
    Bytes::from(
        b.iter()
            .map(|&c| if c == b'\r' || c == b'\n' { b' ' } else { c })
            .collect::<Vec<u8>>(),
    )
}

/// Converts a script's return value into its reply. `resp3` is whether the
/// script called `redis.setresp(3)` (it decides how booleans convert).
pub fn lua_to_frame(v: &Value, resp3: bool) -> Frame {
    to_frame(v, resp3, 0)
}

fn to_frame(v: &Value, resp3: bool, depth: usize) -> Frame {
    if depth > MAX_REPLY_DEPTH {
        return Frame::Error(Bytes::from_static(STACK_LIMIT_ERROR.as_bytes()));
    }
    match v {
        Value::String(s) => Frame::Bulk(Bytes::copy_from_slice(&s.as_bytes())),
        Value::Boolean(b) => match (resp3, b) {
            (true, b) => Frame::Boolean(*b),
            (false, true) => Frame::Integer(1),
            (false, false) => Frame::Null,
        },
        Value::Integer(n) => Frame::Integer(*n),
        Value::Number(n) => Frame::Integer(c_double_to_i64(*n)),
        Value::Table(t) => table_to_frame(t, resp3, depth),
        _ => Frame::Null,
    }
}

fn raw(t: &Table, k: &str) -> Value {
    t.raw_get::<Value>(k).unwrap_or(Value::Nil)
}

fn table_to_frame(t: &Table, resp3: bool, depth: usize) -> Frame {
    // `err`: a string (a number does not count), read raw as Redis does.
    if let Value::String(s) = raw(t, "err") {
        return Frame::Error(Bytes::copy_from_slice(&s.as_bytes()));
    }
    if let Value::String(s) = raw(t, "ok") {
        return Frame::Simple(sanitize(&s.as_bytes()));
    }
    match crate::tramp::exact_in(t, "double", raw(t, "double")) {
        Value::Number(n) => return Frame::Double(n),
        Value::Integer(n) => return Frame::Double(n as f64),
        _ => {}
    }
    if let Value::String(s) = raw(t, "big_number") {
        return Frame::BigNumber(sanitize(&s.as_bytes()));
    }
    if let Value::Table(vt) = raw(t, "verbatim_string") {
        if let (Value::String(f), Value::String(s)) = (raw(&vt, "format"), raw(&vt, "string")) {
            let fb = f.as_bytes();
            let mut format = [0u8; 3];
            for (i, c) in fb.iter().take(3).enumerate() {
                format[i] = *c;
            }
            return Frame::Verbatim {
                format,
                text: Bytes::copy_from_slice(&s.as_bytes()),
            };
        }
    }
    if let Value::Table(m) = raw(t, "map") {
        let mut pairs = Vec::new();
        for kv in m.pairs::<Value, Value>() {
            let Ok((k, v)) = kv else { break };
            pairs.push((
                to_frame(&k, resp3, depth + 1),
                to_frame(&v, resp3, depth + 1),
            ));
        }
        return Frame::Map(pairs);
    }
    if let Value::Table(s) = raw(t, "set") {
        let mut items = Vec::new();
        for kv in s.pairs::<Value, Value>() {
            let Ok((k, _)) = kv else { break };
            items.push(to_frame(&k, resp3, depth + 1));
        }
        return Frame::Set(items);
    }
    let mut items = Vec::new();
    let mut i = 1usize;
    loop {
        let v = t.raw_get::<Value>(i).unwrap_or(Value::Nil);
        if v.is_nil() {
            break;
        }
        items.push(to_frame(&v, resp3, depth + 1));
        i += 1;
    }
    Frame::Array(items)
}

/// Writes a script's reply to a client in the client's protocol (the
/// writer's `resp3`): a RESP3 map, set, double, boolean, big number or
/// verbatim string reaches a RESP2 client as Redis sends it (flat array,
/// array, bulk string, `:1`/`:0`, bulk, bulk), and a null as `$-1` / `_`.
pub fn write_reply(frame: &Frame, w: &mut ReplyWriter<'_>) {
    match frame {
        Frame::Simple(s) => w.simple(s),
        // Redis writes `-` and the text whatever it starts with: an error table's text that
        // starts with `-` arrives with two.
        Frame::Error(e) if e.first() == Some(&b'-') => {
            let mut doubled = Vec::with_capacity(e.len() + 1);
            doubled.push(b'-');
            doubled.extend_from_slice(e);
            w.error(&doubled)
        }
        Frame::Error(e) => w.error(e),
        Frame::Integer(n) => w.int(*n),
        Frame::Bulk(b) => w.bulk(b),
        Frame::NullBulk | Frame::Null => w.null(),
        Frame::NullArray => w.null_array(),
        Frame::Array(items) => {
            w.array(items.len());
            for i in items {
                write_reply(i, w);
            }
        }
        Frame::Push(items) => {
            w.push(items.len());
            for i in items {
                write_reply(i, w);
            }
        }
        Frame::Set(items) => {
            w.set(items.len());
            for i in items {
                write_reply(i, w);
            }
        }
        Frame::Map(pairs) | Frame::Attribute(pairs) => {
            w.map(pairs.len());
            for (k, v) in pairs {
                write_reply(k, w);
                write_reply(v, w);
            }
        }
        Frame::Double(d) => w.double(*d),
        Frame::Boolean(b) => w.boolean(*b),
        Frame::BigNumber(s) => w.big_number(s),
        Frame::Verbatim { format, text } => w.verbatim(format, text),
    }
}
