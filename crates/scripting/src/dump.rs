//! FUNCTION DUMP / RESTORE payloads, in Redis 7's format: for each library
//! the RDB function opcode (`RDB_OPCODE_FUNCTION2`, 245) and the library's
//! code as an RDB string, then the RDB version (2 bytes, little-endian) and
//! the CRC64 (Jones polynomial, reflected, little-endian) of everything
//! before it.

/// `RDB_OPCODE_FUNCTION2`.
pub const OPCODE_FUNCTION2: u8 = 245;
/// `RDB_OPCODE_FUNCTION_PRE_GA` (Redis 7.0 release candidates).
pub const OPCODE_FUNCTION_PRE_GA: u8 = 246;
/// The newest RDB version this crate accepts (Redis 7.2's).
pub const RDB_VERSION: u16 = 11;
/// The version it writes: the lowest with the function opcode (Redis 7.0's), so that Redis
/// 7.0 as well as 7.2 and Valkey restore our dumps (the format is the same).
pub const WRITTEN_RDB_VERSION: u16 = 10;

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

const fn crc64_table() -> [u64; 256] {
    // Jones polynomial 0xad93d23594c935a9, bit-reflected.
    const POLY: u64 = 0x95ac_9329_ac4b_c9b5;
    let mut t = [0u64; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u64;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 == 1 { (c >> 1) ^ POLY } else { c >> 1 };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
}

static CRC64_TABLE: [u64; 256] = crc64_table();

/// Redis's CRC64 (`crc64(0, data, len)`).
pub fn crc64(crc: u64, data: &[u8]) -> u64 {
    let mut c = crc;
    for &b in data {
        c = CRC64_TABLE[((c ^ b as u64) & 0xff) as usize] ^ (c >> 8);
    }
    c
}

fn write_len(out: &mut Vec<u8>, len: usize) {
    if len < 1 << 6 {
        out.push(len as u8);
    } else if len < 1 << 14 {
        out.push(0x40 | (len >> 8) as u8);
        out.push(len as u8);
    } else if len <= u32::MAX as usize {
        out.push(0x80);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&(len as u64).to_be_bytes());
    }
}

/// The payload for these library codes.
pub fn encode<'a>(codes: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    for code in codes {
        out.push(OPCODE_FUNCTION2);
        write_len(&mut out, code.len());
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
                lzf_decompress(c, len).ok_or_else(|| TRUNCATED.to_string())
            }
            _ => Err(TRUNCATED.to_string()),
        }
    }
}

/// LZF decompression into exactly `len` bytes.
pub fn lzf_decompress(input: &[u8], len: usize) -> Option<Vec<u8>> {
    let mut out: Vec<u8> = Vec::with_capacity(len.min(input.len().saturating_mul(64)));
    let mut ip = 0;
    while ip < input.len() {
        let ctrl = input[ip] as usize;
        ip += 1;
        if ctrl < 32 {
            let run = ctrl + 1;
            if ip + run > input.len() || out.len() + run > len {
                return None;
            }
            out.extend_from_slice(&input[ip..ip + run]);
            ip += run;
        } else {
            let mut n = ctrl >> 5;
            if n == 7 {
                n += *input.get(ip)? as usize;
                ip += 1;
            }
            let back = ((ctrl & 0x1f) << 8) + *input.get(ip)? as usize + 1;
            ip += 1;
            if back > out.len() || out.len() + n + 2 > len {
                return None;
            }
            let start = out.len() - back;
            for i in 0..n + 2 {
                let b = out[start + i];
                out.push(b);
            }
        }
    }
    (out.len() == len).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc64_check_value() {
        assert_eq!(crc64(0, b"123456789"), 0xe9c6_d914_c4b8_d9ca);
    }

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

    #[test]
    fn lzf_back_references() {
        // literal "abc", then a back reference of length 5 at distance 3.
        let input = [2, b'a', b'b', b'c', (3 << 5), 2];
        assert_eq!(lzf_decompress(&input, 8).unwrap(), b"abcabcab");
        assert!(lzf_decompress(&input, 9).is_none());
        assert!(lzf_decompress(&[0x20, 5], 10).is_none());
    }
}
