//! Command handlers, one file per Redis command group, and the registry that binds them to the
//! command table (`darner-commands`).
//!
//! A handler is one of three kinds, by where it must run:
//! - [`Handler::Conn`]: needs only the client's own state (PING, SELECT, CLIENT SETNAME, CONFIG):
//!   runs on the connection's thread.
//! - [`Handler::Key`]: its keys all live on one shard (GET, SET, INCR, EXPIRE, ...): runs on
//!   that shard's thread, inline when that is the connection's own thread. These are
//!   shard-local `op`s in Dragonfly's sense: they parse, touch data and reply in one place.
//! - [`Handler::Tx`]: needs several shards (MSET, RENAME, KEYS, EXEC): an async task on the
//!   connection's thread that locks the shards it declares ([`Locks`]) and hops to them.
//!
//! Every command named in `tools/commands/*.txt` has exactly one handler; a test checks it.

pub mod connection;
pub mod generic;
pub mod geo;
pub mod hash;
pub mod hyperloglog;
pub mod list;
pub mod pubsub;
pub mod scripting;
pub mod server;
pub mod set;
pub mod sort;
pub mod sorted_set;
pub mod stream;
pub mod string;
pub mod transactions;

use crate::conn::ClientState;
use crate::exec::Tx;
use crate::shard::ShardCtx;
use crate::shared::Shared;
use bytes::Bytes;
use darner_commands::CommandSpec;
use darner_resp::ReplyWriter;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};

/// Handlers that run where the request's bytes are see their arguments as borrowed slices:
/// an inline command (the common case) costs no reference counting and no copy.
pub type KeyFn = fn(&mut ShardCtx, &[&[u8]], &mut ReplyWriter);
pub type ConnFn = fn(&mut ConnCtx, &[&[u8]], &mut ReplyWriter);
pub type TxFuture = Pin<Box<dyn Future<Output = Vec<u8>>>>;
pub type TxFn = fn(Tx, Vec<Bytes>) -> TxFuture;

/// Borrowed views of owned arguments (a command that travelled to another thread or waited in
/// a MULTI queue), to run a [`KeyFn`] or [`ConnFn`] on them. No allocation up to 8 arguments.
pub fn views(args: &[Bytes]) -> smallvec::SmallVec<[&[u8]; 8]> {
    args.iter().map(|a| a.as_ref()).collect()
}

/// A command for the AOF from its parts ([`ShardCtx::propagate`]).
pub fn argv(parts: &[&[u8]]) -> Vec<Bytes> {
    parts.iter().map(|p| Bytes::copy_from_slice(p)).collect()
}

/// A number as a command argument, in decimal.
pub fn num_arg(n: i64) -> Bytes {
    Bytes::from(n.to_string())
}

/// Which shards a [`Handler::Tx`] locks before it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Locks {
    /// The command's keys, reserved on their shards (from the command table's key specs).
    Keys,
    /// Every shard (FLUSHALL: no client may see half of it).
    All,
    /// None: each hop queues behind whatever lock its shard has (KEYS, DBSIZE, SCAN, INFO).
    None,
    /// EXEC: the shards of the queued commands' keys and of the WATCHed keys.
    Queued,
    /// None reserved: the handler runs its work known up front as one-shot parts, one
    /// message per shard ([`crate::exec::Tx::run_parts`]: MSET, MGET, DEL, ...).
    Parts,
}

#[derive(Clone, Copy)]
pub enum Handler {
    Conn(ConnFn),
    Key(KeyFn),
    Tx(TxFn, Locks),
}

pub struct Command {
    pub spec: &'static CommandSpec,
    pub handler: Handler,
    /// A `Locks::Parts` command whose keys are all on one shard runs as this single-shard
    /// handler instead (MSET, MGET, DEL, ...): inline or batched like GET, no transaction;
    /// so do XREAD and XREADGROUP without BLOCK ([`Command::single_fits`]).
    pub single: Option<KeyFn>,
    /// Index into per-thread statistics.
    pub id: usize,
}

impl Command {
    /// Whether its single-shard form can run these arguments: not an XREAD / XREADGROUP
    /// that may block (only its transaction can wait).
    pub fn single_fits(&self, args: &[&[u8]]) -> bool {
        match self.spec.full_name {
            "xreadgroup" => !stream::may_block(args, true),
            "xread" => !stream::may_block(args, false),
            _ => true,
        }
    }

    /// The handler that runs it on one shard (a Key handler, or a Tx handler's single-shard
    /// form).
    pub fn key_fn(&self) -> Option<KeyFn> {
        match self.handler {
            Handler::Key(f) => Some(f),
            _ => self.single,
        }
    }
}

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.spec.full_name)
    }
}

/// What a connection-level handler sees.
pub struct ConnCtx<'a> {
    pub client: &'a mut ClientState,
    pub shared: &'a Arc<Shared>,
    pub thread: usize,
}

pub struct Registry {
    /// Keyed by the spec's address; looked up once per request, so a fast hasher.
    by_spec: HashMap<usize, &'static Command, foldhash::fast::FixedState>,
    pub list: Vec<&'static Command>,
}

impl Registry {
    fn add(&mut self, full_name: &str, handler: Handler, single: Option<KeyFn>) {
        let spec = darner_commands::lookup_full_name(full_name.as_bytes()).unwrap_or_else(|| {
            panic!("'{full_name}' is not in the command table (tools/commands/*.txt)")
        });
        let cmd: &'static Command = Box::leak(Box::new(Command {
            spec,
            handler,
            single,
            id: self.list.len(),
        }));
        let old = self
            .by_spec
            .insert(spec as *const CommandSpec as usize, cmd);
        assert!(old.is_none(), "'{full_name}' registered twice");
        self.list.push(cmd);
    }

    pub fn get(&self, spec: &'static CommandSpec) -> Option<&'static Command> {
        self.by_spec
            .get(&(spec as *const CommandSpec as usize))
            .copied()
    }

    pub fn by_name(&self, full_name: &str) -> Option<&'static Command> {
        darner_commands::lookup_full_name(full_name.as_bytes()).and_then(|s| self.get(s))
    }
}

/// Adds one family's handlers.
pub struct Reg<'a>(&'a mut Registry);

impl Reg<'_> {
    pub fn conn(&mut self, name: &str, f: ConnFn) {
        self.0.add(name, Handler::Conn(f), None);
    }
    pub fn key(&mut self, name: &str, f: KeyFn) {
        self.0.add(name, Handler::Key(f), None);
    }
    pub fn tx(&mut self, name: &str, locks: Locks, f: TxFn) {
        self.0.add(name, Handler::Tx(f, locks), None);
    }
    /// A transaction command with a single-shard form `single`, used when its keys are all
    /// on one shard and [`Command::single_fits`] its arguments (XREAD / XREADGROUP without
    /// BLOCK).
    pub fn tx_single(&mut self, name: &str, locks: Locks, f: TxFn, single: KeyFn) {
        self.0.add(name, Handler::Tx(f, locks), Some(single));
    }
    /// A command of one-shot parts (`Locks::Parts`) with a single-shard form `single`, used
    /// when its keys are all on one shard.
    pub fn parts(&mut self, name: &str, f: TxFn, single: KeyFn) {
        self.0.add(name, Handler::Tx(f, Locks::Parts), Some(single));
    }
}

pub fn registry() -> &'static Registry {
    static R: OnceLock<Registry> = OnceLock::new();
    R.get_or_init(|| {
        let mut r = Registry {
            by_spec: HashMap::with_hasher(foldhash::fast::FixedState::default()),
            list: Vec::new(),
        };
        let mut reg = Reg(&mut r);
        connection::register(&mut reg);
        server::register(&mut reg);
        generic::register(&mut reg);
        geo::register(&mut reg);
        string::register(&mut reg);
        transactions::register(&mut reg);
        hash::register(&mut reg);
        hyperloglog::register(&mut reg);
        list::register(&mut reg);
        pubsub::register(&mut reg);
        scripting::register(&mut reg);
        set::register(&mut reg);
        sorted_set::register(&mut reg);
        sort::register(&mut reg);
        stream::register(&mut reg);
        r
    })
}

/// The shard that owns `key`: by its Redis Cluster slot (CRC16 of the key or its {hashtag}),
/// so keys that Redis Cluster keeps together are also together here.
pub fn shard_of(key: &[u8], shards: usize) -> usize {
    if shards == 1 {
        return 0;
    }
    darner_commands::key_slot(key) as usize % shards
}

/// The shard of a single-shard command: that of its first key (a [`Handler::Key`] command's
/// keys all share it), or `here` for a command without keys. `keys`: the positions of its
/// keys ([`darner_commands::key_positions`]).
pub fn key_shard<A: AsRef<[u8]>>(
    spec: &CommandSpec,
    args: &[A],
    keys: &[usize],
    shards: usize,
    here: usize,
) -> usize {
    if shards == 1 {
        return 0;
    }
    if spec.first_key > 0 && (spec.first_key as usize) < args.len() {
        return shard_of(args[spec.first_key as usize].as_ref(), shards);
    }
    match keys.first() {
        Some(&i) => shard_of(args[i].as_ref(), shards),
        None => here,
    }
}

// Error texts shared by several families (Redis 7.2's exact wording).
pub const ERR_WRONGTYPE: &[u8] =
    b"WRONGTYPE Operation against a key holding the wrong kind of value";
pub const ERR_NOT_INT: &[u8] = b"ERR value is not an integer or out of range";
pub const ERR_NOT_FLOAT: &[u8] = b"ERR value is not a valid float";
pub const ERR_SYNTAX: &[u8] = b"ERR syntax error";
pub const ERR_OVERFLOW: &[u8] = b"ERR increment or decrement would overflow";
pub const ERR_NO_SUCH_KEY: &[u8] = b"ERR no such key";
pub const ERR_DB_INDEX: &[u8] = b"ERR DB index is out of range";

/// The most samples a reply of random picks with repetition may hold: SRANDMEMBER,
/// HRANDFIELD and ZRANDMEMBER with a negative count. Redis has no bound and builds whatever
/// reply the count asks for (`SRANDMEMBER s -10000000000` exhausts its memory); a reply is
/// built in memory here, so a larger count is refused with [`ERR_RANDOM_TOO_LARGE`].
pub const MAX_RANDOM_SAMPLES: u64 = 1 << 24;

/// The reply to a count of random samples beyond [`MAX_RANDOM_SAMPLES`], or whose reply would
/// pass `proto-max-bulk-len` bytes (see [`random_samples`]).
pub const ERR_RANDOM_TOO_LARGE: &[u8] = b"ERR count is too large for a reply";

/// Writes a reply of `n` random samples with repetition: `header` writes the aggregate's
/// header and `sample` one sample. A count above [`MAX_RANDOM_SAMPLES`] is refused before
/// anything is written; a reply that grows past `max_bytes` (`proto-max-bulk-len`: a few
/// big members drawn many times) is taken back and refused with the same error, so neither
/// can make the server allocate without bound.
pub fn random_samples(
    w: &mut ReplyWriter,
    n: u64,
    max_bytes: u64,
    header: impl FnOnce(&mut ReplyWriter),
    mut sample: impl FnMut(&mut ReplyWriter),
) {
    if n > MAX_RANDOM_SAMPLES {
        return w.error(ERR_RANDOM_TOO_LARGE);
    }
    let start = w.out.len();
    header(w);
    for _ in 0..n {
        sample(w);
        if (w.out.len() - start) as u64 > max_bytes {
            w.out.truncate(start);
            w.out.shrink_to_fit();
            return w.error(ERR_RANDOM_TOO_LARGE);
        }
    }
}

/// Parses a Redis integer argument (string2ll rules).
pub fn parse_int(b: &[u8]) -> Option<i64> {
    darner_resp::parse_i64_strict(b)
}

/// Redis's "wrong number of arguments" error for a command or subcommand.
pub fn arity_error(spec: &CommandSpec) -> Vec<u8> {
    format!(
        "ERR wrong number of arguments for '{}' command",
        spec.full_name
    )
    .into_bytes()
}

/// Case-insensitive comparison of an argument with an ASCII keyword.
pub fn eq(arg: &[u8], kw: &str) -> bool {
    arg.eq_ignore_ascii_case(kw.as_bytes())
}

/// Helper for handlers that build a reply into a fresh buffer.
pub fn with_writer(resp3: bool, f: impl FnOnce(&mut ReplyWriter)) -> Vec<u8> {
    let mut out = Vec::new();
    let mut w = ReplyWriter::new(&mut out, resp3);
    f(&mut w);
    out
}

/// Parses a SCAN-family cursor as Redis does (`strtoul` in base 10, whole string): an optional
/// sign (a `-` negates modulo 2^64), digits, no overflow; "" is 0. SCAN, HSCAN, SSCAN, ZSCAN.
pub fn parse_cursor(b: &[u8]) -> Option<u64> {
    if b.is_empty() {
        return Some(0);
    }
    let (neg, digits) = match b[0] {
        b'-' => (true, &b[1..]),
        b'+' => (false, &b[1..]),
        _ => (false, b),
    };
    if digits.is_empty() {
        return None;
    }
    let mut v: u64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
    }
    Some(if neg { v.wrapping_neg() } else { v })
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_table_command_has_a_handler() {
        let r = super::registry();
        for spec in darner_commands::all() {
            if spec.is_container() {
                for sub in spec.subcommands {
                    assert!(r.get(sub).is_some(), "no handler for {}", sub.full_name);
                }
            } else {
                assert!(r.get(spec).is_some(), "no handler for {}", spec.full_name);
            }
        }
    }
}
