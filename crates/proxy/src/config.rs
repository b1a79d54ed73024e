//! The settings: a config file (`darner-proxy FILE [--options]` or `--config FILE`) in
//! redis.conf's syntax (`name value` lines, `#` comments, values quoted as Redis quotes them),
//! then the command line (`--name value`), which overrides the file. Names are the same in
//! both, as the server's command line uses redis.conf's. A name the proxy does not know is
//! refused at start-up, with the file and line, rather than ignored: a misspelt
//! `requirepass` must not leave the proxy open.

use std::time::Duration;

use crate::replicas::ReadPolicy;

/// The proxy's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Where clients connect (`host:port`).
    pub listen: String,
    /// Seed nodes of the cluster (`host:port`), asked for the topology in turn.
    pub cluster: Vec<String>,
    /// Event-loop threads.
    pub threads: usize,
    /// How often each thread re-reads the topology even without a MOVED.
    pub refresh_interval: Duration,
    /// How long a backend may keep a request unanswered before its connection is dropped and
    /// the requests in flight on it fail; `None` (`--op-timeout 0`, the default): no limit.
    pub op_timeout: Option<Duration>,
    /// Clients must AUTH with this password (the `default` user's, as Redis's `requirepass`).
    pub requirepass: Option<String>,
    /// The user the proxy's backend connections authenticate as (`default` when only a
    /// password is given).
    pub backend_user: Option<String>,
    /// The password the proxy's backend connections authenticate with.
    pub backend_password: Option<String>,
    /// Most client connections open at once; more are refused as Redis refuses them.
    pub maxclients: usize,
    /// Where the Prometheus endpoint listens (`host:port`, plain HTTP, `GET /metrics`).
    pub metrics_listen: Option<String>,
    /// Where read-only commands go (`--read-policy`, default `master`).
    pub read_policy: ReadPolicy,
    /// How long after a read first went out it may still be retried on another node of its
    /// shard when one fails (`--read-retry-deadline`, ms).
    pub read_retry_deadline: Duration,
    /// How long a read waits for its reply before a second copy goes to another node of its
    /// shard (`--read-hedge-after`, ms); `None` (0): reads are never hedged.
    pub read_hedge_after: Option<Duration>,
    /// The most hedges as a share of the hedgeable reads (`--read-hedge-max-percent`).
    pub read_hedge_max_percent: u32,
    /// The shared client cache's bound in bytes, over every thread (`proxy-cache yes`); `None`:
    /// no cache.
    pub cache_max_memory: Option<usize>,
}

/// The cache's bound when `proxy-cache-max-memory` is not given.
pub const DEFAULT_CACHE_MAX_MEMORY: usize = 64 << 20;

/// Usage text.
pub const USAGE: &str = "Usage: darner-proxy [config-file] --listen <host:port> \
--cluster <host:port>[,<host:port>...] [--threads <n>] [--cluster-refresh-interval <ms>] \
[--op-timeout <ms>] [--requirepass <password>] [--backend-user <user>] \
[--backend-password <password>] [--maxclients <n>] [--metrics-listen <host:port>] \
[--read-policy master|prefer-master|replica|prefer-replica|any] [--read-retry-deadline <ms>] \
[--read-hedge-after <ms>] [--read-hedge-max-percent <1-100>] \
[--proxy-cache yes|no] [--proxy-cache-max-memory <bytes>[kb|mb|gb]] [--config <file>]\n(the file takes the same names, one `name value` per line; the command \
line overrides it)";

/// Redis's default `maxclients`.
pub const DEFAULT_MAXCLIENTS: usize = 10_000;

/// The settings as they are read, before the required ones are checked.
struct Builder {
    listen: Option<String>,
    cluster: Vec<String>,
    /// The seeds came from the file: the command line's replace them.
    cluster_from_file: bool,
    threads: usize,
    refresh_ms: u64,
    op_timeout_ms: u64,
    requirepass: Option<String>,
    backend_user: Option<String>,
    backend_password: Option<String>,
    maxclients: usize,
    metrics_listen: Option<String>,
    read_policy: ReadPolicy,
    read_retry_ms: u64,
    read_hedge_ms: u64,
    read_hedge_max_percent: u32,
    cache: bool,
    cache_max_memory: usize,
}

impl Builder {
    fn new() -> Builder {
        Builder {
            listen: None,
            cluster: Vec::new(),
            cluster_from_file: false,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            refresh_ms: 10_000,
            op_timeout_ms: 0,
            requirepass: None,
            backend_user: None,
            backend_password: None,
            maxclients: DEFAULT_MAXCLIENTS,
            metrics_listen: None,
            read_policy: ReadPolicy::default(),
            read_retry_ms: 2_000,
            read_hedge_ms: 0,
            read_hedge_max_percent: 10,
            cache: false,
            cache_max_memory: DEFAULT_CACHE_MAX_MEMORY,
        }
    }

    /// Sets `name` (lower case) to `value`; `from_file`: the file's line, else the command
    /// line's option.
    fn set(&mut self, name: &str, value: &str, from_file: bool) -> Result<(), String> {
        match name {
            "listen" => self.listen = Some(value.to_string()),
            "cluster" => {
                if self.cluster_from_file && !from_file {
                    self.cluster.clear();
                    self.cluster_from_file = false;
                }
                self.cluster_from_file |= from_file;
                self.cluster.extend(
                    value
                        .split([',', ' '])
                        .map(str::trim)
                        .filter(|s| !s.is_empty())
                        .map(String::from),
                )
            }
            "threads" => {
                self.threads = value
                    .parse()
                    .ok()
                    .filter(|&n| (1..=1024).contains(&n))
                    .ok_or_else(|| format!("threads must be 1 to 1024, not {value:?}"))?
            }
            "cluster-refresh-interval" => {
                self.refresh_ms = value.parse().ok().filter(|&n| n >= 10).ok_or_else(|| {
                    format!("cluster-refresh-interval must be at least 10 (ms), not {value:?}")
                })?
            }
            "op-timeout" => {
                self.op_timeout_ms = value
                    .parse()
                    .map_err(|_| format!("op-timeout must be a number of ms, not {value:?}"))?
            }
            // An empty password is none, as Redis's `requirepass ""`.
            "requirepass" => self.requirepass = Some(value.to_string()).filter(|v| !v.is_empty()),
            "backend-user" => self.backend_user = Some(value.to_string()).filter(|v| !v.is_empty()),
            "backend-password" => {
                self.backend_password = Some(value.to_string()).filter(|v| !v.is_empty())
            }
            "maxclients" => {
                self.maxclients = value
                    .parse()
                    .ok()
                    .filter(|&n| n >= 1)
                    .ok_or_else(|| format!("maxclients must be at least 1, not {value:?}"))?
            }
            "metrics-listen" => {
                self.metrics_listen = Some(value.to_string()).filter(|v| !v.is_empty())
            }
            "read-policy" => {
                self.read_policy = ReadPolicy::parse(value).ok_or_else(|| {
                    format!("read-policy must be master, prefer-master, replica, prefer-replica or any, not {value:?}")
                })?
            }
            "read-retry-deadline" => {
                self.read_retry_ms = value.parse().map_err(|_| {
                    format!("read-retry-deadline must be a number of ms, not {value:?}")
                })?
            }
            "read-hedge-after" => {
                // Bounded: a budget of minutes hedges nothing a client still waits for, and
                // an unbounded one would overflow the clock's arithmetic.
                self.read_hedge_ms = value
                    .parse()
                    .ok()
                    .filter(|&n| n <= 60_000)
                    .ok_or_else(|| {
                        format!("read-hedge-after must be 0 (off) to 60000 ms, not {value:?}")
                    })?
            }
            "read-hedge-max-percent" => {
                self.read_hedge_max_percent = value
                    .parse()
                    .ok()
                    .filter(|n| (1..=100).contains(n))
                    .ok_or_else(|| {
                        format!("read-hedge-max-percent must be 1 to 100, not {value:?}")
                    })?
            }
            "proxy-cache" => {
                self.cache = match value.to_ascii_lowercase().as_str() {
                    "yes" => true,
                    "no" => false,
                    _ => return Err(format!("proxy-cache must be yes or no, not {value:?}")),
                }
            }
            "proxy-cache-max-memory" => {
                self.cache_max_memory = memory_size(value)
                    .filter(|&n| n >= 1024)
                    .ok_or_else(|| {
                        format!("proxy-cache-max-memory must be a size of at least 1kb (bytes, or with kb, mb, gb), not {value:?}")
                    })?
            }
            _ if from_file => return Err(format!("unknown directive '{name}'")),
            _ => return Err(format!("unknown option \"--{name}\"\n{USAGE}")),
        }
        Ok(())
    }

    fn finish(self) -> Result<Config, String> {
        let listen = self
            .listen
            .ok_or_else(|| format!("--listen is required\n{USAGE}"))?;
        if self.cluster.is_empty() {
            return Err(format!("--cluster is required\n{USAGE}"));
        }
        let addrs = std::iter::once(&listen)
            .chain(&self.cluster)
            .chain(&self.metrics_listen);
        for addr in addrs {
            match addr.rsplit_once(':') {
                Some((h, p)) if !h.is_empty() && p.parse::<u16>().is_ok() => {}
                _ => return Err(format!("{addr:?} is not host:port")),
            }
        }
        if self.backend_user.is_some() && self.backend_password.is_none() {
            return Err("backend-user needs backend-password".into());
        }
        Ok(Config {
            listen,
            cluster: self.cluster,
            threads: self.threads,
            refresh_interval: Duration::from_millis(self.refresh_ms),
            op_timeout: (self.op_timeout_ms > 0).then(|| Duration::from_millis(self.op_timeout_ms)),
            requirepass: self.requirepass,
            backend_user: self.backend_user,
            backend_password: self.backend_password,
            maxclients: self.maxclients,
            metrics_listen: self.metrics_listen,
            read_policy: self.read_policy,
            read_retry_deadline: Duration::from_millis(self.read_retry_ms),
            read_hedge_after: (self.read_hedge_ms > 0)
                .then(|| Duration::from_millis(self.read_hedge_ms)),
            read_hedge_max_percent: self.read_hedge_max_percent,
            cache_max_memory: self.cache.then_some(self.cache_max_memory),
        })
    }
}

/// A size as redis.conf writes them (memtoll): a number of bytes, or with `k`/`m`/`g` (powers
/// of 1000) or `kb`/`mb`/`gb` (powers of 1024), any case.
fn memory_size(value: &str) -> Option<usize> {
    let v = value.to_ascii_lowercase();
    let digits = v.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit: usize = match &v[digits.len()..] {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1024 * 1024,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    digits.parse::<usize>().ok()?.checked_mul(unit)
}

/// Reads the arguments after the program name (and the config file they name).
pub fn parse(args: &[String]) -> Result<Config, String> {
    parse_with(args, |path| {
        std::fs::read_to_string(path).map_err(|e| format!("cannot read config file {path}: {e}"))
    })
}

/// [`parse`], reading files with `read`.
pub(crate) fn parse_with(
    args: &[String],
    read: impl Fn(&str) -> Result<String, String>,
) -> Result<Config, String> {
    let mut b = Builder::new();
    let mut rest = args;
    let mut file = None;
    if let Some(first) = args.first().filter(|a| !a.starts_with('-')) {
        file = Some(first.clone());
        rest = &args[1..];
    }
    // `--config FILE` is read first wherever it is: the other options override it.
    let mut options = Vec::new();
    let mut i = 0;
    while i < rest.len() {
        let name = rest[i].trim_start_matches("--").to_ascii_lowercase();
        let value = rest
            .get(i + 1)
            .ok_or_else(|| format!("missing value for --{name}\n{USAGE}"))?;
        if name == "config" {
            if file.is_some() {
                return Err("one config file only".into());
            }
            file = Some(value.clone());
        } else {
            options.push((name, value));
        }
        i += 2;
    }
    if let Some(path) = file {
        let text = read(&path)?;
        for (line, name, value) in directives(&text).map_err(|e| format!("{path}:{e}"))? {
            b.set(&name, &value, true)
                .map_err(|e| format!("{path}:{line}: {e}"))?;
        }
    }
    for (name, value) in options {
        b.set(&name, value, false)?;
    }
    b.finish()
}

/// The file's directives: (line number, lower-cased name, value). Several words after a name
/// are one value joined by spaces (`cluster a:1 b:2`).
fn directives(text: &str) -> Result<Vec<(usize, String, String)>, String> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        // What Redis trims (sdstrim " \t\r\n"): other blanks may be part of a bare value.
        let line = line.trim_matches([' ', '\t', '\r', '\n']);
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let words = split_args(line).map_err(|e| format!("{}: {e}", n + 1))?;
        let Some((name, values)) = words.split_first() else {
            continue;
        };
        if values.is_empty() {
            return Err(format!("{}: '{name}' needs a value", n + 1));
        }
        out.push((n + 1, name.to_ascii_lowercase(), values.join(" ")));
    }
    Ok(out)
}

/// A line split into words as redis.conf's parser does: Redis's `sdssplitargs`, the one the
/// server's inline requests and the AOF manifest use (`darner_resp::split_args`): blanks
/// separate, `"..."` takes `\xHH`, `\n`, `\r`, `\t`, `\b`, `\a` and `\` before any other
/// byte, `'...'` takes `\'`, a quote may open mid-word, a closing quote must end its word.
/// One shared splitter rather than a copy here, so that a value quoted for Redis reads the
/// same in the proxy's file.
pub(crate) fn split_args(line: &str) -> Result<Vec<String>, String> {
    // Redis splits a C string: a NUL would silently cut the line there.
    if line.contains('\0') {
        return Err("a NUL byte in the line".into());
    }
    let words = darner_resp::split_args(line.as_bytes()).ok_or_else(|| {
        "unbalanced quotes (or a closing quote not followed by a space)".to_string()
    })?;
    words
        .into_iter()
        .map(|w| String::from_utf8(w).map_err(|_| "a value is not UTF-8".to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn parses_and_refuses() {
        let c = parse(&args(
            "--listen 127.0.0.1:7000 --cluster a:1,b:2 --threads 3 --cluster-refresh-interval 50",
        ))
        .unwrap();
        assert_eq!(c.cluster, vec!["a:1", "b:2"]);
        assert_eq!(c.threads, 3);
        assert_eq!(c.refresh_interval, Duration::from_millis(50));
        assert_eq!(c.op_timeout, None);
        assert_eq!(c.maxclients, DEFAULT_MAXCLIENTS);
        assert_eq!(c.requirepass, None);
        let c = parse(&args("--listen h:1 --cluster a:1 --op-timeout 250")).unwrap();
        assert_eq!(c.op_timeout, Some(Duration::from_millis(250)));
        assert!(parse(&args("--listen h:1 --cluster a:1 --op-timeout -1")).is_err());
        assert_eq!(c.read_policy, ReadPolicy::Master);
        assert_eq!(c.read_retry_deadline, Duration::from_millis(2000));
        let c = parse(&args(
            "--listen h:1 --cluster a:1 --read-policy prefer-replica --read-retry-deadline 300",
        ))
        .unwrap();
        assert_eq!(c.read_policy, ReadPolicy::PreferReplica);
        assert_eq!(c.read_retry_deadline, Duration::from_millis(300));
        assert!(parse(&args("--listen h:1 --cluster a:1 --read-policy slave")).is_err());
        assert_eq!(c.read_hedge_after, None, "hedging is off by default");
        assert_eq!(c.read_hedge_max_percent, 10);
        let c = parse(&args(
            "--listen h:1 --cluster a:1 --read-hedge-after 20 --read-hedge-max-percent 100",
        ))
        .unwrap();
        assert_eq!(c.read_hedge_after, Some(Duration::from_millis(20)));
        assert_eq!(c.read_hedge_max_percent, 100);
        let c = parse(&args("--listen h:1 --cluster a:1 --read-hedge-after 0")).unwrap();
        assert_eq!(c.read_hedge_after, None);
        for bad in [
            "--read-hedge-after -1",
            "--read-hedge-after 60001",
            "--read-hedge-max-percent 0",
            "--read-hedge-max-percent 101",
        ] {
            assert!(
                parse(&args(&format!("--listen h:1 --cluster a:1 {bad}"))).is_err(),
                "{bad}"
            );
        }
        assert!(parse(&args("--listen 127.0.0.1:7000")).is_err());
        assert!(parse(&args("--listen x --cluster a:1")).is_err());
        assert!(parse(&args("--listen h:1 --cluster a:1 --threads 0")).is_err());
        assert!(parse(&args("--listen h:1 --cluster a:1 --bogus 1")).is_err());
        assert!(parse(&args("--listen h:1 --cluster")).is_err());
        assert!(parse(&args("--listen h:1 --cluster a:1 --maxclients 0")).is_err());
        assert!(parse(&args("--listen h:1 --cluster a:1 --metrics-listen 9100")).is_err());
        assert!(parse(&args("--listen h:1 --cluster a:1 --backend-user u")).is_err());
    }

    #[test]
    fn cache_options() {
        let c = parse(&args("--listen h:1 --cluster a:1")).unwrap();
        assert_eq!(c.cache_max_memory, None);
        let c = parse(&args("--listen h:1 --cluster a:1 --proxy-cache yes")).unwrap();
        assert_eq!(c.cache_max_memory, Some(DEFAULT_CACHE_MAX_MEMORY));
        let c = parse(&args(
            "--listen h:1 --cluster a:1 --proxy-cache YES --proxy-cache-max-memory 2mb",
        ))
        .unwrap();
        assert_eq!(c.cache_max_memory, Some(2 << 20));
        let c = parse_with(&args("f --proxy-cache-max-memory 5k"), |_| {
            Ok("listen h:1\ncluster a:1\nproxy-cache yes\n".into())
        })
        .unwrap();
        assert_eq!(c.cache_max_memory, Some(5000));
        let c = parse(&args(
            "--listen h:1 --cluster a:1 --proxy-cache no --proxy-cache-max-memory 1gb",
        ))
        .unwrap();
        assert_eq!(c.cache_max_memory, None);
        for bad in [
            "--proxy-cache maybe",
            "--proxy-cache-max-memory 1",
            "--proxy-cache-max-memory 3tb",
            "--proxy-cache-max-memory mb",
            "--proxy-cache-max-memory 99999999999999999999gb",
        ] {
            assert!(
                parse(&args(&format!("--listen h:1 --cluster a:1 {bad}"))).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn file_then_command_line() {
        let file = "# the proxy\n\
                    listen 127.0.0.1:7000\n\
                    cluster a:1 b:2\n\
                    \n   REQUIREPASS \"se same\\x21\"\n\
                    backend-password 'it\\'s'\n\
                    maxclients 5\n";
        let read = |_: &str| Ok(file.to_string());
        let c = parse_with(&args("proxy.conf"), read).unwrap();
        assert_eq!(c.listen, "127.0.0.1:7000");
        assert_eq!(c.cluster, vec!["a:1", "b:2"]);
        assert_eq!(c.requirepass.as_deref(), Some("se same!"));
        assert_eq!(c.maxclients, 5);
        assert_eq!(c.backend_password.as_deref(), Some("it's"));
        // The command line wins, and its seeds replace the file's.
        let c = parse_with(
            &args("--maxclients 7 --config proxy.conf --cluster c:3"),
            read,
        )
        .unwrap();
        assert_eq!(c.maxclients, 7);
        assert_eq!(c.cluster, vec!["c:3"]);
        let bad = |_: &str| Ok("listen h:1\ncluster a:1\nrequirepas x\n".to_string());
        assert_eq!(
            parse_with(&args("p.conf"), bad).unwrap_err(),
            "p.conf:3: unknown directive 'requirepas'"
        );
        let bad = |_: &str| Ok("maxclients\n".to_string());
        assert_eq!(
            parse_with(&args("p.conf"), bad).unwrap_err(),
            "p.conf:1: 'maxclients' needs a value"
        );
        let bad = |_: &str| Ok("requirepass \"x\n".to_string());
        assert!(parse_with(&args("p.conf"), bad)
            .unwrap_err()
            .contains("unbalanced"));
        let bad = |_: &str| Ok("threads 0\n".to_string());
        assert!(parse_with(&args("p.conf"), bad)
            .unwrap_err()
            .starts_with("p.conf:1: threads must be"));
    }

    // ---- the file's splitter under its grammar ----

    use proptest::prelude::*;

    /// `word` written the way the grammar allows, in the form `how` picks: bare (when it has no
    /// blank, quote or backslash and is not empty), in single quotes (escaping `'`; no line
    /// break, which would end the file's line), or in double
    /// quotes with escapes (`\xHH` for other control bytes and, by `hex`, for any byte).
    fn quote(word: &str, how: u8, hex: bool) -> String {
        let bare_ok = !word.is_empty()
            && !word
                .bytes()
                .any(|c| c.is_ascii_whitespace() || b"\"'\\\x0b\x0c".contains(&c));
        match how % 3 {
            0 if bare_ok => word.to_string(),
            1 if !word.contains(['\\', '\n']) => format!("'{}'", word.replace('\'', "\\'")),
            _ => {
                let mut q = String::from("\"");
                for c in word.chars() {
                    match c {
                        '"' => q.push_str("\\\""),
                        '\\' => q.push_str("\\\\"),
                        '\n' => q.push_str("\\n"),
                        '\r' => q.push_str("\\r"),
                        '\t' => q.push_str("\\t"),
                        '\x08' => q.push_str("\\b"),
                        '\x07' => q.push_str("\\a"),
                        c if c.is_ascii() && (hex || c.is_ascii_control()) => {
                            q.push_str(&format!("\\x{:02x}", c as u8))
                        }
                        c => q.push(c),
                    }
                }
                q.push('"');
                q
            }
        }
    }

    fn word() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z0-9:._-]{1,8}",
            "[ -~]{0,12}",
            "[\\x01-\\x7f]{0,12}",
            any::<String>().prop_map(|s| s.replace('\0', "")),
        ]
    }

    proptest! {
        /// Words quoted by the grammar's rules, between any blanks, split back to themselves.
        #[test]
        fn quoted_words_split_back_to_themselves(
            words in proptest::collection::vec((word(), any::<u8>(), any::<bool>()), 0..6),
            blanks in proptest::collection::vec("[ \t]{1,3}", 7),
        ) {
            let mut line = blanks[6].clone();
            for (i, (w, how, hex)) in words.iter().enumerate() {
                line.push_str(&quote(w, *how, *hex));
                line.push_str(&blanks[i]);
            }
            let want: Vec<String> = words.iter().map(|(w, _, _)| w.clone()).collect();
            prop_assert_eq!(split_args(&line), Ok(want), "{:?}", line);
        }

        /// A quoted password in the file is the password, whatever bytes it holds.
        #[test]
        fn quoted_values_in_the_file_are_read_as_written(
            pass in word().prop_filter("a value", |w| !w.is_empty()),
            how in any::<u8>(),
            hex in any::<bool>(),
        ) {
            let file = format!("listen h:1\ncluster a:1\nrequirepass {}\n", quote(&pass, how, hex));
            let c = parse_with(&args("f"), |_| Ok(file.clone())).unwrap();
            prop_assert_eq!(c.requirepass, Some(pass));
        }

        /// Any file text: a config or an error, never a panic.
        #[test]
        fn arbitrary_files_never_panic(data in proptest::collection::vec(any::<u8>(), 0..400)) {
            crate::fuzz_support::exercise_config(&data);
        }

        /// Lines made of the grammar's special bytes: never a panic.
        #[test]
        fn quote_and_escape_soup_never_panics(line in "[ a\"'\\\\xn0-9A-F\t]{0,40}") {
            let _ = split_args(&line);
        }
    }

    /// The proxy's own copy of the splitter differed from Redis's: a quote opening mid-word
    /// (`ab"c d"`) was a literal byte, `\b` and `\a` were `b` and `a`, and Unicode blanks were
    /// trimmed from a line's ends; the file now reads as Redis reads it.
    #[test]
    fn regression_splitter_follows_sdssplitargs() {
        assert_eq!(split_args(r#"a"b c"d"#), Err(split_args("\"").unwrap_err()));
        assert_eq!(split_args(r#"ab"c d" e"#).unwrap(), vec!["abc d", "e"]);
        assert_eq!(split_args(r#""\x41\b\a\q""#).unwrap(), vec!["A\x08\x07q"]);
        assert_eq!(split_args(r#""\x4g""#).unwrap(), vec!["x4g"]);
        assert!(split_args("\"a\"b").is_err());
        assert!(split_args("a\0b").is_err());
        let file = "listen h:1\ncluster a:1\nrequirepass pass\u{a0}\n";
        let c = parse_with(&args("f"), |_| Ok(file.to_string())).unwrap();
        assert_eq!(c.requirepass.as_deref(), Some("pass\u{a0}"));
        assert_eq!(
            split_args(r#""\xff""#),
            Err("a value is not UTF-8".to_string())
        );
    }
}
