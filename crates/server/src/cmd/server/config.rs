//! CONFIG GET / SET / REWRITE / HELP over the directive table (`crate::config`).
//!
//! Directives of features not built yet (`config::UNBUILT`) are visible too: CONFIG GET shows
//! the value that describes what Darner does (`appendonly no`), and CONFIG SET
//! accepts exactly those values and refuses others, naming the directive.

use crate::cmd::{views, with_writer, ConnCtx, Locks, Reg, TxFuture};
use crate::config::{self, Kind, ALIASES, TABLE, UNBUILT, UNBUILT_IMMUTABLE};
use crate::exec::{Hop, Tx};
use crate::log;
use crate::shared::Shared;
use bytes::Bytes;
use darner_resp::ReplyWriter;
use std::sync::Mutex;

pub fn register(r: &mut Reg) {
    r.conn("config|get", get);
    // A task: a new port or bind waits for every thread to take its new listeners.
    r.tx("config|set", Locks::None, set);
    r.conn("config|rewrite", rewrite);
    r.conn("config|help", help);
}

/// CONFIG SET and CONFIG REWRITE from different threads run one at a time, so a multi-directive
/// SET is all-or-nothing for other SETs too, and a REWRITE never sees half of one.
static CONFIG_LOCK: Mutex<()> = Mutex::new(());

/// A directive CONFIG knows: a working one (index into `TABLE`), another name of one (index
/// into `ALIASES`) or an unbuilt one (index into `UNBUILT`). An alias is a directive of its
/// own to CONFIG, as in Redis: `CONFIG GET *` lists it, and one CONFIG SET may name both it
/// and its directive (the later value wins).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Directive {
    Table(usize),
    Alias(usize),
    Unbuilt(usize),
}

impl Directive {
    fn find(name: &str) -> Option<Directive> {
        let by_name = |n: &&str| n.eq_ignore_ascii_case(name);
        TABLE
            .iter()
            .position(|d| by_name(&d.name))
            .map(Directive::Table)
            .or_else(|| {
                ALIASES
                    .iter()
                    .position(|(n, _)| by_name(n))
                    .map(Directive::Alias)
            })
            .or_else(|| {
                UNBUILT
                    .iter()
                    .position(|(n, _)| by_name(n))
                    .map(Directive::Unbuilt)
            })
    }

    fn name(self) -> &'static str {
        match self {
            Directive::Table(i) => TABLE[i].name,
            Directive::Alias(i) => ALIASES[i].0,
            Directive::Unbuilt(i) => UNBUILT[i].0,
        }
    }

    /// The table row this directive sets, if it is a working one.
    fn row(self) -> Option<usize> {
        match self {
            Directive::Table(i) => Some(i),
            Directive::Alias(i) => config::find(ALIASES[i].1),
            Directive::Unbuilt(_) => None,
        }
    }

    fn mutable(self) -> bool {
        match self {
            Directive::Unbuilt(i) => !UNBUILT_IMMUTABLE.contains(&UNBUILT[i].0),
            d => d.row().is_some_and(|i| TABLE[i].mutable),
        }
    }

    fn value(self, cfg: &config::Config) -> String {
        match (self, self.row()) {
            (_, Some(i)) => cfg.get_index(i),
            // The "feature off" value, which is what the server does.
            (Directive::Unbuilt(i), _) => UNBUILT[i].1.first().unwrap_or(&"").to_string(),
            _ => String::new(),
        }
    }

    fn all() -> impl Iterator<Item = Directive> {
        (0..TABLE.len())
            .map(Directive::Table)
            .chain((0..ALIASES.len()).map(Directive::Alias))
            .chain((0..UNBUILT.len()).map(Directive::Unbuilt))
    }
}

fn get(ctx: &mut ConnCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    // (name as replied, directive): a plain name is replied as typed, as Redis does.
    let mut found: Vec<(String, Directive)> = Vec::new();
    for pat in &args[2..] {
        let p = String::from_utf8_lossy(pat);
        if !pat.iter().any(|b| matches!(b, b'[' | b'*' | b'?')) {
            if let Some(d) = Directive::find(&p) {
                if !found.iter().any(|f| f.1 == d) {
                    found.push((p.into_owned(), d));
                }
            }
            continue;
        }
        for d in Directive::all() {
            if !found.iter().any(|f| f.1 == d)
                && darner_engine::glob_match(pat, d.name().as_bytes(), true)
            {
                found.push((d.name().to_string(), d));
            }
        }
    }
    w.map(found.len());
    for (name, d) in found {
        w.bulk(name.as_bytes());
        w.bulk(d.value(&ctx.shared.config).as_bytes());
    }
}

fn set(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let shared = tx.shared().clone();
        let mut swaps = Vec::new();
        let reply = with_writer(tx.resp3(), |w| {
            swaps = set_now(&tx, &shared, &views(&args), w)
        });
        // The reply leaves once every thread listens where the new values say (and no
        // longer where the old ones did).
        for h in swaps {
            h.await;
        }
        reply
    })
}

/// CONFIG SET's work, under the lock; returns the steps that swap the threads' listeners
/// when `port` or `bind` changed (sent before the lock is released, so that the steps of
/// two CONFIG SETs reach every thread in the order the lock gave them).
fn set_now(tx: &Tx, shared: &Shared, args: &[&[u8]], w: &mut ReplyWriter) -> Vec<Hop<()>> {
    // Name/value pairs (the table's arity already asks for at least one).
    if !args.len().is_multiple_of(2) {
        w.error(crate::cmd::ERR_SYNTAX);
        return Vec::new();
    }
    let cfg = &shared.config;
    let _serial = CONFIG_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let pairs: Vec<(String, String)> = args[2..]
        .chunks(2)
        .map(|p| {
            (
                String::from_utf8_lossy(p[0]).into_owned(),
                String::from_utf8_lossy(p[1]).into_owned(),
            )
        })
        .collect();
    // First pass: every name must be known, settable and not given twice; the first name
    // that is not, in argument order, is the one reported (as Redis does). Nothing is changed.
    let fail = |w: &mut ReplyWriter, name: &str, why: &str| {
        w.error(
            format!("ERR CONFIG SET failed (possibly related to argument '{name}') - {why}")
                .as_bytes(),
        )
    };
    let mut targets: Vec<Directive> = Vec::with_capacity(pairs.len());
    for (name, _) in &pairs {
        let Some(d) = Directive::find(name) else {
            w.error(
                format!("ERR Unknown option or number of arguments for CONFIG SET - '{name}'")
                    .as_bytes(),
            );
            return Vec::new();
        };
        if !d.mutable() {
            fail(w, name, "can't set immutable config");
            return Vec::new();
        }
        if targets.contains(&d) {
            fail(w, name, "duplicate parameter");
            return Vec::new();
        }
        targets.push(d);
    }
    // Second pass: set each, undoing the ones already set if one fails.
    let undo = |done: Vec<(usize, String)>| {
        for (i, old) in done.into_iter().rev() {
            if let Err(e) = cfg.set(TABLE[i].name, &old, true) {
                log::warning(&format!(
                    "CONFIG SET: failed restoring '{}' to '{old}': {e}",
                    TABLE[i].name
                ));
            }
        }
    };
    let old_listen = (cfg.get_i64("port"), cfg.get("bind").unwrap_or_default());
    let mut done: Vec<(usize, String)> = Vec::new();
    for (d, (_, value)) in targets.iter().zip(&pairs) {
        let result =
            match (*d, d.row()) {
                (_, Some(i)) => {
                    let old = cfg.get_index(i);
                    cfg.set(TABLE[i].name, value, false)
                        .map(|()| done.push((i, old)))
                }
                (Directive::Unbuilt(i), _) => {
                    if UNBUILT[i].1.iter().any(|ok| ok.eq_ignore_ascii_case(value)) {
                        Ok(())
                    } else {
                        Err("not supported by this version of Darner (the feature is not built yet)"
                        .to_string())
                    }
                }
                (_, None) => Ok(()),
            };
        if let Err(why) = result {
            undo(done);
            fail(w, d.name(), &why);
            return Vec::new();
        }
    }
    // A new port or bind: the new listeners open first; only when they all do are the old
    // ones closed. Otherwise nothing changes (as in Redis, which keeps serving where it did).
    let new_listen = (cfg.get_i64("port"), cfg.get("bind").unwrap_or_default());
    if new_listen == old_listen {
        w.ok();
        return Vec::new();
    }
    let mut listening = shared.listening.lock().unwrap();
    let closing: Vec<std::net::SocketAddr> = listening.closing.iter().map(|c| c.0).collect();
    let opened = crate::server::open_listeners(
        &new_listen.1,
        new_listen.0 as u16,
        shared.threads,
        &listening.addrs,
        &closing,
    );
    let opened = match opened {
        Ok(o) => o,
        Err(e) => {
            let (name, why, what) = if new_listen.0 != old_listen.0 {
                (
                    "port",
                    "Unable to listen on this port. Check server logs.",
                    "port",
                )
            } else {
                ("bind", "Failed to bind to specified addresses.", "bind")
            };
            log::warning(&format!("Warning: {e}"));
            log::warning(&format!(
                "Failed applying new configuration. Possibly related to new {what} setting. \
                 Restoring previous settings."
            ));
            drop(listening);
            undo(done);
            fail(w, name, why);
            return Vec::new();
        }
    };
    let removed: Vec<std::net::SocketAddr> = listening
        .addrs
        .iter()
        .filter(|a| !opened.bound.contains(a))
        .copied()
        .collect();
    for &a in &removed {
        match listening.closing.iter_mut().find(|c| c.0 == a) {
            Some(c) => c.1 += shared.threads,
            None => listening.closing.push((a, shared.threads)),
        }
    }
    listening.addrs = opened.bound;
    // Sent under the lock: each thread runs the swaps in the order the lock gave them.
    let hops = opened
        .per_thread
        .into_iter()
        .enumerate()
        .map(|(t, add)| {
            let removed = removed.clone();
            tx.on_thread_in_order(t, move |ctx| ctx.swap_listeners(&removed, add))
        })
        .collect();
    drop(listening);
    w.ok();
    hops
}

// ---- CONFIG REWRITE ----

const SIGNATURE: &str = "# Generated by CONFIG REWRITE";

/// Quotes a value for the config file when it needs it (empty, spaces, quotes, escapes).
fn quote(v: &str) -> String {
    let mut out = String::with_capacity(v.len() + 2);
    out.push('"');
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A byte count with the largest exact unit, as Redis writes memory directives.
fn memory(v: &str) -> String {
    match config::parse_memory(v) {
        Some(n) if n != 0 && n % (1 << 30) == 0 => format!("{}gb", n >> 30),
        Some(n) if n != 0 && n % (1 << 20) == 0 => format!("{}mb", n >> 20),
        Some(n) if n != 0 && n % (1 << 10) == 0 => format!("{}kb", n >> 10),
        _ => v.to_string(),
    }
}

/// The config-file lines for directive `i` with value `v` (client-output-buffer-limit takes
/// one line per client class).
fn directive_lines(i: usize, v: &str) -> Vec<String> {
    let d = &TABLE[i];
    let value = match d.kind {
        Kind::Str => quote(v),
        Kind::Memory { .. } => memory(v),
        Kind::Special if d.name == "dir" || d.name == "dbfilename" => quote(v),
        // One line per save point, or `save ""` for none (Redis's rewriteConfigSaveOption).
        Kind::Special if d.name == "save" => {
            let points = config::save_points(v);
            if points.is_empty() {
                return vec!["save \"\"".to_string()];
            }
            return points
                .iter()
                .map(|p| format!("save {} {}", p.seconds, p.changes))
                .collect();
        }
        // A primary's file has no `replicaof` line: the one a REPLICAOF wrote goes once
        // REPLICAOF NO ONE made it a primary (Redis's rewriteConfigReplicaOfOption), as a
        // `replicaof ""` line would stop it from starting again.
        Kind::Special if d.name == "replicaof" && v.is_empty() => return Vec::new(),
        Kind::Special if d.name == "client-output-buffer-limit" => {
            let words: Vec<&str> = v.split_whitespace().collect();
            return words
                .chunks(4)
                .map(|c| format!("{} {}", d.name, c.join(" ")))
                .collect();
        }
        _ if v.is_empty() => quote(v),
        _ => v.to_string(),
    };
    vec![format!("{} {value}", d.name)]
}

/// The new file text: the old lines with every directive of the table replaced by its current
/// value (at its first occurrence; later occurrences dropped), other lines kept as they are,
/// and non-default directives the file lacked appended after the signature line.
fn rewritten(old: &str, cfg: &config::Config) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut written = vec![false; TABLE.len()];
    let mut has_signature = false;
    for line in old.lines() {
        let t = line.trim();
        if t == SIGNATURE {
            has_signature = true;
            out.push(line.to_string());
            continue;
        }
        if t.is_empty() || t.starts_with('#') {
            out.push(line.to_string());
            continue;
        }
        let idx = config::split_line(t)
            .ok()
            .and_then(|w| w.first().and_then(|n| config::find(n)));
        match idx {
            Some(i) if written[i] => {}
            Some(i) => {
                written[i] = true;
                out.extend(directive_lines(i, &cfg.get_index(i)));
            }
            None => out.push(line.to_string()),
        }
    }
    let mut appended = Vec::new();
    for (name, value) in cfg.non_defaults() {
        if let Some(i) = config::find(name).filter(|&i| !written[i]) {
            written[i] = true;
            appended.extend(directive_lines(i, &value));
        }
    }
    // Redis always writes the save points, defaults included: a file without `save` lines
    // would get the defaults of whichever version reads it.
    if let Some(i) = config::find("save").filter(|&i| !written[i]) {
        appended.extend(directive_lines(i, &cfg.get_index(i)));
    }
    if !appended.is_empty() {
        if !has_signature {
            out.push(SIGNATURE.to_string());
        }
        out.extend(appended);
    }
    let mut text = out.join("\n");
    text.push('\n');
    text
}

/// Writes `text` over `path` through a temporary file and a rename, so a crash never leaves
/// half a config file.
fn replace_file(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = path.with_file_name(format!(
        "{}.tmp-{}",
        path.file_name()
            .map_or("darner.conf".into(), |n| n.to_string_lossy()),
        std::process::id()
    ));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

fn rewrite(ctx: &mut ConnCtx, _: &[&[u8]], w: &mut ReplyWriter) {
    if ctx.shared.config_file.is_empty() {
        return w.error(b"ERR The server is running without a config file");
    }
    let _serial = CONFIG_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let path = std::path::Path::new(&ctx.shared.config_file);
    let old = match std::fs::read_to_string(path) {
        Ok(t) => t,
        // A config file removed since start-up is written afresh, as Redis does.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => {
            log::warning(&format!("CONFIG REWRITE failed: {e}"));
            return w.error(
                format!("ERR Rewriting config file: {}", crate::log::strerror(&e)).as_bytes(),
            );
        }
    };
    match replace_file(path, &rewritten(&old, &ctx.shared.config)) {
        Ok(()) => {
            log::notice("CONFIG REWRITE executed with success.");
            w.ok();
        }
        Err(e) => {
            log::warning(&format!("CONFIG REWRITE failed: {e}"));
            w.error(format!("ERR Rewriting config file: {}", crate::log::strerror(&e)).as_bytes());
        }
    }
}

fn help(_: &mut ConnCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    super::help_reply(
        w,
        args[0],
        &[
            "GET <pattern> [<pattern> ...]",
            "    Return the directives whose names match any glob-style <pattern>, with their",
            "    values.",
            "SET <directive> <value> [<directive> <value> ...]",
            "    Change directives: either all of them or, on any error, none.",
            "RESETSTAT",
            "    Zero the statistics INFO reports.",
            "REWRITE",
            "    Write the running configuration back to the config file.",
        ],
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewrite_keeps_other_lines() {
        let cfg = config::load(None, &[]).unwrap();
        cfg.set("save", "", false).unwrap();
        cfg.set("hz", "20", false).unwrap();
        cfg.set("maxclients", "50", false).unwrap();
        cfg.set("requirepass", "a b\"c", false).unwrap();
        cfg.set("proto-max-bulk-len", "2mb", false).unwrap();
        cfg.set("client-output-buffer-limit", "normal 1mb 0 0", false)
            .unwrap();
        let old = "# my server\nport 7000\nhz 15\n\nsave \"\"\nhz 16\nappendonly no\n";
        let new = rewritten(old, &cfg);
        assert_eq!(
            new,
            "# my server\nport 6379\nhz 20\n\nsave \"\"\nappendonly no\n\
             # Generated by CONFIG REWRITE\nmaxclients 50\nrequirepass \"a b\\\"c\"\n\
             proto-max-bulk-len 2mb\n\
             client-output-buffer-limit normal 1048576 0 0\n\
             client-output-buffer-limit slave 268435456 67108864 60\n\
             client-output-buffer-limit pubsub 33554432 8388608 60\n"
        );
        // What was written loads back to the same values.
        let dir = std::env::temp_dir().join(format!("darner-rw-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("x.conf");
        std::fs::write(&file, &new).unwrap();
        let back = config::load(Some(&file), &[]).unwrap();
        for name in ["hz", "maxclients", "requirepass", "proto-max-bulk-len"] {
            assert_eq!(back.get(name), cfg.get(name), "{name}");
        }
        assert_eq!(
            back.get("client-output-buffer-limit"),
            cfg.get("client-output-buffer-limit")
        );
        // A second rewrite is stable.
        assert_eq!(rewritten(&new, &back), new);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn rewrite_drops_the_replicaof_line_of_a_promoted_replica() {
        let cfg = config::load(
            None,
            &["--replicaof".into(), "127.0.0.1".into(), "7000".into()],
        )
        .unwrap();
        cfg.set("save", "", false).unwrap();
        let old = "port 7001\nreplicaof 127.0.0.1 6999\nsave \"\"\n";
        assert_eq!(
            rewritten(old, &cfg),
            "port 6379\nreplicaof 127.0.0.1 7000\nsave \"\"\n"
        );
        // REPLICAOF NO ONE (replica::unset_master) empties the value.
        cfg.store_raw("replicaof", String::new());
        let new = rewritten(old, &cfg);
        assert_eq!(new, "port 6379\nsave \"\"\n");
        assert_eq!(
            rewritten("save \"\"\nslaveof 127.0.0.1 6999\n", &cfg),
            "save \"\"\n"
        );
        // The file loads back: a primary.
        let dir = std::env::temp_dir().join(format!("darner-rwr-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("x.conf");
        std::fs::write(&file, &new).unwrap();
        let back = config::load(Some(&file), &[]).unwrap();
        assert_eq!(back.replicaof(), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn rewrite_writes_save_points_one_line_each_defaults_included() {
        let cfg = config::load(None, &[]).unwrap();
        assert_eq!(
            rewritten("port 6379\n", &cfg),
            "port 6379\n# Generated by CONFIG REWRITE\n\
             save 3600 1\nsave 300 100\nsave 60 10000\n"
        );
        cfg.set("save", "10 2 20 0", false).unwrap();
        let new = rewritten("save 1 1\nsave 2 2\nhz 10\n", &cfg);
        assert_eq!(new, "save 10 2\nsave 20 0\nhz 10\n");
        // What was written loads back to the same points.
        let dir = std::env::temp_dir().join(format!("darner-rws-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("x.conf");
        std::fs::write(&file, &new).unwrap();
        let back = config::load(Some(&file), &[]).unwrap();
        assert_eq!(back.get("save").unwrap(), "10 2 20 0");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
