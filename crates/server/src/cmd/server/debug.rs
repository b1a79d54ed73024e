//! DEBUG and its subcommands.
//!
//! DEBUG is a plain command in the table (no subcommand specs, no key specs), so it parses its
//! own subcommand, with Redis's argument counts; it is a `Tx` handler because several
//! subcommands must hop to a key's shard (OBJECT, DIGEST-VALUE, LISTPACK), which the
//! dispatcher cannot find from DEBUG's (absent) key specs, or to every shard (DIGEST).

use super::{help_reply, subcommand_error};
use crate::cmd::{eq, parse_int, with_writer, Locks, Reg, TxFuture, ERR_NOT_INT, ERR_NO_SUCH_KEY};
use crate::digest::{self, Digest};
use crate::exec::Tx;
use crate::log;
use crate::sha1::hex;
use bytes::Bytes;
use darner_engine::{Entry, ValueRef};
use darner_resp::ReplyWriter;
use std::sync::atomic::Ordering;

pub fn register(r: &mut Reg) {
    r.tx("debug", Locks::None, debug);
}

fn debug(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let resp3 = tx.resp3();
        let sub = &args[1];
        let n = args.len();
        if eq(sub, "help") && n == 2 {
            with_writer(resp3, |w| debug_help(w, &args[0]))
        } else if eq(sub, "sleep") && n == 3 {
            sleep(&tx, &args[2]);
            with_writer(resp3, |w| w.ok())
        } else if eq(sub, "set-active-expire") && n == 3 {
            // atoi, like Redis: anything that does not start with a non-zero number disables.
            let on = strtod(&args[2]) as i64 != 0;
            tx.shared()
                .active_expire_enabled
                .store(on, Ordering::Relaxed);
            with_writer(resp3, |w| w.ok())
        } else if eq(sub, "quicklist-packed-threshold") && n == 3 {
            // Redis's memtoull, then quicklistSetPackedThreshold's limits. The threshold is
            // process-wide, as in Redis.
            let sz = std::str::from_utf8(&args[2])
                .ok()
                .and_then(crate::config::memtoull);
            with_writer(resp3, |w| {
                match sz.filter(|&s| darner_engine::types::list::set_packed_threshold(s)) {
                    Some(_) => w.ok(),
                    None => w.error(
                        b"ERR argument must be a memory value bigger than 1 and smaller than 4gb",
                    ),
                }
            })
        } else if eq(sub, "object") && n == 3 {
            let key = args[2].clone();
            tx.run(tx.shard_of(&key), move |ctx| {
                let clock = ctx.clock;
                let fill = ctx.limits().list_max_listpack_size;
                let line = ctx.db().peek(&key).map(|e| debug_object(e, clock, fill));
                with_writer(ctx.resp3, |w| match line {
                    Some(l) => w.simple(l.as_bytes()),
                    None => w.error(ERR_NO_SUCH_KEY),
                })
            })
            .await
        } else if eq(sub, "reload") {
            reload(&tx, &args[2..]).await
        } else if eq(sub, "digest") && n == 2 {
            let d = dataset_digest(&tx).await;
            with_writer(resp3, |w| w.simple(hex(&d).as_bytes()))
        } else if eq(sub, "digest-value") {
            let ds = value_digests(&tx, &args[2..]).await;
            with_writer(resp3, |w| {
                w.array(ds.len());
                for d in &ds {
                    w.simple(hex(d).as_bytes());
                }
            })
        } else if eq(sub, "protocol") && n == 3 {
            with_writer(resp3, |w| protocol(w, &args[2]))
        } else if eq(sub, "error") && n == 3 {
            // The argument as the whole error line, without an ERR prefix (CR and LF become
            // spaces, as in Redis).
            with_writer(resp3, |w| {
                w.raw(b"-");
                w.raw(&sanitize(&args[2]));
                w.raw(b"\r\n");
            })
        } else if eq(sub, "log") && n == 3 {
            log::warning(&format!("DEBUG LOG: {}", String::from_utf8_lossy(&args[2])));
            with_writer(resp3, |w| w.ok())
        } else if eq(sub, "listpack") && n == 3 {
            listpack(&tx, args[2].clone()).await
        } else if eq(sub, "replybuffer") && n == 4 {
            with_writer(resp3, |w| replybuffer(w, &args))
        } else if eq(sub, "change-repl-id") && n == 2 {
            log::notice("Changing replication IDs after receiving DEBUG change-repl-id");
            tx.shared().repl.change_replid();
            with_writer(resp3, |w| w.ok())
        } else if eq(sub, "stringmatch-test") && n == 2 {
            stringmatch_fuzz(crate::shared::Shared::now_us() as u64 | 1);
            with_writer(resp3, |w| {
                w.simple(b"Apparently Redis did not crash: test passed")
            })
        } else {
            with_writer(resp3, |w| subcommand_error(w, &args[0], sub))
        }
    })
}

fn debug_help(w: &mut ReplyWriter, command: &[u8]) {
    help_reply(
        w,
        command,
        &[
            "CHANGE-REPL-ID",
            "    Draw a new replication ID (master_replid).",
            "DIGEST",
            "    Redis's SHA-1 signature of the whole dataset, in hex.",
            "DIGEST-VALUE <key> [<key> ...]",
            "    The signature of each key's value (zeros for a missing key).",
            "ERROR <string>",
            "    Reply with <string> as an error line (to test clients' error handling).",
            "LISTPACK <key>",
            "    Write the elements of the listpack-encoded value at <key> to the server log.",
            "LOG <message>",
            "    Write <message> to the server log.",
            "OBJECT <key>",
            "    Show internal details of the value stored at <key>.",
            "PROTOCOL <type>",
            "    Reply with a sample value of one reply type: string, integer, double,",
            "    bignum, null, array, set, map, attrib, push, verbatim, true or false.",
            "RELOAD [option ...]",
            "    Save the RDB on disk and reload it back to memory. Options:",
            "    * MERGE: keys of the file replace keys already in memory.",
            "    * NOFLUSH: do not empty the dataset before loading.",
            "    * NOSAVE: do not save before loading.",
            "REPLYBUFFER PEAK-RESET-TIME <NEVER||RESET|time>",
            "    Accepted for compatibility (Darner's reply buffers are not resized by a cron).",
            "REPLYBUFFER RESIZING <0|1>",
            "    Accepted for compatibility (Darner's reply buffers are not resized by a cron).",
            "QUICKLIST-PACKED-THRESHOLD <size>",
            "    Elements of a list at least <size> bytes long get a node of their own.",
            "SET-ACTIVE-EXPIRE <0|1>",
            "    Turn the periodic reclaiming of expired keys off (0) or on (1).",
            "SLEEP <seconds>",
            "    Block the connection's thread for <seconds> (a decimal number).",
            "STRINGMATCH-TEST",
            "    Run a fuzz tester against the glob-style pattern matcher.",
        ],
    );
}

// ---- RELOAD ----

/// DEBUG RELOAD [MERGE] [NOFLUSH] [NOSAVE]: save, empty the dataset, load the file back, all
/// while holding every shard (Redis's semantics and replies).
async fn reload(tx: &Tx, opts: &[Bytes]) -> Vec<u8> {
    let resp3 = tx.resp3();
    let (mut merge, mut flush, mut save) = (false, true, true);
    for o in opts {
        if eq(o, "merge") {
            merge = true;
        } else if eq(o, "noflush") {
            flush = false;
        } else if eq(o, "nosave") {
            save = false;
        } else {
            return with_writer(resp3, |w| {
                w.error(b"ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options.")
            });
        }
    }
    tx.reserve(crate::cmd::transactions::every_shard(tx.nshards()))
        .await;
    if save && crate::persist::save(tx).await.is_err() {
        return with_writer(resp3, |w| w.error(b"ERR"));
    }
    if flush {
        super::flush_shards(tx, true).await;
    }
    match crate::persist::load::reload(tx, flush, merge).await {
        Ok(()) => {
            log::notice("DB reloaded by DEBUG RELOAD");
            with_writer(resp3, |w| w.ok())
        }
        Err(e) => {
            log::warning(&e);
            with_writer(resp3, |w| {
                w.error(b"ERR Error trying to load the RDB dump, check server logs.")
            })
        }
    }
}

// ---- SLEEP ----

/// Redis blocks its (only) thread: here the connection's thread sleeps, and with it its shard
/// and its other clients. In slices, so that a shutdown (SIGTERM, or SHUTDOWN from a client of
/// another thread) is not held up until the end.
fn sleep(tx: &Tx, arg: &[u8]) {
    if let Some(d) = sleep_time(strtod(arg)) {
        let until = std::time::Instant::now() + d;
        let shared = tx.shared();
        while !shared.shutdown.load(Ordering::Relaxed) {
            let left = until.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                break;
            }
            std::thread::sleep(left.min(std::time::Duration::from_millis(100)));
        }
    }
}

// ---- DIGEST, DIGEST-VALUE ----

/// The digest of every database: one hop per shard, each computing its part of every
/// database (see digest.rs). Like DBSIZE, the hops take no locks: under concurrent writes the
/// parts are each consistent, not all taken at one instant.
async fn dataset_digest(tx: &Tx) -> Digest {
    let parts: Vec<Vec<(usize, Digest)>> = tx
        .run_all(|ctx| ctx.shard.dbs.iter().map(digest::db_part).collect())
        .await;
    let dbs = parts.first().map_or(0, Vec::len);
    let per_db: Vec<Vec<(usize, Digest)>> = (0..dbs)
        .map(|j| parts.iter().map(|p| p[j]).collect())
        .collect();
    digest::dataset(&per_db)
}

/// Each key's value digest in the client's database (zeros for a missing key); like Redis,
/// a logically expired key not yet reclaimed still has its digest.
async fn value_digests(tx: &Tx, keys: &[Bytes]) -> Vec<Digest> {
    let hops: Vec<_> = keys
        .iter()
        .map(|k| {
            let k = k.clone();
            tx.run(tx.shard_of(&k), move |ctx| {
                let mut d = [0u8; 20];
                if let Some(e) = ctx.shard.dbs[ctx.db].entry_raw(&k) {
                    digest::value_digest(e, &mut d);
                }
                d
            })
        })
        .collect();
    let mut out = Vec::with_capacity(hops.len());
    for h in hops {
        out.push(h.await);
    }
    out
}

// ---- PROTOCOL ----

/// A test value of each reply type, as Redis 7.2 sends it in the client's protocol.
fn protocol(w: &mut ReplyWriter, name: &[u8]) {
    if eq(name, "string") {
        w.bulk(b"Hello World");
    } else if eq(name, "integer") {
        w.int(12345);
    } else if eq(name, "double") {
        // Redis's sample value (not an approximation of pi).
        #[allow(clippy::approx_constant)]
        w.double(3.141);
    } else if eq(name, "bignum") {
        w.big_number(b"1234567999999999999999999999999999999");
    } else if eq(name, "null") {
        w.null();
    } else if eq(name, "array") {
        w.array(3);
        (0..3).for_each(|j| w.int(j));
    } else if eq(name, "set") {
        w.set(3);
        (0..3).for_each(|j| w.int(j));
    } else if eq(name, "map") {
        w.map(3);
        for j in 0..3 {
            w.int(j);
            w.boolean(j == 1);
        }
    } else if eq(name, "attrib") {
        // RESP2 has no attributes: only the reply they would annotate is sent.
        if w.resp3 {
            w.attribute(1);
            w.bulk(b"key-popularity");
            w.array(2);
            w.bulk(b"key:123");
            w.int(90);
        }
        w.bulk(b"Some real reply following the attribute");
    } else if eq(name, "push") {
        if !w.resp3 {
            return w.error(b"ERR RESP2 is not supported by this command");
        }
        w.push(2);
        w.bulk(b"server-cpu-usage");
        w.int(42);
        // A push is not a reply: the real reply follows.
        w.bulk(b"Some real reply following the push reply");
    } else if eq(name, "true") {
        w.boolean(true);
    } else if eq(name, "false") {
        w.boolean(false);
    } else if eq(name, "verbatim") {
        w.verbatim(b"txt", b"This is a verbatim\nstring");
    } else {
        w.error(b"ERR Wrong protocol type name. Please use one of the following: string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false");
    }
}

/// CR and LF become spaces (an error line cannot hold them).
fn sanitize(b: &[u8]) -> Vec<u8> {
    b.iter()
        .map(|&c| if c == b'\r' || c == b'\n' { b' ' } else { c })
        .collect()
}

// ---- LISTPACK ----

/// Redis prints a listpack-encoded value's structure on its standard output and answers a
/// status line; Darner writes the elements to its log (one line each) and answers the same.
async fn listpack(tx: &Tx, key: Bytes) -> Vec<u8> {
    tx.run(tx.shard_of(&key), move |ctx| {
        let resp3 = ctx.resp3;
        let mut db = ctx.db();
        let Some(e) = db.peek(&key) else {
            return with_writer(resp3, |w| w.error(ERR_NO_SUCH_KEY));
        };
        if e.encoding() != "listpack" {
            return with_writer(resp3, |w| w.error(b"ERR Not a listpack encoded object."));
        }
        for line in listpack_lines(&key, e) {
            log::notice(&line);
        }
        with_writer(resp3, |w| w.simple(b"Listpack structure printed on stdout"))
    })
    .await
}

/// A listpack's dump: a header, then its elements in order (a hash's field then value, a
/// sorted set's member then score).
fn listpack_lines(key: &[u8], e: &Entry) -> Vec<String> {
    let mut items: Vec<String> = Vec::new();
    match e.value() {
        ValueRef::Str(_) | ValueRef::Stream(_) => {}
        ValueRef::List(l) => items.extend(l.iter().map(|e| repr(&e))),
        ValueRef::Set(s) => s.for_each(|m| items.push(repr(m))),
        ValueRef::ZSet(z) => z.for_each(|m, s| {
            items.push(repr(m));
            let mut b = Vec::new();
            darner_resp::format_double(s, &mut b);
            items.push(String::from_utf8_lossy(&b).into_owned());
        }),
        ValueRef::Hash(h) => {
            for (f, v) in h.iter() {
                items.push(repr(f));
                items.push(repr(v));
            }
        }
    }
    let mut out = Vec::with_capacity(items.len() + 1);
    out.push(format!(
        "DEBUG LISTPACK {}: {} listpack, {} elements",
        repr(key),
        e.value_type().name(),
        items.len()
    ));
    out.extend(
        items
            .into_iter()
            .enumerate()
            .map(|(i, s)| format!("  [{i}] {s}")),
    );
    out
}

/// A quoted, escaped form of `b` for the log (printable ASCII as is, the rest as \xNN).
fn repr(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len() + 2);
    s.push('"');
    for &c in b {
        match c {
            b'"' | b'\\' => {
                s.push('\\');
                s.push(c as char);
            }
            0x20..=0x7e => s.push(c as char),
            _ => s.push_str(&format!("\\x{c:02x}")),
        }
    }
    s.push('"');
    s
}

// ---- REPLYBUFFER ----

/// Redis's reply buffers are resized by its cron; Darner's are not, so both settings are only
/// checked as Redis checks them, and accepted.
fn replybuffer(w: &mut ReplyWriter, args: &[Bytes]) {
    if eq(&args[2], "peak-reset-time") {
        let v = &args[3];
        if !(eq(v, "never") || eq(v, "reset") || parse_int(v).is_some()) {
            return w.error(ERR_NOT_INT);
        }
    } else if !eq(&args[2], "resizing") {
        return subcommand_error(w, &args[0], &args[1]);
    }
    w.ok()
}

// ---- STRINGMATCH-TEST ----

/// Redis's stringmatchlen fuzz test: random patterns against random strings, which passes if
/// nothing crashes (the matcher bounds its work on patterns with many stars).
fn stringmatch_fuzz(mut seed: u64) {
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    const ALPHABET: &[u8] = b"ab*?[]^-\\\0\xff";
    let mut pat = Vec::with_capacity(32);
    let mut s = Vec::with_capacity(32);
    for _ in 0..1000 {
        pat.clear();
        s.clear();
        for _ in 0..next() % 32 {
            pat.push(ALPHABET[(next() % ALPHABET.len() as u64) as usize]);
        }
        for _ in 0..next() % 32 {
            s.push(ALPHABET[(next() % ALPHABET.len() as u64) as usize]);
        }
        let nocase = next() & 1 == 1;
        std::hint::black_box(darner_engine::glob_match(&pat, &s, nocase));
    }
}

// ---- OBJECT and argument parsing ----

/// How long DEBUG SLEEP sleeps, as Redis computes it: `(long long)(seconds * 1e6)`
/// microseconds, and nothing when that is not positive. A time of 2^63 microseconds or more,
/// an infinity or NaN converts to LLONG_MIN on x86-64 and Redis returns at once; so does
/// Darner (it used to sleep 10^12 seconds: that thread's clients never heard again).
fn sleep_time(secs: f64) -> Option<std::time::Duration> {
    let us = secs * 1e6;
    // NaN is in no range.
    (1.0..9_223_372_036_854_775_808.0)
        .contains(&us)
        .then(|| std::time::Duration::from_micros(us as u64))
}

/// C's strtod on the longest numeric prefix (0 when there is none), as DEBUG's arguments are
/// read by Redis.
fn strtod(b: &[u8]) -> f64 {
    let s = String::from_utf8_lossy(&b[..b.len().min(64)]);
    let s = s.trim_start();
    (1..=s.len())
        .rev()
        .filter(|&n| s.is_char_boundary(n))
        .find_map(|n| s[..n].parse::<f64>().ok())
        .unwrap_or(0.0)
}

/// RDB's length prefix size.
fn rdb_len_size(n: usize) -> usize {
    match n {
        0..=63 => 1,
        64..=16383 => 2,
        _ if n as u64 <= u32::MAX as u64 => 5,
        _ => 9,
    }
}

/// The size of a string in an RDB file: the integer encodings (1 + 1/2/4 bytes) for numbers
/// that fit 32 bits, else a length prefix and the bytes. (Redis would also try LZF on values
/// over 20 bytes; this reports their uncompressed size.)
fn rdb_string_size(v: &[u8]) -> usize {
    if v.len() <= 11 {
        if let Some(n) = parse_int(v) {
            if i8::try_from(n).is_ok() {
                return 2;
            } else if i16::try_from(n).is_ok() {
                return 3;
            } else if i32::try_from(n).is_ok() {
                return 5;
            }
        }
    }
    rdb_len_size(v.len()) + v.len()
}

/// DEBUG OBJECT's line; `fill` (`list-max-listpack-size`) is a quicklist's `ql_listpack_max`.
fn debug_object(e: &Entry, clock: darner_engine::Clock, fill: i64) -> String {
    let encoding = e.encoding();
    let is_string = e.value_type() == darner_engine::ValueType::String;
    // Redis shares the integers 0..9999 between keys: it reports them with the "shared"
    // reference count.
    let shared = is_string
        && encoding == "int"
        && parse_int(e.str_value()).is_some_and(|n| (0..10000).contains(&n));
    // A collection's serialized length is not computed (no RDB yet): its memory stands in.
    let serialized = if is_string {
        rdb_string_size(e.str_value())
    } else {
        e.memory()
    };
    // A quicklist's fields, as Redis's debug.c adds them.
    let ql = match e.value() {
        darner_engine::ValueRef::List(l) => l.quicklist_info().map(|q| {
            format!(
                " ql_nodes:{} ql_avg_node:{:.2} ql_listpack_max:{} ql_compressed:{} \
                 ql_uncompressed_size:{}",
                q.nodes,
                q.len as f64 / q.nodes.max(1) as f64,
                fill,
                q.compressed as u8,
                q.uncompressed_size
            )
        }),
        _ => None,
    };
    format!(
        "Value at:{:p} refcount:{} encoding:{} serializedlength:{} lru:{} lru_seconds_idle:{}{}",
        e as *const Entry,
        if shared { i32::MAX } else { 1 },
        encoding,
        serialized,
        e.clock(),
        clock.idle_secs(e.clock()),
        ql.unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleep_time_is_redis_conversion() {
        use std::time::Duration;
        assert_eq!(sleep_time(0.2), Some(Duration::from_millis(200)));
        assert_eq!(sleep_time(0.0000015), Some(Duration::from_micros(1)));
        assert_eq!(sleep_time(0.0000005), None);
        for none in [
            0.0,
            -1.0,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            1e300,
            9.3e12,
        ] {
            assert_eq!(sleep_time(none), None, "{none}");
        }
        assert_eq!(
            sleep_time(9.2e12),
            Some(Duration::from_secs(9_200_000_000_000))
        );
    }

    #[test]
    fn strtod_prefixes() {
        assert_eq!(strtod(b"0.5"), 0.5);
        assert_eq!(strtod(b"  2abc"), 2.0);
        assert_eq!(strtod(b"x"), 0.0);
        assert_eq!(strtod(b""), 0.0);
        assert_eq!(strtod(b"-1"), -1.0);
        assert_eq!(strtod("1é".as_bytes()), 1.0);
    }

    #[test]
    fn rdb_sizes() {
        assert_eq!(rdb_string_size(b"v"), 2);
        assert_eq!(rdb_string_size(b"123"), 2);
        assert_eq!(rdb_string_size(b"1000"), 3);
        assert_eq!(rdb_string_size(b"100000"), 5);
        assert_eq!(rdb_string_size(b"1234567890123"), 14);
        assert_eq!(rdb_string_size(b"0123"), 5);
        assert_eq!(rdb_string_size(&[b'a'; 100]), 102);
    }

    #[test]
    fn encodings() {
        let e = |v: &[u8]| Entry::new_str(b"k", v, None, false, 0);
        assert_eq!(e(b"123").string_encoding(), "int");
        assert_eq!(e(b"-9223372036854775808").string_encoding(), "int");
        assert_eq!(e(b"0123").string_encoding(), "embstr");
        assert_eq!(e(&[b'a'; 44]).string_encoding(), "embstr");
        assert_eq!(e(&[b'a'; 45]).string_encoding(), "raw");
        assert_eq!(
            Entry::new_str(b"k", b"1", None, true, 0).string_encoding(),
            "raw"
        );
    }
}
