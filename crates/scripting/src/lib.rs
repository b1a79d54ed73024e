//! Lua scripting for Darner with Redis 7.2's semantics: EVAL scripts and
//! FUNCTION libraries, as a library without I/O. The server runs commands
//! for the scripts through the [`Host`] trait and writes the returned
//! replies; this crate never touches a socket or the keyspace.
//!
//! # Layout
//!
//! | module | what it is for |
//! | --- | --- |
//! | `lib` (this file) | [`ScriptFlags`], [`EvalEngine`]: EVAL / EVALSHA / SCRIPT LOAD, EXISTS, FLUSH, KILL |
//! | `functions` | [`FunctionEngine`]: FUNCTION LOAD / DELETE / FLUSH / LIST / DUMP / RESTORE / KILL, FCALL, `redis.register_function` |
//! | `host` | [`Host`] (what the server implements), [`CallCtx`], [`RunControl`] (run clock, kill switch, "has written"), error texts |
//! | `sandbox` | the Lua state: library set, read-only globals, error handler, memory limit, kill hook |
//! | `redislib` | the `redis` table and Redis's `math.random` |
//! | `tramp` | the one raw Lua C API piece: the C closure through which natives raise Redis's error values |
//! | `convert` | reply ⇄ Lua conversions, [`write_reply`] |
//! | `cache` | EVAL's script cache, [`parse_shebang`] |
//! | `dump` | the FUNCTION DUMP payload (RDB function opcode, version, CRC64) |
//! | `libs/` | `cjson`, `cmsgpack`, `bit`, `struct`, written in Rust |
//! | `num`, `sha1` | `%.Ng` number formatting, SHA-1 |
//!
//! # Why it is shaped this way
//!
//! Scripts are where Redis's behaviour is most observable and least
//! documented: which Lua value becomes which reply, what a failing
//! `redis.call` raises, what the error text of a script that reads a
//! missing global is. Clients and libraries (rate limiters, locks, queues)
//! depend on those details, so this crate reproduces them from Redis's
//! source and checks them against `redis-server`. Keeping it a library with
//! no server dependency makes that testable in isolation: the unit tests
//! drive the engine with an in-memory [`Host`], every conversion and error
//! text is checked without a network, and the server's integration is
//! reduced to implementing one trait.
//!
//! The **[`Host`] trait** is the whole boundary. `redis.call` hands the host
//! the arguments as byte slices (no copy for Lua strings) and gets back a
//! [`darner_resp::Frame`], which is then converted to Lua; the host decides
//! everything about commands: lookup, arity, ACL, `no-writes`, OOM,
//! cluster slots, and which shard runs them. It receives the RESP version
//! the script selected with `redis.setresp` and the script's flags on every
//! call. The same `Frame` type is what a script returns, so the server
//! writes it with [`write_reply`] in the client's protocol.
//!
//! **One Lua state per engine.** Like Redis, EVAL scripts and FUNCTION
//! libraries live in two separate states ([`EvalEngine`], [`FunctionEngine`]):
//! functions must not see `KEYS`/`ARGV`, and their load-time environment is
//! different. An engine is single-threaded (a Lua state is not `Send`); the
//! server keeps one pair per thread that runs scripts. What other threads
//! need while a script runs (is it busy, has it written, kill it) is in
//! [`RunControl`], behind an `Arc` of atomics; the script's own thread gets
//! a callback from the hook ([`EvalEngine::set_busy_callback`]) to serve its
//! other clients meanwhile.
//!
//! **Stock Lua 5.1.** Redis embeds Lua 5.1 with a patch for read-only
//! tables; the `mlua` crate vendors the unpatched interpreter, so the
//! read-only globals are proxies (see `sandbox`), and the libraries Redis
//! links in C (cjson, cmsgpack, struct, bit) are written here in Rust with
//! their Redis-visible behaviour. A per-engine memory limit turns an
//! allocation bomb into a script error, and an instruction-count hook makes
//! scripts killable.

#![warn(missing_docs)]

mod cache;
mod convert;
mod dump;
mod functions;
mod host;
mod libs;
mod num;
mod redislib;
mod sandbox;
mod sha1;
mod tramp;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use bytes::Bytes;
pub use darner_resp::Frame;

pub use cache::parse_shebang;
pub use convert::{write_reply, MAX_REPLY_DEPTH};
pub use dump::{crc64, RestorePolicy};
pub use functions::{FunctionEngine, FunctionInfo, LibraryInfo};
pub use host::{errors, CallCtx, Host, KillOutcome, LogLevel, RunControl};
pub use host::{REPL_ALL, REPL_AOF, REPL_NONE, REPL_REPLICA};
pub use redislib::{REDIS_VERSION, REDIS_VERSION_NUM};
pub use sha1::{sha1, sha1_hex};

use sandbox::{Kind, Sandbox};

/// Default memory limit of one engine's Lua heap, beyond what its libraries
/// use after start: 256 MiB.
pub const DEFAULT_MEMORY_LIMIT: usize = 256 << 20;

/// The flags a script declares (EVAL shebang `flags=`) or a function is
/// registered with. What they mean is enforced by the host.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScriptFlags {
    /// `no-writes`: the script may not write (EVAL_RO / FCALL_RO need it).
    pub no_writes: bool,
    /// `allow-oom`: may run (and write) when over `maxmemory`.
    pub allow_oom: bool,
    /// `allow-stale`: may run on a stale replica.
    pub allow_stale: bool,
    /// `no-cluster`: refused in cluster mode.
    pub no_cluster: bool,
    /// `allow-cross-slot-keys`: may touch keys of several slots.
    pub allow_cross_slot_keys: bool,
    /// An EVAL script without shebang: Redis's pre-7 rules apply (it may
    /// write unless the command is read-only, OOM checked per command).
    pub eval_compat_mode: bool,
}

impl ScriptFlags {
    /// The flag names as FUNCTION LIST reports them.
    pub fn names(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        if self.no_writes {
            v.push("no-writes");
        }
        if self.allow_oom {
            v.push("allow-oom");
        }
        if self.allow_stale {
            v.push("allow-stale");
        }
        if self.no_cluster {
            v.push("no-cluster");
        }
        if self.allow_cross_slot_keys {
            v.push("allow-cross-slot-keys");
        }
        v
    }
}

/// EVAL's engine: a Lua state and its script cache.
pub struct EvalEngine {
    sandbox: Sandbox,
    cache: cache::ScriptCache,
    memory_limit: usize,
}

impl EvalEngine {
    /// A new engine with [`DEFAULT_MEMORY_LIMIT`].
    pub fn new() -> EvalEngine {
        EvalEngine::with_memory_limit(DEFAULT_MEMORY_LIMIT)
    }

    /// A new engine whose Lua heap may grow by at most `limit` bytes past
    /// its initial size (0: unlimited).
    pub fn with_memory_limit(limit: usize) -> EvalEngine {
        let control = RunControl::new();
        let sandbox =
            Sandbox::new(Kind::Eval, control, limit).expect("building the Lua sandbox cannot fail");
        EvalEngine {
            sandbox,
            cache: cache::ScriptCache::default(),
            memory_limit: limit,
        }
    }

    /// The run clock and kill switch, shareable with other threads.
    pub fn control(&self) -> Arc<RunControl> {
        self.sandbox.state.control.clone()
    }

    /// Sets a callback that the running script calls every 100000 Lua
    /// instructions with its elapsed milliseconds: where the server, past
    /// `busy-reply-threshold`, serves its own thread's other clients (BUSY
    /// replies, SCRIPT KILL), as Redis does from its hook. It must not run
    /// scripts on this engine; it may suspend the running script's stack
    /// (the server's coroutine does) as long as nothing touches this engine
    /// until it returns.
    pub fn set_busy_callback(&mut self, f: impl FnMut(u64) + 'static) {
        *self.sandbox.state.busy_callback.borrow_mut() = Some(Box::new(f));
    }

    /// Removes the callback set by [`EvalEngine::set_busy_callback`].
    pub fn clear_busy_callback(&mut self) {
        *self.sandbox.state.busy_callback.borrow_mut() = None;
    }

    /// SCRIPT LOAD (and the first half of EVAL): parses the shebang and
    /// compiles `body` unless cached. Returns its SHA-1 (lowercase hex) and
    /// flags, or the error reply text (`ERR Error compiling script ...`).
    pub fn load(&mut self, body: &[u8]) -> Result<(String, ScriptFlags), String> {
        let sha = sha1_hex(body);
        if let Some(c) = self.cache.map.get(&sha) {
            return Ok((sha, c.flags));
        }
        let (flags, shebang_len) = parse_shebang(body)?;
        let code = cache::without_shebang(body, shebang_len);
        let func = self
            .sandbox
            .compile(&code, "@user_script", None)
            .map_err(|e| format!("ERR Error compiling script (new function): {e}"))?;
        self.cache.map.insert(
            sha.clone(),
            cache::Cached {
                func,
                flags,
                body: Bytes::copy_from_slice(body),
            },
        );
        Ok((sha, flags))
    }

    /// SCRIPT EXISTS for one SHA-1 (case-insensitive, as Redis).
    pub fn exists(&self, sha: &str) -> bool {
        self.cache.map.contains_key(&sha.to_ascii_lowercase())
    }

    /// The flags of a cached script.
    pub fn flags(&self, sha: &str) -> Option<ScriptFlags> {
        self.cache
            .map
            .get(&sha.to_ascii_lowercase())
            .map(|c| c.flags)
    }

    /// The body of a cached script (for replication/AOF of EVALSHA).
    pub fn body(&self, sha: &str) -> Option<Bytes> {
        self.cache
            .map
            .get(&sha.to_ascii_lowercase())
            .map(|c| c.body.clone())
    }

    /// Number of cached scripts.
    pub fn len(&self) -> usize {
        self.cache.map.len()
    }

    /// Whether no script is cached.
    pub fn is_empty(&self) -> bool {
        self.cache.map.is_empty()
    }

    /// SCRIPT FLUSH: forgets every script and starts a fresh Lua state.
    pub fn flush(&mut self) {
        self.cache.map.clear();
        let control = self.control();
        let callback = self.sandbox.state.busy_callback.borrow_mut().take();
        if let Ok(s) = Sandbox::new(Kind::Eval, control, self.memory_limit) {
            self.sandbox = s;
        }
        *self.sandbox.state.busy_callback.borrow_mut() = callback;
    }

    /// Bytes used by the Lua heap (`used_memory_lua`).
    pub fn used_memory(&self) -> usize {
        self.sandbox.lua.used_memory()
    }

    /// EVAL: loads `body` (if needed) and runs it.
    pub fn eval(
        &mut self,
        host: &mut dyn Host,
        body: &[u8],
        keys: &[&[u8]],
        args: &[&[u8]],
    ) -> Frame {
        match self.load(body) {
            Ok((sha, _)) => self.evalsha(host, &sha, keys, args),
            Err(e) => Frame::Error(Bytes::from(e)),
        }
    }

    /// EVALSHA: runs a cached script with `KEYS` and `ARGV`; `NOSCRIPT` if
    /// it is not cached.
    pub fn evalsha(
        &mut self,
        host: &mut dyn Host,
        sha: &str,
        keys: &[&[u8]],
        args: &[&[u8]],
    ) -> Frame {
        let sha = sha.to_ascii_lowercase();
        let Some(c) = self.cache.map.get(&sha) else {
            return Frame::Error(Bytes::from_static(
                b"NOSCRIPT No matching script. Please use EVAL.",
            ));
        };
        let lua = &self.sandbox.lua;
        let set = || -> mlua::Result<()> {
            let g = &self.sandbox.globals;
            g.raw_set("KEYS", sandbox::string_array(lua, keys)?)?;
            g.raw_set("ARGV", sandbox::string_array(lua, args)?)?;
            Ok(())
        };
        if let Err(e) = set() {
            return Frame::Error(Bytes::from(format!(
                "ERR Error running script {sha}, {}",
                sandbox::plain_error_message(&e)
            )));
        }
        let func = c.func.clone();
        self.sandbox.run(host, &func, None, &sha, c.flags)
    }
}

impl Default for EvalEngine {
    fn default() -> Self {
        EvalEngine::new()
    }
}
