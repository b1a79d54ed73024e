//! The framing of a whole RDB file: the `REDIS` header, opcodes between keys, the EOF marker
//! and its checksum; and [`FileWriter`], which keeps the running CRC-64 while the caller hands
//! the bytes on in pieces.

use super::value::{encode_value, object_type_of};
use super::writer::{write_len, write_ms, write_string};
use super::EncodeOptions;
use crate::crc64::crc64;
use crate::{opcode, Value};

/// Appends the magic and the version, `REDIS0010`.
pub fn write_header(out: &mut Vec<u8>, version: u16) {
    out.extend_from_slice(format!("REDIS{version:04}").as_bytes());
}

/// Appends an auxiliary field (`redis-ver`, `ctime`, ...). Values are written as Redis
/// writes them (an integer text gets an integer encoding), never compressed.
pub fn write_aux(out: &mut Vec<u8>, key: &[u8], value: &[u8]) {
    out.push(opcode::AUX);
    write_string(out, key, false);
    write_string(out, value, false);
}

/// Appends a switch to database `db`.
pub fn write_select_db(out: &mut Vec<u8>, db: u64) {
    out.push(opcode::SELECTDB);
    write_len(out, db);
}

/// Appends the size hints of the current database: keys, and keys with an expiry.
pub fn write_resize_db(out: &mut Vec<u8>, db_size: u64, expires_size: u64) {
    out.push(opcode::RESIZEDB);
    write_len(out, db_size);
    write_len(out, expires_size);
}

/// Appends the expiry of the next key, an absolute unix time in ms.
pub fn write_expire_ms(out: &mut Vec<u8>, at_ms: u64) {
    out.push(opcode::EXPIRETIME_MS);
    write_ms(out, at_ms);
}

/// Appends the LRU idle time of the next key, in seconds.
pub fn write_idle(out: &mut Vec<u8>, seconds: u64) {
    out.push(opcode::IDLE);
    write_len(out, seconds);
}

/// Appends the LFU counter of the next key.
pub fn write_freq(out: &mut Vec<u8>, freq: u8) {
    out.push(opcode::FREQ);
    out.push(freq);
}

/// Appends a function library: its code (`#!lua name=...`), as Redis 7.0 GA writes it.
pub fn write_function(out: &mut Vec<u8>, code: &[u8], opts: &EncodeOptions) {
    out.push(opcode::FUNCTION2);
    write_string(out, code, opts.compression);
}

/// Appends a key's type byte and name; its object follows.
pub fn write_key(out: &mut Vec<u8>, object_type: u8, key: &[u8], opts: &EncodeOptions) {
    out.push(object_type);
    write_string(out, key, opts.compression);
}

/// Ends a file held whole in `out`: the EOF opcode and the CRC-64 of everything before the
/// checksum (0 when `checksum` is off, as Redis writes with `rdbchecksum no`).
pub fn write_eof(out: &mut Vec<u8>, checksum: bool) {
    out.push(opcode::EOF);
    let crc = if checksum { crc64(0, out) } else { 0 };
    out.extend_from_slice(&crc.to_le_bytes());
}

/// Writes a file in pieces: append through the methods (or [`FileWriter::buf`] with the
/// element-by-element functions), hand the bytes on with [`FileWriter::take`] whenever the
/// buffer is big enough, and end with [`FileWriter::finish`]. The checksum covers every byte
/// taken or finished.
#[derive(Debug)]
pub struct FileWriter {
    buf: Vec<u8>,
    crc: u64,
    checksum: bool,
    taken: u64,
    opts: EncodeOptions,
}

impl FileWriter {
    /// A file of RDB `version`, its header already written.
    pub fn new(version: u16, checksum: bool, opts: EncodeOptions) -> FileWriter {
        let mut buf = Vec::with_capacity(1 << 16);
        write_header(&mut buf, version);
        FileWriter {
            buf,
            crc: 0,
            checksum,
            taken: 0,
            opts,
        }
    }

    /// The options keys and values are written with.
    pub fn options(&self) -> &EncodeOptions {
        &self.opts
    }

    /// The pending bytes, to append to directly (element-by-element writes).
    pub fn buf(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    /// Bytes written so far, taken or pending.
    pub fn len(&self) -> u64 {
        self.taken + self.buf.len() as u64
    }

    /// Whether nothing at all has been written (never: the header is).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes not yet taken.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }

    pub fn aux(&mut self, key: &[u8], value: &[u8]) {
        write_aux(&mut self.buf, key, value);
    }

    pub fn select_db(&mut self, db: u64) {
        write_select_db(&mut self.buf, db);
    }

    pub fn resize_db(&mut self, db_size: u64, expires_size: u64) {
        write_resize_db(&mut self.buf, db_size, expires_size);
    }

    pub fn function(&mut self, code: &[u8]) {
        write_function(&mut self.buf, code, &self.opts);
    }

    pub fn expire_ms(&mut self, at_ms: u64) {
        write_expire_ms(&mut self.buf, at_ms);
    }

    pub fn idle(&mut self, seconds: u64) {
        write_idle(&mut self.buf, seconds);
    }

    pub fn freq(&mut self, freq: u8) {
        write_freq(&mut self.buf, freq);
    }

    /// A key's type byte and name (its object follows, written element by element).
    pub fn key(&mut self, object_type: u8, key: &[u8]) {
        write_key(&mut self.buf, object_type, key, &self.opts);
    }

    /// A whole key: its expiry if any, type, name and value. Returns the object type.
    pub fn entry(&mut self, key: &[u8], value: &Value, expire_at_ms: Option<u64>) -> u8 {
        if let Some(at) = expire_at_ms {
            self.expire_ms(at);
        }
        let ty = object_type_of(value);
        self.key(ty, key);
        let opts = self.opts;
        encode_value(value, &opts, &mut self.buf);
        ty
    }

    /// Takes the pending bytes (the checksum has seen them).
    pub fn take(&mut self) -> Vec<u8> {
        if self.checksum {
            self.crc = crc64(self.crc, &self.buf);
        }
        self.taken += self.buf.len() as u64;
        std::mem::take(&mut self.buf)
    }

    /// Ends the file: the EOF opcode and the checksum. Returns the last pending bytes.
    pub fn finish(mut self) -> Vec<u8> {
        self.buf.push(opcode::EOF);
        let crc = if self.checksum {
            crc64(self.crc, &self.buf)
        } else {
            0
        };
        self.buf.extend_from_slice(&crc.to_le_bytes());
        self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writer_in_pieces_equals_the_file_written_whole() {
        let opts = EncodeOptions::default();
        let value = Value::String(b"hello".to_vec());
        let mut whole = Vec::new();
        write_header(&mut whole, 10);
        write_aux(&mut whole, b"redis-ver", b"7.0.15");
        write_aux(&mut whole, b"ctime", b"1700000000");
        write_select_db(&mut whole, 0);
        write_resize_db(&mut whole, 1, 1);
        write_expire_ms(&mut whole, 4_102_444_800_000);
        write_key(&mut whole, 0, b"k", &opts);
        encode_value(&value, &opts, &mut whole);
        write_eof(&mut whole, true);

        let mut w = FileWriter::new(10, true, opts);
        w.aux(b"redis-ver", b"7.0.15");
        let mut pieces = w.take();
        w.aux(b"ctime", b"1700000000");
        w.select_db(0);
        pieces.extend(w.take());
        w.resize_db(1, 1);
        assert_eq!(w.entry(b"k", &value, Some(4_102_444_800_000)), 0);
        pieces.extend(w.finish());
        assert_eq!(pieces, whole);
        assert_eq!(&whole[..9], b"REDIS0010");
        // The trailer is the CRC of everything before it.
        let n = whole.len();
        assert_eq!(
            u64::from_le_bytes(whole[n - 8..].try_into().unwrap()),
            crc64(0, &whole[..n - 8])
        );
        // "ctime" is an integer: int32-encoded like Redis's rdbSaveAuxFieldStrInt.
        let ctime = [
            &[opcode::AUX, 5][..],
            b"ctime",
            &[0xc2],
            &1_700_000_000i32.to_le_bytes(),
        ]
        .concat();
        assert!(whole.windows(ctime.len()).any(|w| w == ctime));
    }

    #[test]
    fn checksum_off_writes_zero() {
        let mut out = Vec::new();
        write_header(&mut out, 10);
        write_eof(&mut out, false);
        assert_eq!(&out[9..], &[0xff, 0, 0, 0, 0, 0, 0, 0, 0]);
        let w = FileWriter::new(10, false, EncodeOptions::default());
        assert_eq!(w.finish()[9..], out[9..]);
    }
}
