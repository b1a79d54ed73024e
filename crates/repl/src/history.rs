//! A server's replication history: who it is in the replication protocol, and the decision a
//! primary makes when a replica sends `PSYNC <replid> <offset>`.
//!
//! A history is named by a replication ID (40 hex characters) and measured by an offset, the
//! number of stream bytes since it began. Every dataset change a primary propagates advances
//! its offset; a replica that applied the same bytes has the same offset, which is how the two
//! agree on where to continue after a disconnect. When a replica is promoted, its history
//! goes on under a new ID, and the old one stays valid up to the offset at the promotion
//! (`replid2`, `second_replid_offset`), so the other replicas of the old primary, which ask
//! with the old ID, can continue with the new primary without a full sync (PSYNC2). The rules
//! and log lines are Redis 7.2's (`masterTryPartialResynchronization`, `shiftReplicationId`).

use crate::backlog::Backlog;
use crate::Level;

/// A replication ID: 40 hex characters.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReplId(pub [u8; 40]);

impl ReplId {
    /// The ID with no history (`0000...`, what `master_replid2` shows when unset).
    pub const ZERO: ReplId = ReplId([b'0'; 40]);

    /// An ID made of `random`'s bytes as hex (the caller supplies the randomness; Redis uses
    /// 20 random bytes the same way, `getRandomHexChars`).
    pub fn from_random(random: [u8; 20]) -> ReplId {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut id = [0u8; 40];
        for (i, b) in random.iter().enumerate() {
            id[2 * i] = HEX[usize::from(b >> 4)];
            id[2 * i + 1] = HEX[usize::from(b & 15)];
        }
        ReplId(id)
    }

    /// `bytes` as an ID when it is exactly 40 bytes long (a replica takes what its primary
    /// sends, as Redis does: only the length is checked).
    pub fn parse(bytes: &[u8]) -> Option<ReplId> {
        <[u8; 40]>::try_from(bytes).ok().map(ReplId)
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// Redis compares IDs with `strcasecmp`.
    fn matches(&self, other: &[u8]) -> bool {
        self.0.eq_ignore_ascii_case(other)
    }
}

impl std::fmt::Display for ReplId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&String::from_utf8_lossy(&self.0))
    }
}

impl std::fmt::Debug for ReplId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ReplId({self})")
    }
}

/// A server's place in its replication history, and its backlog.
#[derive(Debug, Clone)]
pub struct History {
    /// INFO's `master_replid`.
    pub replid: ReplId,
    /// INFO's `master_replid2`: the previous history, valid up to `second_replid_offset`.
    pub replid2: ReplId,
    /// INFO's `second_repl_offset` (-1: none).
    pub second_replid_offset: i64,
    /// INFO's `master_repl_offset`: stream bytes of this history so far.
    pub master_repl_offset: i64,
    /// None until a replica first asks for a sync (or this server follows a primary).
    pub backlog: Option<Backlog>,
}

/// What a primary answers to `PSYNC`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PsyncAnswer {
    /// A partial resync: send `reply`, then the backlog from `from`.
    Continue { reply: Vec<u8>, from: i64 },
    /// A full resync is needed (the `+FULLRESYNC` line goes once the snapshot's offset is
    /// known: [`History::fullresync_reply`]). `partial_err`: the replica asked for a partial
    /// resync and it failed (INFO's `sync_partial_err`; not for `?`).
    FullResync { partial_err: bool },
}

impl History {
    /// A new history (a server that never replicated): offset 0, no second ID, no backlog.
    pub fn new(replid: ReplId) -> History {
        History {
            replid,
            replid2: ReplId::ZERO,
            second_replid_offset: -1,
            master_repl_offset: 0,
            backlog: None,
        }
    }

    /// Appends the stream's next bytes: the offset advances and the backlog keeps them. With
    /// no backlog nothing is counted, as in Redis (no replica has ever asked).
    pub fn feed(&mut self, bytes: &[u8]) {
        if let Some(b) = self.backlog.as_mut() {
            b.feed(bytes);
            self.master_repl_offset += bytes.len() as i64;
        }
    }

    /// Creates the backlog (first replica, or this server starts following a primary).
    pub fn create_backlog(&mut self, size: usize) {
        self.backlog = Some(Backlog::new(size, self.master_repl_offset + 1));
    }

    /// Makes sure a backlog of `size` bytes continues at the current offset: one that does
    /// not end there (or none) is replaced by an empty one starting at `master_repl_offset +
    /// 1`. A replica keeps feeding its backlog with its primary's stream, so that its own
    /// replicas (chained) and, once promoted, its former siblings can continue from it.
    /// Returns whether it was replaced.
    pub fn ensure_backlog(&mut self, size: usize) -> bool {
        let next = self.master_repl_offset + 1;
        if self
            .backlog
            .as_ref()
            .is_some_and(|b| b.next_offset() == next)
        {
            return false;
        }
        self.create_backlog(size);
        true
    }

    /// Starts a new history under `new_id` with no second ID (Redis's `changeReplicationId`
    /// and `clearReplicationId2`, as when a backlog is created from scratch).
    pub fn restart(&mut self, new_id: ReplId) {
        self.replid = new_id;
        self.replid2 = ReplId::ZERO;
        self.second_replid_offset = -1;
    }

    /// A replica that finished a full sync takes its primary's history.
    pub fn adopt(&mut self, replid: ReplId, offset: i64) {
        self.replid = replid;
        self.master_repl_offset = offset;
        self.replid2 = ReplId::ZERO;
        self.second_replid_offset = -1;
    }

    /// Goes on under `new_id`, the current ID staying valid up to the current offset (a
    /// replica promoted, or told by `+CONTINUE <id>` that its primary's ID changed). Returns
    /// Redis's log line for a promotion.
    pub fn shift(&mut self, new_id: ReplId) -> String {
        self.replid2 = self.replid;
        self.second_replid_offset = self.master_repl_offset + 1;
        self.replid = new_id;
        format!(
            "Setting secondary replication ID to {}, valid up to offset: {}. New replication ID is {}",
            self.replid2, self.second_replid_offset, self.replid
        )
    }

    /// The primary's decision on `PSYNC <asked_id> <offset>` from `replica` (its name in the
    /// log lines), with the lines Redis logs. `psync2`: the replica sent `REPLCONF capa
    /// psync2` (then `+CONTINUE` carries the ID).
    pub fn psync(
        &self,
        asked_id: &[u8],
        offset: i64,
        psync2: bool,
        replica: &str,
        log: &mut Vec<(Level, String)>,
    ) -> PsyncAnswer {
        let full = PsyncAnswer::FullResync {
            partial_err: asked_id.first() != Some(&b'?'),
        };
        if !self.replid.matches(asked_id)
            && (!self.replid2.matches(asked_id) || offset > self.second_replid_offset)
        {
            let line = if asked_id.first() == Some(&b'?') {
                format!("Full resync requested by replica {replica}")
            } else if !self.replid.matches(asked_id) && !self.replid2.matches(asked_id) {
                format!(
                    "Partial resynchronization not accepted: Replication ID mismatch (Replica asked for '{}', my replication IDs are '{}' and '{}')",
                    String::from_utf8_lossy(asked_id),
                    self.replid,
                    self.replid2
                )
            } else {
                format!(
                    "Partial resynchronization not accepted: Requested offset for second ID was {offset}, but I can reply up to {}",
                    self.second_replid_offset
                )
            };
            log.push((Level::Notice, line));
            return full;
        }
        if !self.backlog.as_ref().is_some_and(|b| b.covers(offset)) {
            log.push((
                Level::Notice,
                format!(
                    "Unable to partial resync with replica {replica} for lack of backlog (Replica request was: {offset})."
                ),
            ));
            if offset > self.master_repl_offset {
                log.push((
                    Level::Warning,
                    format!(
                        "Warning: replica {replica} tried to PSYNC with an offset that is greater than the master replication offset."
                    ),
                ));
            }
            return full;
        }
        let reply = if psync2 {
            format!("+CONTINUE {}\r\n", self.replid).into_bytes()
        } else {
            b"+CONTINUE\r\n".to_vec()
        };
        PsyncAnswer::Continue {
            reply,
            from: offset,
        }
    }

    /// The line that starts a full resync, at the offset the snapshot is taken.
    pub fn fullresync_reply(&self) -> Vec<u8> {
        format!(
            "+FULLRESYNC {} {}\r\n",
            self.replid, self.master_repl_offset
        )
        .into_bytes()
    }

    /// Redis's log line once a partial resync's backlog is sent.
    pub fn continue_log(replica: &str, sent: usize, from: i64) -> String {
        format!(
            "Partial resynchronization request from {replica} accepted. Sending {sent} bytes of backlog starting from offset {from}."
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(c: u8) -> ReplId {
        ReplId([c; 40])
    }

    fn with_backlog() -> History {
        let mut h = History::new(id(b'a'));
        h.create_backlog(crate::backlog::MIN_SIZE);
        h.feed(&[b'x'; 100]);
        h
    }

    #[test]
    fn random_bytes_become_forty_hex_characters() {
        let id = ReplId::from_random([0xab; 20]);
        assert_eq!(id.as_bytes(), "ab".repeat(20).as_bytes());
    }

    #[test]
    fn the_same_id_within_the_backlog_continues() {
        let h = with_backlog();
        let mut log = Vec::new();
        for offset in [1, 50, 101] {
            assert_eq!(
                h.psync(&[b'A'; 40], offset, true, "r", &mut log),
                PsyncAnswer::Continue {
                    reply: format!("+CONTINUE {}\r\n", "a".repeat(40)).into_bytes(),
                    from: offset
                }
            );
        }
        assert_eq!(
            h.psync(&[b'a'; 40], 7, false, "r", &mut log),
            PsyncAnswer::Continue {
                reply: b"+CONTINUE\r\n".to_vec(),
                from: 7
            }
        );
        assert!(log.is_empty());
    }

    #[test]
    fn an_offset_outside_the_backlog_needs_a_full_resync() {
        let h = with_backlog();
        let mut log = Vec::new();
        assert_eq!(
            h.psync(&[b'a'; 40], 102, true, "r", &mut log),
            PsyncAnswer::FullResync { partial_err: true }
        );
        assert_eq!(log.len(), 2, "{log:?}");
        assert!(log[1]
            .1
            .contains("greater than the master replication offset"));
        log.clear();
        h.psync(&[b'a'; 40], 0, true, "r", &mut log);
        assert_eq!(log.len(), 1);
    }

    #[test]
    fn question_mark_asks_for_a_full_resync_and_is_not_a_partial_error() {
        let h = with_backlog();
        let mut log = Vec::new();
        assert_eq!(
            h.psync(b"?", -1, true, "127.0.0.1:7000", &mut log),
            PsyncAnswer::FullResync { partial_err: false }
        );
        assert_eq!(log[0].1, "Full resync requested by replica 127.0.0.1:7000");
    }

    #[test]
    fn after_a_shift_the_old_id_continues_up_to_the_shift_offset() {
        let mut h = with_backlog();
        let log_line = h.shift(id(b'b'));
        assert!(log_line.contains("valid up to offset: 101"), "{log_line}");
        h.feed(&[b'y'; 10]);
        let mut log = Vec::new();
        assert!(matches!(
            h.psync(&[b'a'; 40], 101, true, "r", &mut log),
            PsyncAnswer::Continue { .. }
        ));
        assert_eq!(
            h.psync(&[b'a'; 40], 102, true, "r", &mut log),
            PsyncAnswer::FullResync { partial_err: true }
        );
        assert!(log[0].1.contains("Requested offset for second ID was 102"));
        assert!(matches!(
            h.psync(&[b'b'; 40], 111, true, "r", &mut log),
            PsyncAnswer::Continue { .. }
        ));
    }

    #[test]
    fn ensure_backlog_keeps_a_backlog_that_ends_at_the_offset_and_replaces_others() {
        let mut h = with_backlog();
        assert!(!h.ensure_backlog(crate::backlog::MIN_SIZE));
        assert_eq!(h.backlog.as_ref().unwrap().histlen(), 100);
        // A replica that adopted another offset: its old bytes do not continue it.
        h.adopt(id(b'c'), 500);
        assert!(h.ensure_backlog(crate::backlog::MIN_SIZE));
        let b = h.backlog.as_ref().unwrap();
        assert_eq!((b.first_byte_offset(), b.histlen()), (501, 0));
        let mut none = History::new(id(b'd'));
        assert!(none.ensure_backlog(0));
        assert_eq!(none.backlog.as_ref().unwrap().next_offset(), 1);
    }

    #[test]
    fn without_a_backlog_nothing_is_counted() {
        let mut h = History::new(id(b'a'));
        h.feed(b"abc");
        assert_eq!(h.master_repl_offset, 0);
        h.create_backlog(0);
        h.feed(b"abc");
        assert_eq!(h.master_repl_offset, 3);
        assert_eq!(h.backlog.as_ref().unwrap().first_byte_offset(), 1);
        assert_eq!(
            h.fullresync_reply(),
            format!("+FULLRESYNC {} 3\r\n", "a".repeat(40)).into_bytes()
        );
    }
}
