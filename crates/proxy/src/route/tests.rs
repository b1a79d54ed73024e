use std::collections::HashMap;

use darner_resp::{decode, encode, Bytes, Frame, Limits};
use proptest::prelude::*;

use super::*;
use crate::merge::{merge, Merge};

fn me() -> Identity {
    Identity {
        host: "127.0.0.1".into(),
        port: 7777,
        node_id: "a".repeat(40),
    }
}

fn three_nodes() -> SlotMap {
    let mut m = SlotMap::default();
    m.assign(0, 5460, "127.0.0.1:7000");
    m.assign(5461, 10922, "127.0.0.1:7001");
    m.assign(10923, 16383, "127.0.0.1:7002");
    m
}

fn run(args: &[&str], s: &mut Session) -> Plan {
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    plan(&args, s, &me(), &three_nodes())
}

fn local_reply(args: &[&str], s: &mut Session) -> Frame {
    match run(args, s) {
        Plan::Reply { bytes, .. } => decode(&bytes, &Limits::default()).unwrap().unwrap().0,
        other => panic!("not local: {other:?}"),
    }
}

fn err(text: &str) -> Frame {
    Frame::Error(Bytes::copy_from_slice(text.as_bytes()))
}

/// The arguments of an encoded request.
fn args_of(payload: &[u8]) -> Vec<Vec<u8>> {
    match decode(payload, &Limits::default()).unwrap().unwrap().0 {
        Frame::Array(v) => v
            .into_iter()
            .map(|f| match f {
                Frame::Bulk(b) => b.to_vec(),
                other => panic!("{other:?}"),
            })
            .collect(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn single_slot_commands_go_to_their_slot() {
    let mut s = Session::default();
    for (args, key) in [
        (vec!["GET", "foo"], "foo"),
        (vec!["set", "{user1}.a", "x"], "user1"),
        (vec!["MSETNX", "{t}a", "1", "{t}b", "2"], "t"),
        (vec!["MGET", "{t}a", "{t}b"], "t"),
        (vec!["EVAL", "return 1", "1", "k"], "k"),
        (vec!["SORT", "{s}l", "BY", "nosort", "STORE", "{s}dst"], "s"),
        (vec!["SORT_RO", "l", "LIMIT", "0", "1"], "l"),
    ] {
        match run(&args, &mut s) {
            Plan::Forward { parts, merge } => {
                assert_eq!(merge, Merge::Passthrough);
                assert_eq!(parts.len(), 1);
                assert_eq!(parts[0].target, Target::Slot(key_slot(key.as_bytes())));
                let want: Vec<Vec<u8>> = args.iter().map(|a| a.as_bytes().to_vec()).collect();
                assert_eq!(args_of(&parts[0].payload), want);
            }
            other => panic!("{args:?}: {other:?}"),
        }
    }
}

#[test]
fn keyless_and_unknown_commands_go_anywhere() {
    let mut s = Session::default();
    for args in [
        vec!["COMMAND"],
        vec!["nosuchcommand", "x"],
        vec!["EVAL", "return 1", "0"],
        vec!["PUBLISH", "ch", "m"],
    ] {
        match run(&args, &mut s) {
            Plan::Forward { parts, .. } => assert_eq!(parts[0].target, Target::Any, "{args:?}"),
            other => panic!("{args:?}: {other:?}"),
        }
    }
}

#[test]
fn atomic_multi_slot_commands_are_refused() {
    let mut s = Session::default();
    for args in [
        vec!["MSETNX", "a", "1", "b", "2"],
        vec!["RENAME", "a", "b"],
        vec!["SUNIONSTORE", "d", "a", "b"],
        vec!["EVAL", "return 1", "2", "a", "b"],
        vec!["SORT", "a", "STORE", "b"],
    ] {
        assert_eq!(local_reply(&args, &mut s), err(CROSSSLOT), "{args:?}");
    }
}

#[test]
fn monitor_gets_connections_of_its_own_outside_transactions() {
    let mut s = Session::default();
    assert_eq!(run(&["MONITOR"], &mut s), Plan::Monitor);
    assert_eq!(
        local_reply(&["MONITOR", "x"], &mut s),
        err("ERR wrong number of arguments for 'monitor' command")
    );
}

#[test]
fn wait_arguments_are_checked_as_redis_checks_them() {
    let mut s = Session::default();
    assert_eq!(
        run(&["WAIT", "2", "150"], &mut s),
        Plan::Wait {
            numreplicas: 2,
            timeout_ms: 150
        }
    );
    for (args, want) in [
        (
            &["WAIT", "x", "0"][..],
            "ERR value is not an integer or out of range",
        ),
        (
            &["WAIT", "1", "1.5"],
            "ERR timeout is not an integer or out of range",
        ),
        (
            &["WAIT", "x", "-1"],
            "ERR value is not an integer or out of range",
        ),
        (&["WAIT", "1", "-1"], "ERR timeout is negative"),
        (
            &["WAIT", "1"],
            "ERR wrong number of arguments for 'wait' command",
        ),
    ] {
        assert_eq!(local_reply(args, &mut s), err(want), "{args:?}");
    }
}

#[test]
fn unsupported_commands_say_so() {
    let mut s = Session::default();
    assert_eq!(
        local_reply(&["WAITAOF", "0", "0", "0"], &mut s),
        err("ERR unknown command 'WAITAOF', with args beginning with: '0' '0' '0' ")
    );
    for args in [vec!["AUTH", "x"]] {
        match local_reply(&args, &mut s) {
            Frame::Error(e) => assert!(
                e.starts_with(b"ERR command '")
                    && e.ends_with(b"not supported by darner proxy yet"),
                "{args:?}: {e:?}"
            ),
            other => panic!("{other:?}"),
        }
    }
    // XREAD without BLOCK does not block.
    assert!(matches!(
        run(&["XREAD", "STREAMS", "s", "0"], &mut s),
        Plan::Forward { .. }
    ));
}

#[test]
fn subscriptions_get_a_connection_of_their_own() {
    let mut s = Session::default();
    for args in [
        vec!["SUBSCRIBE", "c"],
        vec!["PSUBSCRIBE", "c*"],
        vec!["UNSUBSCRIBE"],
        vec!["PUNSUBSCRIBE"],
        vec!["SUNSUBSCRIBE"],
    ] {
        assert_eq!(
            run(&args, &mut s),
            Plan::Subscribe {
                target: Target::Any
            },
            "{args:?}"
        );
    }
    assert_eq!(
        run(&["SSUBSCRIBE", "{t}a", "{t}b"], &mut s),
        Plan::Subscribe {
            target: Target::Slot(key_slot(b"t"))
        }
    );
    assert_eq!(
        local_reply(&["SSUBSCRIBE", "{t}a", "{u}b"], &mut s),
        err(CROSSSLOT)
    );
    assert_eq!(
        local_reply(&["SUBSCRIBE"], &mut s),
        err("ERR wrong number of arguments for 'subscribe' command")
    );
    // Inside MULTI, not yet.
    run(&["MULTI"], &mut s);
    match local_reply(&["SUBSCRIBE", "c"], &mut s) {
        Frame::Error(e) => assert!(e.ends_with(b"not supported by darner proxy yet"), "{e:?}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn blocking_commands_get_a_connection_of_their_own() {
    let mut s = Session::default();
    for args in [
        vec!["BLPOP", "a", "{a}b", "0"],
        vec!["BLMOVE", "a", "{a}x", "LEFT", "RIGHT", "1"],
        vec!["XREAD", "BLOCK", "0", "STREAMS", "a", "$"],
        vec!["BZPOPMIN", "a", "0.5"],
    ] {
        match run(&args, &mut s) {
            Plan::Blocking { target, payload } => {
                assert_eq!(target, Target::Slot(key_slot(b"a")), "{args:?}");
                assert_eq!(args_of(&payload).len(), args.len());
            }
            other => panic!("{args:?}: {other:?}"),
        }
    }
    assert_eq!(
        local_reply(&["BLPOP", "a", "b", "0"], &mut s),
        err(CROSSSLOT)
    );
    // Inside MULTI they do not block: queued on the transaction's connection.
    assert_eq!(local_reply(&["MULTI"], &mut s), Frame::Simple("OK".into()));
    assert!(matches!(
        run(&["BLPOP", "a", "0"], &mut s),
        Plan::Pinned { release: false, .. }
    ));
}

/// A pinned plan's parts: where it opens, the preamble's and the payload's arguments, the
/// proxy's own reply, and whether it releases the connection.
type PinnedParts = (
    Option<Target>,
    Vec<Vec<Vec<u8>>>,
    Vec<Vec<u8>>,
    Option<Vec<u8>>,
    bool,
);

fn pinned(p: Plan) -> PinnedParts {
    match p {
        Plan::Pinned {
            open,
            preamble,
            payload,
            reply,
            release,
        } => (
            open,
            preamble.iter().map(|p| args_of(p)).collect(),
            args_of(&payload),
            reply,
            release,
        ),
        other => panic!("not pinned: {other:?}"),
    }
}

fn words(w: &[&str]) -> Vec<Vec<u8>> {
    w.iter().map(|a| a.as_bytes().to_vec()).collect()
}

#[test]
fn transaction_pins_on_its_first_key() {
    let mut s = Session::default();
    let ok = Frame::Simple("OK".into());
    let queued = Frame::Simple("QUEUED".into());
    assert_eq!(local_reply(&["MULTI"], &mut s), ok);
    assert_eq!(local_reply(&["PING"], &mut s), queued);
    let (open, pre, payload, reply, release) = pinned(run(&["SET", "a", "1"], &mut s));
    assert_eq!(open, Some(Target::Slot(key_slot(b"a"))));
    assert_eq!(pre, vec![words(&["MULTI"]), words(&["PING"])]);
    assert_eq!(payload, words(&["SET", "a", "1"]));
    assert!(reply.is_none() && !release);
    let (_, pre, payload, _, release) = pinned(run(&["GET", "{a}x"], &mut s));
    assert!(pre.is_empty() && !release && payload == words(&["GET", "{a}x"]));
    // Another slot: queued here, refused at EXEC (a node owning both slots does so).
    assert_eq!(local_reply(&["GET", "b"], &mut s), queued);
    let (_, _, payload, reply, release) = pinned(run(&["EXEC"], &mut s));
    assert_eq!(payload, words(&["DISCARD"]));
    assert!(release);
    let reply = decode(&reply.unwrap(), &Limits::default())
        .unwrap()
        .unwrap()
        .0;
    assert_eq!(reply, err(CROSSSLOT));
    assert!(!s.tx.multi && !s.tx.pinned);
    assert_eq!(
        local_reply(&["EXEC"], &mut s),
        err("ERR EXEC without MULTI")
    );
    assert_eq!(
        local_reply(&["DISCARD"], &mut s),
        err("ERR DISCARD without MULTI")
    );
}

#[test]
fn transaction_without_keys() {
    let mut s = Session::default();
    local_reply(&["MULTI"], &mut s);
    assert_eq!(local_reply(&["EXEC"], &mut s), Frame::Array(vec![]));
    local_reply(&["MULTI"], &mut s);
    assert_eq!(
        local_reply(&["MULTI"], &mut s),
        err("ERR MULTI calls can not be nested")
    );
    assert_eq!(
        local_reply(&["WATCH", "a"], &mut s),
        err("ERR WATCH inside MULTI is not allowed")
    );
    local_reply(&["ECHO", "x"], &mut s);
    let (open, pre, payload, reply, release) = pinned(run(&["EXEC"], &mut s));
    assert_eq!(open, Some(Target::Any));
    assert_eq!(pre, vec![words(&["MULTI"]), words(&["ECHO", "x"])]);
    assert!(payload == words(&["EXEC"]) && reply.is_none() && release);
    // A refused command aborts EXEC; nothing was sent, so nothing is discarded.
    local_reply(&["MULTI"], &mut s);
    local_reply(&["GET"], &mut s);
    assert_eq!(
        local_reply(&["EXEC"], &mut s),
        err("EXECABORT Transaction discarded because of previous errors.")
    );
    assert_eq!(
        local_reply(&["DISCARD"], &mut s),
        err("ERR DISCARD without MULTI")
    );
}

#[test]
fn watch_pins_and_unwatch_releases() {
    let mut s = Session::default();
    assert_eq!(local_reply(&["WATCH", "a", "b"], &mut s), err(CROSSSLOT));
    assert_eq!(
        local_reply(&["UNWATCH"], &mut s),
        Frame::Simple("OK".into())
    );
    let (open, _, payload, _, release) = pinned(run(&["WATCH", "a"], &mut s));
    assert!(
        open == Some(Target::Slot(key_slot(b"a"))) && payload == words(&["WATCH", "a"]) && !release
    );
    // The watched slot's commands follow the WATCH on its connection; others stay shared.
    assert!(matches!(run(&["GET", "{a}1"], &mut s), Plan::Pinned { .. }));
    assert!(matches!(run(&["GET", "b"], &mut s), Plan::Forward { .. }));
    assert_eq!(local_reply(&["WATCH", "b"], &mut s), err(CROSSSLOT));
    // Sent on the connection the WATCH holds, never on a new one (`open` is none).
    let (open, pre, payload, _, _) = pinned(run(&["MULTI"], &mut s));
    assert!(open.is_none() && pre.is_empty() && payload == words(&["MULTI"]));
    pinned(run(&["INCR", "a"], &mut s));
    let (_, _, payload, reply, release) = pinned(run(&["EXEC"], &mut s));
    assert!(payload == words(&["EXEC"]) && reply.is_none() && release);
    // A lost connection while watching: EXEC says the transaction did not run.
    pinned(run(&["WATCH", "a"], &mut s));
    s.tx.connection_lost();
    local_reply(&["MULTI"], &mut s);
    let (_, pre, ..) = pinned(run(&["INCR", "a"], &mut s));
    assert_eq!(pre, vec![words(&["MULTI"])]);
    let (_, _, payload, reply, _) = pinned(run(&["EXEC"], &mut s));
    assert_eq!(payload, words(&["DISCARD"]));
    assert_eq!(reply.unwrap(), b"*-1\r\n");
    let (_, _, payload, _, release) = pinned(run(&["WATCH", "a"], &mut s));
    assert!(payload == words(&["WATCH", "a"]) && !release);
    let (_, _, payload, _, release) = pinned(run(&["UNWATCH"], &mut s));
    assert!(payload == words(&["UNWATCH"]) && release && !s.tx.pinned);
}

#[test]
fn local_commands() {
    let mut s = Session::default();
    assert_eq!(
        local_reply(&["PING"], &mut s),
        Frame::Simple(Bytes::from_static(b"PONG"))
    );
    assert_eq!(
        local_reply(&["ping", "x"], &mut s),
        Frame::Bulk(Bytes::from_static(b"x"))
    );
    assert_eq!(
        local_reply(&["PING", "a", "b"], &mut s),
        err("ERR wrong number of arguments for 'ping' command")
    );
    assert_eq!(
        local_reply(&["SELECT", "0"], &mut s),
        Frame::Simple(Bytes::from_static(b"OK"))
    );
    assert_eq!(
        local_reply(&["SELECT", "1"], &mut s),
        err("ERR SELECT is not allowed in cluster mode")
    );
    assert_eq!(
        local_reply(&["SELECT", "x"], &mut s),
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(
        local_reply(&["CLUSTER", "KEYSLOT", "{user1}x"], &mut s),
        Frame::Integer(i64::from(key_slot(b"user1")))
    );
    assert_eq!(
        local_reply(&["CLUSTER", "nope"], &mut s),
        err("ERR unknown subcommand 'nope'. Try CLUSTER HELP.")
    );
    assert_eq!(
        local_reply(&["HELLO", "4"], &mut s),
        err("NOPROTO unsupported protocol version")
    );
    match local_reply(&["HELLO", "3"], &mut s) {
        Frame::Map(m) => {
            assert!(m.contains(&(Frame::Bulk(Bytes::from_static(b"proto")), Frame::Integer(3))))
        }
        other => panic!("{other:?}"),
    }
    assert!(s.resp3);
    let slots = local_reply(&["CLUSTER", "SLOTS"], &mut s);
    let map = SlotMap::from_cluster_slots(&slots, "x").unwrap();
    assert!(map.is_complete());
    assert_eq!(map.primaries(), vec!["127.0.0.1:7777"]);
    let shards = local_reply(&["CLUSTER", "SHARDS"], &mut s);
    assert_eq!(SlotMap::from_cluster_shards(&shards, "x").unwrap(), map);
    assert!(matches!(
        run(&["QUIT"], &mut s),
        Plan::Reply { close: true, .. }
    ));
    assert_eq!(
        local_reply(&["CLIENT", "SETNAME", "a b"], &mut s),
        err("ERR Client names cannot contain spaces, newlines or special characters.")
    );
}

#[test]
fn fan_out_commands_reach_every_primary() {
    let mut s = Session::default();
    match run(&["DBSIZE"], &mut s) {
        Plan::Forward { parts, merge } => {
            assert_eq!(merge, Merge::Sum);
            let nodes: Vec<_> = parts.iter().map(|p| p.target.clone()).collect();
            assert_eq!(
                nodes,
                ["7000", "7001", "7002"].map(|p| Target::Node(format!("127.0.0.1:{p}")))
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        run(&["KEYS", "*"], &mut s),
        Plan::Forward {
            merge: Merge::Concat,
            ..
        }
    ));
}

#[test]
fn redirects() {
    assert_eq!(
        parse_redirect(b"-MOVED 3999 127.0.0.1:7001\r\n"),
        Some(Redirect::Moved {
            slot: 3999,
            node: "127.0.0.1:7001".into()
        })
    );
    assert_eq!(
        parse_redirect(b"-ASK 1 [::1]:7001\r\n"),
        Some(Redirect::Ask {
            slot: 1,
            node: "[::1]:7001".into()
        })
    );
    assert_eq!(parse_redirect(b"-MOVED 16384 h:1\r\n"), None);
    assert_eq!(parse_redirect(b"-ERR x\r\n"), None);
    assert_eq!(parse_redirect(b"+MOVED 1 h:1\r\n"), None);
}

/// A keyspace of strings, answering the split commands as one Redis node does.
fn model_exec(db: &mut HashMap<Vec<u8>, Vec<u8>>, args: &[Vec<u8>]) -> Frame {
    let name = String::from_utf8_lossy(&args[0]).to_ascii_lowercase();
    let keys = &args[1..];
    match name.as_str() {
        "mget" => Frame::Array(
            keys.iter()
                .map(|k| match db.get(k) {
                    Some(v) => Frame::Bulk(Bytes::from(v.clone())),
                    None => Frame::NullBulk,
                })
                .collect(),
        ),
        "mset" => {
            for kv in keys.chunks(2) {
                db.insert(kv[0].clone(), kv[1].clone());
            }
            Frame::Simple(Bytes::from_static(b"OK"))
        }
        "exists" | "touch" => {
            Frame::Integer(keys.iter().filter(|k| db.contains_key(*k)).count() as i64)
        }
        "del" | "unlink" => {
            Frame::Integer(keys.iter().filter(|k| db.remove(*k).is_some()).count() as i64)
        }
        other => panic!("{other}"),
    }
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof!["[a-e]", "\\{[ab]\\}[a-c]", "[a-c]\\{\\}"]
}

proptest! {
    /// Split and merged, a multi-key command answers what one node holding every key answers,
    /// and every part's keys share the part's slot.
    #[test]
    fn split_and_merge_match_one_node(
        cmd in prop_oneof![Just("MGET"), Just("MSET"), Just("DEL"), Just("EXISTS"),
                           Just("UNLINK"), Just("TOUCH")],
        keys in proptest::collection::vec(key(), 1..8),
        preset in proptest::collection::vec(key(), 0..6),
    ) {
        let mut args: Vec<Vec<u8>> = vec![cmd.as_bytes().to_vec()];
        for (i, k) in keys.iter().enumerate() {
            args.push(k.as_bytes().to_vec());
            if cmd == "MSET" {
                args.push(format!("v{i}").into_bytes());
            }
        }
        let mut one: HashMap<Vec<u8>, Vec<u8>> =
            preset.iter().map(|k| (k.as_bytes().to_vec(), b"old".to_vec())).collect();
        let mut split_db = one.clone();
        let want = model_exec(&mut one, &args);

        let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        let mut s = Session::default();
        let Plan::Forward { parts, merge: how } = plan(&refs, &mut s, &me(), &three_nodes()) else {
            panic!("not forwarded");
        };
        let mut replies = Vec::new();
        for p in &parts {
            let a = args_of(&p.payload);
            let Target::Slot(slot) = p.target else { panic!("{:?}", p.target) };
            let step = if cmd == "MSET" { 2 } else { 1 };
            for k in a[1..].iter().step_by(step) {
                prop_assert_eq!(key_slot(k), slot);
            }
            // Through the wire, as the backend's reply would come.
            let mut wire = Vec::new();
            encode(&model_exec(&mut split_db, &a), &mut wire);
            replies.push(decode(&wire, &Limits::default()).unwrap().unwrap().0);
        }
        prop_assert_eq!(merge(&how, replies), want);
        prop_assert_eq!(split_db, one);
    }

    /// Any arguments: a plan, never a panic.
    #[test]
    fn plan_never_panics(args in proptest::collection::vec(
        prop_oneof!["[a-z]{1,8}", "(?i)(get|mset|mget|cluster|hello|client|select|eval|del)",
                    "-?[0-9]{1,3}", ".{0,5}"], 1..6)) {
        let refs: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        let mut s = Session::default();
        let _ = plan(&refs, &mut s, &me(), &three_nodes());
    }
}
