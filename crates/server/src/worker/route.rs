//! A request routed once: when dispatch has accepted a command (looked up, checked, neither
//! queued by MULTI nor held by CLIENT PAUSE), it finds the positions of its keys and where it
//! runs, once; every later step reads them from the [`Routed`] value: the stream checks
//! (streams.rs), the batch item sent to another shard (and there, its stream check and its
//! tracking record: messages.rs), the tracking record of a command run here, and a
//! transaction's shards and tracked keys (dispatch.rs).

use super::*;
use darner_commands::KeyPositions;

/// A command on its way: what it is, the positions of its keys among its arguments, and
/// where it runs.
pub(super) struct Routed {
    pub(super) cmd: &'static Command,
    /// Positions of its keys among the arguments (inline up to 8 keys: no allocation).
    pub(super) keys: KeyPositions,
    pub(super) to: To,
}

/// Where a routed command runs.
pub(super) enum To {
    /// A connection command: on the connection, on this thread.
    Conn(cmd::ConnFn),
    /// A single-shard command: on the shard of its keys (this thread's, another's, or this
    /// thread's for a command without keys).
    Shard(cmd::KeyFn, usize),
    /// A transaction, as a task of this thread: what it reserves on each shard (sched.rs).
    Shards(cmd::TxFn, Vec<(usize, crate::sched::Intents)>),
}

impl Worker {
    /// Routes connection `c`'s command `cmd` with arguments `args`.
    pub(super) fn route(&self, c: usize, cmd: &'static Command, args: &[&[u8]]) -> Routed {
        let spec = cmd.spec;
        let threads = self.shared.threads;
        let keys = darner_commands::key_positions(spec, args);
        let to = match cmd.handler {
            Handler::Conn(f) => To::Conn(f),
            Handler::Key(f) => To::Shard(f, cmd::key_shard(spec, args, &keys, threads, self.id)),
            Handler::Tx(_, _)
                if cmd.single.is_some()
                    && one_shard(args, &keys, threads)
                    && cmd.single_fits(args) =>
            {
                let single = cmd.single.expect("checked");
                To::Shard(single, cmd::key_shard(spec, args, &keys, threads, self.id))
            }
            Handler::Tx(f, locks) => To::Shards(
                f,
                cmd::transactions::reservation(
                    cmd,
                    args,
                    &keys,
                    locks,
                    &self.conns[c].state,
                    threads,
                    self.id,
                ),
            ),
        };
        Routed { cmd, keys, to }
    }
}

/// Whether the keys (at least one) all live on one shard.
fn one_shard(args: &[&[u8]], keys: &[usize], threads: usize) -> bool {
    let Some((&first, rest)) = keys.split_first() else {
        return false;
    };
    if threads == 1 {
        return true;
    }
    let s = cmd::shard_of(args[first], threads);
    rest.iter().all(|&i| cmd::shard_of(args[i], threads) == s)
}
