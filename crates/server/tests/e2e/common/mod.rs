//! Test harness: starts the real `darner` binary on a free loopback port and stops it when
//! the handle drops (even when the test panics).

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Server {
    pub port: u16,
    child: Child,
}

/// A loopback port that is free now and that no other test of this binary has been given.
///
/// Tests run on parallel threads: without the set, two of them could be handed the same port
/// in the window between closing the probe listener and darner binding it, and the second
/// test's readiness check would then connect to the first test's server.
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

impl Server {
    /// The server process's id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Starts darner with `--threads 2` and the extra arguments.
    pub fn start(extra: &[&str]) -> Server {
        for _ in 0..5 {
            let port = free_port();
            let mut args: Vec<String> = vec![
                "--port".into(),
                port.to_string(),
                "--bind".into(),
                "127.0.0.1".into(),
                "--loglevel".into(),
                "warning".into(),
                // Redis 7 refuses DEBUG unless this allows it; the tests use DEBUG. Before the
                // test's own arguments, which win.
                "--enable-debug-command".into(),
                "yes".into(),
            ];
            if !extra.contains(&"--threads") {
                args.extend(["--threads".into(), "2".into()]);
            }
            // No save points unless the test gives its own: Redis's default ones would write
            // dump.rdb into the test's working directory (the crate's) when a save point is
            // met or at SHUTDOWN.
            if !extra.contains(&"--save") {
                args.extend(["--save".into(), String::new()]);
            }
            args.extend(extra.iter().map(|s| s.to_string()));
            let child = Command::new(env!("CARGO_BIN_EXE_darner"))
                .args(&args)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start darner");
            let mut s = Server { port, child };
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = s.child.try_wait() {
                    break; // exited: port taken? retry with another
                }
                if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    // Something answers: make sure it is our child, not a stranger on the port
                    // (ours would have exited with a bind error by now).
                    std::thread::sleep(Duration::from_millis(20));
                    if let Ok(None) = s.child.try_wait() {
                        return s;
                    }
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = s.child.kill();
        }
        panic!("darner did not start");
    }

    pub fn client(&self) -> redis::Connection {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))
            .unwrap()
            .get_connection()
            .unwrap()
    }

    pub fn raw(&self) -> Raw {
        let s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        Raw { s }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A raw socket for exact framing checks.
pub struct Raw {
    pub s: TcpStream,
}

impl Raw {
    pub fn send(&mut self, b: &[u8]) {
        self.s.write_all(b).unwrap();
    }

    /// Reads until `n` bytes have arrived (or the peer closes / times out).
    pub fn read_n(&mut self, n: usize) -> Vec<u8> {
        let mut out = Vec::new();
        let mut buf = [0u8; 65536];
        while out.len() < n {
            match self.s.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(k) => out.extend_from_slice(&buf[..k]),
            }
        }
        out
    }

    /// Sends a command and reads exactly the expected reply bytes.
    pub fn roundtrip(&mut self, req: &[u8], expect: &[u8]) {
        self.send(req);
        let got = self.read_n(expect.len());
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(expect),
            "request {:?}",
            String::from_utf8_lossy(req)
        );
    }

    /// Switches to RESP3 (HELLO 3) and reads HELLO's reply, whatever its ids and version.
    pub fn hello3(&mut self) {
        self.send(&cmd(&[b"HELLO", b"3"]));
        // HELLO's map ends with the empty modules array.
        let mut hello = Vec::new();
        while !hello.ends_with(b"$7\r\nmodules\r\n*0\r\n") {
            let more = self.read_n(1);
            assert!(!more.is_empty(), "HELLO reply cut short");
            hello.extend(more);
        }
        assert!(hello.starts_with(b"%7\r\n"), "not a RESP3 HELLO reply");
    }

    /// Whether the server closed the connection.
    pub fn closed(&mut self) -> bool {
        let mut b = [0u8; 1];
        matches!(self.s.read(&mut b), Ok(0))
    }
}

/// Encodes a command as a RESP array of bulk strings.
pub fn cmd(args: &[&[u8]]) -> Vec<u8> {
    let mut v = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        v.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        v.extend_from_slice(a);
        v.extend_from_slice(b"\r\n");
    }
    v
}

/// Command lines (arguments separated by single spaces; `''` is an empty argument and `\xNN`
/// a byte) with the exact reply Redis gives to each, in order.
pub type Steps = &'static [(&'static str, &'static [u8])];

pub fn args_of(line: &str) -> Vec<Vec<u8>> {
    line.split(' ')
        .map(|a| {
            if a == "''" {
                return Vec::new();
            }
            let b = a.as_bytes();
            let mut out = Vec::new();
            let mut i = 0;
            while i < b.len() {
                if b[i] == b'\\' && i + 3 < b.len() && b[i + 1] == b'x' {
                    let hex = std::str::from_utf8(&b[i + 2..i + 4]).unwrap();
                    out.push(u8::from_str_radix(hex, 16).unwrap());
                    i += 4;
                } else {
                    out.push(b[i]);
                    i += 1;
                }
            }
            out
        })
        .collect()
}

pub fn run(r: &mut Raw, steps: Steps) {
    for (line, want) in steps {
        let args = args_of(line);
        let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
        r.roundtrip(&cmd(&refs), want);
    }
}
