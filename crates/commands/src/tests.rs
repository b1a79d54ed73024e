//! Unit tests: known values from Redis `COMMAND INFO`, lookups, key
//! extraction and cluster hashing.

use super::*;

/// (name, arity, flags, first, last, step, categories) as printed by a real
/// Redis 7.x `COMMAND INFO`.
type InfoRow = (
    &'static str,
    i32,
    &'static [&'static str],
    i32,
    i32,
    i32,
    &'static [&'static str],
);

const COMMAND_INFO: &[InfoRow] = &[
    (
        "get",
        2,
        &["readonly", "fast"],
        1,
        1,
        1,
        &["@read", "@string", "@fast"],
    ),
    (
        "set",
        -3,
        &["write", "denyoom"],
        1,
        1,
        1,
        &["@write", "@string", "@slow"],
    ),
    (
        "mset",
        -3,
        &["write", "denyoom"],
        1,
        -1,
        2,
        &["@write", "@string", "@slow"],
    ),
    (
        "msetnx",
        -3,
        &["write", "denyoom"],
        1,
        -1,
        2,
        &["@write", "@string", "@slow"],
    ),
    (
        "exec",
        1,
        &["noscript", "loading", "stale", "skip_slowlog"],
        0,
        0,
        0,
        &["@slow", "@transaction"],
    ),
    (
        "multi",
        1,
        &["noscript", "loading", "stale", "fast", "allow_busy"],
        0,
        0,
        0,
        &["@fast", "@transaction"],
    ),
    (
        "watch",
        -2,
        &["noscript", "loading", "stale", "fast", "allow_busy"],
        1,
        -1,
        1,
        &["@fast", "@transaction"],
    ),
    (
        "bitop",
        -4,
        &["write", "denyoom"],
        2,
        -1,
        1,
        &["@write", "@bitmap", "@slow"],
    ),
    (
        "del",
        -2,
        &["write"],
        1,
        -1,
        1,
        &["@keyspace", "@write", "@slow"],
    ),
    (
        "exists",
        -2,
        &["readonly", "fast"],
        1,
        -1,
        1,
        &["@keyspace", "@read", "@fast"],
    ),
    (
        "lcs",
        -3,
        &["readonly"],
        1,
        2,
        1,
        &["@read", "@string", "@slow"],
    ),
    (
        "append",
        3,
        &["write", "denyoom", "fast"],
        1,
        1,
        1,
        &["@write", "@string", "@fast"],
    ),
    ("ping", -1, &["fast"], 0, 0, 0, &["@fast", "@connection"]),
    (
        "auth",
        -2,
        &[
            "noscript",
            "loading",
            "stale",
            "fast",
            "no_auth",
            "allow_busy",
        ],
        0,
        0,
        0,
        &["@fast", "@connection"],
    ),
    (
        "hello",
        -1,
        &[
            "noscript",
            "loading",
            "stale",
            "fast",
            "no_auth",
            "allow_busy",
        ],
        0,
        0,
        0,
        &["@fast", "@connection"],
    ),
    ("client", -2, &[], 0, 0, 0, &["@slow"]),
    (
        "client|list",
        -2,
        &["admin", "noscript", "loading", "stale"],
        0,
        0,
        0,
        &["@admin", "@slow", "@dangerous", "@connection"],
    ),
    (
        "client|kill",
        -3,
        &["admin", "noscript", "loading", "stale"],
        0,
        0,
        0,
        &["@admin", "@slow", "@dangerous", "@connection"],
    ),
    ("config", -2, &[], 0, 0, 0, &["@slow"]),
    (
        "config|get",
        -3,
        &["admin", "noscript", "loading", "stale"],
        0,
        0,
        0,
        &["@admin", "@slow", "@dangerous"],
    ),
    (
        "config|set",
        -4,
        &["admin", "noscript", "loading", "stale"],
        0,
        0,
        0,
        &["@admin", "@slow", "@dangerous"],
    ),
    (
        "command",
        -1,
        &["loading", "stale"],
        0,
        0,
        0,
        &["@slow", "@connection"],
    ),
    (
        "command|info",
        -2,
        &["loading", "stale"],
        0,
        0,
        0,
        &["@slow", "@connection"],
    ),
    ("object", -2, &[], 0, 0, 0, &["@slow"]),
    (
        "object|encoding",
        3,
        &["readonly"],
        2,
        2,
        1,
        &["@keyspace", "@read", "@slow"],
    ),
    (
        "object|freq",
        3,
        &["readonly"],
        2,
        2,
        1,
        &["@keyspace", "@read", "@slow"],
    ),
    (
        "debug",
        -2,
        &["admin", "noscript", "loading", "stale"],
        0,
        0,
        0,
        &["@admin", "@slow", "@dangerous"],
    ),
    (
        "shutdown",
        -1,
        &[
            "admin",
            "noscript",
            "loading",
            "stale",
            "no_multi",
            "allow_busy",
        ],
        0,
        0,
        0,
        &["@admin", "@slow", "@dangerous"],
    ),
    (
        "keys",
        2,
        &["readonly"],
        0,
        0,
        0,
        &["@keyspace", "@read", "@slow", "@dangerous"],
    ),
    (
        "scan",
        -2,
        &["readonly"],
        0,
        0,
        0,
        &["@keyspace", "@read", "@slow"],
    ),
    (
        "flushall",
        -1,
        &["write"],
        0,
        0,
        0,
        &["@keyspace", "@write", "@slow", "@dangerous"],
    ),
    (
        "expire",
        -3,
        &["write", "fast"],
        1,
        1,
        1,
        &["@keyspace", "@write", "@fast"],
    ),
    (
        "copy",
        -3,
        &["write", "denyoom"],
        1,
        2,
        1,
        &["@keyspace", "@write", "@slow"],
    ),
    (
        "rename",
        3,
        &["write"],
        1,
        2,
        1,
        &["@keyspace", "@write", "@slow"],
    ),
    (
        "renamenx",
        3,
        &["write", "fast"],
        1,
        2,
        1,
        &["@keyspace", "@write", "@fast"],
    ),
    (
        "move",
        3,
        &["write", "fast"],
        1,
        1,
        1,
        &["@keyspace", "@write", "@fast"],
    ),
    (
        "echo",
        2,
        &["loading", "stale", "fast"],
        0,
        0,
        0,
        &["@fast", "@connection"],
    ),
    (
        "select",
        2,
        &["loading", "stale", "fast"],
        0,
        0,
        0,
        &["@fast", "@connection"],
    ),
    (
        "info",
        -1,
        &["loading", "stale"],
        0,
        0,
        0,
        &["@slow", "@dangerous"],
    ),
    (
        "monitor",
        1,
        &["admin", "noscript", "loading", "stale"],
        0,
        0,
        0,
        &["@admin", "@slow", "@dangerous"],
    ),
    (
        "time",
        1,
        &["loading", "stale", "fast"],
        0,
        0,
        0,
        &["@fast"],
    ),
    (
        "bitfield",
        -2,
        &["write", "denyoom"],
        1,
        1,
        1,
        &["@write", "@bitmap", "@slow"],
    ),
    (
        "bitfield_ro",
        -2,
        &["readonly", "fast"],
        1,
        1,
        1,
        &["@read", "@bitmap", "@fast"],
    ),
    (
        "getex",
        -2,
        &["write", "fast"],
        1,
        1,
        1,
        &["@write", "@string", "@fast"],
    ),
    (
        "getdel",
        2,
        &["write", "fast"],
        1,
        1,
        1,
        &["@write", "@string", "@fast"],
    ),
    (
        "touch",
        -2,
        &["readonly", "fast"],
        1,
        -1,
        1,
        &["@keyspace", "@read", "@fast"],
    ),
    (
        "unlink",
        -2,
        &["write", "fast"],
        1,
        -1,
        1,
        &["@keyspace", "@write", "@fast"],
    ),
    (
        "randomkey",
        1,
        &["readonly"],
        0,
        0,
        0,
        &["@keyspace", "@read", "@slow"],
    ),
    (
        "quit",
        -1,
        &[
            "noscript",
            "loading",
            "stale",
            "fast",
            "no_auth",
            "allow_busy",
        ],
        0,
        0,
        0,
        &["@fast", "@connection"],
    ),
    (
        "reset",
        1,
        &[
            "noscript",
            "loading",
            "stale",
            "fast",
            "no_auth",
            "allow_busy",
        ],
        0,
        0,
        0,
        &["@fast", "@connection"],
    ),
    (
        "dbsize",
        1,
        &["readonly", "fast"],
        0,
        0,
        0,
        &["@keyspace", "@read", "@fast"],
    ),
    (
        "lastsave",
        1,
        &["loading", "stale", "fast"],
        0,
        0,
        0,
        &["@admin", "@fast", "@dangerous"],
    ),
    ("slowlog", -2, &[], 0, 0, 0, &["@slow"]),
    (
        "slowlog|get",
        -2,
        &["admin", "loading", "stale"],
        0,
        0,
        0,
        &["@admin", "@slow", "@dangerous"],
    ),
    (
        "substr",
        4,
        &["readonly"],
        1,
        1,
        1,
        &["@read", "@string", "@slow"],
    ),
    (
        "incrbyfloat",
        3,
        &["write", "denyoom", "fast"],
        1,
        1,
        1,
        &["@write", "@string", "@fast"],
    ),
    (
        "setex",
        4,
        &["write", "denyoom"],
        1,
        1,
        1,
        &["@write", "@string", "@slow"],
    ),
    (
        "psetex",
        4,
        &["write", "denyoom"],
        1,
        1,
        1,
        &["@write", "@string", "@slow"],
    ),
];

fn spec(full_name: &str) -> &'static CommandSpec {
    lookup_full_name(full_name.as_bytes()).unwrap_or_else(|| panic!("{full_name} not in table"))
}

#[test]
fn command_info_matches_redis() {
    for &(name, arity, flag_names, first, last, step, cats) in COMMAND_INFO {
        let c = spec(name);
        assert_eq!(c.full_name, name);
        assert_eq!(c.arity, arity, "{name} arity");
        assert_eq!(c.flag_names, flag_names, "{name} flags");
        assert_eq!(
            (c.first_key, c.last_key, c.step),
            (first, last, step),
            "{name} keys"
        );
        assert_eq!(c.acl_categories, cats, "{name} categories");
    }
}

#[test]
fn valkey_facts_kept_where_redis_7_0_differs() {
    // Redis 7.0 says -4; the specs (and newer servers) say -3.
    assert_eq!(spec("command|getkeys").arity, -3);
    assert_eq!(spec("command|getkeysandflags").arity, -3);
    // Deliberately not taken from the specs: no NO_MULTI on MULTI / WATCH.
    assert!(!spec("multi").has(flags::NO_MULTI));
    assert!(!spec("watch").has(flags::NO_MULTI));
    assert!(spec("shutdown").has(flags::NO_MULTI));
}

#[test]
fn hidden_and_bit_flags() {
    let client = spec("client");
    assert!(client.has(flags::SENTINEL));
    assert!(client.flag_names.is_empty());
    assert!(spec("debug").has(flags::PROTECTED));
    assert!(spec("debug").has(flags::ADMIN | flags::NOSCRIPT));
    assert!(!spec("debug").has(flags::ADMIN | flags::WRITE));
    assert!(spec("get").has(flags::READONLY | flags::FAST));
    assert!(spec("get").in_category(acl::READ | acl::STRING | acl::FAST));
    assert!(!spec("get").in_category(acl::SLOW));
    assert_eq!(acl::by_name(b"DANGEROUS"), Some(acl::DANGEROUS));
    assert_eq!(acl::by_name(b"nope"), None);
}

/// Printable flag bits, in COMMAND INFO order, for the consistency check.
const PRINTED: &[(u64, &str)] = &[
    (flags::WRITE, "write"),
    (flags::READONLY, "readonly"),
    (flags::DENYOOM, "denyoom"),
    (flags::MODULE, "module"),
    (flags::ADMIN, "admin"),
    (flags::PUBSUB, "pubsub"),
    (flags::NOSCRIPT, "noscript"),
    (flags::BLOCKING, "blocking"),
    (flags::LOADING, "loading"),
    (flags::STALE, "stale"),
    (flags::SKIP_MONITOR, "skip_monitor"),
    (flags::SKIP_SLOWLOG, "skip_slowlog"),
    (flags::ASKING, "asking"),
    (flags::FAST, "fast"),
    (flags::NO_AUTH, "no_auth"),
    (flags::NO_MANDATORY_KEYS, "no_mandatory_keys"),
    (flags::NO_ASYNC_LOADING, "no_async_loading"),
    (flags::NO_MULTI, "no_multi"),
    (flags::MOVABLE_KEYS, "movablekeys"),
    (flags::ALLOW_BUSY, "allow_busy"),
];

fn every_spec() -> impl Iterator<Item = &'static CommandSpec> {
    all()
        .iter()
        .flat_map(|c| std::iter::once(c).chain(c.subcommands))
}

#[test]
fn bits_agree_with_names() {
    for c in every_spec() {
        let names: Vec<&str> = PRINTED
            .iter()
            .filter(|(bit, _)| c.has(*bit))
            .map(|(_, n)| *n)
            .collect();
        assert_eq!(names, c.flag_names, "{}", c.full_name);
        let cats: Vec<String> = (0..acl::NAMES.len())
            .filter(|i| c.acl_flags & (1 << i) != 0)
            .map(|i| format!("@{}", acl::NAMES[i]))
            .collect();
        assert_eq!(cats, c.acl_categories, "{}", c.full_name);
        // Redis's binary world: exactly one of @fast / @slow.
        assert!(c.in_category(acl::FAST) != c.in_category(acl::SLOW));
        assert_eq!(c.has(flags::FAST), c.in_category(acl::FAST));
        if c.has(flags::WRITE) {
            assert!(c.in_category(acl::WRITE));
        }
        if c.has(flags::ADMIN) {
            assert!(c.in_category(acl::ADMIN | acl::DANGEROUS));
        }
    }
}

#[test]
fn table_matches_the_command_lists() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tools/commands");
    let mut text = String::new();
    for f in std::fs::read_dir(dir).unwrap() {
        let path = f.unwrap().path();
        if path.extension().is_some_and(|e| e == "txt") {
            text.push_str(&std::fs::read_to_string(path).unwrap());
            text.push('\n');
        }
    }
    let listed: Vec<&str> = text
        .lines()
        .map(|l| l.split('#').next().unwrap().trim())
        .filter(|l| !l.is_empty())
        .collect();
    let mut in_table: Vec<&str> = every_spec().map(|c| c.full_name).collect();
    let mut listed_sorted = listed.clone();
    listed_sorted.sort_unstable();
    in_table.sort_unstable();
    assert_eq!(in_table, listed_sorted);
    for name in listed {
        let c = spec(name);
        assert_eq!(c.full_name, name);
        assert_eq!(c.name, name.rsplit('|').next().unwrap());
    }
}

#[test]
fn table_is_sorted_and_well_formed() {
    assert_eq!(all().len(), table::COMMAND_COUNT);
    assert!(all().windows(2).all(|w| w[0].name < w[1].name));
    for c in all() {
        assert_eq!(c.name, c.full_name);
        assert!(c.subcommands.windows(2).all(|w| w[0].name < w[1].name));
        for s in c.subcommands {
            assert_eq!(s.full_name, format!("{}|{}", c.name, s.name));
            assert!(s.subcommands.is_empty());
            assert!(s.arity.unsigned_abs() >= 2, "{}", s.full_name);
        }
        if c.is_container() {
            assert!(c.arity < 0);
        }
    }
    for c in every_spec() {
        assert!(c.name.bytes().all(|b| !b.is_ascii_uppercase()));
        for a in c.args {
            check_arg(c, a);
        }
    }
}

fn check_arg(c: &CommandSpec, a: &Arg) {
    if a.kind == "key" {
        assert!(a.key_spec_index >= 0 && (a.key_spec_index as usize) < c.key_specs.len());
    }
    assert_eq!(
        matches!(a.kind, "oneof" | "block"),
        !a.children.is_empty(),
        "{} {}",
        c.full_name,
        a.name
    );
    for ch in a.children {
        check_arg(c, ch);
    }
}

#[test]
fn key_specs_and_args() {
    let set = spec("set");
    assert_eq!(set.key_specs.len(), 1);
    assert_eq!(
        set.key_specs[0].flags,
        ["RW", "access", "update", "variable_flags"]
    );
    assert_eq!(set.key_specs[0].begin, BeginSearch::Index(1));
    assert_eq!(
        set.key_specs[0].find,
        FindKeys::Range {
            last_key: 0,
            step: 1,
            limit: 0
        }
    );
    let names: Vec<&str> = set.args.iter().map(|a| a.name).collect();
    assert_eq!(names, ["key", "value", "condition", "get", "expiration"]);
    assert_eq!(set.args[0].kind, "key");
    assert_eq!(set.args[0].key_spec_index, 0);
    assert_eq!(set.args[3].token, Some("GET"));
    assert_eq!(set.args[3].flags, ["optional"]);
    assert_eq!(set.args[4].children.len(), 5);
    assert_eq!(
        spec("mset").tips,
        [
            "request_policy:multi_shard",
            "response_policy:all_succeeded"
        ]
    );
    assert_eq!(spec("bitop").key_specs[1].flags, ["RO", "access"]);
    assert_eq!(spec("get").group, "string");
    assert_eq!(spec("get").since, "1.0.0");
    assert_eq!(spec("del").group, "generic");
    assert_eq!(spec("setnx").doc_flags, ["deprecated"]);
    assert_eq!(spec("setnx").deprecated_since, Some("2.6.12"));
    assert_eq!(spec("debug").doc_flags, ["syscmd"]);
    assert_eq!(spec("client|list").tips, ["nondeterministic_output"]);
    assert!(spec("del").may_have_keys());
    assert!(!spec("ping").may_have_keys());
}

#[test]
fn lookup_is_case_insensitive() {
    for c in all() {
        let upper = c.name.to_ascii_uppercase();
        assert_eq!(
            lookup(upper.as_bytes()).map(|s| s.full_name),
            Some(c.full_name)
        );
        assert_eq!(
            lookup(c.name.as_bytes()).map(|s| s.full_name),
            Some(c.full_name)
        );
        for s in c.subcommands {
            let up = s.name.to_ascii_uppercase();
            assert!(std::ptr::eq(
                lookup_subcommand(c, up.as_bytes()).unwrap(),
                s
            ));
        }
    }
    assert_eq!(lookup(b"GeT").unwrap().name, "get");
    assert_eq!(lookup(b"BITFIELD_RO").unwrap().name, "bitfield_ro");
    assert!(lookup(b"").is_none());
    assert!(lookup(b"ge").is_none());
    assert!(lookup(b"gett").is_none());
    assert!(lookup(b"get\0").is_none());
    assert!(lookup(b"nosuchcommand").is_none());
    assert!(lookup(b"client|list").is_none());
    assert!(lookup(b"\xff\xfe").is_none());
    assert!(lookup(b"{et").is_none()); // non-letter first byte
    assert!(lookup(b"asking").is_none()); // not implemented yet (cluster mode)
    assert!(lookup(b"georadiusbymember_rox").is_none()); // longer than every name
    assert!(lookup(&[b'g'; 300]).is_none());
}

/// The hashed index agrees with a scan of the table for every name in any case and for
/// every one-byte variation of each name (wrong letter, a byte appended or dropped).
#[test]
fn lookup_agrees_with_a_scan() {
    let scan = |name: &[u8]| {
        all()
            .iter()
            .find(|c| c.name.as_bytes().eq_ignore_ascii_case(name))
            .map(|c| c.full_name)
    };
    for c in all() {
        let name = c.name.as_bytes();
        let upper = c.name.to_ascii_uppercase();
        assert_eq!(
            lookup(upper.as_bytes()).map(|s| s.full_name),
            Some(c.full_name)
        );
        for i in 0..name.len() {
            for b in [b'a', b'z', b'_', b'|', 0, 0xff, name[i] ^ 0x20] {
                let mut v = name.to_vec();
                v[i] = b;
                assert_eq!(lookup(&v).map(|s| s.full_name), scan(&v), "{v:?}");
            }
            let mut dropped = name.to_vec();
            dropped.remove(i);
            assert_eq!(lookup(&dropped).map(|s| s.full_name), scan(&dropped));
        }
        let mut longer = name.to_vec();
        longer.push(b's');
        assert_eq!(lookup(&longer).map(|s| s.full_name), scan(&longer));
    }
}

#[test]
fn subcommand_lookup() {
    let client = lookup(b"CLIENT").unwrap();
    assert!(client.is_container());
    assert_eq!(
        lookup_subcommand(client, b"LiSt").unwrap().full_name,
        "client|list"
    );
    assert_eq!(
        lookup_subcommand(client, b"no-evict").unwrap().full_name,
        "client|no-evict"
    );
    assert!(lookup_subcommand(client, b"nosuch").is_none());
    assert!(lookup_subcommand(client, b"").is_none());
    assert!(lookup_subcommand(lookup(b"get").unwrap(), b"list").is_none());
    assert_eq!(
        lookup_full_name(b"CONFIG|GET").unwrap().full_name,
        "config|get"
    );
    assert_eq!(lookup_full_name(b"get").unwrap().full_name, "get");
    assert!(lookup_full_name(b"get|x").is_none());
    assert!(lookup_full_name(b"client|list|x").is_none());
    assert!(lookup_full_name(b"client|").is_none());
    assert!(lookup_full_name(b"|list").is_none());
    assert_eq!(lookup_full_name(b"client").unwrap().full_name, "client");
}

#[test]
fn arity() {
    let get = spec("get");
    assert!(!get.arity_ok(1));
    assert!(get.arity_ok(2));
    assert!(!get.arity_ok(3));
    let set = spec("set");
    assert!(!set.arity_ok(2));
    assert!(set.arity_ok(3));
    assert!(set.arity_ok(9));
    let ping = spec("ping");
    assert!(ping.arity_ok(1));
    assert!(ping.arity_ok(2));
    assert!(!ping.arity_ok(0));
    assert!(spec("client|list").arity_ok(2));
    assert!(!spec("client|kill").arity_ok(2));
}

fn keys(name: &str, args: &[&str]) -> Vec<usize> {
    let mut out = vec![99]; // must be cleared
    key_indices(spec(name), args, &mut out);
    out
}

#[test]
fn key_indices_real_commands() {
    assert_eq!(keys("get", &["get", "k"]), [1]);
    assert_eq!(keys("set", &["set", "k", "v", "GET"]), [1]);
    assert_eq!(keys("mset", &["mset", "a", "1", "b", "2"]), [1, 3]);
    // Odd argument count: Redis still reports the positions it can see.
    assert_eq!(keys("mset", &["mset", "a", "1", "b"]), [1, 3]);
    assert_eq!(keys("msetnx", &["msetnx", "a", "1"]), [1]);
    assert_eq!(keys("bitop", &["bitop", "AND", "d", "a", "b"]), [2, 3, 4]);
    assert_eq!(keys("bitop", &["bitop", "NOT", "d", "a"]), [2, 3]);
    assert_eq!(keys("del", &["del", "a", "b", "c"]), [1, 2, 3]);
    assert_eq!(keys("exists", &["exists", "a"]), [1]);
    assert_eq!(keys("object|encoding", &["object", "encoding", "k"]), [2]);
    assert_eq!(keys("lcs", &["lcs", "a", "b", "LEN"]), [1, 2]);
    assert_eq!(keys("copy", &["copy", "a", "b", "REPLACE"]), [1, 2]);
    assert_eq!(keys("rename", &["rename", "a", "b"]), [1, 2]);
    assert_eq!(keys("watch", &["watch", "a", "b"]), [1, 2]);
    assert_eq!(keys("bitfield", &["bitfield", "k", "GET", "u8", "0"]), [1]);
    assert_eq!(keys("expire", &["expire", "k", "10", "NX"]), [1]);
    assert!(keys("ping", &["ping"]).is_empty());
    assert!(keys("exec", &["exec"]).is_empty());
    assert!(keys("keys", &["keys", "*"]).is_empty());
    assert!(keys("client|list", &["client", "list"]).is_empty());
    // Too few arguments: out of bounds, nothing (no panic).
    assert!(keys("del", &["del"]).is_empty());
    assert!(keys("get", &["get"]).is_empty());
    assert!(keys("lcs", &["lcs", "a"]).is_empty());
    assert!(keys("bitop", &["bitop", "AND", "d"]).is_empty());
    assert!(keys("object|encoding", &["object"]).is_empty());
    let empty: [&[u8]; 0] = [];
    let mut out = Vec::new();
    key_indices(spec("get"), &empty, &mut out);
    assert!(out.is_empty());
    // Works with owned buffers too.
    let owned: Vec<Vec<u8>> = vec![b"del".to_vec(), b"x".to_vec()];
    key_indices(spec("del"), &owned, &mut out);
    assert_eq!(out, [1]);
}

const fn synthetic(key_specs: &'static [KeySpec]) -> CommandSpec {
    CommandSpec {
        name: "synthetic",
        full_name: "synthetic",
        arity: -1,
        flags: 0,
        flag_names: &[],
        acl_flags: 0,
        acl_categories: &[],
        first_key: 0,
        last_key: 0,
        step: 0,
        key_specs,
        tips: &[],
        group: "generic",
        since: "0.0.0",
        deprecated_since: None,
        doc_flags: &[],
        args: &[],
        subcommands: &[],
    }
}

fn skeys(spec: &CommandSpec, args: &[&str]) -> Vec<usize> {
    let mut out = Vec::new();
    key_indices(spec, args, &mut out);
    out
}

/// Like ZUNIONSTORE: destination, then numkeys and keys.
static KEYNUM: CommandSpec = synthetic(&[
    KeySpec {
        flags: &["OW", "update"],
        begin: BeginSearch::Index(1),
        find: FindKeys::Range {
            last_key: 0,
            step: 1,
            limit: 0,
        },
    },
    KeySpec {
        flags: &["RO", "access"],
        begin: BeginSearch::Index(2),
        find: FindKeys::Keynum {
            keynum_idx: 0,
            first_key: 1,
            step: 1,
        },
    },
]);

#[test]
fn key_indices_keynum() {
    let k = &KEYNUM;
    assert_eq!(
        skeys(k, &["z", "d", "2", "a", "b", "WEIGHTS", "1", "2"]),
        [1, 3, 4]
    );
    assert_eq!(skeys(k, &["z", "d", "1", "a"]), [1, 3]);
    // numkeys 0: last < first, an invalid spec in Redis.
    assert!(skeys(k, &["z", "d", "0", "a"]).is_empty());
    assert!(skeys(k, &["z", "d", "3", "a", "b"]).is_empty());
    assert!(skeys(k, &["z", "d", "-1", "a"]).is_empty());
    assert!(skeys(k, &["z", "d", "x", "a"]).is_empty());
    assert!(skeys(k, &["z", "d", "01", "a"]).is_empty());
    assert!(skeys(k, &["z", "d", "+1", "a"]).is_empty());
    assert!(skeys(k, &["z", "d", " 1", "a"]).is_empty());
    assert!(skeys(k, &["z", "d", "9223372036854775807", "a"]).is_empty());
    assert!(skeys(k, &["z", "d", "99999999999999999999", "a"]).is_empty());
    assert!(skeys(k, &["z", "d"]).is_empty());
    assert!(skeys(k, &["z"]).is_empty());
}

/// Like MIGRATE's second spec: KEYS searched backwards from the end.
static KEYWORD_BACK: CommandSpec = synthetic(&[KeySpec {
    flags: &["RW"],
    begin: BeginSearch::Keyword {
        keyword: "KEYS",
        start_from: -2,
    },
    find: FindKeys::Range {
        last_key: -1,
        step: 1,
        limit: 0,
    },
}]);

/// Like XREAD: STREAMS searched forwards, half of the rest are keys.
static KEYWORD_LIMIT: CommandSpec = synthetic(&[KeySpec {
    flags: &["RO", "access"],
    begin: BeginSearch::Keyword {
        keyword: "STREAMS",
        start_from: 1,
    },
    find: FindKeys::Range {
        last_key: -1,
        step: 1,
        limit: 2,
    },
}]);

#[test]
fn key_indices_keyword() {
    let m = &KEYWORD_BACK;
    assert_eq!(
        skeys(m, &["m", "h", "p", "", "0", "5", "keys", "a", "b"]),
        [7, 8]
    );
    assert_eq!(skeys(m, &["m", "x", "KEYS", "a"]), [3]);
    // Backwards search stops before index 1, as in Redis.
    assert!(skeys(m, &["m", "KEYS", "a"]).is_empty());
    // Keyword absent: the spec contributes nothing (not an error).
    assert!(skeys(m, &["m", "h", "p", "k", "0", "5"]).is_empty());
    // Keyword is the last argument: never examined.
    assert!(skeys(m, &["m", "h", "KEYS"]).is_empty());
    assert!(skeys(m, &["m"]).is_empty());

    let x = &KEYWORD_LIMIT;
    assert_eq!(
        skeys(x, &["xread", "COUNT", "2", "STREAMS", "s1", "s2", "0", "0"]),
        [4, 5]
    );
    assert_eq!(skeys(x, &["xread", "streams", "s1", "0"]), [2]);
    // Odd number of remaining arguments.
    assert_eq!(skeys(x, &["xread", "STREAMS", "s1", "s2", "0"]), [2]);
    assert!(skeys(x, &["xread", "STREAMS", "s1"]).is_empty());
    assert!(skeys(x, &["xread", "COUNT", "2"]).is_empty());
}

static INCOMPLETE: CommandSpec = synthetic(&[KeySpec {
    flags: &["RO", "incomplete"],
    begin: BeginSearch::Index(1),
    find: FindKeys::Range {
        last_key: 0,
        step: 1,
        limit: 0,
    },
}]);

static UNKNOWN: CommandSpec = synthetic(&[
    KeySpec {
        flags: &["RO"],
        begin: BeginSearch::Index(1),
        find: FindKeys::Range {
            last_key: 0,
            step: 1,
            limit: 0,
        },
    },
    KeySpec {
        flags: &["RO"],
        begin: BeginSearch::Unknown,
        find: FindKeys::Unknown,
    },
]);

static NOT_KEY: CommandSpec = synthetic(&[KeySpec {
    flags: &["not_key"],
    begin: BeginSearch::Index(1),
    find: FindKeys::Range {
        last_key: -1,
        step: 1,
        limit: 0,
    },
}]);

#[test]
fn key_indices_invalid_specs() {
    // Redis gives up on the spec path (and would use the command's own key
    // function): no keys from the specs.
    assert!(skeys(&INCOMPLETE, &["c", "k"]).is_empty());
    assert!(skeys(&UNKNOWN, &["c", "k", "BY", "x"]).is_empty());
    assert!(skeys(&NOT_KEY, &["c", "ch1", "ch2"]).is_empty());
    assert!(!NOT_KEY.may_have_keys());
}

#[test]
fn key_indices_reuses_buffer() {
    let mut out = Vec::with_capacity(8);
    let ptr = out.as_ptr();
    for _ in 0..3 {
        key_indices(
            spec("mset"),
            &["mset", "a", "1", "b", "2", "c", "3"],
            &mut out,
        );
        assert_eq!(out, [1, 3, 5]);
    }
    assert_eq!(out.as_ptr(), ptr);
}

#[test]
fn key_positions_are_key_indices_inline() {
    let cases: &[(&str, &[&str])] = &[
        ("get", &["get", "k"]),
        ("mset", &["mset", "a", "1", "b", "2"]),
        ("del", &["del"]),
        ("ping", &["ping"]),
        ("zunionstore", &["zunionstore", "d", "2", "a", "b"]),
        ("zunionstore", &["zunionstore", "d", "x", "a", "b"]),
    ];
    for (name, args) in cases {
        let at = key_positions(spec(name), args);
        assert_eq!(&at[..], &keys(name, args)[..], "{name} {args:?}");
        assert!(!at.spilled());
    }
    // Past 8 keys they move to the heap, still in spec order.
    let many: Vec<String> = std::iter::once("del".to_string())
        .chain((0..20).map(|i| format!("k{i}")))
        .collect();
    let at = key_positions(spec("del"), &many);
    assert_eq!(&at[..], &(1..=20).collect::<Vec<usize>>()[..]);
}

#[test]
fn strict_integer_parsing() {
    assert_eq!(parse_i64_strict(b"0"), Some(0));
    assert_eq!(parse_i64_strict(b"7"), Some(7));
    assert_eq!(parse_i64_strict(b"-7"), Some(-7));
    assert_eq!(parse_i64_strict(b"9223372036854775807"), Some(i64::MAX));
    assert_eq!(parse_i64_strict(b"-9223372036854775808"), Some(i64::MIN));
    for bad in [
        &b""[..],
        b"-",
        b"-0",
        b"00",
        b"+1",
        b" 1",
        b"1 ",
        b"1a",
        b"9223372036854775808",
        b"-9223372036854775809",
        b"123456789012345678901",
    ] {
        assert_eq!(
            parse_i64_strict(bad),
            None,
            "{:?}",
            String::from_utf8_lossy(bad)
        );
    }
}

#[test]
fn crc16_vectors() {
    assert_eq!(crc16(b""), 0);
    assert_eq!(crc16(b"123456789"), 0x31C3);
    // Bit-by-bit reference implementation.
    fn slow(data: &[u8]) -> u16 {
        let mut crc: u16 = 0;
        for &b in data {
            crc ^= u16::from(b) << 8;
            for _ in 0..8 {
                crc = if crc & 0x8000 != 0 {
                    (crc << 1) ^ 0x1021
                } else {
                    crc << 1
                };
            }
        }
        crc
    }
    let data: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
    for n in 0..data.len() {
        assert_eq!(crc16(&data[..n]), slow(&data[..n]));
    }
}

#[test]
fn key_slots() {
    assert_eq!(key_slot(b"123456789"), 12739);
    assert_eq!(key_slot(b""), 0);
    // Values from Redis CLUSTER KEYSLOT.
    assert_eq!(key_slot(b"foo"), 12182);
    assert_eq!(key_slot(b"bar"), 5061);
    assert_eq!(
        key_slot(b"{user1000}.following"),
        key_slot(b"{user1000}.followers")
    );
    assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
    assert_eq!(hashtag(b"foo{}{bar}"), b"foo{}{bar}");
    assert_eq!(key_slot(b"foo{}{bar}"), crc16(b"foo{}{bar}") % 16384);
    assert_eq!(hashtag(b"foo{{bar}}zap"), b"{bar");
    assert_eq!(key_slot(b"foo{{bar}}zap"), key_slot(b"{bar"));
    assert_eq!(hashtag(b"foo{bar}{zap}"), b"bar");
    assert_eq!(key_slot(b"foo{bar}{zap}"), key_slot(b"bar"));
    assert_eq!(hashtag(b"{}"), b"{}");
    assert_eq!(hashtag(b"{a"), b"{a");
    assert_eq!(hashtag(b"a}b{c}"), b"c");
    assert_eq!(hashtag(b"}{"), b"}{");
    for k in [&b"a"[..], b"abc", b"{x}y", b"\xff\x00"] {
        assert!(key_slot(k) < SLOTS);
        assert_eq!(key_slot(k), crc16(hashtag(k)) % 16384);
    }
}
