//! End-to-end tests of the string commands. Every expected reply below was produced by a real
//! redis-server (7.0, whose string and bitmap commands behave as 7.2's) for the same command
//! sequence on an empty database, and is checked byte for byte.

use crate::common::{cmd, run, Raw, Server, Steps};
use std::time::Duration;

/// A raw connection switched to RESP3, or None when this build has no HELLO yet (the
/// connection family provides it).
fn resp3(s: &Server) -> Option<Raw> {
    let mut r = s.raw();
    r.send(&cmd(&[b"HELLO", b"3"]));
    r.send(&cmd(&[b"PING"]));
    let mut got = Vec::new();
    while !got.ends_with(b"+PONG\r\n") {
        let chunk = r.read_n(1);
        if chunk.is_empty() {
            break;
        }
        got.extend_from_slice(&chunk);
    }
    if got.first() == Some(&b'-') || !got.ends_with(b"+PONG\r\n") {
        eprintln!("HELLO 3 is not available in this build: RESP3 checks skipped");
        return None;
    }
    Some(r)
}

fn get(r: &mut redis::Connection, k: &str) -> Option<Vec<u8>> {
    redis::cmd("GET").arg(k).query(r).unwrap()
}

const SET_GET: Steps = &[
    ("SET k v", b"+OK\r\n"),
    ("GET k", b"$1\r\nv\r\n"),
    ("GET nokey", b"$-1\r\n"),
    ("SET k v2 NX", b"$-1\r\n"),
    ("SET k v2 XX", b"+OK\r\n"),
    ("SET k2 v XX", b"$-1\r\n"),
    ("GET k2", b"$-1\r\n"),
    ("SET k v NX XX", b"-ERR syntax error\r\n"),
    ("SET k v XX NX", b"-ERR syntax error\r\n"),
    ("SET k v3 GET", b"$2\r\nv2\r\n"),
    ("SET k v4 get nx", b"$2\r\nv3\r\n"),
    ("SET k v5 GET XX", b"$2\r\nv3\r\n"),
    ("GET k", b"$2\r\nv5\r\n"),
    ("SET new v GET", b"$-1\r\n"),
    ("SET new2 v GET XX", b"$-1\r\n"),
    ("GET new2", b"$-1\r\n"),
    ("SET k v EX 10 KEEPTTL", b"-ERR syntax error\r\n"),
    ("SET k v KEEPTTL PX 10", b"-ERR syntax error\r\n"),
    ("SET k v EX 1 PX 1", b"-ERR syntax error\r\n"),
    ("SET k v EXAT 1 PXAT 1", b"-ERR syntax error\r\n"),
    ("SET k v EX", b"-ERR syntax error\r\n"),
    ("SET k v foo", b"-ERR syntax error\r\n"),
    ("SET k v PERSIST", b"-ERR syntax error\r\n"),
    ("SET k v ex 10 ex 20", b"+OK\r\n"),
    ("SET k v nx nx", b"$-1\r\n"),
    ("SET k v GET GET", b"$1\r\nv\r\n"),
    (
        "SET k v EX 0",
        b"-ERR invalid expire time in 'set' command\r\n",
    ),
    (
        "SET k v PX -5",
        b"-ERR invalid expire time in 'set' command\r\n",
    ),
    (
        "SET k v EX abc",
        b"-ERR value is not an integer or out of range\r\n",
    ),
    (
        "SET k v EX 9223372036854775",
        b"-ERR invalid expire time in 'set' command\r\n",
    ),
    (
        "SET k v EX 9223372036854774",
        b"-ERR invalid expire time in 'set' command\r\n",
    ),
    (
        "SET k v PX 9223372036854775807",
        b"-ERR invalid expire time in 'set' command\r\n",
    ),
    (
        "SET k v EXAT 0",
        b"-ERR invalid expire time in 'set' command\r\n",
    ),
    (
        "SET k v PXAT -1",
        b"-ERR invalid expire time in 'set' command\r\n",
    ),
    ("SET k v EXAT 9223372036854775", b"+OK\r\n"),
    ("SET k v PXAT 9223372036854775807", b"+OK\r\n"),
    (
        "SET k v EX 1.5",
        b"-ERR value is not an integer or out of range\r\n",
    ),
    ("SETNX k x", b":0\r\n"),
    ("SETNX fresh x", b":1\r\n"),
    ("GET fresh", b"$1\r\nx\r\n"),
    ("SETEX s 100 v", b"+OK\r\n"),
    ("GET s", b"$1\r\nv\r\n"),
    (
        "SETEX s 0 v",
        b"-ERR invalid expire time in 'setex' command\r\n",
    ),
    (
        "SETEX s -1 v",
        b"-ERR invalid expire time in 'setex' command\r\n",
    ),
    (
        "SETEX s x v",
        b"-ERR value is not an integer or out of range\r\n",
    ),
    (
        "SETEX s 9223372036854775 v",
        b"-ERR invalid expire time in 'setex' command\r\n",
    ),
    ("PSETEX s 100000 v2", b"+OK\r\n"),
    ("GET s", b"$2\r\nv2\r\n"),
    (
        "PSETEX s 0 v",
        b"-ERR invalid expire time in 'psetex' command\r\n",
    ),
    (
        "PSETEX s abc v",
        b"-ERR value is not an integer or out of range\r\n",
    ),
    (
        "PSETEX s 9223372036854775807 v",
        b"-ERR invalid expire time in 'psetex' command\r\n",
    ),
    ("GETSET s new", b"$2\r\nv2\r\n"),
    ("GET s", b"$3\r\nnew\r\n"),
    ("GETSET nokey v", b"$-1\r\n"),
    ("GET nokey", b"$1\r\nv\r\n"),
    ("GETDEL nokey2", b"$-1\r\n"),
    ("GETDEL s", b"$3\r\nnew\r\n"),
    ("GETDEL s", b"$-1\r\n"),
    ("EXISTS s", b":0\r\n"),
    ("SET z v NX\\x00junk", b"+OK\r\n"),
    ("SET z v NX\\x00junk", b"$-1\r\n"),
    ("SET z \\x00\\xff\\x0d\\x0a", b"+OK\r\n"),
    ("GET z", b"$4\r\n\x00\xff\r\n\r\n"),
];

const GETEX: Steps = &[
    ("SET s 1", b"+OK\r\n"),
    ("GETEX s", b"$1\r\n1\r\n"),
    ("GETEX s PERSIST", b"$1\r\n1\r\n"),
    ("GETEX s EX 100", b"$1\r\n1\r\n"),
    ("GETEX s px 100000", b"$1\r\n1\r\n"),
    ("GETEX s EXAT 9999999999", b"$1\r\n1\r\n"),
    ("GETEX s PXAT 9999999999000", b"$1\r\n1\r\n"),
    (
        "GETEX s EX 0",
        b"-ERR invalid expire time in 'getex' command\r\n",
    ),
    (
        "GETEX s EX -1",
        b"-ERR invalid expire time in 'getex' command\r\n",
    ),
    (
        "GETEX s EX x",
        b"-ERR value is not an integer or out of range\r\n",
    ),
    (
        "GETEX s PX 9223372036854775807",
        b"-ERR invalid expire time in 'getex' command\r\n",
    ),
    ("GETEX s PERSIST EX 10", b"-ERR syntax error\r\n"),
    ("GETEX s EX 10 PERSIST", b"-ERR syntax error\r\n"),
    ("GETEX s EX 10 PX 10", b"-ERR syntax error\r\n"),
    ("GETEX s NX", b"-ERR syntax error\r\n"),
    ("GETEX s GET", b"-ERR syntax error\r\n"),
    ("GETEX s KEEPTTL", b"-ERR syntax error\r\n"),
    ("GETEX s EX", b"-ERR syntax error\r\n"),
    ("GETEX nokey EX 0", b"$-1\r\n"),
    ("GETEX nokey", b"$-1\r\n"),
    ("GETEX s EXAT 1", b"$1\r\n1\r\n"),
    ("EXISTS s", b":0\r\n"),
    ("SET s 2", b"+OK\r\n"),
    ("GETEX s PXAT 1", b"$1\r\n2\r\n"),
    ("GET s", b"$-1\r\n"),
];

const MULTI_KEY: Steps = &[
    ("MSET a 1 b 2 c 3 d 4", b"+OK\r\n"),
    (
        "MGET a b c d nokey a",
        b"*6\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n$1\r\n4\r\n$-1\r\n$1\r\n1\r\n",
    ),
    (
        "MSET a",
        b"-ERR wrong number of arguments for 'mset' command\r\n",
    ),
    (
        "MSET a 1 b",
        b"-ERR wrong number of arguments for 'mset' command\r\n",
    ),
    ("MSET a x a y", b"+OK\r\n"),
    ("GET a", b"$1\r\ny\r\n"),
    ("MSETNX a 1 e 5", b":0\r\n"),
    ("EXISTS e", b":0\r\n"),
    ("MSETNX e 5 f 6 g 7", b":1\r\n"),
    ("MGET e f g", b"*3\r\n$1\r\n5\r\n$1\r\n6\r\n$1\r\n7\r\n"),
    ("MSETNX e 1", b":0\r\n"),
    (
        "MSETNX h",
        b"-ERR wrong number of arguments for 'msetnx' command\r\n",
    ),
    (
        "MSETNX h 1 i",
        b"-ERR wrong number of arguments for 'msetnx' command\r\n",
    ),
    ("MSETNX j 1 j 2", b":1\r\n"),
    ("GET j", b"$1\r\n2\r\n"),
];

const APPEND_RANGES: Steps = &[
    ("APPEND k hello", b":5\r\n"),
    ("APPEND k _world", b":11\r\n"),
    ("GET k", b"$11\r\nhello_world\r\n"),
    ("STRLEN k", b":11\r\n"),
    ("STRLEN nokey", b":0\r\n"),
    ("APPEND k ''", b":11\r\n"),
    ("GETRANGE k 0 4", b"$5\r\nhello\r\n"),
    ("GETRANGE k -5 -1", b"$5\r\nworld\r\n"),
    ("GETRANGE k 5 3", b"$0\r\n\r\n"),
    ("GETRANGE k -1 -5", b"$0\r\n\r\n"),
    ("GETRANGE k 0 -100", b"$1\r\nh\r\n"),
    ("GETRANGE k -100 100", b"$11\r\nhello_world\r\n"),
    ("GETRANGE k 100 200", b"$0\r\n\r\n"),
    (
        "GETRANGE k x 1",
        b"-ERR value is not an integer or out of range\r\n",
    ),
    (
        "GETRANGE k 0 x",
        b"-ERR value is not an integer or out of range\r\n",
    ),
    (
        "GETRANGE k 0 9223372036854775807",
        b"$11\r\nhello_world\r\n",
    ),
    (
        "GETRANGE k -9223372036854775808 -1",
        b"$11\r\nhello_world\r\n",
    ),
    ("GETRANGE nokey 0 -1", b"$0\r\n\r\n"),
    (
        "GETRANGE nokey x 1",
        b"-ERR value is not an integer or out of range\r\n",
    ),
    ("SUBSTR k 0 2", b"$3\r\nhel\r\n"),
    ("SUBSTR k -3 -1", b"$3\r\nrld\r\n"),
    ("SETRANGE k 6 WORLD", b":11\r\n"),
    ("GET k", b"$11\r\nhello_WORLD\r\n"),
    ("SETRANGE k 15 x", b":16\r\n"),
    ("GET k", b"$16\r\nhello_WORLD\x00\x00\x00\x00x\r\n"),
    ("SETRANGE k -1 x", b"-ERR offset is out of range\r\n"),
    (
        "SETRANGE k x x",
        b"-ERR value is not an integer or out of range\r\n",
    ),
    ("SETRANGE k 0 ''", b":16\r\n"),
    ("SETRANGE nokey 0 ''", b":0\r\n"),
    ("EXISTS nokey", b":0\r\n"),
    ("SETRANGE nokey 3 abc", b":6\r\n"),
    ("GET nokey", b"$6\r\n\x00\x00\x00abc\r\n"),
    (
        "SETRANGE k 536870912 x",
        b"-ERR string exceeds maximum allowed size (proto-max-bulk-len)\r\n",
    ),
    ("SETRANGE k 536870911 ''", b":16\r\n"),
    (
        "SETRANGE k 9223372036854775807 x",
        b"-ERR string exceeds maximum allowed size (proto-max-bulk-len)\r\n",
    ),
];

const COUNTERS: Steps = &[
    ("INCR n", b":1\r\n"),
    ("INCR n", b":2\r\n"),
    ("DECR n", b":1\r\n"),
    ("INCRBY n 10", b":11\r\n"),
    ("INCRBY n -100", b":-89\r\n"),
    ("DECRBY n 5", b":-94\r\n"),
    ("DECRBY n -5", b":-89\r\n"),
    ("GET n", b"$3\r\n-89\r\n"),
    (
        "INCRBY n x",
        b"-ERR value is not an integer or out of range\r\n",
    ),
    (
        "INCRBY n 1.5",
        b"-ERR value is not an integer or out of range\r\n",
    ),
    (
        "DECRBY n 9223372036854775808",
        b"-ERR value is not an integer or out of range\r\n",
    ),
    (
        "DECRBY n -9223372036854775808",
        b"-ERR decrement would overflow\r\n",
    ),
    ("INCRBY n 9223372036854775807", b":9223372036854775718\r\n"),
    (
        "INCRBY n 9223372036854775807",
        b"-ERR increment or decrement would overflow\r\n",
    ),
    ("SET n 9223372036854775807", b"+OK\r\n"),
    ("INCR n", b"-ERR increment or decrement would overflow\r\n"),
    ("INCRBY n -1", b":9223372036854775806\r\n"),
    ("SET n -9223372036854775808", b"+OK\r\n"),
    ("DECR n", b"-ERR increment or decrement would overflow\r\n"),
    (
        "DECRBY n 1",
        b"-ERR increment or decrement would overflow\r\n",
    ),
    ("SET n 0010", b"+OK\r\n"),
    (
        "INCR n",
        b"-ERR value is not an integer or out of range\r\n",
    ),
    ("SET n +1", b"+OK\r\n"),
    (
        "INCR n",
        b"-ERR value is not an integer or out of range\r\n",
    ),
    ("SET n -0", b"+OK\r\n"),
    (
        "INCR n",
        b"-ERR value is not an integer or out of range\r\n",
    ),
    ("SET n 1.0", b"+OK\r\n"),
    (
        "DECR n",
        b"-ERR value is not an integer or out of range\r\n",
    ),
    ("SET n 18446744073709551616", b"+OK\r\n"),
    (
        "INCR n",
        b"-ERR value is not an integer or out of range\r\n",
    ),
    ("SET n abc", b"+OK\r\n"),
    (
        "DECRBY n 1",
        b"-ERR value is not an integer or out of range\r\n",
    ),
    ("SET n 41", b"+OK\r\n"),
    ("INCR n", b":42\r\n"),
    ("GET n", b"$2\r\n42\r\n"),
];

const INCRBYFLOAT: Steps = &[
    ("SET f 10.5", b"+OK\r\n"),
    ("INCRBYFLOAT f 0.1", b"$4\r\n10.6\r\n"),
    ("INCRBYFLOAT nf 5.0e3", b"$4\r\n5000\r\n"),
    ("INCRBYFLOAT nf -5000", b"$1\r\n0\r\n"),
    ("INCRBYFLOAT g 0.1", b"$3\r\n0.1\r\n"),
    ("INCRBYFLOAT g 0.2", b"$3\r\n0.3\r\n"),
    ("INCRBYFLOAT big 1e20", b"$21\r\n100000000000000000000\r\n"),
    (
        "INCRBYFLOAT tiny 0.000003814697265625",
        b"$19\r\n0.00000381469726562\r\n",
    ),
    ("INCRBYFLOAT neg -1e-30", b"$1\r\n0\r\n"),
    ("INCRBYFLOAT hex 0x1p-2", b"$4\r\n0.25\r\n"),
    ("INCRBYFLOAT e3 3.0e-3", b"$5\r\n0.003\r\n"),
    ("INCRBYFLOAT f x", b"-ERR value is not a valid float\r\n"),
    ("INCRBYFLOAT f ''", b"-ERR value is not a valid float\r\n"),
    (
        "INCRBYFLOAT f inf",
        b"-ERR increment would produce NaN or Infinity\r\n",
    ),
    (
        "INCRBYFLOAT f -inf",
        b"-ERR increment would produce NaN or Infinity\r\n",
    ),
    ("INCRBYFLOAT f nan", b"-ERR value is not a valid float\r\n"),
    (
        "INCRBYFLOAT f 1e5000",
        b"-ERR value is not a valid float\r\n",
    ),
    (
        "INCRBYFLOAT f 1e-5000",
        b"-ERR value is not a valid float\r\n",
    ),
    (
        "INCRBYFLOAT f 1.5e4932",
        b"-ERR value is not a valid float\r\n",
    ),
    ("INCRBYFLOAT f 1e", b"-ERR value is not a valid float\r\n"),
    ("INCRBYFLOAT f .", b"-ERR value is not a valid float\r\n"),
    ("INCRBYFLOAT f .5", b"$4\r\n11.1\r\n"),
    ("INCRBYFLOAT f 5.", b"$4\r\n16.1\r\n"),
    ("INCRBYFLOAT f +1", b"$4\r\n17.1\r\n"),
    ("SET s abc", b"+OK\r\n"),
    ("INCRBYFLOAT s 1", b"-ERR value is not a valid float\r\n"),
    ("SET i 17", b"+OK\r\n"),
    ("INCRBYFLOAT i 0.5", b"$4\r\n17.5\r\n"),
    ("GET i", b"$4\r\n17.5\r\n"),
    (
        "INCR i",
        b"-ERR value is not an integer or out of range\r\n",
    ),
];

const LCS: Steps = &[
    ("SET a ohmytext", b"+OK\r\n"),
    ("SET b mynewtext", b"+OK\r\n"),
    ("LCS a b", b"$6\r\nmytext\r\n"),
    ("LCS a b LEN", b":6\r\n"),
    ("LCS a b IDX", b"*4\r\n$7\r\nmatches\r\n*2\r\n*2\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n*2\r\n*2\r\n:2\r\n:3\r\n*2\r\n:0\r\n:1\r\n$3\r\nlen\r\n:6\r\n"),
    ("LCS a b IDX WITHMATCHLEN", b"*4\r\n$7\r\nmatches\r\n*2\r\n*3\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n:4\r\n*3\r\n*2\r\n:2\r\n:3\r\n*2\r\n:0\r\n:1\r\n:2\r\n$3\r\nlen\r\n:6\r\n"),
    ("LCS a b IDX MINMATCHLEN 4", b"*4\r\n$7\r\nmatches\r\n*1\r\n*2\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n$3\r\nlen\r\n:6\r\n"),
    ("LCS a b IDX MINMATCHLEN 4 WITHMATCHLEN", b"*4\r\n$7\r\nmatches\r\n*1\r\n*3\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n:4\r\n$3\r\nlen\r\n:6\r\n"),
    ("LCS a b idx minmatchlen -5", b"*4\r\n$7\r\nmatches\r\n*2\r\n*2\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n*2\r\n*2\r\n:2\r\n:3\r\n*2\r\n:0\r\n:1\r\n$3\r\nlen\r\n:6\r\n"),
    ("LCS a b IDX LEN", b"-ERR If you want both the length and indexes, please just use IDX.\r\n"),
    ("LCS a b foo", b"-ERR syntax error\r\n"),
    ("LCS a b MINMATCHLEN", b"-ERR syntax error\r\n"),
    ("LCS a b MINMATCHLEN x", b"-ERR value is not an integer or out of range\r\n"),
    ("LCS a nokey", b"$0\r\n\r\n"),
    ("LCS a nokey LEN", b":0\r\n"),
    ("LCS nokey nokey2 IDX WITHMATCHLEN", b"*4\r\n$7\r\nmatches\r\n*0\r\n$3\r\nlen\r\n:0\r\n"),
    ("SET c foobar", b"+OK\r\n"),
    ("SET d abcdef", b"+OK\r\n"),
    ("LCS c d IDX WITHMATCHLEN", b"*4\r\n$7\r\nmatches\r\n*1\r\n*3\r\n*2\r\n:4\r\n:4\r\n*2\r\n:0\r\n:0\r\n:1\r\n$3\r\nlen\r\n:1\r\n"),
    ("LCS d c", b"$1\r\nf\r\n"),
];

const LCS_RESP3: Steps = &[
    ("SET a ohmytext", b"+OK\r\n"),
    ("SET b mynewtext", b"+OK\r\n"),
    ("LCS a b IDX", b"%2\r\n$7\r\nmatches\r\n*2\r\n*2\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n*2\r\n*2\r\n:2\r\n:3\r\n*2\r\n:0\r\n:1\r\n$3\r\nlen\r\n:6\r\n"),
    ("LCS a b IDX MINMATCHLEN 4 WITHMATCHLEN", b"%2\r\n$7\r\nmatches\r\n*1\r\n*3\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n:4\r\n$3\r\nlen\r\n:6\r\n"),
    ("LCS nokey nokey2 IDX", b"%2\r\n$7\r\nmatches\r\n*0\r\n$3\r\nlen\r\n:0\r\n"),
    ("LCS a b", b"$6\r\nmytext\r\n"),
    ("INCRBYFLOAT f 10.5", b"$4\r\n10.5\r\n"),
    ("INCRBYFLOAT f 0.1", b"$4\r\n10.6\r\n"),
    ("MGET a nokey", b"*2\r\n$8\r\nohmytext\r\n_\r\n"),
    ("SET a x NX", b"_\r\n"),
    ("GETEX nokey", b"_\r\n"),
    ("BITFIELD bb OVERFLOW FAIL INCRBY u2 0 10", b"*1\r\n_\r\n"),
];

const BITS: Steps = &[
    ("SETBIT bk 7 1", b":0\r\n"),
    ("GET bk", b"$1\r\n\x01\r\n"),
    ("SETBIT bk 7 1", b":1\r\n"),
    ("SETBIT bk 7 0", b":1\r\n"),
    ("SETBIT bk 100 1", b":0\r\n"),
    ("STRLEN bk", b":13\r\n"),
    ("GETBIT bk 100", b":1\r\n"),
    ("GETBIT bk 101", b":0\r\n"),
    ("GETBIT bk 100000", b":0\r\n"),
    ("GETBIT nokey 5", b":0\r\n"),
    (
        "SETBIT bk -1 1",
        b"-ERR bit offset is not an integer or out of range\r\n",
    ),
    (
        "SETBIT bk x 1",
        b"-ERR bit offset is not an integer or out of range\r\n",
    ),
    (
        "SETBIT bk 1 2",
        b"-ERR bit is not an integer or out of range\r\n",
    ),
    (
        "SETBIT bk 1 -1",
        b"-ERR bit is not an integer or out of range\r\n",
    ),
    (
        "SETBIT bk 1 x",
        b"-ERR bit is not an integer or out of range\r\n",
    ),
    (
        "SETBIT bk 4294967296 1",
        b"-ERR bit offset is not an integer or out of range\r\n",
    ),
    (
        "GETBIT bk 4294967296",
        b"-ERR bit offset is not an integer or out of range\r\n",
    ),
    (
        "GETBIT bk -1",
        b"-ERR bit offset is not an integer or out of range\r\n",
    ),
    ("SET bk foobar", b"+OK\r\n"),
    ("BITCOUNT bk", b":26\r\n"),
    ("BITCOUNT bk 0 0", b":4\r\n"),
    ("BITCOUNT bk 1 1", b":6\r\n"),
    ("BITCOUNT bk 1 1 BYTE", b":6\r\n"),
    ("BITCOUNT bk 5 30 BIT", b":17\r\n"),
    ("BITCOUNT bk 0 -1 bit", b":26\r\n"),
    ("BITCOUNT bk -5 -1 bit", b":2\r\n"),
    ("BITCOUNT bk 0", b"-ERR syntax error\r\n"),
    ("BITCOUNT bk 0 1 2 3", b"-ERR syntax error\r\n"),
    ("BITCOUNT bk 0 -1 foo", b"-ERR syntax error\r\n"),
    ("BITCOUNT bk -1 -5 foo", b":0\r\n"),
    (
        "BITCOUNT bk a b",
        b"-ERR value is not an integer or out of range\r\n",
    ),
    ("BITCOUNT nokey a b", b":0\r\n"),
    ("BITCOUNT bk 100 200", b":0\r\n"),
    (
        "BITCOUNT bk -9223372036854775808 9223372036854775807 bit",
        b":26\r\n",
    ),
    ("SET bp \\xff\\xf0\\x00", b"+OK\r\n"),
    ("BITPOS bp 0", b":12\r\n"),
    ("BITPOS bp 1", b":0\r\n"),
    ("BITPOS bp 1 1", b":8\r\n"),
    ("BITPOS bp 0 2", b":16\r\n"),
    ("BITPOS bp 0 0 1", b":12\r\n"),
    ("BITPOS bp 1 2 -1", b":-1\r\n"),
    ("BITPOS bp 1 7 15 bit", b":7\r\n"),
    ("BITPOS bp 0 7 15 BIT", b":12\r\n"),
    ("BITPOS bp 0 0 11 bit", b":-1\r\n"),
    ("BITPOS bp 1 12 23 bit", b":-1\r\n"),
    ("BITPOS bp 0 3 2", b":-1\r\n"),
    ("BITPOS bp 2", b"-ERR The bit argument must be 1 or 0.\r\n"),
    (
        "BITPOS bp x",
        b"-ERR value is not an integer or out of range\r\n",
    ),
    (
        "BITPOS bp 1 x",
        b"-ERR value is not an integer or out of range\r\n",
    ),
    (
        "BITPOS bp 1 0 x",
        b"-ERR value is not an integer or out of range\r\n",
    ),
    ("BITPOS bp 1 0 1 foo", b"-ERR syntax error\r\n"),
    ("BITPOS bp 1 0 1 bit extra", b"-ERR syntax error\r\n"),
    ("BITPOS nokey 0", b":0\r\n"),
    ("BITPOS nokey 1", b":-1\r\n"),
    ("BITPOS nokey 1 x y", b":-1\r\n"),
    ("SET ones \\xff\\xff", b"+OK\r\n"),
    ("BITPOS ones 0", b":16\r\n"),
    ("BITPOS ones 0 0", b":16\r\n"),
    ("BITPOS ones 0 0 -1", b":-1\r\n"),
    ("BITPOS ones 0 3 12 bit", b":-1\r\n"),
];

const BITOP: Steps = &[
    ("SET a \\xf0\\x0f", b"+OK\r\n"),
    ("SET b \\xff", b"+OK\r\n"),
    ("BITOP AND dest a b", b":2\r\n"),
    ("GET dest", b"$2\r\n\xf0\x00\r\n"),
    ("BITOP OR dest a b", b":2\r\n"),
    ("GET dest", b"$2\r\n\xff\x0f\r\n"),
    ("BITOP XOR dest a b c", b":2\r\n"),
    ("GET dest", b"$2\r\n\x0f\x0f\r\n"),
    ("BITOP NOT dest a", b":2\r\n"),
    ("GET dest", b"$2\r\n\x0f\xf0\r\n"),
    (
        "BITOP NOT dest a b",
        b"-ERR BITOP NOT must be called with a single source key.\r\n",
    ),
    ("BITOP FOO dest a", b"-ERR syntax error\r\n"),
    ("BITOP AND dest nokey", b":0\r\n"),
    ("EXISTS dest", b":0\r\n"),
    ("BITOP OR d nokey a", b":2\r\n"),
    ("GET d", b"$2\r\n\xf0\x0f\r\n"),
];

const BITFIELD: Steps = &[
    ("BITFIELD bf SET i8 0 100", b"*1\r\n:0\r\n"),
    ("BITFIELD bf GET i8 0", b"*1\r\n:100\r\n"),
    ("BITFIELD bf INCRBY i8 0 100", b"*1\r\n:-56\r\n"),
    ("BITFIELD bf OVERFLOW SAT INCRBY i8 0 100", b"*1\r\n:44\r\n"),
    ("BITFIELD bf OVERFLOW FAIL INCRBY i8 0 100", b"*1\r\n$-1\r\n"),
    ("BITFIELD bf OVERFLOW WRAP INCRBY i8 0 100", b"*1\r\n:-112\r\n"),
    ("BITFIELD bf SET u8 #1 255 GET u8 #1 INCRBY u8 #1 10", b"*3\r\n:0\r\n:255\r\n:9\r\n"),
    ("BITFIELD bf OVERFLOW SAT SET u8 0 -1 GET u8 0", b"*2\r\n:144\r\n:255\r\n"),
    ("BITFIELD bf OVERFLOW FAIL SET u8 0 256 GET u8 0", b"*2\r\n$-1\r\n:255\r\n"),
    ("BITFIELD bf OVERFLOW SAT SET i8 0 200 GET i8 0", b"*2\r\n:-1\r\n:127\r\n"),
    ("BITFIELD bf SET i64 0 -1 GET i64 0 GET u63 0 GET u63 1", b"*4\r\n:9153847717607243776\r\n:-1\r\n:9223372036854775807\r\n:9223372036854775807\r\n"),
    ("BITFIELD bf INCRBY i64 0 9223372036854775807", b"*1\r\n:9223372036854775806\r\n"),
    ("BITFIELD bf OVERFLOW SAT INCRBY i64 0 -9223372036854775808", b"*1\r\n:-2\r\n"),
    ("BITFIELD bf OVERFLOW FAIL INCRBY u63 0 -1", b"*1\r\n:9223372036854775806\r\n"),
    ("BITFIELD bf GET u8 1000", b"*1\r\n:0\r\n"),
    ("BITFIELD bf SET u8 16 1 GET u8 1000", b"*2\r\n:255\r\n:0\r\n"),
    ("BITFIELD bf GET u64 0", b"-ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.\r\n"),
    ("BITFIELD bf GET i65 0", b"-ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.\r\n"),
    ("BITFIELD bf GET u0 0", b"-ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.\r\n"),
    ("BITFIELD bf GET x8 0", b"-ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.\r\n"),
    ("BITFIELD bf GET I8 0", b"-ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.\r\n"),
    ("BITFIELD bf GET i8 -1", b"-ERR bit offset is not an integer or out of range\r\n"),
    ("BITFIELD bf GET i8 x", b"-ERR bit offset is not an integer or out of range\r\n"),
    ("BITFIELD bf GET i8 #-1", b"-ERR bit offset is not an integer or out of range\r\n"),
    ("BITFIELD bf GET i8 4294967296", b"-ERR bit offset is not an integer or out of range\r\n"),
    ("BITFIELD bf SET i8 0 x", b"-ERR value is not an integer or out of range\r\n"),
    ("BITFIELD bf SET i8 0", b"-ERR syntax error\r\n"),
    ("BITFIELD bf GET i8", b"-ERR syntax error\r\n"),
    ("BITFIELD bf FOO", b"-ERR syntax error\r\n"),
    ("BITFIELD bf OVERFLOW", b"-ERR syntax error\r\n"),
    ("BITFIELD bf OVERFLOW FOO", b"-ERR Invalid OVERFLOW type specified\r\n"),
    ("BITFIELD bf OVERFLOW FAIL", b"*0\r\n"),
    ("BITFIELD bf", b"*0\r\n"),
    ("BITFIELD nokey GET u8 100", b"*1\r\n:0\r\n"),
    ("EXISTS nokey", b":0\r\n"),
    ("BITFIELD_RO bf GET i8 0 GET u4 4", b"*2\r\n:-1\r\n:15\r\n"),
    ("BITFIELD_RO bf SET i8 0 1", b"-ERR BITFIELD_RO only supports the GET subcommand\r\n"),
    ("BITFIELD_RO bf SET i8 0 x", b"-ERR value is not an integer or out of range\r\n"),
    ("BITFIELD_RO bf INCRBY i8 0 1", b"-ERR BITFIELD_RO only supports the GET subcommand\r\n"),
    ("BITFIELD_RO nokey GET i8 0", b"*1\r\n:0\r\n"),
    ("BITFIELD nb OVERFLOW FAIL INCRBY u2 0 10", b"*1\r\n$-1\r\n"),
    ("STRLEN nb", b":1\r\n"),
];

#[test]
fn set_get_and_their_options() {
    let s = Server::start(&[]);
    run(&mut s.raw(), SET_GET);
}

#[test]
fn getex_options() {
    let s = Server::start(&[]);
    run(&mut s.raw(), GETEX);
}

#[test]
fn mget_mset_msetnx_across_shards() {
    // With 4 shards, a b c d live on four different shards.
    let s = Server::start(&["--threads", "4"]);
    run(&mut s.raw(), MULTI_KEY);
}

#[test]
fn append_strlen_getrange_setrange() {
    let s = Server::start(&[]);
    run(&mut s.raw(), APPEND_RANGES);
}

#[test]
fn counters_and_their_errors() {
    let s = Server::start(&[]);
    run(&mut s.raw(), COUNTERS);
}

#[test]
fn incrbyfloat_uses_long_double_formatting() {
    let s = Server::start(&[]);
    run(&mut s.raw(), INCRBYFLOAT);
}

#[test]
fn lcs_replies() {
    let s = Server::start(&["--threads", "4"]);
    run(&mut s.raw(), LCS);
}

#[test]
fn resp3_reply_shapes() {
    let s = Server::start(&["--threads", "4"]);
    if let Some(mut r) = resp3(&s) {
        run(&mut r, LCS_RESP3);
    }
}

#[test]
fn setbit_getbit_bitcount_bitpos() {
    let s = Server::start(&[]);
    run(&mut s.raw(), BITS);
}

#[test]
fn bitop_across_shards() {
    let s = Server::start(&["--threads", "4"]);
    run(&mut s.raw(), BITOP);
}

/// BITOP folds each shard's sources where they live (no copy per source): operands of
/// different lengths, repeated, missing or of another type, on 4 shards ({a} and {b} keys are
/// on different shards; checked against redis-server).
const BITOP_FOLDS: Steps = &[
    ("SET {a}1 \\xf0\\x0f\\xff", b"+OK\r\n"),
    ("SET {b}1 \\xff", b"+OK\r\n"),
    ("SET {a}2 \\x3c\\xff", b"+OK\r\n"),
    ("BITOP AND d {a}1 {b}1 {a}2", b":3\r\n"),
    ("GET d", b"$3\r\n\x30\x00\x00\r\n"),
    ("BITOP AND d {a}1 {a}2 {a}1 {a}1", b":3\r\n"),
    ("GET d", b"$3\r\n\x30\x0f\x00\r\n"),
    ("BITOP AND d {b}1 {a}1 nokey", b":3\r\n"),
    ("GET d", b"$3\r\n\x00\x00\x00\r\n"),
    ("BITOP OR d {b}1 {a}2 {a}1", b":3\r\n"),
    ("GET d", b"$3\r\n\xff\xff\xff\r\n"),
    ("BITOP XOR d {a}1 {b}1 {a}2 {b}1 {b}1", b":3\r\n"),
    ("GET d", b"$3\r\n\x33\xf0\xff\r\n"),
    ("BITOP XOR d {a}2 {a}2 nokey {b}nokey", b":2\r\n"),
    ("GET d", b"$2\r\n\x00\x00\r\n"),
    ("BITOP NOT d {b}1", b":1\r\n"),
    ("GET d", b"$1\r\n\x00\r\n"),
    ("RPUSH {b}l x", b":1\r\n"),
    (
        "BITOP OR d {a}1 {b}l",
        b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
    ),
    (
        "BITOP OR d {b}l {a}1 {a}2",
        b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
    ),
    ("GET d", b"$1\r\n\x00\r\n"),
    ("BITOP AND d nokey {b}nokey", b":0\r\n"),
    ("EXISTS d", b":0\r\n"),
];

#[test]
fn bitop_folds_sources_where_they_live() {
    let s = Server::start(&["--threads", "4"]);
    run(&mut s.raw(), BITOP_FOLDS);
    // One big key named many times: each source used to be copied before the operation
    // (500 copies of 1 MiB here; of 100 MB, a short command exhausted memory). Now each
    // shard folds its sources in place into one buffer.
    let mut c = s.client();
    let _: i64 = redis::cmd("SETBIT")
        .arg("big")
        .arg((1 << 23) - 1)
        .arg(1)
        .query(&mut c)
        .unwrap();
    let mut cmd = redis::cmd("BITOP");
    cmd.arg("XOR").arg("dst");
    for _ in 0..501 {
        cmd.arg("big");
    }
    let n: i64 = cmd.query(&mut c).unwrap();
    assert_eq!(n, 1 << 20);
    let ones: i64 = redis::cmd("BITCOUNT").arg("dst").query(&mut c).unwrap();
    assert_eq!(ones, 1);
    let pong: String = redis::cmd("PING").query(&mut c).unwrap();
    assert_eq!(pong, "PONG");
}

/// With proto-max-bulk-len raised past what any machine holds, a string grown within it
/// fails to allocate: the command answers an error and changes nothing (redis-server aborts).
const GROWTH_PAST_MEMORY: Steps = &[
    (
        "CONFIG SET proto-max-bulk-len 9223372036854775807",
        b"+OK\r\n",
    ),
    (
        "SETRANGE k 9000000000000000000 x",
        b"-ERR Insufficient memory, failed allocating the string\r\n",
    ),
    ("EXISTS k", b":0\r\n"),
    ("SET s abc", b"+OK\r\n"),
    (
        "SETRANGE s 9000000000000000000 x",
        b"-ERR Insufficient memory, failed allocating the string\r\n",
    ),
    (
        "SETBIT s 9223372036854775807 1",
        b"-ERR Insufficient memory, failed allocating the string\r\n",
    ),
    (
        "BITFIELD s SET u8 9223372036854775800 1",
        b"-ERR Insufficient memory, failed allocating the string\r\n",
    ),
    ("GET s", b"$3\r\nabc\r\n"),
    (
        "SETBIT b 9223372036854775807 1",
        b"-ERR Insufficient memory, failed allocating the string\r\n",
    ),
    (
        "BITFIELD b SET u8 9223372036854775800 1",
        b"-ERR Insufficient memory, failed allocating the string\r\n",
    ),
    ("EXISTS b", b":0\r\n"),
    ("GETBIT b 9223372036854775807", b":0\r\n"),
    ("PING", b"+PONG\r\n"),
];

#[test]
fn string_growth_past_memory_is_an_error() {
    let s = Server::start(&[]);
    run(&mut s.raw(), GROWTH_PAST_MEMORY);
}

#[test]
fn bitfield_and_bitfield_ro() {
    let s = Server::start(&[]);
    run(&mut s.raw(), BITFIELD);
}

#[test]
fn ttl_is_kept_or_cleared_like_redis() {
    let s = Server::start(&["--threads", "4"]);
    let mut c = s.client();
    let q = |c: &mut redis::Connection, args: &[&str]| {
        let mut k = redis::cmd(args[0]);
        for a in &args[1..] {
            k.arg(*a);
        }
        // (Errors, such as DECRBY's below, are part of the test: they must not touch the TTL.)
        let _ = k.query::<redis::Value>(c);
    };
    // (setup commands, whether the key must still exist after its TTL has passed)
    let cases: &[(&[&[&str]], &str, bool)] = &[
        (
            &[&["SET", "t1", "v", "PX", "500"], &["SET", "t1", "w"]],
            "t1",
            true,
        ),
        (
            &[
                &["SET", "t2", "v", "PX", "500"],
                &["SET", "t2", "w", "KEEPTTL"],
            ],
            "t2",
            false,
        ),
        (
            &[&["SET", "t3", "5", "PX", "500"], &["INCR", "t3"]],
            "t3",
            false,
        ),
        (
            &[&["SET", "t4", "a", "PX", "500"], &["APPEND", "t4", "b"]],
            "t4",
            false,
        ),
        (
            &[
                &["SET", "t5", "a", "PX", "500"],
                &["SETRANGE", "t5", "0", "b"],
            ],
            "t5",
            false,
        ),
        (
            &[
                &["SET", "t6", "a", "PX", "500"],
                &["SETBIT", "t6", "0", "1"],
            ],
            "t6",
            false,
        ),
        (
            &[
                &["SET", "t7", "1.5", "PX", "500"],
                &["INCRBYFLOAT", "t7", "1"],
            ],
            "t7",
            false,
        ),
        (
            &[
                &["SET", "t8", "v", "PX", "500"],
                &["GETEX", "t8", "PERSIST"],
            ],
            "t8",
            true,
        ),
        (
            &[&["SET", "t9", "v"], &["GETEX", "t9", "PX", "500"]],
            "t9",
            false,
        ),
        (
            &[&["SET", "t10", "v", "PX", "500"], &["GETSET", "t10", "w"]],
            "t10",
            true,
        ),
        (
            &[
                &["SET", "t11", "v", "PX", "500"],
                &["MSET", "t11", "w", "a", "b"],
            ],
            "t11",
            true,
        ),
        (&[&["PSETEX", "t12", "500", "v"]], "t12", false),
        (
            &[
                &["SET", "t13", "v", "PX", "500"],
                &["BITOP", "NOT", "t13", "t13"],
            ],
            "t13",
            true,
        ),
        (
            &[
                &["SET", "t14", "v", "PX", "500"],
                &["BITFIELD", "t14", "SET", "u8", "0", "1"],
            ],
            "t14",
            false,
        ),
        (
            &[&["SET", "t15", "v", "PX", "500"], &["DECRBY", "t15", "x"]],
            "t15",
            false,
        ),
        (
            &[
                &["SET", "t16", "2", "PX", "500"],
                &["SET", "t16", "3", "XX", "GET", "KEEPTTL"],
            ],
            "t16",
            false,
        ),
        (
            &[
                &["SET", "t17", "v", "EX", "1000"],
                &["GETEX", "t17", "PX", "500"],
            ],
            "t17",
            false,
        ),
    ];
    for (setup, _, _) in cases {
        for args in *setup {
            q(&mut c, args);
        }
    }
    for (_, key, _) in cases {
        assert!(get(&mut c, key).is_some(), "{key} expired too early");
    }
    std::thread::sleep(Duration::from_millis(700));
    for (_, key, stays) in cases {
        assert_eq!(get(&mut c, key).is_some(), *stays, "{key}");
    }
    // Absolute times in the past: the key is gone at once.
    q(&mut c, &["SET", "p1", "v", "EXAT", "1"]);
    assert_eq!(get(&mut c, "p1"), None);
    q(&mut c, &["SET", "p2", "v"]);
    q(&mut c, &["GETEX", "p2", "PXAT", "1"]);
    assert_eq!(get(&mut c, "p2"), None);
}

#[test]
fn multi_key_writes_are_atomic_across_shards() {
    let s = Server::start(&["--threads", "4"]);
    let mut w = s.client();
    let mut r = s.client();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let v = i.to_string();
                redis::cmd("MSET")
                    .arg("a")
                    .arg(&v)
                    .arg("b")
                    .arg(&v)
                    .arg("c")
                    .arg(&v)
                    .arg("d")
                    .arg(&v)
                    .query::<()>(&mut w)
                    .unwrap();
                i += 1;
            }
        })
    };
    for _ in 0..2000 {
        let vals: Vec<Option<String>> = redis::cmd("MGET")
            .arg(&["a", "b", "c", "d"])
            .query(&mut r)
            .unwrap();
        assert!(vals.windows(2).all(|p| p[0] == p[1]), "torn MSET: {vals:?}");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.join().unwrap();

    // Racing MSETNX on overlapping keys: exactly one wins each round.
    for round in 0..50 {
        let keys = [
            format!("x{round}"),
            format!("y{round}"),
            format!("z{round}"),
        ];
        let port = s.port;
        let racers: Vec<_> = (0..3)
            .map(|t| {
                let keys = keys.clone();
                std::thread::spawn(move || {
                    let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
                        .unwrap()
                        .get_connection()
                        .unwrap();
                    let (k1, k2) = (&keys[t], &keys[(t + 1) % 3]);
                    redis::cmd("MSETNX")
                        .arg(k1)
                        .arg(t)
                        .arg(k2)
                        .arg(t)
                        .query::<i64>(&mut c)
                        .unwrap()
                })
            })
            .collect();
        let won: i64 = racers.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(won, 1, "round {round}");
    }
}

#[test]
fn string_commands_inside_multi_exec() {
    let s = Server::start(&["--threads", "4"]);
    let mut r = s.raw();
    let mut req = Vec::new();
    for args in [
        &[&b"MULTI"[..]][..],
        &[b"MSET", b"a", b"1", b"b", b"2", b"c", b"3"],
        &[b"INCR", b"a"],
        &[b"APPEND", b"b", b"x"],
        &[b"MSET", b"a", b"9", b"b"],
        &[b"BITOP", b"OR", b"d", b"a", b"b"],
        &[b"MGET", b"a", b"b", b"c", b"d"],
        &[b"EXEC"],
    ] {
        req.extend(cmd(args));
    }
    r.roundtrip(
        &req,
        b"+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n\
          *6\r\n+OK\r\n:2\r\n:2\r\n-ERR wrong number of arguments for 'mset' command\r\n:2\r\n\
          *4\r\n$1\r\n2\r\n$2\r\n2x\r\n$1\r\n3\r\n$2\r\n2x\r\n",
    );
}

#[test]
fn appends_grow_in_place_and_large_values_round_trip() {
    let s = Server::start(&[]);
    let mut c = s.client();
    for _ in 0..1000 {
        redis::cmd("APPEND")
            .arg("log")
            .arg("0123456789")
            .query::<i64>(&mut c)
            .unwrap();
    }
    let n: i64 = redis::cmd("STRLEN").arg("log").query(&mut c).unwrap();
    assert_eq!(n, 10_000);
    let tail: String = redis::cmd("GETRANGE")
        .arg("log")
        .arg(-3)
        .arg(-1)
        .query(&mut c)
        .unwrap();
    assert_eq!(tail, "789");
    // A 1 MB SETRANGE far into a new key is zero padded.
    let n: i64 = redis::cmd("SETRANGE")
        .arg("big")
        .arg(1 << 20)
        .arg("end")
        .query(&mut c)
        .unwrap();
    assert_eq!(n, (1 << 20) + 3);
    let bits: i64 = redis::cmd("BITCOUNT").arg("big").query(&mut c).unwrap();
    assert_eq!(
        bits,
        "end".bytes().map(|b| b.count_ones() as i64).sum::<i64>()
    );
    let pos: i64 = redis::cmd("BITPOS")
        .arg("big")
        .arg(1)
        .query(&mut c)
        .unwrap();
    assert_eq!(pos, (1 << 23) + 1); // 'e' = 0b01100101
}

fn rdb_changes(c: &mut redis::Connection) -> i64 {
    let info: String = redis::cmd("INFO").arg("persistence").query(c).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("rdb_changes_since_last_save:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Redis 7.2's bitops.c and t_string.c: a SETBIT of the bit's own value, a BITFIELD whose
/// writes leave every field as it was (or that only reads), and a SETRANGE of nothing change
/// nothing: no dirty count, no keyspace event, no WATCH invalidation.
#[test]
fn writes_that_change_nothing_are_not_changes() {
    let s = Server::start(&[]);
    let mut c = s.client();
    let mut r = s.raw();
    let q = |c: &mut redis::Connection, line: &str| -> redis::Value {
        let mut cmd = redis::cmd(line.split(' ').next().unwrap());
        for a in line.split(' ').skip(1) {
            cmd.arg(if a == "''" { "" } else { a });
        }
        cmd.query(c).unwrap()
    };
    q(&mut c, "SETBIT s 3 1");
    q(&mut c, "CONFIG SET notify-keyspace-events KA");
    r.roundtrip(
        &cmd(&[b"SUBSCRIBE", b"__keyspace@0__:s"]),
        b"*3\r\n$9\r\nsubscribe\r\n$16\r\n__keyspace@0__:s\r\n:1\r\n",
    );
    let mut w = s.client();
    q(&mut w, "WATCH s");
    let before = rdb_changes(&mut c);
    for line in [
        "SETBIT s 3 1",
        "SETBIT s 4 0",
        "BITFIELD s SET u8 0 16",
        "BITFIELD s GET u8 0",
        "BITFIELD s INCRBY u4 0 0",
        "BITFIELD_RO s GET u8 0",
        "SETRANGE s 0 ''",
        "SETRANGE nokey 0 ''",
    ] {
        q(&mut c, line);
        assert_eq!(rdb_changes(&mut c), before, "{line}");
    }
    q(&mut w, "MULTI");
    q(&mut w, "GET s");
    let done: redis::Value = redis::cmd("EXEC").query(&mut w).unwrap();
    assert_ne!(
        done,
        redis::Value::Nil,
        "EXEC aborted by a write that changed nothing"
    );
    // A real change counts, and its event is the first the subscriber hears.
    q(&mut c, "SETBIT s 4 1");
    assert_eq!(rdb_changes(&mut c), before + 1);
    let event = b"*3\r\n$7\r\nmessage\r\n$16\r\n__keyspace@0__:s\r\n$6\r\nsetbit\r\n";
    assert_eq!(r.read_n(event.len()), event);
}
