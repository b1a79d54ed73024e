//! The replica's side of the handshake, from the connection to its primary to the answer to
//! `PSYNC`: what to send, what each reply means, and the lines Redis 7.2 logs on the way
//! (`syncWithMaster`, `slaveTryPartialResynchronization`).
//!
//! The sequence: `PING` (any `+` reply, or an authentication error, lets the handshake go on);
//! then, in one write, `AUTH [masteruser] masterauth` when configured, `REPLCONF
//! listening-port <port>`, `REPLCONF ip-address <ip>` when `replica-announce-ip` is set, and
//! `REPLCONF capa eof capa psync2`; their replies in that order (only AUTH's failure is
//! fatal; the others are logged as not critical, for primaries that do not know them); then
//! `PSYNC <cached replid> <cached offset + 1>` (or `PSYNC ? -1` with nothing cached), whose
//! answer decides: `+FULLRESYNC <replid> <offset>` (a snapshot follows), `+CONTINUE [<replid>]`
//! (the stream goes on from the cached offset), `-NOMASTERLINK` / `-LOADING` (try again later),
//! and any other error: the primary does not know PSYNC, so the replica sends `SYNC`, after
//! which a snapshot follows with no offset. Empty lines before the PSYNC answer are the
//! primary's keep-alives.

use crate::history::ReplId;
use crate::line::LineReader;
use crate::Level;

/// What the replica says about itself, and what it remembers of its primary.
#[derive(Debug, Clone, Default)]
pub struct Config {
    pub masteruser: Option<Vec<u8>>,
    pub masterauth: Option<Vec<u8>>,
    /// `replica-announce-port`, else the port this server listens on.
    pub listening_port: u32,
    /// `replica-announce-ip`.
    pub announce_ip: Option<Vec<u8>>,
    /// The primary this replica followed last: its ID and the offset reached.
    pub cached: Option<(ReplId, i64)>,
    /// A FAILOVER in progress: the PSYNC asks the target to become the primary.
    pub failover: bool,
}

/// How a finished handshake continues.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A snapshot follows, then the stream from `offset`. None: the `+FULLRESYNC` line was
    /// malformed (Redis then blanks the primary's ID, so the next PSYNC cannot continue, and
    /// counts the offset as unknown).
    FullResync(Option<(ReplId, i64)>),
    /// The stream continues from the cached offset. `new_id`: the primary's ID changed (the
    /// replica shifts its history: [`crate::History::shift`], and drops its own replicas).
    Continue { new_id: Option<ReplId> },
    /// The primary does not know PSYNC: `SYNC` was sent and a snapshot follows, with no
    /// offset (a pre-PSYNC primary).
    Sync,
}

/// Why the handshake stopped: the link is dropped and tried again later. The reason has been
/// logged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failed;

/// What the caller must do after a step: bytes to send and lines to log.
#[derive(Debug, Default)]
pub struct Output {
    pub send: Vec<u8>,
    pub log: Vec<(Level, String)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Ping,
    Auth,
    Port,
    Ip,
    Capa,
    Psync,
    Done,
}

/// The handshake in progress.
#[derive(Debug)]
pub struct Handshake {
    config: Config,
    state: State,
    line: LineReader,
}

/// A command as the replica sends it (multibulk).
pub fn command(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

impl Handshake {
    /// Starts once connected: the PING goes out.
    pub fn start(config: Config, out: &mut Output) -> Handshake {
        out.send.extend_from_slice(&command(&[b"PING"]));
        Handshake {
            config,
            state: State::Ping,
            line: LineReader::default(),
        }
    }

    /// Takes the primary's bytes. Returns how many were consumed and, once the PSYNC answer
    /// came, the outcome: the bytes after `consumed` are then the snapshot or the stream.
    pub fn feed(
        &mut self,
        input: &[u8],
        out: &mut Output,
    ) -> Result<(usize, Option<Outcome>), Failed> {
        let mut used = 0;
        while used < input.len() && self.state != State::Done {
            let (n, line) = match self.line.feed(&input[used..]) {
                Ok(r) => r,
                Err(_) => {
                    out.log.push((
                        Level::Warning,
                        "Reply from MASTER too long: not a primary speaking the replication protocol"
                            .into(),
                    ));
                    return Err(Failed);
                }
            };
            used += n;
            let Some(line) = line else { break };
            if let Some(outcome) = self.on_line(&line, out)? {
                self.state = State::Done;
                return Ok((used, Some(outcome)));
            }
        }
        Ok((used, None))
    }

    fn on_line(&mut self, line: &[u8], out: &mut Output) -> Result<Option<Outcome>, Failed> {
        let text = String::from_utf8_lossy(line).into_owned();
        let error = line.first() == Some(&b'-');
        match self.state {
            State::Ping => {
                if line.first() != Some(&b'+')
                    && !line.starts_with(b"-NOAUTH")
                    && !line.starts_with(b"-NOPERM")
                    && !line.starts_with(b"-ERR operation not permitted")
                {
                    out.log.push((
                        Level::Warning,
                        format!("Error reply to PING from master: '{text}'"),
                    ));
                    return Err(Failed);
                }
                out.log.push((
                    Level::Notice,
                    "Master replied to PING, replication can continue...".into(),
                ));
                self.send_handshake(out);
                self.state = if self.config.masterauth.is_some() {
                    State::Auth
                } else {
                    State::Port
                };
            }
            State::Auth => {
                if error {
                    out.log
                        .push((Level::Warning, format!("Unable to AUTH to MASTER: {text}")));
                    return Err(Failed);
                }
                self.state = State::Port;
            }
            State::Port => {
                if error {
                    out.log.push((
                        Level::Notice,
                        format!(
                            "(Non critical) Master does not understand REPLCONF listening-port: {text}"
                        ),
                    ));
                }
                self.state = if self.config.announce_ip.is_some() {
                    State::Ip
                } else {
                    State::Capa
                };
            }
            State::Ip => {
                if error {
                    out.log.push((
                        Level::Notice,
                        format!(
                            "(Non critical) Master does not understand REPLCONF ip-address: {text}"
                        ),
                    ));
                }
                self.state = State::Capa;
            }
            State::Capa => {
                if error {
                    out.log.push((
                        Level::Notice,
                        format!("(Non critical) Master does not understand REPLCONF capa: {text}"),
                    ));
                }
                self.send_psync(out);
                self.state = State::Psync;
            }
            State::Psync => {
                if line.is_empty() {
                    // A keep-alive while the primary prepares its answer.
                    return Ok(None);
                }
                return self.on_psync_reply(line, &text, out).map(Some);
            }
            State::Done => {}
        }
        Ok(None)
    }

    fn send_handshake(&self, out: &mut Output) {
        let c = &self.config;
        if let Some(pass) = &c.masterauth {
            match &c.masteruser {
                Some(user) => out.send.extend(command(&[b"AUTH", user, pass])),
                None => out.send.extend(command(&[b"AUTH", pass])),
            }
        }
        let port = c.listening_port.to_string();
        out.send
            .extend(command(&[b"REPLCONF", b"listening-port", port.as_bytes()]));
        if let Some(ip) = &c.announce_ip {
            out.send.extend(command(&[b"REPLCONF", b"ip-address", ip]));
        }
        out.send
            .extend(command(&[b"REPLCONF", b"capa", b"eof", b"capa", b"psync2"]));
    }

    fn send_psync(&self, out: &mut Output) {
        let (id, offset) = match &self.config.cached {
            Some((id, reached)) => {
                let offset = (reached + 1).to_string();
                out.log.push((
                    Level::Notice,
                    format!("Trying a partial resynchronization (request {id}:{offset})."),
                ));
                (id.as_bytes().to_vec(), offset)
            }
            None => {
                out.log.push((
                    Level::Notice,
                    "Partial resynchronization not possible (no cached master)".into(),
                ));
                (b"?".to_vec(), "-1".to_string())
            }
        };
        let mut args: Vec<&[u8]> = vec![b"PSYNC", &id, offset.as_bytes()];
        if self.config.failover {
            args.push(b"FAILOVER");
        }
        out.send.extend(command(&args));
    }

    fn on_psync_reply(
        &mut self,
        line: &[u8],
        text: &str,
        out: &mut Output,
    ) -> Result<Outcome, Failed> {
        if line.starts_with(b"+FULLRESYNC") {
            // `+FULLRESYNC <40-byte id> <offset>`, split at the first two spaces.
            let parsed = line.iter().position(|&b| b == b' ').and_then(|a| {
                let rest = &line[a + 1..];
                let b = rest.iter().position(|&b| b == b' ')?;
                let id = ReplId::parse(&rest[..b])?;
                let (offset, _) = darner_resp::num::strtoll(&rest[b + 1..]);
                Some((id, offset))
            });
            match parsed {
                Some((id, offset)) => out.log.push((
                    Level::Notice,
                    format!("Full resync from master: {id}:{offset}"),
                )),
                None => out.log.push((
                    Level::Warning,
                    "Master replied with wrong +FULLRESYNC syntax.".into(),
                )),
            }
            return Ok(Outcome::FullResync(parsed));
        }
        if line.starts_with(b"+CONTINUE") {
            let Some((cached, _)) = self.config.cached else {
                out.log.push((
                    Level::Warning,
                    format!(
                        "Unexpected reply to PSYNC from master: {text} (nothing to continue from)"
                    ),
                ));
                return Err(Failed);
            };
            out.log.push((
                Level::Notice,
                "Successful partial resynchronization with master.".into(),
            ));
            // `+CONTINUE <id>`: the ID runs from byte 10 to the end (or a NUL).
            let id = line.get(10..).and_then(|rest| {
                let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
                ReplId::parse(&rest[..end])
            });
            let new_id = id.filter(|id| *id != cached);
            if let Some(id) = new_id {
                out.log.push((
                    Level::Notice,
                    format!("Master replication ID changed to {id}"),
                ));
            }
            out.log.push((
                Level::Notice,
                "MASTER <-> REPLICA sync: Master accepted a Partial Resynchronization.".into(),
            ));
            return Ok(Outcome::Continue { new_id });
        }
        if line.starts_with(b"-NOMASTERLINK") || line.starts_with(b"-LOADING") {
            out.log.push((
                Level::Notice,
                format!("Master is currently unable to PSYNC but should be in the future: {text}"),
            ));
            return Err(Failed);
        }
        if line.starts_with(b"-ERR") {
            out.log.push((
                Level::Notice,
                format!("Master does not support PSYNC or is in error state (reply: {text})"),
            ));
        } else {
            out.log.push((
                Level::Warning,
                format!("Unexpected reply to PSYNC from master: {text}"),
            ));
        }
        out.log
            .push((Level::Notice, "Retrying with SYNC...".into()));
        out.send.extend_from_slice(b"SYNC\r\n");
        Ok(Outcome::Sync)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(config: Config, replies: &[u8]) -> (Output, Result<(usize, Option<Outcome>), Failed>) {
        let mut out = Output::default();
        let mut h = Handshake::start(config, &mut out);
        let r = h.feed(replies, &mut out);
        (out, r)
    }

    fn sent_commands(bytes: &[u8]) -> Vec<String> {
        // Multibulk commands, rendered as space-separated words for comparison.
        let mut out = Vec::new();
        let text = String::from_utf8_lossy(bytes).into_owned();
        let mut parts = text.split("\r\n").peekable();
        while let Some(head) = parts.next() {
            if head.is_empty() {
                continue;
            }
            if let Some(n) = head.strip_prefix('*') {
                let n: usize = n.parse().unwrap();
                let mut words = Vec::new();
                for _ in 0..n {
                    parts.next();
                    words.push(parts.next().unwrap().to_string());
                }
                out.push(words.join(" "));
            } else {
                out.push(head.to_string());
            }
        }
        out
    }

    #[test]
    fn a_first_sync_sends_the_handshake_and_asks_for_everything() {
        let cfg = Config {
            listening_port: 7001,
            ..Config::default()
        };
        let id = "f".repeat(40);
        let replies = format!("+PONG\r\n+OK\r\n+OK\r\n\n\n+FULLRESYNC {id} 1234\r\nREDIS0011");
        let (out, r) = run(cfg, replies.as_bytes());
        let (used, outcome) = r.unwrap();
        assert_eq!(&replies.as_bytes()[used..], b"REDIS0011");
        assert_eq!(
            outcome,
            Some(Outcome::FullResync(Some((
                ReplId::parse(id.as_bytes()).unwrap(),
                1234
            ))))
        );
        assert_eq!(
            sent_commands(&out.send),
            [
                "PING",
                "REPLCONF listening-port 7001",
                "REPLCONF capa eof capa psync2",
                "PSYNC ? -1"
            ]
        );
        assert!(out
            .log
            .iter()
            .any(|(_, l)| l == &format!("Full resync from master: {id}:1234")));
    }

    #[test]
    fn a_cached_primary_asks_to_continue_after_its_offset_with_auth_and_ip() {
        let cached = ReplId([b'a'; 40]);
        let cfg = Config {
            masteruser: Some(b"u".to_vec()),
            masterauth: Some(b"p".to_vec()),
            listening_port: 1,
            announce_ip: Some(b"10.0.0.1".to_vec()),
            cached: Some((cached, 99)),
            failover: true,
        };
        let new = "b".repeat(40);
        let replies = format!("+PONG\r\n+OK\r\n-ERR x\r\n+OK\r\n+OK\r\n+CONTINUE {new}\r\n");
        let (out, r) = run(cfg, replies.as_bytes());
        assert_eq!(
            r.unwrap().1,
            Some(Outcome::Continue {
                new_id: ReplId::parse(new.as_bytes())
            })
        );
        assert_eq!(
            sent_commands(&out.send),
            [
                "PING",
                "AUTH u p",
                "REPLCONF listening-port 1",
                "REPLCONF ip-address 10.0.0.1",
                "REPLCONF capa eof capa psync2",
                &format!("PSYNC {} 100 FAILOVER", "a".repeat(40)),
            ]
        );
        assert!(out.log.iter().any(|(l, s)| *l == Level::Notice
            && s == "(Non critical) Master does not understand REPLCONF listening-port: -ERR x"));
    }

    #[test]
    fn continue_with_the_same_id_or_none_keeps_the_history() {
        let cached = ReplId([b'a'; 40]);
        for reply in [format!("+CONTINUE {}", "a".repeat(40)), "+CONTINUE".into()] {
            let cfg = Config {
                cached: Some((cached, 5)),
                ..Config::default()
            };
            let replies = format!("+PONG\r\n+OK\r\n+OK\r\n{reply}\r\n");
            let (_, r) = run(cfg, replies.as_bytes());
            assert_eq!(r.unwrap().1, Some(Outcome::Continue { new_id: None }));
        }
    }

    #[test]
    fn failures_stop_the_handshake_with_redis_lines() {
        for (replies, line) in [
            ("-ERR unknown\r\n", "Error reply to PING from master: '-ERR unknown'"),
            (
                "+PONG\r\n-WRONGPASS bad\r\n",
                "Unable to AUTH to MASTER: -WRONGPASS bad",
            ),
            (
                "+PONG\r\n+OK\r\n+OK\r\n+OK\r\n-LOADING Redis is loading\r\n",
                "Master is currently unable to PSYNC but should be in the future: -LOADING Redis is loading",
            ),
        ] {
            let cfg = Config {
                masterauth: Some(b"p".to_vec()),
                ..Config::default()
            };
            let (out, r) = run(cfg, replies.as_bytes());
            assert_eq!(r, Err(Failed), "{replies}");
            assert_eq!(out.log.last().unwrap().1, line);
        }
    }

    #[test]
    fn an_authentication_error_to_ping_lets_the_handshake_go_on() {
        let (out, r) = run(Config::default(), b"-NOAUTH Authentication required.\r\n");
        assert_eq!(r.unwrap(), (34, None));
        assert!(sent_commands(&out.send).contains(&"REPLCONF capa eof capa psync2".to_string()));
    }

    #[test]
    fn a_primary_without_psync_gets_sync() {
        let replies = b"+PONG\r\n+OK\r\n+OK\r\n-ERR unknown command 'PSYNC'\r\n$5\r\n";
        let (out, r) = run(Config::default(), replies);
        let (used, outcome) = r.unwrap();
        assert_eq!(outcome, Some(Outcome::Sync));
        assert_eq!(&replies[used..], b"$5\r\n");
        assert!(out.send.ends_with(b"SYNC\r\n"));
    }

    #[test]
    fn a_malformed_fullresync_goes_on_without_an_offset() {
        let (out, r) = run(
            Config::default(),
            b"+PONG\r\n+OK\r\n+OK\r\n+FULLRESYNC abc 5\r\n",
        );
        assert_eq!(r.unwrap().1, Some(Outcome::FullResync(None)));
        assert_eq!(
            out.log.last().unwrap().1,
            "Master replied with wrong +FULLRESYNC syntax."
        );
    }
}
