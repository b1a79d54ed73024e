//! Rendering commands as Redis 7.2 appends them to the AOF (`feedAppendOnlyFile`).
//!
//! A command is a RESP array of bulk strings, `*<argc>\r\n` then `$<len>\r\n<bytes>\r\n` per
//! argument. Before a command for another database than the previous one, a
//! `SELECT <db>` is written; after a rewrite or when a new incr file is opened the next command
//! always gets one ([`Writer::force_select`]). With `aof-timestamp-enabled`, a
//! `#TS:<unix seconds>\r\n` annotation goes before the first command of each new second. A
//! transaction (MULTI/EXEC from a client, or a script or command that propagates several
//! writes) is written as `MULTI`, its commands, `EXEC`; the SELECT for its first command's
//! database comes before the `MULTI`.

/// Appends one command in AOF form.
pub fn render_command<A: AsRef<[u8]>>(out: &mut Vec<u8>, argv: &[A]) {
    out.push(b'*');
    darner_resp::write_u64(argv.len() as u64, out);
    out.extend_from_slice(b"\r\n");
    for arg in argv {
        let arg = arg.as_ref();
        out.push(b'$');
        darner_resp::write_u64(arg.len() as u64, out);
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
}

/// Appends a timestamp annotation, `#TS:<unix seconds>\r\n`.
pub fn render_timestamp(out: &mut Vec<u8>, unix_secs: i64) {
    out.extend_from_slice(b"#TS:");
    darner_resp::write_i64(unix_secs, out);
    out.extend_from_slice(b"\r\n");
}

/// Appends `SELECT <db>`.
pub fn render_select(out: &mut Vec<u8>, db: u32) {
    let mut digits = Vec::with_capacity(10);
    darner_resp::write_u64(u64::from(db), &mut digits);
    render_command(out, &[&b"SELECT"[..], &digits]);
}

/// The state Redis keeps between appended commands: the database of the last one and the
/// time of the last timestamp annotation.
#[derive(Debug, Clone)]
pub struct Writer {
    selected_db: Option<u32>,
    timestamps: bool,
    last_timestamp: i64,
}

impl Writer {
    /// A writer at the start of a file: the first command gets a SELECT.
    pub fn new(timestamps: bool) -> Writer {
        Writer {
            selected_db: None,
            timestamps,
            last_timestamp: 0,
        }
    }

    /// Turns timestamp annotations on or off (`aof-timestamp-enabled`).
    pub fn set_timestamps(&mut self, on: bool) {
        self.timestamps = on;
    }

    /// Makes the next command for a database carry a SELECT (after a rewrite starts, or when
    /// AOF is switched off and on).
    pub fn force_select(&mut self) {
        self.selected_db = None;
    }

    /// The database of the last command written, if a SELECT has been written since the
    /// last [`force_select`](Writer::force_select).
    pub fn selected_db(&self) -> Option<u32> {
        self.selected_db
    }

    /// Appends a timestamp annotation unconditionally (a rewrite's first line with
    /// `aof-timestamp-enabled`), and remembers its time.
    pub fn timestamp_now(&mut self, out: &mut Vec<u8>, unix_secs: i64) {
        self.last_timestamp = unix_secs;
        render_timestamp(out, unix_secs);
    }

    /// Appends a command for database `db` (`None`: a command for no database, which never
    /// gets a SELECT), preceded by a timestamp annotation if enabled and `now_secs` is past
    /// the last one, and by a SELECT if `db` differs from the last command's.
    pub fn append<A: AsRef<[u8]>>(
        &mut self,
        out: &mut Vec<u8>,
        db: Option<u32>,
        argv: &[A],
        now_secs: i64,
    ) {
        self.before_command(out, db, now_secs);
        render_command(out, argv);
    }

    /// What goes before a command for database `db`: the timestamp annotation if enabled and
    /// `now_secs` is past the last one, and SELECT if `db` differs from the last command's.
    fn before_command(&mut self, out: &mut Vec<u8>, db: Option<u32>, now_secs: i64) {
        if self.timestamps && self.last_timestamp < now_secs {
            self.timestamp_now(out, now_secs);
        }
        if let Some(db) = db {
            if self.selected_db != Some(db) {
                render_select(out, db);
                self.selected_db = Some(db);
            }
        }
    }

    /// Appends commands rendered already ([`render_command`]) for database `db`, with the
    /// timestamp annotation and SELECT that [`Writer::append`] would put before the first.
    pub fn append_rendered(
        &mut self,
        out: &mut Vec<u8>,
        db: Option<u32>,
        resp: &[u8],
        now_secs: i64,
    ) {
        if resp.is_empty() {
            return;
        }
        self.before_command(out, db, now_secs);
        out.extend_from_slice(resp);
    }

    /// Appends a transaction: `MULTI` (for the first command's database), each command (with
    /// SELECTs where the database changes), `EXEC` (for the last command's database). A single
    /// command is written without MULTI/EXEC, as Redis propagates it; none writes nothing.
    pub fn append_transaction<A: AsRef<[u8]>>(
        &mut self,
        out: &mut Vec<u8>,
        commands: &[(u32, &[A])],
        now_secs: i64,
    ) {
        match commands {
            [] => {}
            [(db, argv)] => self.append(out, Some(*db), argv, now_secs),
            [(first, _), .., (last, _)] => {
                self.append(out, Some(*first), &[b"MULTI"], now_secs);
                for (db, argv) in commands {
                    self.append(out, Some(*db), argv, now_secs);
                }
                self.append(out, Some(*last), &[b"EXEC"], now_secs);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_a_command_as_resp_bulk_strings() {
        let mut out = Vec::new();
        render_command(&mut out, &[&b"SET"[..], b"k", b"", b"a\r\nb"]);
        assert_eq!(
            out,
            b"*4\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n$4\r\na\r\nb\r\n"
        );
    }

    #[test]
    fn rendered_commands_get_the_same_select_and_timestamps_as_appended_ones() {
        let cmds: [(u32, &[&str]); 4] = [
            (0, &["SET", "a", "1"]),
            (0, &["INCR", "a"]),
            (3, &["DEL", "b"]),
            (0, &["SET", "c", ""]),
        ];
        let mut appended = Vec::new();
        let mut w = Writer::new(true);
        for (db, argv) in cmds {
            w.append(&mut appended, Some(db), argv, 100);
        }
        // The same commands as runs of one database each, rendered beforehand.
        let mut rendered = Vec::new();
        let mut w = Writer::new(true);
        for run in [&cmds[..2], &cmds[2..3], &cmds[3..]] {
            let mut resp = Vec::new();
            for (_, argv) in run {
                render_command(&mut resp, argv);
            }
            w.append_rendered(&mut rendered, Some(run[0].0), &resp, 100);
        }
        assert_eq!(rendered, appended);
        assert!(rendered.starts_with(b"#TS:100\r\n"));
    }

    #[test]
    fn select_only_when_the_database_changes() {
        let mut w = Writer::new(false);
        let mut out = Vec::new();
        w.append(&mut out, Some(0), &["INCR", "a"], 0);
        w.append(&mut out, Some(0), &["INCR", "b"], 0);
        w.append(&mut out, Some(12), &["INCR", "c"], 0);
        w.append(&mut out, None, &["FLUSHALL"], 0);
        assert_eq!(
            out,
            b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*2\r\n$4\r\nINCR\r\n$1\r\na\r\n*2\r\n$4\r\nINCR\r\n$1\r\nb\r\n\
              *2\r\n$6\r\nSELECT\r\n$2\r\n12\r\n*2\r\n$4\r\nINCR\r\n$1\r\nc\r\n*1\r\n$8\r\nFLUSHALL\r\n"
        );
        out.clear();
        w.force_select();
        w.append(&mut out, Some(12), &["DEL", "c"], 0);
        assert!(out.starts_with(b"*2\r\n$6\r\nSELECT\r\n$2\r\n12\r\n"));
    }

    #[test]
    fn timestamp_once_per_new_second_before_the_select() {
        let mut w = Writer::new(true);
        let mut out = Vec::new();
        w.append(&mut out, Some(1), &["PING"], 1_700_000_000);
        w.append(&mut out, Some(1), &["PING"], 1_700_000_000);
        w.append(&mut out, Some(1), &["PING"], 1_700_000_001);
        assert_eq!(
            out,
            b"#TS:1700000000\r\n*2\r\n$6\r\nSELECT\r\n$1\r\n1\r\n*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nPING\r\n\
              #TS:1700000001\r\n*1\r\n$4\r\nPING\r\n"
        );
        let mut off = Writer::new(false);
        out.clear();
        off.append(&mut out, None, &["PING"], 5);
        assert_eq!(out, b"*1\r\n$4\r\nPING\r\n");
    }

    #[test]
    fn transaction_is_wrapped_in_multi_exec_with_select_before_multi() {
        let mut w = Writer::new(false);
        let mut out = Vec::new();
        let a: &[&str] = &["INCR", "a"];
        let b: &[&str] = &["INCR", "b"];
        w.append_transaction(&mut out, &[(3, a), (4, b)], 0);
        let mut want = Vec::new();
        for argv in [
            &["SELECT", "3"][..],
            &["MULTI"],
            a,
            &["SELECT", "4"],
            b,
            &["EXEC"],
        ] {
            render_command(&mut want, argv);
        }
        assert_eq!(out, want);
        out.clear();
        w.append_transaction(&mut out, &[(4, a)], 0);
        assert_eq!(out, b"*2\r\n$4\r\nINCR\r\n$1\r\na\r\n");
        out.clear();
        w.append_transaction::<&str>(&mut out, &[], 0);
        assert!(out.is_empty());
    }
}
