#!/usr/bin/env python3
"""Generate crates/commands/src/table.rs from the Redis/Valkey command specs.

Usage (from anywhere):

    python3 tools/gen_commands.py [SPEC_DIR] [--check]

SPEC_DIR defaults to ../shared/commands relative to the repository root.
The list of commands to include is read from tools/commands/*.txt.
With --check nothing is written; the exit status is 1 if table.rs is stale.

Only facts are taken from the JSON specs: names, arity, flags, ACL
categories, key specs, group, since, doc flags, tips and the argument
structure. No prose (summaries, complexity, history, notes, descriptions)
is copied. Derived values (implicit ACL categories, the movablekeys flag and
the legacy first/last/step key range) are computed the way Redis 7.2 does.

The output is deterministic: it depends only on the files in tools/commands/ and the specs.
"""

import json
import os
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIST_DIR = os.path.join(REPO_ROOT, "tools", "commands")
OUT_PATH = os.path.join(REPO_ROOT, "crates", "commands", "src", "table.rs")
DEFAULT_SPEC_DIR = os.path.join(REPO_ROOT, "..", "shared", "commands")
# Facts (arity, flags, key specs, arguments; no prose) for commands newer than the shared
# reference specs (Redis 7.4's hash field expiry), written for this project.
PROJECT_SPEC_DIR = os.path.join(REPO_ROOT, "tools", "specs")

# Command flags: (JSON name, Rust const name, bit, name printed by COMMAND
# INFO or None when Redis hides it). Bits follow Redis's server.h; the list
# order is the order in which COMMAND INFO prints flags.
COMMAND_FLAGS = [
    ("WRITE", "WRITE", 0, "write"),
    ("READONLY", "READONLY", 1, "readonly"),
    ("DENYOOM", "DENYOOM", 2, "denyoom"),
    ("MODULE", "MODULE", 3, "module"),
    ("ADMIN", "ADMIN", 4, "admin"),
    ("PUBSUB", "PUBSUB", 5, "pubsub"),
    ("NOSCRIPT", "NOSCRIPT", 6, "noscript"),
    ("BLOCKING", "BLOCKING", 8, "blocking"),
    ("LOADING", "LOADING", 9, "loading"),
    ("STALE", "STALE", 10, "stale"),
    ("SKIP_MONITOR", "SKIP_MONITOR", 11, "skip_monitor"),
    ("SKIP_SLOWLOG", "SKIP_SLOWLOG", 12, "skip_slowlog"),
    ("ASKING", "ASKING", 13, "asking"),
    ("FAST", "FAST", 14, "fast"),
    ("NO_AUTH", "NO_AUTH", 15, "no_auth"),
    ("MAY_REPLICATE", "MAY_REPLICATE", 16, None),
    ("SENTINEL", "SENTINEL", 17, None),
    ("ONLY_SENTINEL", "ONLY_SENTINEL", 18, None),
    ("NO_MANDATORY_KEYS", "NO_MANDATORY_KEYS", 19, "no_mandatory_keys"),
    ("PROTECTED", "PROTECTED", 20, None),
    ("NO_ASYNC_LOADING", "NO_ASYNC_LOADING", 23, "no_async_loading"),
    ("NO_MULTI", "NO_MULTI", 24, "no_multi"),
    (None, "MOVABLE_KEYS", 25, "movablekeys"),  # derived, never in JSON
    ("ALLOW_BUSY", "ALLOW_BUSY", 26, "allow_busy"),
    ("TOUCHES_ARBITRARY_KEYS", "TOUCHES_ARBITRARY_KEYS", 28, None),
]
FLAG_BY_JSON = {f[0]: f for f in COMMAND_FLAGS if f[0]}
MOVABLE_KEYS_BIT = 25

# ACL categories in Redis's bit order, which is also COMMAND INFO's order.
ACL_CATEGORIES = [
    "keyspace", "read", "write", "set", "sortedset", "list", "hash", "string",
    "bitmap", "hyperloglog", "geo", "stream", "pubsub", "admin", "fast",
    "slow", "blocking", "dangerous", "connection", "transaction", "scripting",
]
ACL_BIT = {name: i for i, name in enumerate(ACL_CATEGORIES)}

# Key spec flags in the order (and spelling) COMMAND INFO prints them.
KEY_SPEC_FLAGS = [
    ("RO", "RO"), ("RW", "RW"), ("OW", "OW"), ("RM", "RM"),
    ("ACCESS", "access"), ("UPDATE", "update"), ("INSERT", "insert"),
    ("DELETE", "delete"), ("NOT_KEY", "not_key"),
    ("INCOMPLETE", "incomplete"), ("VARIABLE_FLAGS", "variable_flags"),
]
KEY_SPEC_FLAG_NAMES = dict(KEY_SPEC_FLAGS)

ARG_TYPES = {"key", "string", "integer", "double", "pattern", "unix-time",
             "pure-token", "oneof", "block"}
ARG_FLAGS = ["optional", "multiple", "multiple_token"]
ARG_KEYS = {"name", "type", "token", "display", "key_spec_index", "arguments",
            "since", "deprecated_since", "summary"} | set(ARG_FLAGS)
DOC_FLAGS = {"DEPRECATED", "SYSCMD"}

# Deliberate departures from the (Valkey 8.0) specs, where Redis 7.x behaves
# differently in a way clients notice. Each entry: full name -> command
# flags to drop.
#
# * multi, watch: Valkey 8 flags them NO_MULTI, so a nested MULTI or a WATCH
#   inside MULTI is refused with the generic "not allowed inside a
#   transaction" error. Redis 7.x has no such flag on them; the commands
#   themselves reply "MULTI calls can not be nested" / "WATCH inside MULTI is
#   not allowed", and COMMAND INFO does not list no_multi.
#
# Known differences kept as in the specs (no client-visible behaviour beyond
# metadata): COMMAND GETKEYS[ANDFLAGS] arity -3 (Redis 7.0: -4); extra
# response_policy tips on SCAN/RANDOMKEY and request/response tips on
# CLIENT SETNAME, CONFIG RESETSTAT/REWRITE; no tips on MSETNX; argument names
# in a few COMMAND DOCS entries.
DROP_FLAGS = {
    "multi": ["NO_MULTI"],
    "watch": ["NO_MULTI"],
}


class GenError(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise GenError(msg)


def read_list(path):
    names = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            check(line == line.lower(), f"{path}:{lineno}: names must be lowercase: {line!r}")
            check(line.count("|") <= 1, f"{path}:{lineno}: only one level of subcommands: {line!r}")
            check(line not in names, f"{path}:{lineno}: duplicate entry {line!r}")
            names.append(line)
    return names


def load_specs(spec_dir):
    """Map full lowercase name ("get", "client|list") -> JSON object."""
    specs = {}
    for fname in sorted(os.listdir(spec_dir)):
        if not fname.endswith(".json"):
            continue
        with open(os.path.join(spec_dir, fname), encoding="utf-8") as f:
            doc = json.load(f)
        check(len(doc) == 1, f"{fname}: expected exactly one command")
        (name, body), = doc.items()
        name = name.lower()
        if "container" in body:
            name = body["container"].lower() + "|" + name
        check(name not in specs, f"{fname}: duplicate command {name}")
        specs[name] = body
    return specs


def rs_str(s):
    check(isinstance(s, str), f"expected a string, got {s!r}")
    check(all(0x20 <= ord(c) < 0x7f for c in s), f"non-printable/non-ASCII text {s!r}")
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def rs_opt_str(s):
    return "None" if s is None else f"Some({rs_str(s)})"


def rs_str_slice(items):
    return "&[" + ", ".join(rs_str(s) for s in items) + "]"


def is_index_range(ks):
    return "index" in ks["begin_search"] and "range" in ks["find_keys"]


def legacy_range(key_specs):
    """(first, last, step, movable) as Redis 7.2 populateCommandLegacyRangeSpec
    and addReplyCommandInfo compute them."""
    movable = False
    if not key_specs:
        return 0, 0, 0, movable

    def to_info(pos, lastkey, step):
        last = lastkey + pos if lastkey >= 0 else lastkey
        return pos, last, step

    if len(key_specs) == 1 and is_index_range(key_specs[0]):
        ks = key_specs[0]
        if "INCOMPLETE" in ks["flags"]:
            movable = True
        r = ks["find_keys"]["range"]
        return (*to_info(ks["begin_search"]["index"]["pos"], r["lastkey"], r["step"]), movable)

    int_max = 2**31 - 1
    firstkey, lastkey, prev_lastkey = int_max, 0, 0
    for ks in key_specs:
        if not is_index_range(ks):
            movable = True
            continue
        pos = ks["begin_search"]["index"]["pos"]
        r = ks["find_keys"]["range"]
        if r["step"] != 1 or (prev_lastkey and prev_lastkey != pos - 1):
            movable = True
            continue
        if "INCOMPLETE" in ks["flags"]:
            movable = True
        firstkey = min(firstkey, pos)
        abs_last = r["lastkey"]
        if abs_last >= 0:
            abs_last += pos
        # Redis compares as unsigned so that a negative lastkey wins.
        lastkey = max(lastkey, abs_last, key=lambda v: v & 0xFFFFFFFF)
        prev_lastkey = lastkey
    if firstkey == int_max:
        return 0, 0, 0, True
    check(firstkey != 0 and lastkey != 0, "bad legacy range")
    rel_last = lastkey if lastkey < 0 else lastkey - firstkey
    return (*to_info(firstkey, rel_last, 1), movable)


class Command:
    def __init__(self, full_name, body):
        self.full_name = full_name
        self.name = full_name.split("|")[-1]
        self.body = body
        self.subcommands = []
        unknown = set(body) - {
            "summary", "complexity", "group", "since", "arity", "function",
            "command_flags", "reply_schema", "arguments", "acl_categories",
            "key_specs", "container", "command_tips", "history", "doc_flags",
            "get_keys_function", "deprecated_since", "replaced_by"}
        check(not unknown, f"{full_name}: unknown JSON keys {sorted(unknown)}")
        self.arity = body["arity"]
        check(isinstance(self.arity, int) and self.arity != 0, f"{full_name}: bad arity")
        self.group = body["group"]
        self.since = body["since"]
        self.deprecated_since = body.get("deprecated_since")
        self.doc_flags = []
        for f in body.get("doc_flags", []):
            check(f in DOC_FLAGS, f"{full_name}: unknown doc flag {f}")
            self.doc_flags.append(f.lower())
        self.tips = [t.lower() for t in body.get("command_tips", [])]

        self.key_specs = body.get("key_specs", [])
        for i, ks in enumerate(self.key_specs):
            for fl in ks["flags"]:
                check(fl in KEY_SPEC_FLAG_NAMES, f"{full_name}: unknown key spec flag {fl}")
            check(len(ks["begin_search"]) == 1 and len(ks["find_keys"]) == 1,
                  f"{full_name}: key spec {i} malformed")

        bits = 0
        json_flags = body.get("command_flags", [])
        for f in DROP_FLAGS.get(full_name, []):
            check(f in json_flags, f"{full_name}: override drops absent flag {f}")
        for f in json_flags:
            if f in DROP_FLAGS.get(full_name, []):
                continue
            check(f in FLAG_BY_JSON, f"{full_name}: unknown command flag {f}")
            bits |= 1 << FLAG_BY_JSON[f][2]
        self.first, self.last, self.step, movable = legacy_range(self.key_specs)
        if movable:
            bits |= 1 << MOVABLE_KEYS_BIT
        self.flag_bits = bits
        self.flag_consts = [f[1] for f in COMMAND_FLAGS if bits & (1 << f[2])]
        self.flag_names = [f[3] for f in COMMAND_FLAGS if f[3] and bits & (1 << f[2])]

        # setImplicitACLCategories (Redis 7.2).
        acl = 0
        for c in body.get("acl_categories", []):
            check(c.lower() in ACL_BIT, f"{full_name}: unknown ACL category {c}")
            acl |= 1 << ACL_BIT[c.lower()]

        def has(flag):
            return bool(bits & (1 << FLAG_BY_JSON[flag][2]))

        if has("WRITE"):
            acl |= 1 << ACL_BIT["write"]
        if has("READONLY") and not acl & (1 << ACL_BIT["scripting"]):
            acl |= 1 << ACL_BIT["read"]
        if has("ADMIN"):
            acl |= (1 << ACL_BIT["admin"]) | (1 << ACL_BIT["dangerous"])
        if has("PUBSUB"):
            acl |= 1 << ACL_BIT["pubsub"]
        if has("FAST"):
            acl |= 1 << ACL_BIT["fast"]
        if has("BLOCKING"):
            acl |= 1 << ACL_BIT["blocking"]
        if not acl & (1 << ACL_BIT["fast"]):
            acl |= 1 << ACL_BIT["slow"]
        self.acl_bits = acl
        self.acl_names = [c for c in ACL_CATEGORIES if acl & (1 << ACL_BIT[c])]

        self.args = body.get("arguments", [])
        self.check_args(self.args)
        self.check_consistency()

    def check_args(self, args):
        for a in args:
            unknown = set(a) - ARG_KEYS
            check(not unknown, f"{self.full_name}: unknown argument keys {sorted(unknown)}")
            check(a["type"] in ARG_TYPES, f"{self.full_name}: unknown argument type {a['type']}")
            ksi = a.get("key_spec_index", -1)
            check(a["type"] != "key" or ksi >= 0,
                  f"{self.full_name}: key argument {a['name']} without key_spec_index")
            check(ksi < 0 or a["type"] in ("key", "pattern"),
                  f"{self.full_name}: argument {a['name']}: key_spec_index on a {a['type']}")
            check(ksi < len(self.key_specs),
                  f"{self.full_name}: argument {a['name']}: key_spec_index out of range")
            nested = a.get("arguments")
            check((a["type"] in ("oneof", "block")) == (nested is not None),
                  f"{self.full_name}: argument {a['name']}: children only on oneof/block")
            if nested is not None:
                self.check_args(nested)

    def check_consistency(self):
        n = self.full_name
        # Every key spec is referenced by at least one key argument, and
        # every key argument by exactly one spec index (checked above).
        used = set()

        def walk(args):
            for a in args:
                if a.get("key_spec_index", -1) >= 0:
                    used.add(a["key_spec_index"])
                walk(a.get("arguments", []))

        walk(self.args)
        real = {i for i, ks in enumerate(self.key_specs) if "NOT_KEY" not in ks["flags"]}
        check(real <= used, f"{n}: key specs {sorted(real - used)} not referenced by any argument")
        # Fixed-arity commands must have every index/range key inside argv.
        if self.arity > 0:
            for ks in self.key_specs:
                if is_index_range(ks):
                    pos = ks["begin_search"]["index"]["pos"]
                    lk = ks["find_keys"]["range"]["lastkey"]
                    check(pos < self.arity, f"{n}: key position {pos} beyond arity")
                    if lk >= 0:
                        check(pos + lk < self.arity, f"{n}: last key beyond arity")
            check(self.last < self.arity, f"{n}: legacy last key beyond arity")
        # Legacy range sanity.
        check((self.first == 0) == (self.last == 0) == (self.step == 0),
              f"{n}: inconsistent first/last/step")
        if self.key_specs and not (self.flag_bits & (1 << MOVABLE_KEYS_BIT)):
            check(self.first > 0, f"{n}: non-movable command with keys but no legacy range")
        # Derived categories: exactly one of @fast/@slow.
        check(("fast" in self.acl_names) != ("slow" in self.acl_names), f"{n}: fast/slow")
        if "fast" in self.flag_names:
            check("fast" in self.acl_names, f"{n}: FAST flag without @fast")
        if "write" in self.flag_names:
            check("write" in self.acl_names, f"{n}: write flag without @write")
        check(not ("write" in self.flag_names and "readonly" in self.flag_names),
              f"{n}: both write and readonly")


def emit_key_spec(ks):
    flags = [name for (j, name) in KEY_SPEC_FLAGS if j in ks["flags"]]
    bs = ks["begin_search"]
    if "index" in bs:
        begin = f"BeginSearch::Index({bs['index']['pos']})"
    elif "keyword" in bs:
        kw = bs["keyword"]
        begin = (f"BeginSearch::Keyword {{ keyword: {rs_str(kw['keyword'])}, "
                 f"start_from: {kw['startfrom']} }}")
    else:
        check("unknown" in bs, "bad begin_search")
        begin = "BeginSearch::Unknown"
    fk = ks["find_keys"]
    if "range" in fk:
        r = fk["range"]
        find = (f"FindKeys::Range {{ last_key: {r['lastkey']}, step: {r['step']}, "
                f"limit: {r['limit']} }}")
    elif "keynum" in fk:
        k = fk["keynum"]
        find = (f"FindKeys::Keynum {{ keynum_idx: {k['keynumidx']}, "
                f"first_key: {k['firstkey']}, step: {k['step']} }}")
    else:
        check("unknown" in fk, "bad find_keys")
        find = "FindKeys::Unknown"
    return f"KeySpec {{ flags: {rs_str_slice(flags)}, begin: {begin}, find: {find} }}"


def emit_args(args, indent):
    if not args:
        return "&[]"
    pad = " " * indent
    out = ["&["]
    for a in args:
        flags = [f for f in ARG_FLAGS if a.get(f)]
        out.append(f"{pad}    Arg {{")
        out.append(f"{pad}        name: {rs_str(a['name'])},")
        out.append(f"{pad}        kind: {rs_str(a['type'])},")
        # Redis 7.2's specs spell every token in upper case; the shared specs (Valkey's) have
        # some in lower case (the GEO units m/km/ft/mi, CLIENT KILL/LIST's client types,
        # CLIENT SETINFO's LIB-NAME/LIB-VER), which COMMAND DOCS would then show.
        token = a.get("token")
        out.append(f"{pad}        token: {rs_opt_str(token.upper() if token else token)},")
        out.append(f"{pad}        flags: {rs_str_slice(flags)},")
        out.append(f"{pad}        key_spec_index: {a.get('key_spec_index', -1)},")
        out.append(f"{pad}        display: {rs_opt_str(a.get('display'))},")
        out.append(f"{pad}        since: {rs_opt_str(a.get('since'))},")
        out.append(f"{pad}        deprecated_since: {rs_opt_str(a.get('deprecated_since'))},")
        out.append(f"{pad}        children: {emit_args(a.get('arguments', []), indent + 8)},")
        out.append(f"{pad}    }},")
    out.append(f"{pad}]")
    return "\n".join(out)


def emit_command(cmd, indent):
    pad = " " * indent
    flags = " | ".join(f"flags::{c}" for c in cmd.flag_consts) or "0"
    acl = " | ".join(f"acl::{c.upper()}" for c in cmd.acl_names) or "0"
    lines = [
        f"{pad}CommandSpec {{",
        f"{pad}    name: {rs_str(cmd.name)},",
        f"{pad}    full_name: {rs_str(cmd.full_name)},",
        f"{pad}    arity: {cmd.arity},",
        f"{pad}    flags: {flags},",
        f"{pad}    flag_names: {rs_str_slice(cmd.flag_names)},",
        f"{pad}    acl_flags: {acl},",
        f"{pad}    acl_categories: {rs_str_slice('@' + c for c in cmd.acl_names)},",
        f"{pad}    first_key: {cmd.first},",
        f"{pad}    last_key: {cmd.last},",
        f"{pad}    step: {cmd.step},",
    ]
    if cmd.key_specs:
        lines.append(f"{pad}    key_specs: &[")
        for ks in cmd.key_specs:
            lines.append(f"{pad}        {emit_key_spec(ks)},")
        lines.append(f"{pad}    ],")
    else:
        lines.append(f"{pad}    key_specs: &[],")
    lines += [
        f"{pad}    tips: {rs_str_slice(cmd.tips)},",
        f"{pad}    group: {rs_str(cmd.group)},",
        f"{pad}    since: {rs_str(cmd.since)},",
        f"{pad}    deprecated_since: {rs_opt_str(cmd.deprecated_since)},",
        f"{pad}    doc_flags: {rs_str_slice(cmd.doc_flags)},",
        f"{pad}    args: {emit_args(cmd.args, indent + 4)},",
    ]
    if cmd.subcommands:
        lines.append(f"{pad}    subcommands: &[")
        for sub in cmd.subcommands:
            lines.append(emit_command(sub, indent + 8) + ",")
        lines.append(f"{pad}    ],")
    else:
        lines.append(f"{pad}    subcommands: &[],")
    lines.append(f"{pad}}}")
    return "\n".join(lines)


def name_hash(name):
    """FNV-1a (64-bit) of the lowercase name: the same function as `name_hash` in the
    generated Rust."""
    h = 0xCBF29CE484222325
    for b in name.lower().encode():
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def emit_lookup(top):
    # Open addressing with linear probing in a table at least 4x the commands: a lookup
    # hashes the name once and compares one or two candidates (the old (length, first
    # letter) buckets compared up to seven, 740 instructions for HINCRBY).
    size = 1
    while size < 4 * len(top):
        size *= 2
    slots = [None] * size
    longest = 0
    for i, cmd in enumerate(top):
        check(cmd.name.isascii() and cmd.name == cmd.name.lower(), f"command name {cmd.name!r}")
        longest = max(longest, len(cmd.name))
        j = (name_hash(cmd.name) ^ (name_hash(cmd.name) >> 32)) & (size - 1)
        while slots[j] is not None:
            j = (j + 1) & (size - 1)
        slots[j] = i
    cells = ", ".join("u16::MAX" if v is None else str(v) for v in slots)
    lines = [
        "/// The longest top-level command name.",
        f"const LONGEST_NAME: usize = {longest};",
        "",
        "/// Open-addressing index of [`COMMANDS`] by [`name_hash`] (linear probing;",
        "/// `u16::MAX`: empty).",
        f"static TOP_INDEX: [u16; {size}] = [{cells}];",
        "",
        "/// FNV-1a (64-bit) of an already lowercase name.",
        "#[inline]",
        "fn name_hash(lower: &[u8]) -> u64 {",
        "    let mut h: u64 = 0xcbf2_9ce4_8422_2325;",
        "    for &b in lower {",
        "        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);",
        "    }",
        "    h",
        "}",
        "",
        "/// Index into [`COMMANDS`] of the top-level command called `name`",
        "/// (ASCII case-insensitive).",
        "#[inline]",
        "pub(crate) fn find_top(name: &[u8]) -> Option<usize> {",
        "    if name.is_empty() || name.len() > LONGEST_NAME {",
        "        return None;",
        "    }",
        "    let mut buf = [0u8; LONGEST_NAME];",
        "    let lower = &mut buf[..name.len()];",
        "    for (d, s) in lower.iter_mut().zip(name) {",
        "        *d = s.to_ascii_lowercase();",
        "    }",
        "    let h = name_hash(lower);",
        "    let mask = TOP_INDEX.len() - 1;",
        "    let mut j = ((h ^ (h >> 32)) as usize) & mask;",
        "    loop {",
        "        let i = TOP_INDEX[j];",
        "        if i == u16::MAX {",
        "            return None;",
        "        }",
        "        if COMMANDS[usize::from(i)].name.as_bytes() == &*lower {",
        "            return Some(usize::from(i));",
        "        }",
        "        j = (j + 1) & mask;",
        "    }",
        "}",
    ]
    return "\n".join(lines)


def generate(spec_dir):
    names = []
    for fname in sorted(os.listdir(LIST_DIR)):
        if fname.endswith(".txt"):
            for name in read_list(os.path.join(LIST_DIR, fname)):
                check(name not in names, f"{fname}: {name!r} is listed in another file too")
                names.append(name)
    specs = load_specs(spec_dir)
    for name, body in load_specs(PROJECT_SPEC_DIR).items():
        check(name not in specs, f"tools/specs: {name!r} is in {spec_dir} already")
        specs[name] = body
    top = {}
    for full in names:
        check(full in specs, f"no spec for {full!r} in {spec_dir}")
        if "|" not in full:
            check("container" not in specs[full], f"{full}: is a subcommand")
            top[full] = Command(full, specs[full])
    for full in names:
        if "|" in full:
            parent = full.split("|")[0]
            check(parent in top, f"{full}: parent {parent!r} is not listed")
            top[parent].subcommands.append(Command(full, specs[full]))
    for cmd in top.values():
        cmd.subcommands.sort(key=lambda c: c.name)
        # A container without its own "function" has no behaviour of its own.
        if cmd.subcommands:
            check(cmd.arity < 0, f"{cmd.full_name}: container with fixed arity")
    ordered = [top[k] for k in sorted(top)]
    check(len(ordered) < 65536, "too many commands")

    out = [
        "// @generated by tools/gen_commands.py from tools/commands/*.txt and the",
        "// command specs in ../shared/commands (facts only: no prose is copied).",
        "// DO NOT EDIT. Regenerate with: python3 tools/gen_commands.py",
        "",
        "use crate::{acl, flags, Arg, BeginSearch, CommandSpec, FindKeys, KeySpec};",
        "",
        "/// Number of top-level commands in [`COMMANDS`].",
        f"pub const COMMAND_COUNT: usize = {len(ordered)};",
        "",
        "/// All top-level commands, sorted by name.",
        f"pub static COMMANDS: [CommandSpec; {len(ordered)}] = [",
    ]
    for cmd in ordered:
        out.append(emit_command(cmd, 4) + ",")
    out.append("];")
    out.append("")
    out.append(emit_lookup(ordered))
    out.append("")
    return "\n".join(out)


def main(argv):
    check_only = "--check" in argv
    rest = [a for a in argv if a != "--check"]
    if len(rest) > 1:
        sys.exit(__doc__)
    spec_dir = rest[0] if rest else DEFAULT_SPEC_DIR
    try:
        text = generate(spec_dir)
    except GenError as e:
        sys.exit(f"gen_commands: {e}")
    if check_only:
        try:
            with open(OUT_PATH, encoding="utf-8") as f:
                current = f.read()
        except FileNotFoundError:
            current = None
        if current != text:
            sys.exit(f"gen_commands: {OUT_PATH} is stale; run python3 tools/gen_commands.py")
        return
    with open(OUT_PATH, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)


if __name__ == "__main__":
    main(sys.argv[1:])
