//! darner-bench against the real darner binary over TCP.
//!
//! The darner binary is another package's: cargo gives no `CARGO_BIN_EXE_darner` here, so it
//! is found beside this test's own profile directory (`target/<profile>/darner`, built by
//! `cargo build [--release]` of the workspace, which `scripts/test.sh` does first).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Server {
    port: u16,
    child: Child,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn darner_bin() -> PathBuf {
    // target/<profile>/deps/e2e-HASH -> target/<profile>/darner
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().and_then(|d| d.parent()).unwrap();
    let bin = profile_dir.join(format!("darner{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.exists(),
        "{} not found: build it first (cargo build [--release] -p darner-server)",
        bin.display()
    );
    bin
}

fn start_darner() -> Server {
    start_server(
        &darner_bin(),
        &["--save", "", "--threads", "2", "--loglevel", "warning"],
    )
}

/// redis-server, when installed (the reference the figures are checked against).
fn start_redis() -> Option<Server> {
    let bin = PathBuf::from("/usr/bin/redis-server");
    if !bin.exists() {
        eprintln!("redis-server not installed: skipped");
        return None;
    }
    Some(start_server(
        &bin,
        &["--save", "", "--appendonly", "no", "--loglevel", "warning"],
    ))
}

fn start_server(bin: &std::path::Path, extra: &[&str]) -> Server {
    for _ in 0..5 {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let child = Command::new(bin)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start darner");
        let mut s = Server { port, child };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = s.child.try_wait() {
                break; // exited: port taken, try another
            }
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                std::thread::sleep(Duration::from_millis(20));
                if let Ok(None) = s.child.try_wait() {
                    return s;
                }
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    panic!("{} did not start", bin.display());
}

/// Sends one inline command and returns the first reply line.
fn command(port: u16, cmd: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(format!("{cmd}\r\n").as_bytes()).unwrap();
    let mut buf = Vec::new();
    let mut b = [0u8; 256];
    while !buf.ends_with(b"\r\n") {
        let n = s.read(&mut b).unwrap();
        assert!(n > 0, "connection closed");
        buf.extend_from_slice(&b[..n]);
    }
    String::from_utf8_lossy(&buf).trim_end().to_string()
}

/// Runs darner-bench with `--json` and the arguments; returns the JSON line.
fn bench(port: u16, args: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_darner-bench"))
        .args(["--port", &port.to_string(), "--json"])
        .args(args.split_whitespace())
        .output()
        .expect("run darner-bench");
    assert!(
        out.status.success(),
        "darner-bench {args} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// The number after `"name":` in the JSON object.
fn field(json: &str, name: &str) -> f64 {
    let key = format!("\"{name}\":");
    let at = json
        .find(&key)
        .unwrap_or_else(|| panic!("{name} not in {json}"))
        + key.len();
    let rest = &json[at..];
    let end = rest.find([',', '}']).unwrap();
    rest[..end]
        .parse()
        .unwrap_or_else(|_| panic!("{name} in {json}"))
}

const SMALL: &str = "--threads 2 --connections 2 --pipeline 4 --key-pattern sequential \
                     --key-maximum 200 --test-time 1";

#[test]
fn gets_after_sets_hit_every_key_and_miss_before() {
    let srv = start_darner();
    // Nothing stored yet: every GET misses.
    let before = bench(srv.port, &format!("{SMALL} --ratio 0:1"));
    assert!(field(&before, "ops") > 0.0, "{before}");
    assert_eq!(field(&before, "hits"), 0.0, "{before}");
    assert_eq!(field(&before, "misses"), field(&before, "gets"), "{before}");
    assert_eq!(field(&before, "errors"), 0.0, "{before}");

    // SETs only: the sequential pattern, spread over the 4 connections, stores all 200 keys.
    let sets = bench(srv.port, &format!("{SMALL} --ratio 1:0 --data-size 10"));
    assert!(field(&sets, "ops") >= 200.0, "{sets}");
    assert_eq!(field(&sets, "sets"), field(&sets, "ops"), "{sets}");
    assert_eq!(field(&sets, "errors"), 0.0, "{sets}");
    assert!(field(&sets, "ops_per_sec") > 0.0, "{sets}");
    assert_eq!(command(srv.port, "DBSIZE"), ":200");
    assert_eq!(command(srv.port, "STRLEN key:199"), ":10");

    // GETs only on the same keys: every one hits.
    let after = bench(srv.port, &format!("{SMALL} --ratio 0:1"));
    assert!(field(&after, "gets") > 0.0, "{after}");
    assert_eq!(field(&after, "hits"), field(&after, "gets"), "{after}");
    assert_eq!(field(&after, "misses"), 0.0, "{after}");
    assert_eq!(field(&after, "errors"), 0.0, "{after}");
    assert!(field(&after, "p50_us") > 0.0, "{after}");
    assert!(
        field(&after, "p999_us") >= field(&after, "p50_us"),
        "{after}"
    );
}

#[test]
fn error_replies_are_counted_as_errors() {
    let srv = start_darner();
    // A list under the only key: every GET is answered WRONGTYPE.
    assert_eq!(command(srv.port, "RPUSH key:0 a"), ":1");
    let r = bench(
        srv.port,
        "--connections 2 --key-maximum 1 --ratio 0:1 --test-time 1",
    );
    assert!(field(&r, "ops") > 0.0, "{r}");
    assert_eq!(field(&r, "errors"), field(&r, "ops"), "{r}");
    assert_eq!(field(&r, "hits"), 0.0, "{r}");
}

#[test]
fn open_loop_sends_no_more_than_the_rate() {
    let srv = start_darner();
    // 500 requests/s over 4 connections for 1 s: at most 500 scheduled, plus one per
    // connection at the start; a closed loop would send far more.
    let r = bench(
        srv.port,
        "--threads 2 --connections 2 --rate 500 --test-time 1 --ratio 1:1",
    );
    assert_eq!(field(&r, "errors"), 0.0, "{r}");
    assert!(field(&r, "ops") > 0.0, "{r}");
    assert!(field(&r, "ops") <= 504.0, "{r}");
    assert!(r.contains("\"mode\":\"open\""), "{r}");
}

/// The object after `"name":` in the JSON object (up to its matching brace).
fn object<'a>(json: &'a str, name: &str) -> &'a str {
    let key = format!("\"{name}\":{{");
    let at = json
        .find(&key)
        .unwrap_or_else(|| panic!("{name} not in {json}"))
        + key.len()
        - 1;
    let mut depth = 0;
    for (i, c) in json[at..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return &json[at..at + i + 1];
                }
            }
            _ => {}
        }
    }
    panic!("unbalanced {json}");
}

#[test]
fn mset_of_ten_keys_stores_them_all_and_mget_finds_them() {
    let srv = start_darner();
    let small = "--threads 1 --connections 2 --key-pattern sequential --key-maximum 100 \
                 --test-time 1";
    let before = bench(srv.port, &format!("{small} --command mget:10"));
    assert!(field(&before, "ops") > 0.0, "{before}");
    assert_eq!(field(&before, "hits"), 0.0, "{before}");
    assert_eq!(
        field(&before, "misses"),
        10.0 * field(&before, "ops"),
        "{before}"
    );
    let sets = bench(
        srv.port,
        &format!("{small} --command mset:10 --data-size 7"),
    );
    assert!(sets.contains("\"command\":\"mset:10\""), "{sets}");
    assert!(field(&sets, "ops") >= 10.0, "{sets}");
    assert_eq!(field(&sets, "errors"), 0.0, "{sets}");
    assert_eq!(command(srv.port, "DBSIZE"), ":100");
    assert_eq!(command(srv.port, "STRLEN key:99"), ":7");
    let after = bench(srv.port, &format!("{small} --command mget:10"));
    assert_eq!(
        field(&after, "hits"),
        10.0 * field(&after, "ops"),
        "{after}"
    );
    assert_eq!(field(&after, "misses"), 0.0, "{after}");
    let mget = object(&after, "mget");
    assert_eq!(field(mget, "ops"), field(&after, "ops"), "{after}");
}

/// Loads 300 YCSB records, checks the data model, then runs workloads A, E, D and F on them.
fn ycsb_against(port: u16) {
    let small = "--threads 2 --connections 2 --test-time 1 --ycsb-records 300";
    let a = bench(port, &format!("{small} --ycsb a"));
    let load = object(&a, "load");
    assert_eq!(field(load, "records"), 300.0, "{a}");
    assert_eq!(field(load, "errors"), 0.0, "{a}");
    // 300 hashes and the _indices sorted set.
    assert_eq!(command(port, "DBSIZE"), ":301");
    assert_eq!(command(port, "ZCARD _indices"), ":300");
    // Record 0 is user<FNV-64 of 0>, 10 fields of 100 bytes, scored by its Java hash code.
    let key0 = String::from_utf8(darner_bench::ycsb::key_name(0)).unwrap();
    assert_eq!(command(port, &format!("HLEN {key0}")), ":10");
    assert_eq!(command(port, &format!("HSTRLEN {key0} field9")), ":100");
    let score = command(port, &format!("ZSCORE _indices {key0}"));
    let hash = darner_bench::ycsb::java_string_hash(key0.as_bytes());
    assert!(
        score.ends_with(&format!("\r\n{hash}")),
        "{score:?} vs {hash}"
    );
    // Workload A: reads and updates of loaded records, every one found.
    assert!(a.contains("\"command\":\"ycsb-a\""), "{a}");
    assert!(field(&a, "ops") > 0.0, "{a}");
    assert_eq!(field(&a, "errors"), 0.0, "{a}");
    assert_eq!(field(&a, "misses"), 0.0, "{a}");
    assert_eq!(field(&a, "hits"), field(&a, "ops"), "{a}");
    assert!(field(object(&a, "read"), "ops") > 0.0, "{a}");
    assert!(field(object(&a, "update"), "p999_us") > 0.0, "{a}");
    // E: scans (ZRANGEBYSCORE, then HGETALL of each key) send more requests than operations.
    let e = bench(port, &format!("{small} --ycsb e --ycsb-no-load"));
    assert!(e.contains("\"load\":null"), "{e}");
    assert_eq!(field(&e, "errors"), 0.0, "{e}");
    assert!(field(object(&e, "scan"), "ops") > 0.0, "{e}");
    assert!(field(&e, "requests") > 2.0 * field(&e, "ops"), "{e}");
    // D: inserts add records past the 300 loaded ones.
    let d = bench(port, &format!("{small} --ycsb d --ycsb-no-load"));
    assert_eq!(field(&d, "errors"), 0.0, "{d}");
    assert_eq!(field(&d, "misses"), 0.0, "{d}");
    let inserts = field(object(&d, "insert"), "ops");
    assert!(inserts > 0.0, "{d}");
    let zcard: f64 = command(port, "ZCARD _indices")[1..].parse().unwrap();
    assert!(zcard >= 300.0 + inserts, "{zcard} {d}");
    // F: read-modify-writes, each a read then an update.
    let f = bench(port, &format!("{small} --ycsb f --ycsb-no-load"));
    assert_eq!(field(&f, "errors"), 0.0, "{f}");
    assert_eq!(field(&f, "misses"), 0.0, "{f}");
    let rmw = field(object(&f, "read-modify-write"), "ops");
    assert!(rmw > 0.0, "{f}");
    // Two requests per read-modify-write; the reads of those still in flight at the end (one
    // per connection at most) count as requests but not as operations.
    let extra = field(&f, "requests") - field(&f, "ops") - rmw;
    assert!((0.0..=4.0).contains(&extra), "{f}");
}

#[test]
fn ycsb_workloads_run_against_darner() {
    let srv = start_darner();
    ycsb_against(srv.port);
}

#[test]
fn ycsb_workloads_run_against_redis_server() {
    if let Some(srv) = start_redis() {
        ycsb_against(srv.port);
    }
}

/// MSET/DEL pairs on one connection: every DEL deletes the 10 keys the MSET before it stored;
/// EXISTS counts the keys there.
fn mset_del_and_exists_against(port: u16) {
    let one = "--threads 1 --connections 1 --key-pattern sequential --key-maximum 100 \
               --test-time 1";
    let r = bench(
        port,
        &format!("{one} --command mset-del:10 --key-prefix md:"),
    );
    assert!(r.contains("\"command\":\"mset-del:10\""), "{r}");
    assert_eq!(field(&r, "errors"), 0.0, "{r}");
    let msets = field(object(&r, "mset"), "ops");
    let dels = field(object(&r, "del"), "ops");
    assert!(dels > 0.0, "{r}");
    // In turn, one in flight: the last MSET counted may miss its DEL.
    assert!(msets == dels || msets == dels + 1.0, "{r}");
    assert_eq!(field(&r, "ops"), msets + dels, "{r}");
    assert_eq!(field(&r, "hits"), 10.0 * dels, "{r}");
    assert_eq!(field(&r, "misses"), 0.0, "{r}");
    // At most one MSET is left without its DEL.
    let left = command(port, "DBSIZE");
    assert!(left == ":0" || left == ":10", "{left}");

    // Fill key:0 .. key:99, then EXISTS of 10 of them finds all 10, of other keys none.
    let fill = bench(port, &format!("{one} --command mset:10"));
    assert_eq!(field(&fill, "errors"), 0.0, "{fill}");
    let there = bench(port, &format!("{one} --command exists:10"));
    assert!(there.contains("\"command\":\"exists:10\""), "{there}");
    assert!(field(&there, "ops") > 0.0, "{there}");
    assert_eq!(
        field(&there, "hits"),
        10.0 * field(&there, "ops"),
        "{there}"
    );
    assert_eq!(field(&there, "gets"), field(&there, "ops"), "{there}");
    let absent = bench(
        port,
        &format!("{one} --command exists:10 --key-prefix none:"),
    );
    assert_eq!(field(&absent, "hits"), 0.0, "{absent}");
    assert_eq!(
        field(&absent, "misses"),
        10.0 * field(&absent, "ops"),
        "{absent}"
    );
}

#[test]
fn mset_del_and_exists_run_against_darner() {
    let srv = start_darner();
    mset_del_and_exists_against(srv.port);
}

#[test]
fn mset_del_and_exists_run_against_redis_server() {
    if let Some(srv) = start_redis() {
        mset_del_and_exists_against(srv.port);
    }
}
