//! FUNCTION DUMP / RESTORE payloads, in Redis 7's format: for each library
//! the RDB function opcode (`RDB_OPCODE_FUNCTION2`, 245) and the library's
//! code as an RDB string, then the RDB version (2 bytes, little-endian) and
//! the CRC64 (Jones polynomial, reflected, little-endian) of everything
//! before it.

/// `RDB_OPCODE_FUNCTION2`.
pub const OPCODE_FUNCTION2: u8 = darner_rdb::opcode::FUNCTION2;
/// `RDB_OPCODE_FUNCTION_PRE_GA` (Redis 7.0 release candidates).
pub const OPCODE_FUNCTION_PRE_GA: u8 = darner_rdb::opcode::FUNCTION_PRE_GA;
/// The newest RDB version this crate accepts (Redis 7.2's).
pub const RDB_VERSION: u16 = 11;
/// The version it writes: the lowest with the function opcode (Redis 7.0's), so that Redis
/// 7.0 as well as 7.2 and Valkey restore our dumps (the format is the same).
pub const WRITTEN_RDB_VERSION: u16 = darner_rdb::WRITTEN_VERSION;

/// What FUNCTION RESTORE does with the libraries already loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RestorePolicy {
    /// Fail if a library or function already exists (the default).
    #[default]
    Append,
    /// Replace libraries of the same name.
    Replace,
    /// Delete every library first.
    Flush,
}

pub use darner_rdb::crc64::crc64;

/// The payload for these library codes.
pub fn encode<'a>(codes: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    for code in codes {
        out.push(OPCODE_FUNCTION2);
        darner_rdb::encode::write_len(&mut out, code.len() as u64);
        out.extend_from_slice(code);
    }
    out.extend_from_slice(&WRITTEN_RDB_VERSION.to_le_bytes());
    let crc = crc64(0, &out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// The library codes of a payload, or Redis's error text.
pub fn decode(payload: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    const BAD: &str = "ERR payload version or checksum are wrong";
    if payload.len() < 10 {
        return Err(BAD.to_string());
    }
    let body_end = payload.len() - 10;
    let version = u16::from_le_bytes([payload[body_end], payload[body_end + 1]]);
    let crc = u64::from_le_bytes(payload[body_end + 2..].try_into().unwrap_or([0; 8]));
    if version > RDB_VERSION || crc64(0, &payload[..body_end + 2]) != crc {
        return Err(BAD.to_string());
    }
    let mut r = Reader {
        buf: &payload[..body_end],
        pos: 0,
    };
    let mut codes = Vec::new();
    while r.pos < r.buf.len() {
        let op = r.byte()?;
        if op == OPCODE_FUNCTION_PRE_GA {
            return Err("ERR Pre-GA function format not supported".to_string());
        }
        if op != OPCODE_FUNCTION2 {
            return Err("ERR given type is not a function".to_string());
        }
        codes.push(r.string()?);
    }
    Ok(codes)
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

const TRUNCATED: &str = "ERR Failed loading library";

impl Reader<'_> {
    fn byte(&mut self) -> Result<u8, String> {
        let b = *self.buf.get(self.pos).ok_or(TRUNCATED)?;
        self.pos += 1;
        Ok(b)
    }

    fn take(&mut self, n: usize) -> Result<&[u8], String> {
        if self.buf.len() - self.pos < n {
            return Err(TRUNCATED.to_string());
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// A length; `Err` on encoded values.
    fn len(&mut self) -> Result<(usize, Option<u8>), String> {
        let b = self.byte()?;
        Ok(match b >> 6 {
            0 => ((b & 0x3f) as usize, None),
            1 => ((((b & 0x3f) as usize) << 8) | self.byte()? as usize, None),
            2 if b == 0x80 => {
                let s = self.take(4)?;
                (u32::from_be_bytes([s[0], s[1], s[2], s[3]]) as usize, None)
            }
            2 if b == 0x81 => {
                let s = self.take(8)?;
                let v = u64::from_be_bytes(s.try_into().unwrap_or([0xff; 8]));
                (usize::try_from(v).map_err(|_| TRUNCATED)?, None)
            }
            3 => (0, Some(b & 0x3f)),
            _ => return Err(TRUNCATED.to_string()),
        })
    }

    fn string(&mut self) -> Result<Vec<u8>, String> {
        match self.len()? {
            (n, None) => Ok(self.take(n)?.to_vec()),
            (_, Some(0)) => Ok((self.byte()? as i8).to_string().into_bytes()),
            (_, Some(1)) => {
                let s = self.take(2)?;
                Ok(i16::from_le_bytes([s[0], s[1]]).to_string().into_bytes())
            }
            (_, Some(2)) => {
                let s = self.take(4)?;
                Ok(i32::from_le_bytes([s[0], s[1], s[2], s[3]])
                    .to_string()
                    .into_bytes())
            }
            (_, Some(3)) => {
                let (clen, _) = self.len()?;
                let (len, _) = self.len()?;
                let c = self.take(clen)?;
                darner_rdb::lzf::decompress(c, len).map_err(|_| TRUNCATED.to_string())
            }
            _ => Err(TRUNCATED.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let big = vec![b'x'; 20_000];
        let codes: Vec<&[u8]> = vec![b"#!lua name=a\n", &big];
        let p = encode(codes.iter().copied());
        assert_eq!(decode(&p).unwrap(), vec![codes[0].to_vec(), big.clone()]);
        let mut bad = p.clone();
        bad[3] ^= 1;
        assert!(decode(&bad).is_err());
        assert!(decode(&p[..5]).is_err());
    }
}
