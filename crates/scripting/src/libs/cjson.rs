//! `cjson`: the JSON library Redis embeds (lua-cjson 2.1.0 as Redis
//! patched it), with its encoding rules, error texts and configuration
//! functions. `cjson.null` is the light userdata NULL.

use std::cell::Cell;
use std::rc::Rc;

use mlua::{LightUserData, Lua, Table, Value};

use crate::num::fmt_g;
use crate::redislib::{fail, native, ret, ret_many, str_to_number, type_name, value_to_bytes};

/// Settings shared by one `cjson` instance (`cjson.new()` makes another).
#[derive(Clone, Copy)]
struct Config {
    sparse_convert: bool,
    sparse_ratio: i64,
    sparse_safe: i64,
    encode_max_depth: i64,
    decode_max_depth: i64,
    precision: usize,
    keep_buffer: bool,
    /// 0 off, 1 on, 2 "null".
    encode_invalid: u8,
    decode_invalid: bool,
}

const DEFAULT: Config = Config {
    sparse_convert: false,
    sparse_ratio: 2,
    sparse_safe: 10,
    encode_max_depth: 1000,
    decode_max_depth: 1000,
    precision: 14,
    keep_buffer: true,
    encode_invalid: 0,
    decode_invalid: true,
};

/// Nesting never goes deeper than this, whatever `encode_max_depth` /
/// `decode_max_depth` say: the encoder and decoder recurse on the Rust
/// stack, which must not overflow.
pub const HARD_MAX_DEPTH: i64 = 1000;

fn null() -> Value {
    Value::LightUserData(LightUserData(std::ptr::null_mut()))
}

/// The `cjson` table.
pub fn open(lua: &Lua) -> mlua::Result<Table> {
    new_instance(lua)
}

fn new_instance(lua: &Lua) -> mlua::Result<Table> {
    let cfg = Rc::new(Cell::new(DEFAULT));
    let t = lua.create_table()?;
    let c = cfg.clone();
    t.raw_set(
        "encode",
        native(lua, move |lua, a| {
            if a.len() != 1 {
                return fail(lua, "bad argument #1 to 'encode' (expected 1 argument)");
            }
            let mut out = Vec::new();
            match encode_value(&a[0], &c.get(), 0, &mut out) {
                Ok(()) => ret(Value::String(lua.create_string(&out)?)),
                Err(e) => fail(lua, e),
            }
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "decode",
        native(lua, move |lua, a| {
            if a.len() != 1 {
                return fail(lua, "bad argument #1 to 'decode' (expected 1 argument)");
            }
            let Some(text) = value_to_bytes(&a[0]) else {
                return fail(
                    lua,
                    format!(
                        "bad argument #1 to 'decode' (string expected, got {})",
                        type_name(a.front())
                    ),
                );
            };
            let mut p = Parser {
                s: &text,
                pos: 0,
                cfg: c.get(),
                lua,
            };
            match p.document() {
                Ok(v) => ret(v),
                Err(ParseError::Msg(m)) => fail(lua, m),
                Err(ParseError::Lua(e)) => Err(e),
            }
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "encode_sparse_array",
        native(lua, move |lua, a| {
            let mut cur = c.get();
            let args: Vec<Value> = a.into_iter().collect();
            if let Some(v) = args.first().filter(|v| !v.is_nil()) {
                match bool_option(v) {
                    Some(b) => cur.sparse_convert = b,
                    None => return fail(lua, bad_option("encode_sparse_array", 1, v)),
                }
            }
            for (i, slot) in [(1usize, &mut cur.sparse_ratio), (2, &mut cur.sparse_safe)] {
                if let Some(v) = args.get(i).filter(|v| !v.is_nil()) {
                    match int_option(v, 0, i32::MAX as i64) {
                        Some(n) => *slot = n,
                        None => {
                            return fail(
                                lua,
                                format!("bad argument #{} to 'encode_sparse_array' (expected integer between 0 and 2147483647)", i + 1),
                            )
                        }
                    }
                }
            }
            c.set(cur);
            ret_many(
                lua,
                vec![
                    Value::Boolean(cur.sparse_convert),
                    Value::Number(cur.sparse_ratio as f64),
                    Value::Number(cur.sparse_safe as f64),
                ],
            )
        })?,
    )?;
    for (name, min, max) in [
        ("encode_max_depth", 1, i32::MAX as i64),
        ("decode_max_depth", 1, i32::MAX as i64),
        ("encode_number_precision", 1, 14),
    ] {
        let c = cfg.clone();
        t.raw_set(
            name,
            native(lua, move |lua, a| {
                let mut cur = c.get();
                if let Some(v) = a.front().filter(|v| !v.is_nil()) {
                    let Some(n) = int_option(v, min, max) else {
                        return fail(
                            lua,
                            format!("bad argument #1 to '{name}' (expected integer between {min} and {max})"),
                        );
                    };
                    match name {
                        "encode_max_depth" => cur.encode_max_depth = n,
                        "decode_max_depth" => cur.decode_max_depth = n,
                        _ => cur.precision = n as usize,
                    }
                    c.set(cur);
                }
                let v = match name {
                    "encode_max_depth" => cur.encode_max_depth,
                    "decode_max_depth" => cur.decode_max_depth,
                    _ => cur.precision as i64,
                };
                ret(Value::Number(v as f64))
            })?,
        )?;
    }
    for name in [
        "encode_keep_buffer",
        "decode_invalid_numbers",
        "encode_invalid_numbers",
    ] {
        let c = cfg.clone();
        t.raw_set(
            name,
            native(lua, move |lua, a| {
                let mut cur = c.get();
                if let Some(v) = a.front().filter(|v| !v.is_nil()) {
                    let null_ok = name == "encode_invalid_numbers"
                        && matches!(v, Value::String(s) if &s.as_bytes()[..] == b"null");
                    let Some(b) = bool_option(v).or(null_ok.then_some(true)) else {
                        return fail(lua, bad_option(name, 1, v));
                    };
                    match name {
                        "encode_keep_buffer" => cur.keep_buffer = b,
                        "decode_invalid_numbers" => cur.decode_invalid = b,
                        _ => cur.encode_invalid = if null_ok { 2 } else { b as u8 },
                    }
                    c.set(cur);
                }
                let v = match name {
                    "encode_keep_buffer" => Value::Boolean(cur.keep_buffer),
                    "decode_invalid_numbers" => Value::Boolean(cur.decode_invalid),
                    _ if cur.encode_invalid == 2 => Value::String(lua.create_string("null")?),
                    _ => Value::Boolean(cur.encode_invalid == 1),
                };
                ret(v)
            })?,
        )?;
    }
    t.raw_set(
        "new",
        native(lua, |lua, _| ret(Value::Table(new_instance(lua)?)))?,
    )?;
    t.raw_set("null", null())?;
    t.raw_set("_NAME", "cjson")?;
    t.raw_set("_VERSION", "2.1.0")?;
    Ok(t)
}

fn bool_option(v: &Value) -> Option<bool> {
    match v {
        Value::Boolean(b) => Some(*b),
        Value::String(s) => match &s.as_bytes()[..] {
            b"on" | b"true" => Some(true),
            b"off" | b"false" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

fn int_option(v: &Value, min: i64, max: i64) -> Option<i64> {
    let n = match v {
        Value::Number(n) => *n,
        Value::Integer(n) => *n as f64,
        Value::String(s) => str_to_number(&s.as_bytes())?,
        _ => return None,
    };
    let n = crate::num::c_double_to_i64(n);
    (min..=max).contains(&n).then_some(n)
}

fn bad_option(name: &str, n: usize, v: &Value) -> String {
    let shown = value_to_bytes(v).map_or_else(
        || "?".to_string(),
        |b| String::from_utf8_lossy(&b).into_owned(),
    );
    format!("bad argument #{n} to '{name}' (invalid option '{shown}')")
}

// ---------------------------------------------------------------------------
// Encoding.

fn escape_string(s: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &c in s {
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\x08' => out.extend_from_slice(b"\\b"),
            b'\x0c' => out.extend_from_slice(b"\\f"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0..=0x1f | 0x7f => {
                out.extend_from_slice(format!("\\u{:04x}", c).as_bytes());
            }
            _ => out.push(c),
        }
    }
    out.push(b'"');
}

fn encode_number(n: f64, cfg: &Config, out: &mut Vec<u8>) -> Result<(), String> {
    if !n.is_finite() {
        match cfg.encode_invalid {
            0 => return Err("Cannot serialise number: must not be NaN or Inf".into()),
            2 => {
                out.extend_from_slice(b"null");
                return Ok(());
            }
            _ => {}
        }
    }
    fmt_g(n, cfg.precision, out);
    Ok(())
}

fn encode_value(v: &Value, cfg: &Config, depth: i64, out: &mut Vec<u8>) -> Result<(), String> {
    match v {
        Value::String(s) => escape_string(&s.as_bytes(), out),
        Value::Number(n) => encode_number(*n, cfg, out)?,
        Value::Integer(n) => encode_number(*n as f64, cfg, out)?,
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Nil => out.extend_from_slice(b"null"),
        Value::LightUserData(p) if p.0.is_null() => out.extend_from_slice(b"null"),
        Value::Table(t) => {
            let depth = depth + 1;
            if depth > cfg.encode_max_depth.min(HARD_MAX_DEPTH) {
                return Err(format!("Cannot serialise, excessive nesting ({depth})"));
            }
            match array_length(t, cfg)? {
                Some(len) if len > 0 => {
                    out.push(b'[');
                    for i in 1..=len {
                        if i > 1 {
                            out.push(b',');
                        }
                        let v: Value = t.raw_get(i).map_err(|e| e.to_string())?;
                        let v = crate::tramp::exact_in(t, i, v);
                        encode_value(&v, cfg, depth, out)?;
                    }
                    out.push(b']');
                }
                _ => {
                    out.push(b'{');
                    let mut first = true;
                    for kv in t.pairs::<Value, Value>() {
                        let (k, v) = kv.map_err(|e| e.to_string())?;
                        if !first {
                            out.push(b',');
                        }
                        first = false;
                        match &k {
                            Value::String(s) => escape_string(&s.as_bytes(), out),
                            Value::Number(_) | Value::Integer(_) => {
                                out.push(b'"');
                                let n = match k {
                                    Value::Number(n) => n,
                                    Value::Integer(n) => n as f64,
                                    _ => 0.0,
                                };
                                encode_number(n, cfg, out)?;
                                out.push(b'"');
                            }
                            other => {
                                return Err(format!(
                                    "Cannot serialise {}: table key must be a number or string",
                                    type_name(Some(other))
                                ))
                            }
                        }
                        out.push(b':');
                        let v = crate::tramp::exact_in(t, k, v);
                        encode_value(&v, cfg, depth, out)?;
                    }
                    out.push(b'}');
                }
            }
        }
        other => {
            return Err(format!(
                "Cannot serialise {}: type not supported",
                type_name(Some(other))
            ))
        }
    }
    Ok(())
}

/// lua-cjson's `lua_array_length`: `Some(max)` when every key is a positive
/// integer (and the array is not excessively sparse), `None` for an object.
fn array_length(t: &Table, cfg: &Config) -> Result<Option<usize>, String> {
    let mut max = 0f64;
    let mut items = 0f64;
    for kv in t.pairs::<Value, Value>() {
        let (k, _) = kv.map_err(|e| e.to_string())?;
        let n = match k {
            Value::Number(n) => n,
            Value::Integer(n) => n as f64,
            _ => return Ok(None),
        };
        if n < 1.0 || n.floor() != n {
            return Ok(None);
        }
        max = f64::max(max, n);
        items += 1.0;
    }
    if cfg.sparse_ratio > 0 && max > items * cfg.sparse_ratio as f64 && max > cfg.sparse_safe as f64
    {
        if !cfg.sparse_convert {
            return Err("Cannot serialise table: excessively sparse array".into());
        }
        return Ok(None);
    }
    Ok(Some(max as usize))
}

// ---------------------------------------------------------------------------
// Decoding.

enum ParseError {
    Msg(String),
    Lua(mlua::Error),
}

impl From<mlua::Error> for ParseError {
    fn from(e: mlua::Error) -> Self {
        ParseError::Lua(e)
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Tok {
    ObjBegin,
    ObjEnd,
    ArrBegin,
    ArrEnd,
    Str,
    Num,
    Bool,
    Null,
    Colon,
    Comma,
    End,
}

fn tok_name(t: Tok) -> &'static str {
    match t {
        Tok::ObjBegin => "T_OBJ_BEGIN",
        Tok::ObjEnd => "T_OBJ_END",
        Tok::ArrBegin => "T_ARR_BEGIN",
        Tok::ArrEnd => "T_ARR_END",
        Tok::Str => "T_STRING",
        Tok::Num => "T_NUMBER",
        Tok::Bool => "T_BOOLEAN",
        Tok::Null => "T_NULL",
        Tok::Colon => "T_COLON",
        Tok::Comma => "T_COMMA",
        Tok::End => "T_END",
    }
}

/// A token: its kind, start index, and value.
struct Token {
    kind: Result<Tok, &'static str>,
    index: usize,
    value: Value,
}

struct Parser<'a> {
    s: &'a [u8],
    pos: usize,
    cfg: Config,
    lua: &'a Lua,
}

/// The length of the longest prefix of `s` that C's strtod reads.
fn strtod_len(s: &[u8], allow_special: bool) -> usize {
    let mut i = 0;
    if i < s.len() && (s[i] == b'-' || s[i] == b'+') {
        i += 1;
    }
    let rest = &s[i..];
    let lower: Vec<u8> = rest
        .iter()
        .take(8)
        .map(|c| c.to_ascii_lowercase())
        .collect();
    if allow_special {
        if lower.starts_with(b"infinity") {
            return i + 8;
        }
        if lower.starts_with(b"inf") || lower.starts_with(b"nan") {
            return i + 3;
        }
        if lower.starts_with(b"0x") {
            let h = rest[2..]
                .iter()
                .take_while(|c| c.is_ascii_hexdigit())
                .count();
            if h > 0 {
                return i + 2 + h;
            }
        }
    }
    let digits = rest.iter().take_while(|c| c.is_ascii_digit()).count();
    let mut j = digits;
    let mut frac = 0;
    if j < rest.len() && rest[j] == b'.' {
        frac = rest[j + 1..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count();
        j += 1 + frac;
    }
    if digits + frac == 0 {
        return 0;
    }
    if j < rest.len() && (rest[j] == b'e' || rest[j] == b'E') {
        let mut k = j + 1;
        if k < rest.len() && (rest[k] == b'+' || rest[k] == b'-') {
            k += 1;
        }
        let e = rest[k..].iter().take_while(|c| c.is_ascii_digit()).count();
        if e > 0 {
            j = k + e;
        }
    }
    i + j
}

impl Parser<'_> {
    fn next(&mut self) -> Result<Token, ParseError> {
        while self.pos < self.s.len() && matches!(self.s[self.pos], b' ' | b'\t' | b'\n' | b'\r') {
            self.pos += 1;
        }
        let index = self.pos;
        let mk = |kind, value| Token { kind, index, value };
        let Some(&c) = self.s.get(self.pos) else {
            return Ok(mk(Ok(Tok::End), Value::Nil));
        };
        let single = match c {
            b'{' => Some(Tok::ObjBegin),
            b'}' => Some(Tok::ObjEnd),
            b'[' => Some(Tok::ArrBegin),
            b']' => Some(Tok::ArrEnd),
            b':' => Some(Tok::Colon),
            b',' => Some(Tok::Comma),
            _ => None,
        };
        if let Some(t) = single {
            self.pos += 1;
            return Ok(mk(Ok(t), Value::Nil));
        }
        if c == b'"' {
            return Ok(match self.string() {
                Ok(v) => mk(Ok(Tok::Str), Value::String(self.lua.create_string(&v)?)),
                // lua-cjson reports where in the string it failed.
                Err((e, at)) => Token {
                    kind: Err(e),
                    index: at,
                    value: Value::Nil,
                },
            });
        }
        let rest = &self.s[self.pos..];
        let special = self.cfg.decode_invalid;
        if c == b'-'
            || c.is_ascii_digit()
            || (special && matches!(c, b'+' | b'i' | b'I' | b'n' | b'N'))
        {
            // "null" starts with n: try the literal first.
            if !rest.starts_with(b"null") {
                let n = strtod_len(rest, special);
                if n == 0 {
                    return Ok(mk(Err("invalid number"), Value::Nil));
                }
                let text = &rest[..n];
                let v = std::str::from_utf8(text).ok().and_then(|t| {
                    let l = t.to_ascii_lowercase();
                    if l.contains("0x") {
                        str_to_number(text)
                    } else if l.trim_start_matches(['+', '-']).starts_with("nan") {
                        Some(if l.starts_with('-') {
                            -f64::NAN
                        } else {
                            f64::NAN
                        })
                    } else {
                        t.parse::<f64>().ok()
                    }
                });
                let Some(v) = v else {
                    return Ok(mk(Err("invalid number"), Value::Nil));
                };
                self.pos += n;
                return Ok(mk(Ok(Tok::Num), Value::Number(v)));
            }
        }
        for (lit, tok, v) in [
            (&b"true"[..], Tok::Bool, Value::Boolean(true)),
            (b"false", Tok::Bool, Value::Boolean(false)),
            (b"null", Tok::Null, null()),
        ] {
            if rest.starts_with(lit) {
                self.pos += lit.len();
                return Ok(mk(Ok(tok), v));
            }
        }
        Ok(mk(Err("invalid token"), Value::Nil))
    }

    fn string(&mut self) -> Result<Vec<u8>, (&'static str, usize)> {
        let s = self.s;
        let mut i = self.pos + 1;
        let mut out = Vec::new();
        loop {
            let Some(&c) = s.get(i) else {
                return Err(("unexpected end of string", i));
            };
            match c {
                b'"' => break,
                b'\\' => {
                    let Some(&e) = s.get(i + 1) else {
                        return Err(("unexpected end of string", i + 1));
                    };
                    let ch = match e {
                        b'"' => b'"',
                        b'\\' => b'\\',
                        b'/' => b'/',
                        b'b' => 8,
                        b'f' => 12,
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'u' => {
                            const BAD: &str = "invalid unicode escape code";
                            let (cp, used) = unicode_escape(&s[i..]).ok_or((BAD, i))?;
                            let mut buf = [0u8; 4];
                            let ch = char::from_u32(cp).ok_or((BAD, i))?;
                            out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                            i += used;
                            continue;
                        }
                        _ => return Err(("invalid escape code", i)),
                    };
                    out.push(ch);
                    i += 2;
                }
                _ => {
                    out.push(c);
                    i += 1;
                }
            }
        }
        self.pos = i + 1;
        Ok(out)
    }

    fn error(&self, expected: &str, t: &Token) -> ParseError {
        let found = match t.kind {
            Ok(k) => tok_name(k),
            Err(e) => e,
        };
        ParseError::Msg(format!(
            "Expected {expected} but found {found} at character {}",
            t.index + 1
        ))
    }

    fn document(&mut self) -> Result<Value, ParseError> {
        let t = self.next()?;
        let v = self.value(t, 0)?;
        let t = self.next()?;
        if t.kind != Ok(Tok::End) {
            return Err(self.error("the end", &t));
        }
        Ok(v)
    }

    fn value(&mut self, t: Token, depth: i64) -> Result<Value, ParseError> {
        match t.kind {
            Ok(Tok::Str) | Ok(Tok::Num) | Ok(Tok::Bool) | Ok(Tok::Null) => Ok(t.value),
            Ok(Tok::ObjBegin) | Ok(Tok::ArrBegin) => {
                let depth = depth + 1;
                if depth > self.cfg.decode_max_depth.min(HARD_MAX_DEPTH) {
                    return Err(ParseError::Msg(format!(
                        "Found too many nested data structures ({depth}) at character {}",
                        t.index + 1
                    )));
                }
                let table = self.lua.create_table()?;
                if t.kind == Ok(Tok::ArrBegin) {
                    let mut tok = self.next()?;
                    if tok.kind == Ok(Tok::ArrEnd) {
                        return Ok(Value::Table(table));
                    }
                    let mut i = 1usize;
                    loop {
                        let v = self.value(tok, depth)?;
                        table.raw_set(i, v)?;
                        i += 1;
                        let sep = self.next()?;
                        match sep.kind {
                            Ok(Tok::ArrEnd) => return Ok(Value::Table(table)),
                            Ok(Tok::Comma) => tok = self.next()?,
                            _ => return Err(self.error("comma or array end", &sep)),
                        }
                    }
                }
                let mut tok = self.next()?;
                if tok.kind == Ok(Tok::ObjEnd) {
                    return Ok(Value::Table(table));
                }
                loop {
                    if tok.kind != Ok(Tok::Str) {
                        return Err(self.error("object key string", &tok));
                    }
                    let key = tok.value;
                    let colon = self.next()?;
                    if colon.kind != Ok(Tok::Colon) {
                        return Err(self.error("colon", &colon));
                    }
                    let vt = self.next()?;
                    let v = self.value(vt, depth)?;
                    table.raw_set(key, v)?;
                    let sep = self.next()?;
                    match sep.kind {
                        Ok(Tok::ObjEnd) => return Ok(Value::Table(table)),
                        Ok(Tok::Comma) => tok = self.next()?,
                        _ => return Err(self.error("comma or object end", &sep)),
                    }
                }
            }
            _ => Err(self.error("value", &t)),
        }
    }
}

/// `\uXXXX` (and a following low surrogate) at the start of `s`: the code
/// point and the bytes used.
fn unicode_escape(s: &[u8]) -> Option<(u32, usize)> {
    let hex = |b: &[u8]| -> Option<u32> {
        if b.len() < 4 || !b[..4].iter().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        u32::from_str_radix(std::str::from_utf8(&b[..4]).ok()?, 16).ok()
    };
    let hi = hex(s.get(2..)?)?;
    if (0xDC00..=0xDFFF).contains(&hi) {
        return None;
    }
    if (0xD800..=0xDBFF).contains(&hi) {
        if s.get(6..8)? != b"\\u" {
            return None;
        }
        let lo = hex(s.get(8..)?)?;
        if !(0xDC00..=0xDFFF).contains(&lo) {
            return None;
        }
        return Some((0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00), 12));
    }
    Some((hi, 6))
}
