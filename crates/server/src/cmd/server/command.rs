//! COMMAND, COMMAND COUNT / INFO / DOCS / LIST / GETKEYS / GETKEYSANDFLAGS / HELP: the command
//! table (`darner-commands`) in Redis 7.2's reply shapes.
//!
//! The table holds facts only; the one-line summaries COMMAND DOCS shows are written here.
//! Fields whose Redis text is prose (complexity, history, replaced_by, key spec notes) are
//! left out.

use crate::cmd::{ConnCtx, Reg};
use darner_commands::{acl, flags, Arg, BeginSearch, CommandSpec, FindKeys, KeySpec};
use darner_resp::ReplyWriter;

pub fn register(r: &mut Reg) {
    // The container itself answers the bare `COMMAND` (Redis's commandCommand).
    r.conn("command", command_all);
    r.conn("command|count", count);
    r.conn("command|info", info);
    r.conn("command|docs", docs);
    r.conn("command|list", list);
    r.conn("command|getkeys", getkeys);
    r.conn("command|getkeysandflags", getkeysandflags);
    r.conn("command|help", help);
}

fn command_all(_: &mut ConnCtx, _: &[&[u8]], w: &mut ReplyWriter) {
    let all = darner_commands::all();
    w.array(all.len());
    for spec in all {
        write_info(w, spec);
    }
}

fn count(_: &mut ConnCtx, _: &[&[u8]], w: &mut ReplyWriter) {
    w.int(darner_commands::all().len() as i64);
}

fn info(ctx: &mut ConnCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    if args.len() == 2 {
        return command_all(ctx, args, w);
    }
    w.array(args.len() - 2);
    for name in &args[2..] {
        match darner_commands::lookup_full_name(name) {
            Some(spec) => write_info(w, spec),
            None => w.null(),
        }
    }
}

fn docs(_: &mut ConnCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let specs: Vec<&'static CommandSpec> = if args.len() == 2 {
        darner_commands::all().iter().collect()
    } else {
        args[2..]
            .iter()
            .filter_map(|n| darner_commands::lookup_full_name(n))
            .collect()
    };
    w.map(specs.len());
    for spec in specs {
        w.bulk(spec.full_name.as_bytes());
        write_docs(w, spec);
    }
}

fn list(_: &mut ConnCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    enum Filter<'a> {
        All,
        Module,
        Category(Option<u64>),
        Pattern(&'a [u8]),
    }
    let mut filter = Filter::All;
    let mut i = 2;
    while i < args.len() {
        // FILTERBY <type> <arg> must be the last three arguments, as in Redis.
        if crate::cmd::eq(args[i], "filterby") && args.len() - 1 - i == 2 {
            let (kind, arg) = (&args[i + 1], &args[i + 2]);
            filter = if crate::cmd::eq(kind, "module") {
                Filter::Module
            } else if crate::cmd::eq(kind, "aclcat") {
                Filter::Category(acl::by_name(arg))
            } else if crate::cmd::eq(kind, "pattern") {
                Filter::Pattern(arg)
            } else {
                return w.error(crate::cmd::ERR_SYNTAX);
            };
            i += 3;
        } else {
            return w.error(crate::cmd::ERR_SYNTAX);
        }
    }
    let keep = |s: &CommandSpec| match filter {
        Filter::All => true,
        // No modules exist, so no command belongs to one.
        Filter::Module => false,
        Filter::Category(None) => false,
        Filter::Category(Some(bit)) => s.acl_flags & bit != 0,
        Filter::Pattern(p) => darner_engine::glob_match(p, s.full_name.as_bytes(), true),
    };
    let names: Vec<&str> = darner_commands::all()
        .iter()
        .flat_map(|c| std::iter::once(c).chain(c.subcommands.iter()))
        .filter(|s| keep(s))
        .map(|s| s.full_name)
        .collect();
    w.array(names.len());
    for n in names {
        w.bulk(n.as_bytes());
    }
}

fn getkeys(_: &mut ConnCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    getkeys_impl(args, w, false);
}

fn getkeysandflags(_: &mut ConnCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    getkeys_impl(args, w, true);
}

/// Redis's lookupCommand: a container with a subcommand argument resolves to the subcommand.
fn lookup_command(argv: &[&[u8]]) -> Option<&'static CommandSpec> {
    let base = darner_commands::lookup(argv[0])?;
    if argv.len() == 1 || !base.is_container() {
        Some(base)
    } else {
        darner_commands::lookup_subcommand(base, argv[1])
    }
}

fn getkeys_impl(args: &[&[u8]], w: &mut ReplyWriter, with_flags: bool) {
    let argv = &args[2..];
    let Some(spec) = lookup_command(argv) else {
        return w.error(b"ERR Invalid command specified");
    };
    if !spec.may_have_keys() {
        return w.error(b"ERR The command has no key arguments");
    }
    if !spec.arity_ok(argv.len()) {
        return w.error(b"ERR Invalid number of arguments specified for command");
    }
    let keys = keys_and_flags(spec, argv);
    if keys.is_empty() {
        if spec.has(flags::NO_MANDATORY_KEYS) {
            return w.array(0);
        }
        return w.error(b"ERR Invalid arguments specified for command");
    }
    w.array(keys.len());
    for (i, fl) in keys {
        if with_flags {
            w.array(2);
            w.bulk(argv[i]);
            w.set(fl.len());
            for f in fl {
                w.simple(f.as_bytes());
            }
        } else {
            w.bulk(argv[i]);
        }
    }
}

/// The key positions of `argv` with their access flags. The specs give both, except for the
/// commands whose flags depend on the arguments (`variable_flags`): those decide like Redis's
/// own key functions for them.
fn keys_and_flags(
    spec: &'static CommandSpec,
    argv: &[&[u8]],
) -> Vec<(usize, &'static [&'static str])> {
    // sortGetKeys / sortROGetKeys: the source, and for SORT the last STORE's destination
    // (options are skipped by their argument counts: LIMIT 2, GET 1, BY 1).
    if matches!(spec.full_name, "sort" | "sort_ro") {
        let mut keys: Vec<(usize, &'static [&'static str])> = vec![(1, &["RO", "access"])];
        if spec.full_name == "sort" {
            let mut store = None;
            let mut i = 2;
            while i < argv.len() {
                let a = argv[i];
                if crate::cmd::eq(a, "limit") {
                    i += 2;
                } else if crate::cmd::eq(a, "get") || crate::cmd::eq(a, "by") {
                    i += 1;
                } else if crate::cmd::eq(a, "store") && i + 1 < argv.len() {
                    store = Some(i + 1);
                }
                i += 1;
            }
            if let Some(d) = store {
                keys.push((d, &["OW", "update"]));
            }
        }
        return keys;
    }
    let mut all = Vec::new();
    darner_commands::key_indices(spec, argv, &mut all);
    if all.is_empty() {
        return Vec::new();
    }
    match spec.full_name {
        // setGetKeys: GET anywhere after the value reads the old value.
        "set" => {
            let get = argv.iter().skip(3).any(|a| crate::cmd::eq(a, "get"));
            let fl: &'static [&'static str] = if get {
                &["RW", "access", "update"]
            } else {
                &["OW", "update"]
            };
            return vec![(1, fl)];
        }
        // bitfieldGetKeys: read-only unless a SET / INCRBY (or anything unparsable) follows.
        "bitfield" => {
            let mut readonly = true;
            let mut i = 2;
            while i < argv.len() {
                let rem = argv.len() - i - 1;
                let a = &argv[i];
                if crate::cmd::eq(a, "get") && rem >= 2 {
                    i += 3;
                } else if crate::cmd::eq(a, "overflow") && rem >= 1 {
                    i += 2;
                } else {
                    // SET / INCRBY, or a syntax error: assume a write, like Redis.
                    readonly = false;
                    break;
                }
            }
            let fl: &'static [&'static str] = if readonly {
                &["RO", "access"]
            } else {
                &["RW", "access", "update"]
            };
            return vec![(1, fl)];
        }
        _ => {}
    }
    // Attribute each key to its spec by walking the specs one at a time (same order as the
    // whole walk above, which already validated them).
    let mut out = Vec::with_capacity(all.len());
    let mut one = Vec::new();
    for ks in spec.key_specs.iter().filter(|ks| !ks.has_flag("not_key")) {
        let single = CommandSpec {
            key_specs: std::slice::from_ref(ks),
            ..*spec
        };
        darner_commands::key_indices(&single, argv, &mut one);
        out.extend(one.iter().map(|&i| (i, ks.flags)));
    }
    out
}

fn help(_: &mut ConnCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    super::help_reply(
        w,
        args[0],
        &[
            "(no subcommand)",
            "    Describe every command (see INFO for the format).",
            "COUNT",
            "    Return how many commands the server has.",
            "LIST [FILTERBY (MODULE <name>|ACLCAT <category>|PATTERN <pattern>)]",
            "    Return the names of the commands and subcommands, optionally filtered.",
            "INFO [<command-name> ...]",
            "    Describe the named commands (all when none are named): name, arity, flags,",
            "    legacy key positions, ACL categories, tips, key specs and subcommands.",
            "DOCS [<command-name> ...]",
            "    Return the documentation of the named commands (all when none are named).",
            "GETKEYS <full-command>",
            "    Return the key arguments of a complete command.",
            "GETKEYSANDFLAGS <full-command>",
            "    Return the key arguments of a complete command and how each is accessed.",
        ],
    );
}

// ---- reply builders ----

fn status_set(w: &mut ReplyWriter, items: &[&str]) {
    w.set(items.len());
    for s in items {
        w.simple(s.as_bytes());
    }
}

/// One command as COMMAND / COMMAND INFO print it: a 10-element array.
pub fn write_info(w: &mut ReplyWriter, spec: &CommandSpec) {
    w.array(10);
    w.bulk(spec.full_name.as_bytes());
    w.int(spec.arity as i64);
    status_set(w, spec.flag_names);
    w.int(spec.first_key as i64);
    w.int(spec.last_key as i64);
    w.int(spec.step as i64);
    status_set(w, spec.acl_categories);
    w.set(spec.tips.len());
    for t in spec.tips {
        w.bulk(t.as_bytes());
    }
    w.set(spec.key_specs.len());
    for ks in spec.key_specs {
        write_key_spec(w, ks);
    }
    if spec.is_container() {
        w.array(spec.subcommands.len());
        for sub in spec.subcommands {
            write_info(w, sub);
        }
    } else {
        w.set(0);
    }
}

fn kv_int(w: &mut ReplyWriter, k: &str, v: i32) {
    w.bulk(k.as_bytes());
    w.int(v as i64);
}

fn write_key_spec(w: &mut ReplyWriter, ks: &KeySpec) {
    w.map(3);
    w.bulk(b"flags");
    status_set(w, ks.flags);
    w.bulk(b"begin_search");
    w.map(2);
    w.bulk(b"type");
    match ks.begin {
        BeginSearch::Index(i) => {
            w.bulk(b"index");
            w.bulk(b"spec");
            w.map(1);
            kv_int(w, "index", i);
        }
        BeginSearch::Keyword {
            keyword,
            start_from,
        } => {
            w.bulk(b"keyword");
            w.bulk(b"spec");
            w.map(2);
            w.bulk(b"keyword");
            w.bulk(keyword.as_bytes());
            kv_int(w, "startfrom", start_from);
        }
        BeginSearch::Unknown => {
            w.bulk(b"unknown");
            w.bulk(b"spec");
            w.map(0);
        }
    }
    w.bulk(b"find_keys");
    w.map(2);
    w.bulk(b"type");
    match ks.find {
        FindKeys::Range {
            last_key,
            step,
            limit,
        } => {
            w.bulk(b"range");
            w.bulk(b"spec");
            w.map(3);
            kv_int(w, "lastkey", last_key);
            kv_int(w, "keystep", step);
            kv_int(w, "limit", limit);
        }
        FindKeys::Keynum {
            keynum_idx,
            first_key,
            step,
        } => {
            w.bulk(b"keynum");
            w.bulk(b"spec");
            w.map(3);
            kv_int(w, "keynumidx", keynum_idx);
            kv_int(w, "firstkey", first_key);
            kv_int(w, "keystep", step);
        }
        FindKeys::Unknown => {
            w.bulk(b"unknown");
            w.bulk(b"spec");
            w.map(0);
        }
    }
}

fn kv_str(w: &mut ReplyWriter, k: &str, v: &str) {
    w.bulk(k.as_bytes());
    w.bulk(v.as_bytes());
}

/// One command's documentation map, as COMMAND DOCS prints it.
pub fn write_docs(w: &mut ReplyWriter, spec: &CommandSpec) {
    let summary = summary(spec.full_name);
    let fields = 2 // since, group
        + summary.is_some() as usize
        + !spec.doc_flags.is_empty() as usize
        + spec.deprecated_since.is_some() as usize
        + !spec.args.is_empty() as usize
        + spec.is_container() as usize;
    w.map(fields);
    if let Some(s) = summary {
        kv_str(w, "summary", s);
    }
    kv_str(w, "since", spec.since);
    kv_str(w, "group", spec.group);
    if !spec.doc_flags.is_empty() {
        w.bulk(b"doc_flags");
        status_set(w, spec.doc_flags);
    }
    if let Some(d) = spec.deprecated_since {
        kv_str(w, "deprecated_since", d);
    }
    if !spec.args.is_empty() {
        w.bulk(b"arguments");
        write_args(w, spec.args);
    }
    if spec.is_container() {
        w.bulk(b"subcommands");
        w.map(spec.subcommands.len());
        for sub in spec.subcommands {
            w.bulk(sub.full_name.as_bytes());
            write_docs(w, sub);
        }
    }
}

fn write_args(w: &mut ReplyWriter, args: &[Arg]) {
    w.array(args.len());
    for a in args {
        let nested = a.kind == "oneof" || a.kind == "block";
        let fields = 2
            + 1 // display_text, or arguments for a oneof / block
            + (a.key_spec_index != -1) as usize
            + a.token.is_some() as usize
            + a.since.is_some() as usize
            + a.deprecated_since.is_some() as usize
            + !a.flags.is_empty() as usize;
        w.map(fields);
        kv_str(w, "name", a.name);
        kv_str(w, "type", a.kind);
        if !nested {
            kv_str(w, "display_text", a.display.unwrap_or(a.name));
        }
        if a.key_spec_index != -1 {
            kv_int(w, "key_spec_index", a.key_spec_index);
        }
        if let Some(t) = a.token {
            kv_str(w, "token", t);
        }
        if let Some(s) = a.since {
            kv_str(w, "since", s);
        }
        if let Some(d) = a.deprecated_since {
            kv_str(w, "deprecated_since", d);
        }
        if !a.flags.is_empty() {
            w.bulk(b"flags");
            status_set(w, a.flags);
        }
        if nested {
            w.bulk(b"arguments");
            write_args(w, a.children);
        }
    }
}

/// COMMAND DOCS summaries: Darner's own one-line descriptions.
pub fn summary(full_name: &str) -> Option<&'static str> {
    Some(match full_name {
        "append" => "Appends a string to the value of a key, creating the key if needed.",
        "auth" => "Authenticates the connection.",
        "bitcount" => "Counts the bits set to 1 in a string, optionally within a range.",
        "bitfield" => "Reads, writes and increments integer fields of any width in a string.",
        "bitfield_ro" => "Reads integer fields of any width from a string.",
        "bitop" => "Combines strings bit by bit (AND, OR, XOR, NOT) into a destination key.",
        "bitpos" => "Finds the first bit set to 0 or 1 in a string, optionally within a range.",
        "client" => "Container for the commands that inspect and manage connections.",
        "client|getname" => "Returns the name given to this connection.",
        "client|help" => "Lists the CLIENT subcommands.",
        "client|id" => "Returns this connection's unique id.",
        "client|info" => "Describes this connection.",
        "client|kill" => "Closes the connections that match the given filters.",
        "client|unblock" => "Ends the wait of a client blocked on keys.",
        "client|tracking" => "Turns server-assisted client-side caching on or off for the connection.",
        "client|caching" => "Says whether the next command's reads are tracked (OPTIN/OPTOUT modes).",
        "client|getredir" => "Returns the id of the client invalidations are redirected to.",
        "client|trackinginfo" => "Describes the connection's client-side caching settings.",
        "client|list" => "Describes every connection, one per line.",
        "client|no-evict" => "Sets whether this connection may be evicted.",
        "client|no-touch" => "Sets whether this connection's reads update keys' access times.",
        "client|pause" => "Holds back commands of all clients (or only writes) for a while.",
        "client|reply" => "Turns this connection's replies on, off, or off for one command.",
        "client|setinfo" => "Records the client library's name or version for this connection.",
        "client|setname" => "Gives this connection a name.",
        "client|unpause" => "Ends a CLIENT PAUSE.",
        "command" => "Describes every command of the server.",
        "command|count" => "Returns how many commands the server has.",
        "command|docs" => "Returns the documentation of commands.",
        "command|getkeys" => "Returns the key arguments of a complete command.",
        "command|getkeysandflags" => {
            "Returns the key arguments of a command and their access flags."
        }
        "command|help" => "Lists the COMMAND subcommands.",
        "command|info" => "Describes the named commands.",
        "command|list" => "Lists command names, optionally filtered.",
        "config" => "Container for the commands that read and change the configuration.",
        "config|get" => "Returns the configuration directives matching glob patterns.",
        "config|help" => "Lists the CONFIG subcommands.",
        "config|resetstat" => "Zeroes the statistics INFO reports.",
        "config|rewrite" => "Writes the running configuration back to the config file.",
        "config|set" => "Changes configuration directives, all or none.",
        "copy" => "Copies a key's value to another key.",
        "bgsave" => "Writes the dataset to the RDB file while the server goes on serving.",
        "bgrewriteaof" => "Rewrites the append-only file from the dataset while the server goes on serving.",
        "dump" => "Serializes a key's value as a DUMP payload.",
        "restore" => "Creates a key from a DUMP payload.",
        "dbsize" => "Returns the number of keys in the selected database.",
        "debug" => "Debugging and introspection helpers.",
        "decr" => "Subtracts one from the integer value of a key.",
        "decrby" => "Subtracts a number from the integer value of a key.",
        "del" => "Deletes keys.",
        "discard" => "Drops the commands queued since MULTI.",
        "echo" => "Returns its argument.",
        "exec" => "Runs the commands queued since MULTI as one atomic transaction.",
        "exists" => "Counts how many of the given keys exist.",
        "expire" => "Sets a key's time to live in seconds.",
        "expireat" => "Sets a key's expiry as a unix time in seconds.",
        "expiretime" => "Returns a key's expiry as a unix time in seconds.",
        "fieldexpire" => "Gives hash fields or set members a TTL in seconds (Dragonfly).",
        "fieldttl" => "Returns the remaining TTL of a hash field or set member (Dragonfly).",
        "flushall" => "Deletes every key of every database.",
        "flushdb" => "Deletes every key of the selected database.",
        "swapdb" => "Swaps the keys of two databases.",
        "geoadd" => "Adds points (longitude, latitude, member) to a geospatial index.",
        "geodist" => "Returns the distance between two points of a geospatial index.",
        "geohash" => "Returns the standard geohash strings of points.",
        "geopos" => "Returns the longitude and latitude of points.",
        "georadius" => "Finds points within a radius of coordinates, optionally storing them.",
        "georadius_ro" => "Finds points within a radius of coordinates (read-only form).",
        "georadiusbymember" => "Finds points within a radius of a member, optionally storing them.",
        "georadiusbymember_ro" => "Finds points within a radius of a member (read-only form).",
        "geosearch" => "Finds points within a circle or a box around a member or coordinates.",
        "geosearchstore" => "Stores the points within a circle or a box in a key.",
        "get" => "Returns the string value of a key.",
        "getbit" => "Returns the bit at an offset of a string.",
        "getdel" => "Returns the string value of a key and deletes the key.",
        "getex" => "Returns the string value of a key and changes its expiry.",
        "getrange" => "Returns part of a string.",
        "getset" => "Sets a key's string value and returns the previous one.",
        "hdel" => "Removes fields from a hash; an emptied hash is deleted.",
        "hexists" => "Tells whether a field is present in a hash.",
        "hget" => "Returns the value of one field of a hash.",
        "hgetall" => "Returns every field and value of a hash.",
        "hincrby" => "Adds an integer to the integer value of a hash field.",
        "hincrbyfloat" => "Adds a floating-point number to the value of a hash field.",
        "hkeys" => "Returns every field name of a hash.",
        "hlen" => "Returns how many fields a hash has.",
        "hmget" => "Returns the values of several fields of a hash.",
        "hmset" => "Sets several fields of a hash (older form of HSET).",
        "hrandfield" => "Returns one or more random fields of a hash, optionally with values.",
        "hscan" => "Iterates over the fields and values of a hash with a cursor.",
        "hexpire" => "Sets a TTL in seconds on hash fields, optionally only under a condition.",
        "hpexpire" => "Sets a TTL in milliseconds on hash fields, optionally only under a condition.",
        "hexpireat" => "Sets hash fields to expire at a unix time in seconds.",
        "hpexpireat" => "Sets hash fields to expire at a unix time in milliseconds.",
        "httl" => "Returns the remaining TTL of hash fields in seconds.",
        "hpttl" => "Returns the remaining TTL of hash fields in milliseconds.",
        "hexpiretime" => "Returns the unix time in seconds at which hash fields expire.",
        "hpexpiretime" => "Returns the unix time in milliseconds at which hash fields expire.",
        "hpersist" => "Removes the TTL of hash fields.",
        "hgetdel" => "Returns the values of hash fields and deletes the fields.",
        "hgetex" => "Returns the values of hash fields and optionally sets or removes their TTL.",
        "hsetex" => "Sets hash fields with an optional TTL (Redis 8 or Dragonfly form).",
        "hset" => "Sets fields of a hash, creating it if needed; returns how many were new.",
        "hsetnx" => "Sets a hash field only if it does not exist yet.",
        "hstrlen" => "Returns the length of the value of a hash field.",
        "hvals" => "Returns every value of a hash.",
        "hello" => {
            "Chooses the protocol version, optionally authenticates, and describes the server."
        }
        "incr" => "Adds one to the integer value of a key.",
        "incrby" => "Adds a number to the integer value of a key.",
        "incrbyfloat" => "Adds a decimal number to the numeric value of a key.",
        "info" => "Returns server information and statistics, by section.",
        "keys" => "Returns the keys matching a glob pattern.",
        "lastsave" => "Returns the unix time of the last successful save.",
        "replicaof" => "Follows another server as its replica, or with NO ONE stops following.",
        "slaveof" => "Follows another server as its replica (the old name of REPLICAOF).",
        "role" => "Tells whether this server is a primary or a replica, with its offset.",
        "psync" => "An internal command used in replication: a replica asks for the stream from an offset, or for a full sync.",
        "sync" => "An internal command used in replication: a replica asks for a full sync (the old protocol).",
        "replconf" => "An internal command for configuring the replication stream.",
        "failover" => "Hands this primary's role over to one of its replicas, in step with it.",
        "wait" => "Waits for replicas to acknowledge the writes this connection made before it.",
        "save" => "Synchronously saves the database(s) to disk.",
        "lcs" => "Finds the longest common subsequence of two strings.",
        "mget" => "Returns the string values of several keys.",
        "monitor" => "Streams every command the server processes to this connection.",
        "move" => "Moves a key to another database.",
        "mset" => "Sets several keys to string values at once.",
        "msetnx" => "Sets several keys at once, only if none of them exists.",
        "multi" => "Starts queueing commands for a transaction.",
        "object" => "Container for the commands that inspect stored values.",
        "object|encoding" => "Returns how a key's value is stored internally.",
        "object|freq" => "Returns a key's access frequency counter.",
        "object|help" => "Lists the OBJECT subcommands.",
        "object|idletime" => "Returns how long ago a key was last accessed, in seconds.",
        "object|refcount" => "Returns the reference count of a key's value.",
        "persist" => "Removes a key's expiry.",
        "pexpire" => "Sets a key's time to live in milliseconds.",
        "pexpireat" => "Sets a key's expiry as a unix time in milliseconds.",
        "pexpiretime" => "Returns a key's expiry as a unix time in milliseconds.",
        "subscribe" => "Listens for messages published to channels.",
        "unsubscribe" => "Stops listening to channels (all of them when none is named).",
        "psubscribe" => "Listens for messages published to channels matching glob patterns.",
        "punsubscribe" => "Stops listening to patterns (all of them when none is named).",
        "ssubscribe" => "Listens for messages published to shard channels.",
        "sunsubscribe" => "Stops listening to shard channels (all of them when none is named).",
        "publish" => "Sends a message to a channel; returns how many clients received it.",
        "spublish" => "Sends a message to a shard channel; returns how many clients received it.",
        "pubsub" => "Introspects the Pub/Sub subsystem.",
        "pubsub|channels" => "Lists the channels that have subscribers.",
        "pubsub|numsub" => "Counts the subscribers of channels.",
        "pubsub|numpat" => "Counts the distinct patterns subscribed to.",
        "pubsub|shardchannels" => "Lists the shard channels that have subscribers.",
        "pubsub|shardnumsub" => "Counts the subscribers of shard channels.",
        "pubsub|help" => "Shows what PUBSUB's subcommands do.",
        "pfadd" => "Adds elements to a HyperLogLog, creating it if needed.",
        "pfcount" => "Estimates the number of distinct elements added to HyperLogLogs.",
        "pfmerge" => "Merges HyperLogLogs into a destination key.",
        "pfdebug" => "Inspects or converts the internal encoding of a HyperLogLog.",
        "pfselftest" => "Runs the HyperLogLog implementation's self-test.",
        "lolwut" => "Draws a piece of computer art and the server's version.",
        "memory" => "Commands about the server's memory use.",
        "memory|usage" => "Estimates the bytes a key and its value take.",
        "memory|stats" => "Figures about the server's memory use.",
        "memory|doctor" => "Reports memory problems, if any.",
        "memory|malloc-stats" => "The memory allocator's statistics.",
        "memory|purge" => "Makes the allocator give unused memory back to the system.",
        "memory|help" => "Lists the MEMORY subcommands.",
        "module" => "Commands about modules (none can be loaded).",
        "module|list" => "Lists the loaded modules.",
        "module|help" => "Lists the MODULE subcommands.",
        "module|load" => "Loads a module (not supported: always fails).",
        "module|loadex" => "Loads a module with configurations (not supported: always fails).",
        "module|unload" => "Unloads a module.",
        "ping" => "Checks that the server answers.",
        "psetex" => "Sets a key's string value with a time to live in milliseconds.",
        "pttl" => "Returns a key's remaining time to live in milliseconds.",
        "quit" => "Closes the connection.",
        "randomkey" => "Returns a random key of the selected database.",
        "rename" => "Gives a key a new name, replacing any key of that name.",
        "renamenx" => "Gives a key a new name, only if that name is free.",
        "reset" => "Returns the connection to its initial state.",
        "sadd" => "Adds members to a set, creating it if needed.",
        "saddex" => "Adds members to a set that expire after a number of seconds (Dragonfly).",
        "scan" => "Iterates over the keys of the selected database with a cursor.",
        "scard" => "Returns the number of members of a set.",
        "sdiff" => "Returns the members of the first set that are in none of the others.",
        "sdiffstore" => "Stores the difference of sets in a destination key.",
        "select" => "Changes the database this connection uses.",
        "set" => "Sets a key's string value, with optional expiry and conditions.",
        "setbit" => "Sets or clears the bit at an offset of a string.",
        "setex" => "Sets a key's string value with a time to live in seconds.",
        "setnx" => "Sets a key's string value only if the key does not exist.",
        "setrange" => "Overwrites part of a string from an offset.",
        "shutdown" => "Stops the server.",
        "sinter" => "Returns the members common to all the given sets.",
        "sintercard" => {
            "Counts the members common to all the given sets, optionally up to a limit."
        }
        "sinterstore" => "Stores the intersection of sets in a destination key.",
        "sismember" => "Tells whether a value is a member of a set.",
        "slowlog" => "Container for the commands that read and manage the slow log.",
        "slowlog|get" => "Returns the most recent slow log entries.",
        "slowlog|help" => "Lists the SLOWLOG subcommands.",
        "latency" => "Container for the latency monitor and latency histogram commands.",
        "latency|latest" => "Returns each event's latest latency sample and its highest.",
        "latency|history" => "Returns an event's latency samples, oldest first.",
        "latency|reset" => "Forgets the latency samples of some or all events.",
        "latency|graph" => "Draws an event's latency samples as an ASCII graph.",
        "latency|doctor" => "Summarizes the recorded latency spikes in words.",
        "latency|histogram" => "Returns the cumulative latency distribution of commands.",
        "latency|help" => "Lists the LATENCY subcommands.",
        "slowlog|len" => "Returns the number of slow log entries.",
        "slowlog|reset" => "Empties the slow log.",
        "smembers" => "Returns every member of a set.",
        "smismember" => "Tells, for each value, whether it is a member of a set.",
        "smove" => "Moves a member from one set to another.",
        "spop" => "Removes and returns one or more random members of a set.",
        "sort" => "Sorts a list, set or sorted set, optionally by other keys, optionally storing it.",
        "sort_ro" => "Sorts a list, set or sorted set, optionally by other keys (read-only).",
        "srandmember" => "Returns one or more random members of a set, distinct or with repeats.",
        "srem" => "Removes members from a set, deleting it when it becomes empty.",
        "sscan" => "Iterates over the members of a set.",
        "strlen" => "Returns the length of a string value.",
        "substr" => "Returns part of a string.",
        "sunion" => "Returns the members of all the given sets.",
        "sunionstore" => "Stores the union of sets in a destination key.",
        "time" => "Returns the server's clock.",
        "touch" => "Updates the access time of keys and counts those that exist.",
        "ttl" => "Returns a key's remaining time to live in seconds.",
        "type" => "Returns the type of a key's value.",
        "unlink" => "Deletes keys, freeing big values in the background.",
        "unwatch" => "Forgets the keys watched by WATCH.",
        "watch" => "Makes the next EXEC fail if any of these keys changes meanwhile.",
        "blmove" => "Pops an element from one list and pushes it onto another, waiting for one if needed.",
        "blmpop" => "Pops elements from the first non-empty list of several, waiting for one if needed.",
        "blpop" => "Pops the first element of the first non-empty list of several, waiting for one if needed.",
        "brpop" => "Pops the last element of the first non-empty list of several, waiting for one if needed.",
        "brpoplpush" => "Pops the last element of a list and pushes it onto another, waiting for one if needed.",
        "lindex" => "Returns the element at an index of a list.",
        "linsert" => "Inserts an element before or after another element of a list.",
        "llen" => "Returns the length of a list.",
        "lmove" => "Pops an element from one end of a list and pushes it onto an end of another.",
        "lmpop" => "Pops elements from the first non-empty list of several.",
        "lpop" => "Removes and returns elements from the head of a list.",
        "lpos" => "Returns the positions of elements equal to a value in a list.",
        "lpush" => "Prepends elements to a list, creating it if needed.",
        "lpushx" => "Prepends elements to a list only if it exists.",
        "lrange" => "Returns a range of elements of a list.",
        "lrem" => "Removes elements equal to a value from a list.",
        "lset" => "Sets the element at an index of a list.",
        "ltrim" => "Trims a list to a range of indexes.",
        "rpop" => "Removes and returns elements from the tail of a list.",
        "rpoplpush" => "Pops the last element of a list and pushes it onto the head of another.",
        "rpush" => "Appends elements to a list, creating it if needed.",
        "rpushx" => "Appends elements to a list only if it exists.",
        "zadd" => "Adds members to a sorted set or updates their scores.",
        "zcard" => "Returns the number of members of a sorted set.",
        "zcount" => "Counts the members whose scores fall in a range.",
        "zdiff" => "Returns the members of the first sorted set missing from the others.",
        "zdiffstore" => "Stores the difference of sorted sets in a key.",
        "zincrby" => "Adds to the score of a sorted set member.",
        "zinter" => "Returns the intersection of sorted sets.",
        "zintercard" => "Counts the members of the intersection of sorted sets.",
        "zinterstore" => "Stores the intersection of sorted sets in a key.",
        "zlexcount" => "Counts the members in a lexicographical range.",
        "zmpop" => "Removes and returns members of the first non-empty sorted set.",
        "zmscore" => "Returns the scores of several sorted set members.",
        "zpopmax" => "Removes and returns the members with the highest scores.",
        "zpopmin" => "Removes and returns the members with the lowest scores.",
        "zrandmember" => "Returns random members of a sorted set.",
        "zrange" => "Returns sorted set members by rank, score or lexicographical range.",
        "zrangebylex" => "Returns sorted set members in a lexicographical range.",
        "zrangebyscore" => "Returns sorted set members in a score range.",
        "zrangestore" => "Stores a range of a sorted set in a key.",
        "zrank" => "Returns the rank of a sorted set member, lowest score first.",
        "zrem" => "Removes members from a sorted set.",
        "zremrangebylex" => "Removes sorted set members in a lexicographical range.",
        "zremrangebyrank" => "Removes sorted set members in a rank range.",
        "zremrangebyscore" => "Removes sorted set members in a score range.",
        "zrevrange" => "Returns sorted set members by rank, highest score first.",
        "zrevrangebylex" => "Returns sorted set members in a lexicographical range, reversed.",
        "zrevrangebyscore" => "Returns sorted set members in a score range, highest first.",
        "zrevrank" => "Returns the rank of a sorted set member, highest score first.",
        "zscan" => "Iterates over the members and scores of a sorted set.",
        "zscore" => "Returns the score of a sorted set member.",
        "zunion" => "Returns the union of sorted sets.",
        "zunionstore" => "Stores the union of sorted sets in a key.",
        "bzpopmin" => "Removes and returns the member with the lowest score of the first non-empty sorted set of several, waiting for one if needed.",
        "bzpopmax" => "Removes and returns the member with the highest score of the first non-empty sorted set of several, waiting for one if needed.",
        "bzmpop" => "Removes and returns members by score from the first non-empty sorted set of several, waiting for one if needed.",
        "eval" => "Runs a Lua script with the given keys and arguments.",
        "evalsha" => "Runs a cached Lua script, named by its SHA-1, with the given keys and arguments.",
        "eval_ro" => "Runs a Lua script that does not write.",
        "evalsha_ro" => "Runs a cached Lua script that does not write.",
        "script" => "Manages the Lua script cache.",
        "script|load" => "Compiles a Lua script and caches it without running it; returns its SHA-1.",
        "script|exists" => "Tells, for each SHA-1, whether the script is cached.",
        "script|flush" => "Forgets every cached Lua script.",
        "script|kill" => "Stops the running script, if it has not written.",
        "script|help" => "Lists the SCRIPT subcommands.",
        "fcall" => "Calls a function of a loaded library.",
        "fcall_ro" => "Calls a function that does not write.",
        "function" => "Manages function libraries.",
        "function|load" => "Loads a library of functions, optionally replacing one of the same name.",
        "function|delete" => "Removes a library and its functions.",
        "function|flush" => "Removes every library.",
        "function|restore" => "Loads the libraries of a FUNCTION DUMP payload.",
        "function|list" => "Describes the loaded libraries and their functions.",
        "function|dump" => "Serializes every library into a payload for FUNCTION RESTORE.",
        "function|stats" => "Tells whether a function runs, and how many libraries and functions there are.",
        "function|kill" => "Stops the running function, if it has not written.",
        "function|help" => "Lists the FUNCTION subcommands.",
        "xadd" => "Appends an entry to a stream, creating it if needed, optionally trimming it.",
        "xlen" => "Returns how many entries a stream has.",
        "xrange" => "Returns the entries of a stream in a range of ids.",
        "xrevrange" => "Returns the entries of a stream in a range of ids, last first.",
        "xdel" => "Deletes entries of a stream by id.",
        "xtrim" => "Removes the oldest entries of a stream, by length or by id.",
        "xsetid" => "Sets a stream's last id and its added and deleted counters.",
        "xread" => "Returns new entries of one or more streams, waiting for some if asked to.",
        "xreadgroup" => "Returns entries of streams for a consumer of a group, recording them as pending.",
        "xack" => "Acknowledges pending entries of a consumer group.",
        "xpending" => "Returns what a consumer group has delivered and not had acknowledged.",
        "xclaim" => "Gives pending entries of a consumer group to another consumer.",
        "xautoclaim" => "Gives pending entries idle long enough to another consumer, scanning with a cursor.",
        "xgroup" => "Container for the commands that manage consumer groups.",
        "xgroup|create" => "Creates a consumer group of a stream.",
        "xgroup|createconsumer" => "Creates a consumer in a consumer group.",
        "xgroup|delconsumer" => "Deletes a consumer from a consumer group.",
        "xgroup|destroy" => "Deletes a consumer group.",
        "xgroup|setid" => "Sets the last delivered id of a consumer group.",
        "xgroup|help" => "Describes the XGROUP subcommands.",
        "xinfo" => "Container for the commands that describe streams and their groups.",
        "xinfo|stream" => "Describes a stream.",
        "xinfo|groups" => "Describes the consumer groups of a stream.",
        "xinfo|consumers" => "Describes the consumers of a consumer group.",
        "xinfo|help" => "Describes the XINFO subcommands.",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_in_resp3_uses_sets_and_maps() {
        // redis-server's bytes for COMMAND INFO GET after HELLO 3.
        let want: &[u8] = b"*10\r\n$3\r\nget\r\n:2\r\n~2\r\n+readonly\r\n+fast\r\n:1\r\n:1\r\n:1\r\n~3\r\n+@read\r\n+@string\r\n+@fast\r\n~0\r\n~1\r\n%3\r\n$5\r\nflags\r\n~2\r\n+RO\r\n+access\r\n$12\r\nbegin_search\r\n%2\r\n$4\r\ntype\r\n$5\r\nindex\r\n$4\r\nspec\r\n%1\r\n$5\r\nindex\r\n:1\r\n$9\r\nfind_keys\r\n%2\r\n$4\r\ntype\r\n$5\r\nrange\r\n$4\r\nspec\r\n%3\r\n$7\r\nlastkey\r\n:0\r\n$7\r\nkeystep\r\n:1\r\n$5\r\nlimit\r\n:0\r\n~0\r\n";
        let got = crate::cmd::with_writer(true, |w| {
            write_info(w, darner_commands::lookup(b"get").unwrap())
        });
        assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(want));
    }

    #[test]
    fn every_command_has_a_summary() {
        for spec in darner_commands::all() {
            assert!(summary(spec.full_name).is_some(), "{}", spec.full_name);
            for sub in spec.subcommands {
                assert!(summary(sub.full_name).is_some(), "{}", sub.full_name);
            }
        }
    }

    fn keys(args: &[&str]) -> Vec<(usize, Vec<&'static str>)> {
        let argv: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        let spec = lookup_command(&argv).unwrap();
        keys_and_flags(spec, &argv)
            .into_iter()
            .map(|(i, f)| (i, f.to_vec()))
            .collect()
    }

    #[test]
    fn variable_flags() {
        assert_eq!(keys(&["set", "k", "v"]), vec![(1, vec!["OW", "update"])]);
        assert_eq!(
            keys(&["set", "k", "v", "EX", "1", "get"]),
            vec![(1, vec!["RW", "access", "update"])]
        );
        assert_eq!(
            keys(&["bitfield", "k", "get", "u8", "0"]),
            vec![(1, vec!["RO", "access"])]
        );
        assert_eq!(
            keys(&["bitfield", "k", "get", "u8", "0", "set", "u8", "0", "1"]),
            vec![(1, vec!["RW", "access", "update"])]
        );
        assert_eq!(
            keys(&["copy", "a", "b"]),
            vec![(1, vec!["RO", "access"]), (2, vec!["OW", "update"])]
        );
        assert_eq!(keys(&["mset", "a", "1", "b", "2"]).len(), 2);
    }
}
