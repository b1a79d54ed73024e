//! End-to-end tests of the list commands. The expected replies of BASIC_RESP2 / BASIC_RESP3 were
//! produced by a real redis-server (7.0, whose list commands answer as 7.2's apart from OBJECT
//! ENCODING) for the same command sequence on an empty database, and are checked byte for byte.
//! OBJECT ENCODING answers are Redis 7.2's (listpack while the list is one small node).

use crate::common::{args_of, cmd, run, Raw, Server, Steps};

fn send(r: &mut Raw, line: &str, want: &[u8]) {
    let args = args_of(line);
    let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
    r.roundtrip(&cmd(&refs), want);
}

const BASIC_RESP2: Steps = &[
        ("LPUSH l a", b":1\r\n"),
        ("LPUSH l b c", b":3\r\n"),
        ("RPUSH l d e", b":5\r\n"),
        ("LRANGE l 0 -1", b"*5\r\n$1\r\nc\r\n$1\r\nb\r\n$1\r\na\r\n$1\r\nd\r\n$1\r\ne\r\n"),
        ("LLEN l", b":5\r\n"),
        ("LLEN nokey", b":0\r\n"),
        ("LPUSHX nokey a", b":0\r\n"),
        ("RPUSHX nokey a b", b":0\r\n"),
        ("EXISTS nokey", b":0\r\n"),
        ("LPUSHX l x y", b":7\r\n"),
        ("RPUSHX l z", b":8\r\n"),
        ("LPOP l", b"$1\r\ny\r\n"),
        ("RPOP l", b"$1\r\nz\r\n"),
        ("LPOP l 2", b"*2\r\n$1\r\nx\r\n$1\r\nc\r\n"),
        ("RPOP l 2", b"*2\r\n$1\r\ne\r\n$1\r\nd\r\n"),
        ("LPOP l 0", b"*0\r\n"),
        ("LPOP l -1", b"-ERR value is out of range, must be positive\r\n"),
        ("LPOP l abc", b"-ERR value is out of range, must be positive\r\n"),
        ("LPOP l 1 2", b"-ERR wrong number of arguments for 'lpop' command\r\n"),
        ("RPOP l 1 2", b"-ERR wrong number of arguments for 'rpop' command\r\n"),
        ("LPOP l 100", b"*2\r\n$1\r\nb\r\n$1\r\na\r\n"),
        ("EXISTS l", b":0\r\n"),
        ("LPOP l", b"$-1\r\n"),
        ("LPOP l 2", b"*-1\r\n"),
        ("RPOP l 0", b"*-1\r\n"),
        ("RPUSH b \\x00\\r\\n\\xff '' \\x80", b":3\r\n"),
        ("LRANGE b 0 -1", b"*3\r\n$6\r\n\x00\\r\\n\xff\r\n$0\r\n\r\n$1\r\n\x80\r\n"),
        ("LRANGE b -100 100", b"*3\r\n$6\r\n\x00\\r\\n\xff\r\n$0\r\n\r\n$1\r\n\x80\r\n"),
        ("LRANGE b 2 1", b"*0\r\n"),
        ("LRANGE b x 1", b"-ERR value is not an integer or out of range\r\n"),
        ("LRANGE b 0 9223372036854775807", b"*3\r\n$6\r\n\x00\\r\\n\xff\r\n$0\r\n\r\n$1\r\n\x80\r\n"),
        ("LRANGE b -9223372036854775808 -1", b"*3\r\n$6\r\n\x00\\r\\n\xff\r\n$0\r\n\r\n$1\r\n\x80\r\n"),
        ("LINDEX b 0", b"$6\r\n\x00\\r\\n\xff\r\n"),
        ("LINDEX b -1", b"$1\r\n\x80\r\n"),
        ("LINDEX b 3", b"$-1\r\n"),
        ("LINDEX b -4", b"$-1\r\n"),
        ("LINDEX b x", b"-ERR value is not an integer or out of range\r\n"),
        ("LINDEX nokey x", b"$-1\r\n"),
        ("LSET b 1 mid", b"+OK\r\n"),
        ("LSET b 3 x", b"-ERR index out of range\r\n"),
        ("LSET b x x", b"-ERR value is not an integer or out of range\r\n"),
        ("LSET nokey 0 x", b"-ERR no such key\r\n"),
        ("LSET nokey x x", b"-ERR no such key\r\n"),
        ("LRANGE b 0 -1", b"*3\r\n$6\r\n\x00\\r\\n\xff\r\n$3\r\nmid\r\n$1\r\n\x80\r\n"),
        ("RPUSH r a b a c a", b":5\r\n"),
        ("LINSERT r BEFORE a x", b":6\r\n"),
        ("LINSERT r AFTER a y", b":7\r\n"),
        ("LINSERT r before nope z", b":-1\r\n"),
        ("LINSERT r middle a z", b"-ERR syntax error\r\n"),
        ("LINSERT nokey before a z", b":0\r\n"),
        ("LREM r 1 a", b":1\r\n"),
        ("LREM r -1 a", b":1\r\n"),
        ("LREM r 0 a", b":1\r\n"),
        ("LREM r x a", b"-ERR value is not an integer or out of range\r\n"),
        ("LREM nokey 0 a", b":0\r\n"),
        ("LRANGE r 0 -1", b"*4\r\n$1\r\nx\r\n$1\r\ny\r\n$1\r\nb\r\n$1\r\nc\r\n"),
        ("LTRIM r 1 -2", b"+OK\r\n"),
        ("LRANGE r 0 -1", b"*2\r\n$1\r\ny\r\n$1\r\nb\r\n"),
        ("LTRIM r x 1", b"-ERR value is not an integer or out of range\r\n"),
        ("LTRIM nokey 0 1", b"+OK\r\n"),
        ("LTRIM r 5 1", b"+OK\r\n"),
        ("EXISTS r", b":0\r\n"),
        ("RPUSH p a b c 1 2 3 c c", b":8\r\n"),
        ("LPOS p c", b":2\r\n"),
        ("LPOS p c RANK 2", b":6\r\n"),
        ("LPOS p c RANK -1", b":7\r\n"),
        ("LPOS p c COUNT 0", b"*3\r\n:2\r\n:6\r\n:7\r\n"),
        ("LPOS p c COUNT 2 RANK -1", b"*2\r\n:7\r\n:6\r\n"),
        ("LPOS p c MAXLEN 3", b":2\r\n"),
        ("LPOS p c MAXLEN 3 COUNT 0", b"*1\r\n:2\r\n"),
        ("LPOS p x", b"$-1\r\n"),
        ("LPOS p x COUNT 5", b"*0\r\n"),
        ("LPOS nokey a", b"$-1\r\n"),
        ("LPOS nokey a COUNT 1", b"*0\r\n"),
        ("LPOS p c RANK 0", b"-ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list\r\n"),
        ("LPOS p c RANK x", b"-ERR value is not an integer or out of range\r\n"),
        ("LPOS p c COUNT -1", b"-ERR COUNT can't be negative\r\n"),
        ("LPOS p c MAXLEN -1", b"-ERR MAXLEN can't be negative\r\n"),
        ("LPOS p c RANK", b"-ERR syntax error\r\n"),
        ("LPOS p c FOO 1", b"-ERR syntax error\r\n"),
        ("SET s v", b"+OK\r\n"),
        ("LPUSH s a", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        ("LPUSHX s a", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        ("LPOP s", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        ("RPOP s 2", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        ("LLEN s", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        ("LRANGE s 0 -1", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        ("LINDEX s 0", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        ("LSET s 0 x", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        ("LINSERT s before a b", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        ("LREM s 0 a", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        ("LTRIM s 0 1", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        ("LPOS s a", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        ("LMOVE s p LEFT LEFT", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        ("LMOVE p s LEFT LEFT", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        ("LMOVE nokey s LEFT LEFT", b"$-1\r\n"),
        ("RPOPLPUSH nokey s", b"$-1\r\n"),
        ("LMPOP 2 nokey s LEFT", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        ("LMPOP 2 p s LEFT", b"*2\r\n$1\r\np\r\n*1\r\n$1\r\na\r\n"),
        ("LMPOP 1 nokey LEFT", b"*-1\r\n"),
        ("LMPOP 0 p LEFT", b"-ERR numkeys should be greater than 0\r\n"),
        ("LMPOP 1 p MIDDLE", b"-ERR syntax error\r\n"),
        ("LMPOP 3 p LEFT", b"-ERR syntax error\r\n"),
        ("LMPOP 1 p LEFT COUNT 0", b"-ERR count should be greater than 0\r\n"),
        ("LMPOP 1 p LEFT COUNT 1 COUNT 1", b"-ERR syntax error\r\n"),
        ("LMPOP 1 p RIGHT COUNT 3", b"*2\r\n$1\r\np\r\n*3\r\n$1\r\nc\r\n$1\r\nc\r\n$1\r\n3\r\n"),
        ("LMOVE p p LEFT RIGHT", b"$1\r\nb\r\n"),
        ("LRANGE p 0 -1", b"*4\r\n$1\r\nc\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\nb\r\n"),
        ("RPOPLPUSH p p", b"$1\r\nb\r\n"),
        ("LRANGE p 0 -1", b"*4\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\n1\r\n$1\r\n2\r\n"),
        ("LMOVE p q up LEFT", b"-ERR syntax error\r\n"),
        ("LMOVE p q RIGHT LEFT", b"$1\r\n2\r\n"),
        ("LMOVE p q LEFT RIGHT", b"$1\r\nb\r\n"),
        ("LRANGE q 0 -1", b"*2\r\n$1\r\n2\r\n$1\r\nb\r\n"),
        ("LPUSH", b"-ERR wrong number of arguments for 'lpush' command\r\n"),
        ("LPOP", b"-ERR wrong number of arguments for 'lpop' command\r\n"),
        ("LMPOP 1", b"-ERR wrong number of arguments for 'lmpop' command\r\n"),
];

const BASIC_RESP3: Steps = &[
        ("LPUSH l a", b":1\r\n"),
        ("LPUSH l b c", b":3\r\n"),
        ("RPUSH l d e", b":5\r\n"),
        ("LRANGE l 0 -1", b"*5\r\n$1\r\nc\r\n$1\r\nb\r\n$1\r\na\r\n$1\r\nd\r\n$1\r\ne\r\n"),
        ("LLEN l", b":5\r\n"),
        ("LLEN nokey", b":0\r\n"),
        ("LPUSHX nokey a", b":0\r\n"),
        ("RPUSHX nokey a b", b":0\r\n"),
        ("EXISTS nokey", b":0\r\n"),
        ("LPUSHX l x y", b":7\r\n"),
        ("RPUSHX l z", b":8\r\n"),
        ("LPOP l", b"$1\r\ny\r\n"),
        ("RPOP l", b"$1\r\nz\r\n"),
        ("LPOP l 2", b"*2\r\n$1\r\nx\r\n$1\r\nc\r\n"),
        ("RPOP l 2", b"*2\r\n$1\r\ne\r\n$1\r\nd\r\n"),
        ("LPOP l 0", b"*0\r\n"),
        ("LPOP l -1", b"-ERR value is out of range, must be positive\r\n"),
        ("LPOP l abc", b"-ERR value is out of range, must be positive\r\n"),
        ("LPOP l 1 2", b"-ERR wrong number of arguments for 'lpop' command\r\n"),
        ("RPOP l 1 2", b"-ERR wrong number of arguments for 'rpop' command\r\n"),
        ("LPOP l 100", b"*2\r\n$1\r\nb\r\n$1\r\na\r\n"),
        ("EXISTS l", b":0\r\n"),
        ("LPOP l", b"_\r\n"),
        ("LPOP l 2", b"_\r\n"),
        ("RPOP l 0", b"_\r\n"),
        ("RPUSH b \\x00\\r\\n\\xff '' \\x80", b":3\r\n"),
        ("LRANGE b 0 -1", b"*3\r\n$6\r\n\x00\\r\\n\xff\r\n$0\r\n\r\n$1\r\n\x80\r\n"),
        ("LRANGE b -100 100", b"*3\r\n$6\r\n\x00\\r\\n\xff\r\n$0\r\n\r\n$1\r\n\x80\r\n"),
        ("LRANGE b 2 1", b"*0\r\n"),
        ("LRANGE b x 1", b"-ERR value is not an integer or out of range\r\n"),
        ("LRANGE b 0 9223372036854775807", b"*3\r\n$6\r\n\x00\\r\\n\xff\r\n$0\r\n\r\n$1\r\n\x80\r\n"),
        ("LRANGE b -9223372036854775808 -1", b"*3\r\n$6\r\n\x00\\r\\n\xff\r\n$0\r\n\r\n$1\r\n\x80\r\n"),
        ("LINDEX b 0", b"$6\r\n\x00\\r\\n\xff\r\n"),
        ("LINDEX b -1", b"$1\r\n\x80\r\n"),
        ("LINDEX b 3", b"_\r\n"),
        ("LINDEX b -4", b"_\r\n"),
        ("LINDEX b x", b"-ERR value is not an integer or out of range\r\n"),
        ("LINDEX nokey x", b"_\r\n"),
        ("LSET b 1 mid", b"+OK\r\n"),
        ("LSET b 3 x", b"-ERR index out of range\r\n"),
        ("LSET b x x", b"-ERR value is not an integer or out of range\r\n"),
        ("LSET nokey 0 x", b"-ERR no such key\r\n"),
        ("LSET nokey x x", b"-ERR no such key\r\n"),
        ("LRANGE b 0 -1", b"*3\r\n$6\r\n\x00\\r\\n\xff\r\n$3\r\nmid\r\n$1\r\n\x80\r\n"),
        ("RPUSH r a b a c a", b":5\r\n"),
        ("LINSERT r BEFORE a x", b":6\r\n"),
        ("LINSERT r AFTER a y", b":7\r\n"),
        ("LINSERT r before nope z", b":-1\r\n"),
        ("LINSERT r middle a z", b"-ERR syntax error\r\n"),
        ("LINSERT nokey before a z", b":0\r\n"),
        ("LREM r 1 a", b":1\r\n"),
        ("LREM r -1 a", b":1\r\n"),
        ("LREM r 0 a", b":1\r\n"),
        ("LREM r x a", b"-ERR value is not an integer or out of range\r\n"),
        ("LREM nokey 0 a", b":0\r\n"),
        ("LRANGE r 0 -1", b"*4\r\n$1\r\nx\r\n$1\r\ny\r\n$1\r\nb\r\n$1\r\nc\r\n"),
        ("LTRIM r 1 -2", b"+OK\r\n"),
        ("LRANGE r 0 -1", b"*2\r\n$1\r\ny\r\n$1\r\nb\r\n"),
        ("LTRIM r x 1", b"-ERR value is not an integer or out of range\r\n"),
        ("LTRIM nokey 0 1", b"+OK\r\n"),
        ("LTRIM r 5 1", b"+OK\r\n"),
        ("EXISTS r", b":0\r\n"),
        ("RPUSH p a b c 1 2 3 c c", b":8\r\n"),
        ("LPOS p c", b":2\r\n"),
        ("LPOS p c RANK 2", b":6\r\n"),
        ("LPOS p c RANK -1", b":7\r\n"),
        ("LPOS p c COUNT 0", b"*3\r\n:2\r\n:6\r\n:7\r\n"),
        ("LPOS p c COUNT 2 RANK -1", b"*2\r\n:7\r\n:6\r\n"),
        ("LPOS p c MAXLEN 3", b":2\r\n"),
        ("LPOS p c MAXLEN 3 COUNT 0", b"*1\r\n:2\r\n"),
        ("LPOS p x", b"_\r\n"),
        ("LPOS p x COUNT 5", b"*0\r\n"),
        ("LPOS nokey a", b"_\r\n"),
        ("LPOS nokey a COUNT 1", b"*0\r\n"),
        ("LPOS p c RANK 0", b"-ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list\r\n"),
        ("LPOS p c RANK x", b"-ERR value is not an integer or out of range\r\n"),
        ("LPOS p c COUNT -1", b"-ERR COUNT can't be negative\r\n"),
        ("LPOS p c MAXLEN -1", b"-ERR MAXLEN can't be negative\r\n"),
        ("LPOS p c RANK", b"-ERR syntax error\r\n"),
        ("LPOS p c FOO 1", b"-ERR syntax error\r\n"),
        ("SET s v", b"+OK\r\n"),
        ("LPUSH s a", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        ("LPUSHX s a", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        ("LPOP s", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        ("RPOP s 2", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        ("LLEN s", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        ("LRANGE s 0 -1", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        ("LINDEX s 0", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        ("LSET s 0 x", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        ("LINSERT s before a b", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        ("LREM s 0 a", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        ("LTRIM s 0 1", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        ("LPOS s a", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        ("LMOVE s p LEFT LEFT", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        ("LMOVE p s LEFT LEFT", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        ("LMOVE nokey s LEFT LEFT", b"_\r\n"),
        ("RPOPLPUSH nokey s", b"_\r\n"),
        ("LMPOP 2 nokey s LEFT", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        ("LMPOP 2 p s LEFT", b"*2\r\n$1\r\np\r\n*1\r\n$1\r\na\r\n"),
        ("LMPOP 1 nokey LEFT", b"_\r\n"),
        ("LMPOP 0 p LEFT", b"-ERR numkeys should be greater than 0\r\n"),
        ("LMPOP 1 p MIDDLE", b"-ERR syntax error\r\n"),
        ("LMPOP 3 p LEFT", b"-ERR syntax error\r\n"),
        ("LMPOP 1 p LEFT COUNT 0", b"-ERR count should be greater than 0\r\n"),
        ("LMPOP 1 p LEFT COUNT 1 COUNT 1", b"-ERR syntax error\r\n"),
        ("LMPOP 1 p RIGHT COUNT 3", b"*2\r\n$1\r\np\r\n*3\r\n$1\r\nc\r\n$1\r\nc\r\n$1\r\n3\r\n"),
        ("LMOVE p p LEFT RIGHT", b"$1\r\nb\r\n"),
        ("LRANGE p 0 -1", b"*4\r\n$1\r\nc\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\nb\r\n"),
        ("RPOPLPUSH p p", b"$1\r\nb\r\n"),
        ("LRANGE p 0 -1", b"*4\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\n1\r\n$1\r\n2\r\n"),
        ("LMOVE p q up LEFT", b"-ERR syntax error\r\n"),
        ("LMOVE p q RIGHT LEFT", b"$1\r\n2\r\n"),
        ("LMOVE p q LEFT RIGHT", b"$1\r\nb\r\n"),
        ("LRANGE q 0 -1", b"*2\r\n$1\r\n2\r\n$1\r\nb\r\n"),
        ("LPUSH", b"-ERR wrong number of arguments for 'lpush' command\r\n"),
        ("LPOP", b"-ERR wrong number of arguments for 'lpop' command\r\n"),
        ("LMPOP 1", b"-ERR wrong number of arguments for 'lmpop' command\r\n"),
];

#[test]
fn every_command_option_and_error_resp2() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    run(&mut r, BASIC_RESP2);
}

#[test]
fn every_command_option_and_error_resp3() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    r.send(&cmd(&[b"HELLO", b"3"]));
    r.send(&cmd(&[b"PING"]));
    let mut got = Vec::new();
    while !got.ends_with(b"+PONG\r\n") {
        let chunk = r.read_n(1);
        assert!(!chunk.is_empty(), "connection closed");
        got.extend_from_slice(&chunk);
    }
    run(&mut r, BASIC_RESP3);
}

const LP: &[u8] = b"$8\r\nlistpack\r\n";
const QL: &[u8] = b"$9\r\nquicklist\r\n";

#[test]
fn encodings_follow_redis_72() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    let x8170 = "x".repeat(8170);
    send(&mut r, &format!("RPUSH big {x8170}"), b":1\r\n");
    send(&mut r, "OBJECT ENCODING big", LP);
    send(&mut r, "RPUSH big y zzzzz", b":3\r\n");
    send(&mut r, "OBJECT ENCODING big", LP);
    send(&mut r, "RPUSH big w", b":4\r\n");
    send(&mut r, "OBJECT ENCODING big", QL);
    send(&mut r, "RPOP big", b"$1\r\nw\r\n");
    send(&mut r, "OBJECT ENCODING big", QL);
    send(
        &mut r,
        "LPOP big",
        format!("$8170\r\n{x8170}\r\n").as_bytes(),
    );
    send(&mut r, "OBJECT ENCODING big", LP);
    // By count, and the other size classes.
    send(&mut r, "CONFIG SET list-max-listpack-size 4", b"+OK\r\n");
    send(&mut r, "RPUSH c 1 2 3 4", b":4\r\n");
    send(&mut r, "OBJECT ENCODING c", LP);
    send(&mut r, "RPUSH c 5", b":5\r\n");
    send(&mut r, "OBJECT ENCODING c", QL);
    send(&mut r, "LTRIM c 0 2", b"+OK\r\n");
    send(&mut r, "OBJECT ENCODING c", QL);
    send(&mut r, "RPOP c", b"$1\r\n3\r\n");
    send(&mut r, "OBJECT ENCODING c", LP);
    send(&mut r, "CONFIG SET list-max-listpack-size -1", b"+OK\r\n");
    let a4080 = "a".repeat(4080);
    send(&mut r, &format!("RPUSH d {a4080}"), b":1\r\n");
    send(&mut r, "RPUSH d '' b", b":3\r\n");
    send(&mut r, "OBJECT ENCODING d", LP);
    send(&mut r, "RPUSH d c", b":4\r\n");
    send(&mut r, "OBJECT ENCODING d", QL);
    // LSET and LINSERT convert before they know whether they will write.
    send(&mut r, "CONFIG SET list-max-listpack-size -2", b"+OK\r\n");
    let v9000 = "v".repeat(9000);
    send(&mut r, "RPUSH t a", b":1\r\n");
    send(
        &mut r,
        &format!("LSET t 5 {v9000}"),
        b"-ERR index out of range\r\n",
    );
    send(&mut r, "OBJECT ENCODING t", QL);
    send(&mut r, "RPUSH u a", b":1\r\n");
    send(
        &mut r,
        &format!("LINSERT u BEFORE nope {v9000}"),
        b":-1\r\n",
    );
    send(&mut r, "OBJECT ENCODING u", QL);
    send(&mut r, "LSET u 0 small", b"+OK\r\n");
    send(&mut r, "OBJECT ENCODING u", LP);
    // LMOVE into an existing listpack checks the moved element's size.
    send(&mut r, &format!("RPUSH v {v9000}"), b":1\r\n");
    send(&mut r, "OBJECT ENCODING v", QL);
    send(&mut r, "RPUSH w a", b":1\r\n");
    send(&mut r, "OBJECT ENCODING w", LP);
    send(
        &mut r,
        "LMOVE v w LEFT RIGHT",
        format!("$9000\r\n{v9000}\r\n").as_bytes(),
    );
    send(&mut r, "OBJECT ENCODING w", QL);
    send(&mut r, "EXISTS v", b":0\r\n");
}

#[test]
fn moves_between_shards_keep_every_element() {
    let s = Server::start(&[]);
    let mut c = s.client();
    let keys: Vec<String> = (0..8).map(|i| format!("mv{i}")).collect();
    for k in &keys {
        let _: i64 = redis::cmd("RPUSH")
            .arg(k)
            .arg(&[1, 2, 3])
            .query(&mut c)
            .unwrap();
    }
    // Every ordered pair: with 2 shards, many are on different shards.
    for a in &keys {
        for b in &keys {
            let v: Option<String> = redis::cmd("LMOVE")
                .arg(a)
                .arg(b)
                .arg("LEFT")
                .arg("RIGHT")
                .query(&mut c)
                .unwrap();
            assert!(v.is_some());
            let v: Option<String> = redis::cmd("RPOPLPUSH").arg(b).arg(a).query(&mut c).unwrap();
            assert!(v.is_some());
        }
    }
    let mut total = 0;
    for k in &keys {
        let n: i64 = redis::cmd("LLEN").arg(k).query(&mut c).unwrap();
        total += n;
    }
    assert_eq!(total, 24);
    // Drain everything into one key through moves, then LMPOP over all keys.
    for k in &keys[1..] {
        loop {
            let v: Option<String> = redis::cmd("LMOVE")
                .arg(k)
                .arg(&keys[0])
                .arg("RIGHT")
                .arg("LEFT")
                .query(&mut c)
                .unwrap();
            if v.is_none() {
                break;
            }
        }
        let e: i64 = redis::cmd("EXISTS").arg(k).query(&mut c).unwrap();
        assert_eq!(e, 0);
    }
    let (k, vals): (String, Vec<String>) = redis::cmd("LMPOP")
        .arg(8)
        .arg(&keys[7..])
        .arg(&keys[..7])
        .arg("RIGHT")
        .arg("COUNT")
        .arg(100)
        .query(&mut c)
        .unwrap();
    assert_eq!((k.as_str(), vals.len()), ("mv0", 24));
    let none: Option<(String, Vec<String>)> = redis::cmd("LMPOP")
        .arg(8)
        .arg(&keys)
        .arg("LEFT")
        .query(&mut c)
        .unwrap();
    assert!(none.is_none());
}

#[test]
fn cross_shard_errors_and_transactions() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    // Several destinations, so some are on the other shard than the source.
    for i in 0..6 {
        send(&mut r, &format!("SET str{i} v"), b"+OK\r\n");
        send(&mut r, &format!("LMOVE nokey str{i} LEFT LEFT"), b"$-1\r\n");
        send(&mut r, "RPUSH src a", b":1\r\n");
        send(
            &mut r,
            &format!("LMOVE src str{i} LEFT LEFT"),
            b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
        );
        send(
            &mut r,
            &format!("LMPOP 3 nokey str{i} src LEFT"),
            b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
        );
        send(
            &mut r,
            &format!("LMPOP 3 nokey src str{i} LEFT"),
            b"*2\r\n$3\r\nsrc\r\n*1\r\n$1\r\na\r\n",
        );
        send(&mut r, &format!("GET str{i}"), b"$1\r\nv\r\n");
    }
    // Inside MULTI, moves across shards are atomic with the rest.
    send(&mut r, "RPUSH q1 a b c", b":3\r\n");
    send(&mut r, "MULTI", b"+OK\r\n");
    for i in 0..3 {
        send(&mut r, &format!("LMOVE q1 q2{i} LEFT LEFT"), b"+QUEUED\r\n");
    }
    send(&mut r, "LLEN q1", b"+QUEUED\r\n");
    send(
        &mut r,
        "EXEC",
        b"*4\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n:0\r\n",
    );
}

#[test]
fn watch_sees_only_real_writes() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    let mut other = s.raw();
    // Failed or empty operations do not touch a WATCHed key.
    send(&mut r, "SET str v", b"+OK\r\n");
    send(&mut r, "WATCH str nokey", b"+OK\r\n");
    send(
        &mut other,
        "LPUSH str a",
        b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
    );
    send(&mut other, "LPOP nokey", b"$-1\r\n");
    send(&mut other, "LMOVE nokey str LEFT LEFT", b"$-1\r\n");
    send(&mut other, "LPUSHX nokey a", b":0\r\n");
    send(&mut other, "LREM nokey 0 a", b":0\r\n");
    send(&mut r, "MULTI", b"+OK\r\n");
    send(&mut r, "PING", b"+QUEUED\r\n");
    send(&mut r, "EXEC", b"*1\r\n+PONG\r\n");
    // A move marks both keys.
    send(&mut r, "RPUSH l a b", b":2\r\n");
    for (watched, line) in [
        ("dst", "LMOVE l dst LEFT LEFT"),
        ("l", "RPOPLPUSH dst l"),
        ("l", "LSET l 0 z"),
        ("l", "LINSERT l BEFORE z y"),
    ] {
        send(&mut r, &format!("WATCH {watched}"), b"+OK\r\n");
        let args = args_of(line);
        let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
        other.send(&cmd(&refs));
        let _ = other.read_n(1);
        send(&mut r, "MULTI", b"+OK\r\n");
        send(&mut r, "PING", b"+QUEUED\r\n");
        send(&mut r, "EXEC", b"*-1\r\n");
    }
}

#[test]
fn huge_counts_and_long_lists() {
    let s = Server::start(&[]);
    let mut c = s.client();
    let items: Vec<String> = (0..20_000).map(|i| format!("item{i}")).collect();
    let _: i64 = redis::cmd("RPUSH")
        .arg("l")
        .arg(&items)
        .query(&mut c)
        .unwrap();
    let _: i64 = redis::cmd("LPUSH")
        .arg("l")
        .arg(&items)
        .query(&mut c)
        .unwrap();
    let enc: String = redis::cmd("OBJECT")
        .arg("ENCODING")
        .arg("l")
        .query(&mut c)
        .unwrap();
    assert_eq!(enc, "quicklist");
    for (i, want) in [
        (0i64, "item19999"),
        (19_999, "item0"),
        (20_000, "item0"),
        (-1, "item19999"),
        (-20_001, "item0"),
        (30_000, "item10000"),
    ] {
        let v: String = redis::cmd("LINDEX").arg("l").arg(i).query(&mut c).unwrap();
        assert_eq!(v, want, "LINDEX {i}");
    }
    let v: Vec<String> = redis::cmd("LRANGE")
        .arg("l")
        .arg(19_998)
        .arg(20_001)
        .query(&mut c)
        .unwrap();
    assert_eq!(v, ["item1", "item0", "item0", "item1"]);
    let n: i64 = redis::cmd("LPOS")
        .arg("l")
        .arg("item5")
        .arg("RANK")
        .arg(-1)
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 20_005);
    // A huge count reserves nothing: it pops what is there.
    let v: Vec<String> = redis::cmd("LPOP")
        .arg("l")
        .arg(i64::MAX)
        .query(&mut c)
        .unwrap();
    assert_eq!(v.len(), 40_000);
    assert_eq!(v[0], "item19999");
    let e: i64 = redis::cmd("EXISTS").arg("l").query(&mut c).unwrap();
    assert_eq!(e, 0);
}

/// A DEBUG OBJECT field's value.
fn debug_field(c: &mut redis::Connection, key: &str, field: &str) -> String {
    let line: String = redis::cmd("DEBUG").arg("OBJECT").arg(key).query(c).unwrap();
    line.split(' ')
        .find_map(|kv| kv.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in {line}"))
        .to_string()
}

fn used_memory(c: &mut redis::Connection) -> i64 {
    let info: String = redis::cmd("INFO").arg("memory").query(c).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn list_compress_depth_compresses_inner_nodes() {
    let s = Server::start(&[]);
    let mut c = s.client();
    let depth: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("list-compress-depth")
        .query(&mut c)
        .unwrap();
    assert_eq!(depth, ["list-compress-depth", "0"]);
    let items: Vec<String> = (0..100_000)
        .map(|i| format!("element-{}", i % 1000))
        .collect();
    // The same list without compression, then with depth 1 (a list keeps the depth it had
    // when it became a quicklist, as in Redis).
    let m0 = used_memory(&mut c);
    let _: i64 = redis::cmd("RPUSH")
        .arg("plain")
        .arg(&items)
        .query(&mut c)
        .unwrap();
    let m1 = used_memory(&mut c);
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("list-compress-depth")
        .arg("1")
        .query(&mut c)
        .unwrap();
    let _: i64 = redis::cmd("RPUSH")
        .arg("z")
        .arg(&items)
        .query(&mut c)
        .unwrap();
    let m2 = used_memory(&mut c);
    let (plain, packed) = (m1 - m0, m2 - m1);
    assert!(
        packed * 3 < plain,
        "compressed {packed} bytes, plain {plain}"
    );
    assert_eq!(debug_field(&mut c, "plain", "ql_compressed"), "0");
    assert_eq!(debug_field(&mut c, "z", "ql_compressed"), "1");
    let enc: String = redis::cmd("OBJECT")
        .arg("ENCODING")
        .arg("z")
        .query(&mut c)
        .unwrap();
    assert_eq!(enc, "quicklist");
    // Same node layout and sizes, whatever the compression.
    for f in [
        "ql_nodes",
        "ql_avg_node",
        "ql_listpack_max",
        "ql_uncompressed_size",
    ] {
        assert_eq!(
            debug_field(&mut c, "plain", f),
            debug_field(&mut c, "z", f),
            "{f}"
        );
    }
    // Reads and edits in the middle, and a streamed LRANGE over the whole list.
    for i in [0i64, 49_999, 77_777, -1] {
        let v: String = redis::cmd("LINDEX").arg("z").arg(i).query(&mut c).unwrap();
        let w: String = redis::cmd("LINDEX")
            .arg("plain")
            .arg(i)
            .query(&mut c)
            .unwrap();
        assert_eq!(v, w);
    }
    for key in ["plain", "z"] {
        let _: () = redis::cmd("LSET")
            .arg(key)
            .arg(50_000)
            .arg("changed")
            .query(&mut c)
            .unwrap();
        let _: i64 = redis::cmd("LINSERT")
            .arg(key)
            .arg("BEFORE")
            .arg("changed")
            .arg("inserted")
            .query(&mut c)
            .unwrap();
        let _: i64 = redis::cmd("LREM")
            .arg(key)
            .arg(0)
            .arg("element-7")
            .query(&mut c)
            .unwrap();
    }
    let all: Vec<String> = redis::cmd("LRANGE")
        .arg("z")
        .arg(0)
        .arg(-1)
        .query(&mut c)
        .unwrap();
    let want: Vec<String> = redis::cmd("LRANGE")
        .arg("plain")
        .arg(0)
        .arg(-1)
        .query(&mut c)
        .unwrap();
    assert_eq!(all.len(), 100_000 - 100 + 1);
    assert_eq!(all, want);
    // 50 copies of element-7 went from before it.
    assert_eq!(all[49_950..49_952], ["inserted", "changed"]);
    // The directive on the command line (it used to be refused as unbuilt).
    let s = Server::start(&["--list-compress-depth", "2"]);
    let mut c = s.client();
    let depth: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("list-compress-depth")
        .query(&mut c)
        .unwrap();
    assert_eq!(depth, ["list-compress-depth", "2"]);
}

#[test]
fn debug_quicklist_packed_threshold_gives_big_elements_their_own_node() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    let err = b"-ERR argument must be a memory value bigger than 1 and smaller than 4gb\r\n";
    for bad in ["5gb", "abc", "-1", "4293918721"] {
        send(
            &mut r,
            &format!("DEBUG QUICKLIST-PACKED-THRESHOLD {bad}"),
            err,
        );
    }
    send(
        &mut r,
        "DEBUG QUICKLIST-PACKED-THRESHOLD 4293918720",
        b"+OK\r\n",
    );
    send(&mut r, "DEBUG QUICKLIST-PACKED-THRESHOLD 100", b"+OK\r\n");
    send(&mut r, "CONFIG SET list-max-listpack-size 4", b"+OK\r\n");
    // Nodes of 4: [a b c d] [e f g h] [i j].
    send(&mut r, "RPUSH l a b c d e f g h i j", b":10\r\n");
    let (x, y, z) = ("x".repeat(150), "y".repeat(150), "z".repeat(120));
    // x and y go alone; k cannot join x's plain node: 6 nodes.
    send(&mut r, &format!("RPUSH l {x} k"), b":12\r\n");
    send(&mut r, &format!("LPUSH l {y}"), b":13\r\n");
    let mut c = s.client();
    assert_eq!(debug_field(&mut c, "l", "ql_nodes"), "6");
    // Plain nodes count their element's bytes: 3 + 1 listpacks (7 + 3 per entry) and 300.
    assert_eq!(debug_field(&mut c, "l", "ql_uncompressed_size"), "361");
    // z inside [a b c d]: split around it, 8 nodes.
    send(&mut r, &format!("LINSERT l AFTER b {z}"), b":14\r\n");
    assert_eq!(debug_field(&mut c, "l", "ql_nodes"), "8");
    let all: Vec<String> = redis::cmd("LRANGE")
        .arg("l")
        .arg(0)
        .arg(-1)
        .query(&mut c)
        .unwrap();
    let want: Vec<&str> = vec![
        &y, "a", "b", &z, "c", "d", "e", "f", "g", "h", "i", "j", &x, "k",
    ];
    assert_eq!(all, want);
    // Back to the 1 GiB default: x and k join [i j].
    send(&mut r, "DEBUG QUICKLIST-PACKED-THRESHOLD 0", b"+OK\r\n");
    send(&mut r, "RPUSH m a b c d e f g h i j", b":10\r\n");
    send(&mut r, &format!("RPUSH m {x} k"), b":12\r\n");
    assert_eq!(debug_field(&mut c, "m", "ql_nodes"), "3");
}
