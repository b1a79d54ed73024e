//! Load for bench/tracking.py, against one server (darner or redis-server):
//!
//! `tracking-load PORT CLIENTS SECONDS TRACKING(0|1) KEYS WRITES_PER_SEC PROBES [LOAD]`
//!
//! CLIENTS connections (RESP3; with TRACKING=1 each turns CLIENT TRACKING on) send unpipelined
//! GETs of random keys among KEYS for SECONDS; one writer SETs random keys at WRITES_PER_SEC (so
//! tracking clients receive invalidations, which they read and count); meanwhile a probe
//! measures invalidation latency PROBES times: a tracking connection reads a key, another
//! connection writes it, and the time from sending the write to receiving the invalidation is
//! recorded. With LOAD (a nice value, 0 to 19, or `idle` for the SCHED_IDLE class), the GET
//! and writer threads lower their own priority while the probe keeps the process's: on a machine where the load shares the server's
//! cores, the probe then measures the server's path rather than its own wait behind 50 busy
//! load threads for a core. Prints one line: `gets=N secs=S pushes=P lat_p50_us=.. lat_p99_us=.. lat_max_us=..`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn cmd(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend(format!("${}\r\n", a.len()).bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Reads one RESP2/RESP3 frame; returns whether it was a push (`>`).
fn read_frame(r: &mut BufReader<TcpStream>) -> std::io::Result<bool> {
    let mut line = Vec::new();
    r.read_until(b'\n', &mut line)?;
    if line.len() < 3 {
        return Err(std::io::Error::other("connection closed"));
    }
    let kind = line[0];
    let n: i64 = std::str::from_utf8(&line[1..line.len() - 2])
        .unwrap_or("0")
        .parse()
        .unwrap_or(0);
    match kind {
        b'$' | b'=' | b'!' if n >= 0 => {
            let mut buf = vec![0u8; n as usize + 2];
            r.read_exact(&mut buf)?;
        }
        b'*' | b'>' | b'~' if n > 0 => {
            for _ in 0..n {
                read_frame(r)?;
            }
        }
        b'%' | b'|' if n > 0 => {
            for _ in 0..2 * n {
                read_frame(r)?;
            }
        }
        _ => {}
    }
    Ok(kind == b'>')
}

fn connect(port: u16, tracking: bool) -> (TcpStream, BufReader<TcpStream>) {
    let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_nodelay(true).unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    let mut w = s.try_clone().unwrap();
    w.write_all(&cmd(&[b"HELLO", b"3"])).unwrap();
    read_frame(&mut r).unwrap();
    if tracking {
        w.write_all(&cmd(&[b"CLIENT", b"TRACKING", b"on"])).unwrap();
        read_frame(&mut r).unwrap();
    }
    (w, r)
}

/// How the load threads run.
#[derive(Clone, Copy, Debug)]
enum LoadSched {
    /// At this nice value (Linux keeps the nice value per thread).
    Nice(i32),
    /// In the SCHED_IDLE class: only when nothing else wants the core.
    Idle,
}

/// Puts the calling thread in `load`'s scheduling.
fn lower_this_thread(load: LoadSched) {
    #[repr(C)]
    struct SchedParam {
        priority: i32,
    }
    extern "C" {
        fn setpriority(which: i32, who: u32, prio: i32) -> i32;
        fn sched_setscheduler(pid: i32, policy: i32, param: *const SchedParam) -> i32;
    }
    const SCHED_IDLE: i32 = 5;
    let rc = match load {
        LoadSched::Nice(0) => return,
        // SAFETY: setpriority takes plain integers and touches no memory of ours;
        // PRIO_PROCESS (0) with who = 0 names the calling thread on Linux.
        LoadSched::Nice(nice) => unsafe { setpriority(0, 0, nice) },
        // SAFETY: the parameter block lives on this stack frame for the call, which only
        // reads it; pid 0 names the calling thread.
        LoadSched::Idle => unsafe {
            sched_setscheduler(0, SCHED_IDLE, &SchedParam { priority: 0 })
        },
    };
    assert_eq!(
        rc, 0,
        "lowering the load thread's priority to {load:?} failed"
    );
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let port: u16 = a[1].parse().unwrap();
    let clients: usize = a[2].parse().unwrap();
    let secs: f64 = a[3].parse().unwrap();
    let tracking = a[4] == "1";
    let keys: u64 = a[5].parse().unwrap();
    let writes_per_sec: u64 = a[6].parse().unwrap();
    let probes: usize = a[7].parse().unwrap();
    let load = match a.get(8).map(String::as_str) {
        None => LoadSched::Nice(0),
        Some("idle") => LoadSched::Idle,
        Some(n) => LoadSched::Nice(n.parse().unwrap()),
    };
    let stop = Arc::new(AtomicBool::new(false));
    let gets = Arc::new(AtomicU64::new(0));
    let pushes = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut handles = Vec::new();
    for c in 0..clients {
        let (stop, gets, pushes) = (stop.clone(), gets.clone(), pushes.clone());
        handles.push(std::thread::spawn(move || {
            lower_this_thread(load);
            let (mut w, mut r) = connect(port, tracking);
            let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (c as u64 + 1));
            let (mut n, mut p) = (0u64, 0u64);
            while !stop.load(Ordering::Relaxed) {
                let k = format!("key:{}", rng.next() % keys);
                w.write_all(&cmd(&[b"GET", k.as_bytes()])).unwrap();
                // Pushes may come before the reply.
                while read_frame(&mut r).unwrap() {
                    p += 1;
                }
                n += 1;
            }
            gets.fetch_add(n, Ordering::Relaxed);
            pushes.fetch_add(p, Ordering::Relaxed);
        }));
    }
    if writes_per_sec > 0 {
        let stop = stop.clone();
        handles.push(std::thread::spawn(move || {
            lower_this_thread(load);
            let (mut w, mut r) = connect(port, false);
            let mut rng = Rng(42);
            let gap = Duration::from_secs_f64(1.0 / writes_per_sec as f64);
            let mut next = Instant::now();
            while !stop.load(Ordering::Relaxed) {
                let k = format!("key:{}", rng.next() % keys);
                w.write_all(&cmd(&[b"SET", k.as_bytes(), b"value"]))
                    .unwrap();
                read_frame(&mut r).unwrap();
                next += gap;
                if let Some(d) = next.checked_duration_since(Instant::now()) {
                    std::thread::sleep(d);
                }
            }
        }));
    }
    // The latency probe, spread over the run.
    let mut lat: Vec<u64> = Vec::new();
    if probes > 0 {
        let (mut pw, mut pr) = connect(port, true);
        let (mut ww, mut wr) = connect(port, false);
        let gap = Duration::from_secs_f64(secs * 0.8 / probes as f64);
        std::thread::sleep(Duration::from_secs_f64(secs * 0.1));
        for i in 0..probes {
            let k = format!("probe:{i}");
            pw.write_all(&cmd(&[b"GET", k.as_bytes()])).unwrap();
            while read_frame(&mut pr).unwrap() {}
            let t0 = Instant::now();
            ww.write_all(&cmd(&[b"SET", k.as_bytes(), b"v"])).unwrap();
            read_frame(&mut wr).unwrap();
            // The next frame on the probe connection is the invalidation.
            assert!(
                read_frame(&mut pr).unwrap(),
                "expected an invalidation push"
            );
            lat.push(t0.elapsed().as_micros() as u64);
            std::thread::sleep(gap);
        }
    }
    let rest = Duration::from_secs_f64(secs).saturating_sub(started.elapsed());
    std::thread::sleep(rest);
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join().unwrap();
    }
    let elapsed = started.elapsed().as_secs_f64();
    lat.sort_unstable();
    let pct = |q: f64| {
        if lat.is_empty() {
            0
        } else {
            lat[((lat.len() as f64 * q) as usize).min(lat.len() - 1)]
        }
    };
    println!(
        "gets={} secs={:.3} pushes={} lat_p50_us={} lat_p99_us={} lat_max_us={}",
        gets.load(Ordering::Relaxed),
        elapsed,
        pushes.load(Ordering::Relaxed),
        pct(0.5),
        pct(0.99),
        lat.last().copied().unwrap_or(0)
    );
}
