//! Shared by the encoder's tests: a real `redis-server` (Debian's 7.0) on a free loopback
//! port, stopped when the handle drops; a deterministic generator; the persistence fixtures;
//! and a small reader of RDB strings and listpacks, only to take apart fixture payloads.

#![allow(dead_code)]

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A loopback port that is free now and that no other test of this binary was given.
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    loop {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
}

/// A temporary directory, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("darner-rdb-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A running `redis-server`, killed on drop (also when the test panics).
pub struct Redis {
    pub port: u16,
    child: Child,
    pub dir: TempDir,
}

impl Redis {
    /// Starts redis-server with persistence off, in an empty directory.
    pub fn start() -> Redis {
        Redis::start_in(TempDir::new("redis"), &[])
    }

    /// Starts redis-server in `dir` (which may hold a `dump.rdb` to load) with extra args.
    pub fn start_in(mut dir: TempDir, extra: &[&str]) -> Redis {
        for _ in 0..5 {
            let port = free_port();
            let mut args: Vec<String> = [
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "no",
                "--dir",
                dir.0.to_str().unwrap(),
                "--dbfilename",
                "dump.rdb",
                "--logfile",
                "server.log",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            args.extend(extra.iter().map(|s| s.to_string()));
            let child = Command::new("redis-server")
                .args(&args)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("redis-server (Debian's 7.0) must be installed");
            let mut r = Redis { port, child, dir };
            let deadline = Instant::now() + Duration::from_secs(20);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = r.child.try_wait() {
                    break;
                }
                if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    // Up: wait until it has loaded its file (PING answers LOADING before).
                    // The connection may still be refused (another test's server that had
                    // the port a moment): then look again.
                    let Ok(mut con) = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
                        .and_then(|c| c.get_connection())
                    else {
                        std::thread::sleep(Duration::from_millis(20));
                        continue;
                    };
                    while Instant::now() < deadline {
                        if redis::cmd("PING").query::<String>(&mut con).is_ok() {
                            return r;
                        }
                        std::thread::sleep(Duration::from_millis(20));
                    }
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = r.child.kill();
            let _ = r.child.wait();
            let log = std::fs::read_to_string(r.dir.0.join("server.log")).unwrap_or_default();
            if !log.contains("Address already in use") {
                panic!("redis-server did not start; its log:\n{log}");
            }
            dir = TempDir(std::mem::replace(&mut r.dir.0, PathBuf::new()));
        }
        panic!("redis-server did not start");
    }

    pub fn client(&self) -> redis::Connection {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))
            .unwrap()
            .get_connection()
            .unwrap()
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.0.join("server.log")).unwrap_or_default()
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A small deterministic generator (xorshift64*), so every run tests the same values.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }

    pub fn word(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| b'a' + self.below(26) as u8).collect()
    }
}

/// The fixtures directory (shared/fixtures/rdb beside the worktrees).
pub fn fixtures_dir() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    for up in manifest.ancestors() {
        let p = up.join("shared/fixtures/rdb");
        if p.is_dir() {
            return p;
        }
        let p = up.join("../shared/fixtures/rdb");
        if p.is_dir() {
            return p;
        }
    }
    panic!("shared/fixtures/rdb not found above {}", manifest.display());
}

pub fn load_json(name: &str) -> serde_json::Value {
    let p = fixtures_dir().join(name);
    serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap()
}

pub fn b64(v: &serde_json::Value) -> Vec<u8> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(v.as_str().expect("base64 string"))
        .unwrap()
}

pub fn hex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

/// A reader of the few RDB items the tests take apart.
pub struct Reader<'a> {
    pub b: &'a [u8],
    pub pos: usize,
}

/// How a string was stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StrEnc {
    Raw,
    Int,
    Lzf,
}

impl<'a> Reader<'a> {
    pub fn new(b: &'a [u8]) -> Reader<'a> {
        Reader { b, pos: 0 }
    }

    pub fn byte(&mut self) -> u8 {
        self.pos += 1;
        self.b[self.pos - 1]
    }

    pub fn take(&mut self, n: usize) -> &'a [u8] {
        self.pos += n;
        &self.b[self.pos - n..self.pos]
    }

    pub fn u64le(&mut self) -> u64 {
        u64::from_le_bytes(self.take(8).try_into().unwrap())
    }

    /// A length, or (Err) the special-encoding number after `11`.
    pub fn len_or_enc(&mut self) -> Result<u64, u8> {
        let b0 = self.byte();
        match b0 >> 6 {
            0 => Ok((b0 & 63) as u64),
            1 => Ok((((b0 & 63) as u64) << 8) | self.byte() as u64),
            2 if b0 == 0x80 => Ok(u32::from_be_bytes(self.take(4).try_into().unwrap()) as u64),
            2 => Ok(u64::from_be_bytes(self.take(8).try_into().unwrap())),
            _ => Err(b0 & 63),
        }
    }

    pub fn len(&mut self) -> u64 {
        self.len_or_enc().expect("a length")
    }

    pub fn string(&mut self) -> (Vec<u8>, StrEnc) {
        match self.len_or_enc() {
            Ok(n) => (self.take(n as usize).to_vec(), StrEnc::Raw),
            Err(0) => ((self.byte() as i8).to_string().into_bytes(), StrEnc::Int),
            Err(1) => (
                i16::from_le_bytes(self.take(2).try_into().unwrap())
                    .to_string()
                    .into_bytes(),
                StrEnc::Int,
            ),
            Err(2) => (
                i32::from_le_bytes(self.take(4).try_into().unwrap())
                    .to_string()
                    .into_bytes(),
                StrEnc::Int,
            ),
            Err(3) => {
                let clen = self.len() as usize;
                let len = self.len() as usize;
                let c = self.take(clen);
                (darner_rdb::lzf::decompress(c, len).unwrap(), StrEnc::Lzf)
            }
            Err(e) => panic!("unknown string encoding {e}"),
        }
    }
}

/// A listpack entry as the tests see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LpEntry {
    Int(i64),
    Str(Vec<u8>),
}

impl LpEntry {
    pub fn bytes(&self) -> Vec<u8> {
        match self {
            LpEntry::Int(v) => v.to_string().into_bytes(),
            LpEntry::Str(s) => s.clone(),
        }
    }
}

/// The entries of a listpack (trusted input: fixtures).
pub fn listpack_entries(lp: &[u8]) -> Vec<LpEntry> {
    let mut out = Vec::new();
    let mut i = 6;
    while lp[i] != 0xFF {
        let start = i;
        let c = lp[i];
        let e = if c < 0x80 {
            i += 1;
            LpEntry::Int(c as i64)
        } else if c < 0xC0 {
            let n = (c & 63) as usize;
            i += 1 + n;
            LpEntry::Str(lp[start + 1..i].to_vec())
        } else if c < 0xE0 {
            let u = (((c & 31) as i64) << 8) | lp[i + 1] as i64;
            i += 2;
            LpEntry::Int(if u >= 4096 { u - 8192 } else { u })
        } else if c < 0xF0 {
            let n = (((c & 15) as usize) << 8) | lp[i + 1] as usize;
            i += 2 + n;
            LpEntry::Str(lp[start + 2..i].to_vec())
        } else {
            let w = match c {
                0xF0 => {
                    let n = u32::from_le_bytes(lp[i + 1..i + 5].try_into().unwrap()) as usize;
                    i += 5 + n;
                    out.push(LpEntry::Str(lp[start + 5..i].to_vec()));
                    i += backlen_size(i - start);
                    continue;
                }
                0xF1 => 2,
                0xF2 => 3,
                0xF3 => 4,
                0xF4 => 8,
                _ => panic!("bad listpack encoding {c:#x}"),
            };
            let mut buf = [0u8; 8];
            buf[..w].copy_from_slice(&lp[i + 1..i + 1 + w]);
            let shift = 64 - 8 * w as u32;
            let v = (i64::from_le_bytes(buf) << shift) >> shift;
            i += 1 + w;
            LpEntry::Int(v)
        };
        out.push(e);
        i += backlen_size(i - start);
    }
    out
}

fn backlen_size(l: usize) -> usize {
    match l {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2_097_150 => 3,
        _ => 4,
    }
}
