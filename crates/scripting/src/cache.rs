//! EVAL's script cache (SHA-1 → compiled function) and the script shebang.

use std::collections::HashMap;

use bytes::Bytes;
use mlua::Function;

use crate::redislib::flag_by_name;
use crate::ScriptFlags;

/// One cached script.
pub(crate) struct Cached {
    pub func: Function,
    pub flags: ScriptFlags,
    pub body: Bytes,
}

/// The cache: lowercase hex SHA-1 of the body → script.
#[derive(Default)]
pub(crate) struct ScriptCache {
    pub map: HashMap<String, Cached>,
}

/// Parses EVAL's optional first line `#!lua flags=a,b` as Redis 7.2 does.
/// Returns the flags (a script without shebang runs in EVAL compatibility
/// mode) and the offset of the line break ending the shebang (the body
/// compiles with the shebang blanked, so line numbers stay right).
pub fn parse_shebang(body: &[u8]) -> Result<(ScriptFlags, usize), String> {
    if !body.starts_with(b"#!") {
        return Ok((
            ScriptFlags {
                eval_compat_mode: true,
                ..ScriptFlags::default()
            },
            0,
        ));
    }
    let Some(end) = body.iter().position(|&c| c == b'\n') else {
        return Err("ERR Invalid script shebang".to_string());
    };
    let line = &body[..end];
    let mut parts = line.split(|&c| c == b' ');
    let engine = parts.next().unwrap_or_default();
    if engine != b"#!lua" {
        return Err(format!(
            "ERR Unexpected engine in script shebang: {}",
            String::from_utf8_lossy(engine)
        ));
    }
    let mut flags = ScriptFlags::default();
    for part in parts {
        if let Some(list) = part.strip_prefix(b"flags=") {
            for flag in list.split(|&c| c == b',') {
                if flag.is_empty() {
                    continue;
                }
                match flag_by_name(flag, false) {
                    Some(set) => set(&mut flags),
                    None => {
                        return Err(format!(
                            "ERR Unexpected flag in script shebang: {}",
                            String::from_utf8_lossy(flag)
                        ))
                    }
                }
            }
        } else {
            return Err(format!(
                "ERR Unknown lua shebang option: {}",
                String::from_utf8_lossy(part)
            ));
        }
    }
    Ok((flags, end))
}

/// `body` with its first `len` bytes (the shebang) blanked out.
pub(crate) fn without_shebang(body: &[u8], len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(body.len());
    v.extend(std::iter::repeat_n(b' ', len));
    v.extend_from_slice(&body[len..]);
    v
}
