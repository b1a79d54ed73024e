//! An incremental reader of an AOF file in RESP form (an incr file, a base file written without
//! an RDB preamble, or the tail of an old-style file after its RDB preamble), with the
//! acceptance rules of Redis 7.2's `loadSingleAppendOnlyFile`.
//!
//! Feed it bytes in any pieces with [`Reader::feed`], call [`Reader::finish`] at the end of the
//! file, and take [`Event`]s with [`Reader::next_event`]: each command (its argv, and the
//! offsets where it starts and ends), each annotation line (`#TS:<unix seconds>` with
//! `aof-timestamp-enabled`), and at the end how the file ended ([`Ending`]). The result does not
//! depend on how the bytes were split.
//!
//! # Redis's reading rules
//!
//! Redis reads lines with `fgets` into a 1024-byte buffer, so a line is at most 1023 bytes; the
//! rest of a longer line is read as the next line. A line starting with `#` is skipped (an
//! annotation). A command is a line `*<argc>` (`atoi`: lenient; below 1 is a format error)
//! followed by `argc` arguments, each a line `$<len>` (`strtol`: lenient) then `len` bytes and
//! two more bytes that are skipped unchecked. Any other line where a command or an argument
//! should start is a format error ("Bad file format"), reported with its offset.
//!
//! Running out of bytes inside a command is a short read: with `aof-load-truncated yes` Redis
//! truncates the file after the last complete command ([`Ending::Truncated`]), and with `no`
//! it refuses to start. A file that ends cleanly inside a MULTI without its EXEC is treated
//! the same way, reverted to the offset before the MULTI ([`Ending::IncompleteMulti`]).
//! [`Ending::log_lines`] and [`Ending::fatal_message`] render what Redis logs in each case.
//!
//! Departures (Redis itself would misbehave): a negative `$` length is a format error (Redis
//! tries to allocate ~2^64 bytes and aborts), and `*` followed by a NUL byte before the end of
//! the file is a format error (Redis reports an I/O error with an unrelated `errno`).

use bytes::{Bytes, BytesMut};
use std::fmt;

/// The `fgets` buffer of `loadSingleAppendOnlyFile` (`AOF_ANNOTATION_LINE_MAX_LEN`): lines are
/// read at most `LINE_MAX - 1` bytes at a time.
pub const LINE_MAX: usize = 1024;

/// Argument slots reserved before the arguments are actually there (a `*` count is not
/// trusted for an allocation).
const MAX_ARGS_PREALLOC: usize = 1024;

/// Whether a file is an RDB (an RDB-preamble base file, or an old-style AOF with an RDB
/// preamble) or RESP commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileFormat {
    /// Starts with `REDIS`: load it as an RDB (then, for an old-style AOF, read the tail).
    Rdb,
    /// Anything else, including a file shorter than 5 bytes: RESP commands.
    Resp,
}

/// Detects a file's format from its first bytes (`head`: the first 5 bytes, or the whole file
/// if shorter), as Redis does.
pub fn detect_format(head: &[u8]) -> FileFormat {
    if head.starts_with(b"REDIS") {
        FileFormat::Rdb
    } else {
        FileFormat::Resp
    }
}

/// One item of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Offset of its first byte in the file.
    pub offset: u64,
    /// Offset just past it.
    pub end: u64,
    /// What it is.
    pub kind: EntryKind,
}

/// A command or an annotation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryKind {
    /// A command: its arguments (at least one).
    Command(Vec<Bytes>),
    /// A line starting with `#`, without its line ending (Redis skips it).
    Annotation(Bytes),
}

impl Entry {
    /// The command's arguments, if it is a command.
    pub fn argv(&self) -> Option<&[Bytes]> {
        match &self.kind {
            EntryKind::Command(argv) => Some(argv),
            EntryKind::Annotation(_) => None,
        }
    }

    /// The time of a `#TS:<unix seconds>` annotation.
    pub fn timestamp(&self) -> Option<i64> {
        match &self.kind {
            EntryKind::Annotation(line) => parse_timestamp(line),
            EntryKind::Command(_) => None,
        }
    }
}

/// The seconds of a `#TS:<digits>` annotation line (with or without its line ending).
pub fn parse_timestamp(line: &[u8]) -> Option<i64> {
    let digits = line.strip_prefix(b"#TS:")?;
    let digits = digits.strip_suffix(b"\n").unwrap_or(digits);
    let digits = digits.strip_suffix(b"\r").unwrap_or(digits);
    darner_resp::parse_i64_strict(digits)
}

/// What a command means to the loader's transaction handling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxRole {
    /// `MULTI` (any case).
    Multi,
    /// `EXEC` (any case).
    Exec,
    /// Anything else.
    Other,
}

/// Classifies a command by its name.
pub fn tx_role(argv: &[Bytes]) -> TxRole {
    match argv.first() {
        Some(name) if name.eq_ignore_ascii_case(b"multi") => TxRole::Multi,
        Some(name) if name.eq_ignore_ascii_case(b"exec") => TxRole::Exec,
        _ => TxRole::Other,
    }
}

/// How a file ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// The file is empty (Redis's `AOF_EMPTY`).
    Empty,
    /// The file ended after a complete command (or annotation), outside a transaction.
    Complete {
        /// The file's length.
        len: u64,
    },
    /// The file ended inside a command (a short read).
    Truncated {
        /// Offset just past the last complete command (0 when there is none): where Redis
        /// truncates the file with `aof-load-truncated yes`.
        valid_up_to: u64,
        /// The file's length.
        len: u64,
        /// Whether the last complete command was inside a MULTI (its queued commands are not
        /// run, and the truncated file then ends inside the MULTI).
        in_multi: bool,
    },
    /// The file ended cleanly inside a MULTI without its EXEC.
    IncompleteMulti {
        /// Offset of the MULTI: where Redis truncates the file with `aof-load-truncated yes`.
        valid_up_to: u64,
        /// The file's length.
        len: u64,
    },
}

impl Ending {
    /// Where the file must be cut (with `aof-load-truncated yes`), if it must.
    pub fn truncate_to(&self) -> Option<u64> {
        match *self {
            Ending::Truncated { valid_up_to, .. } | Ending::IncompleteMulti { valid_up_to, .. } => {
                Some(valid_up_to)
            }
            Ending::Empty | Ending::Complete { .. } => None,
        }
    }

    /// The warnings Redis logs for this ending with `aof-load-truncated yes` (none for a
    /// complete file), `file` being the file's name.
    pub fn log_lines(&self, file: &str) -> Vec<String> {
        let Some(offset) = self.truncate_to() else {
            return Vec::new();
        };
        let mut lines = self.revert_line(file).into_iter().collect::<Vec<_>>();
        lines.push(format!(
            "!!! Warning: short read while loading the AOF file {file}!!!"
        ));
        lines.push(format!(
            "!!! Truncating the AOF {file} at offset {offset} !!!"
        ));
        lines.push(format!(
            "AOF {file} loaded anyway because aof-load-truncated is enabled"
        ));
        lines
    }

    /// What Redis logs before refusing to start with `aof-load-truncated no` (`None` for a
    /// complete file): the MULTI revert warning where there is one, then the error.
    pub fn fatal_message(&self, file: &str) -> Option<Vec<String>> {
        self.truncate_to()?;
        let mut lines = self.revert_line(file).into_iter().collect::<Vec<_>>();
        lines.push(format!(
            "Unexpected end of file reading the append only file {file}. You can: \
             1) Make a backup of your AOF file, then use ./redis-check-aof --fix <filename.manifest>. \
             2) Alternatively you can set the 'aof-load-truncated' configuration option to yes and restart the server."
        ));
        Some(lines)
    }

    fn revert_line(&self, file: &str) -> Option<String> {
        matches!(self, Ending::IncompleteMulti { .. })
            .then(|| format!("Revert incomplete MULTI/EXEC transaction in AOF file {file}"))
    }
}

/// What Redis logs when a file other than the last one is truncated (loading fails).
pub const TRUNCATED_NOT_LAST: &str = "Fatal error: the truncated file is not the last file";

/// What is wrong with a malformed line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FormatErrorKind {
    /// A line where a command should start neither starts with `*` nor with `#`.
    NotACommand,
    /// A `*` count below 1.
    BadArgCount,
    /// `*` followed by a NUL byte.
    NulAfterStar,
    /// A line where an argument should start does not start with `$`.
    NotABulk,
    /// A negative `$` length.
    NegativeLength,
}

/// A file Redis refuses as "Bad file format": the offset of the offending line and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FormatError {
    /// Offset of the offending line in the file.
    pub offset: u64,
    /// What is wrong.
    pub kind: FormatErrorKind,
}

impl FormatError {
    /// What Redis logs (it then refuses to start), `file` being the file's name.
    pub fn log_line(&self, file: &str) -> String {
        format!(
            "Bad file format reading the append only file {file}: make a backup of your AOF file, \
             then use ./redis-check-aof --fix <filename.manifest>"
        )
    }
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            FormatErrorKind::NotACommand => "expected '*' or '#'",
            FormatErrorKind::BadArgCount => "argument count below 1",
            FormatErrorKind::NulAfterStar => "NUL byte after '*'",
            FormatErrorKind::NotABulk => "expected '$'",
            FormatErrorKind::NegativeLength => "negative argument length",
        };
        write!(f, "bad AOF format at offset {}: {what}", self.offset)
    }
}

impl std::error::Error for FormatError {}

/// What the reader produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A command or an annotation.
    Entry(Entry),
    /// All fed bytes are used up: feed more, or call [`Reader::finish`].
    NeedData,
    /// The file is over (after [`Reader::finish`]); repeated on later calls.
    End(Ending),
}

#[derive(Debug)]
enum State {
    /// Expecting a `*` line or an annotation.
    Start,
    /// Expecting the `$` line of the next argument.
    ArgHeader,
    /// Expecting an argument's bytes.
    ArgBody {
        len: u64,
    },
    /// Expecting the two bytes after an argument.
    ArgEnd,
    Ended(Ending),
    Failed(FormatError),
}

/// The incremental AOF reader (see the module documentation).
#[derive(Debug)]
pub struct Reader {
    buf: BytesMut,
    /// File offset of `buf[0]`.
    pos: u64,
    /// How many bytes at the start of `buf` are known to hold no `\n` (line search resumes
    /// there).
    scanned: usize,
    eof: bool,
    state: State,
    /// The command being read: where it started, how many arguments it has, those read.
    cmd_start: u64,
    argc: usize,
    args: Vec<Bytes>,
    in_multi: bool,
    valid_up_to: u64,
    valid_before_multi: u64,
}

impl Default for Reader {
    fn default() -> Self {
        Reader::new()
    }
}

impl Reader {
    /// A reader of a file from its first byte.
    pub fn new() -> Reader {
        Reader::starting_at(0)
    }

    /// A reader whose first byte is at `offset` in the file (the RESP tail after an RDB
    /// preamble). As in Redis, a truncation before the first complete command still reports
    /// offset 0.
    pub fn starting_at(offset: u64) -> Reader {
        Reader {
            buf: BytesMut::new(),
            pos: offset,
            scanned: 0,
            eof: false,
            state: State::Start,
            cmd_start: offset,
            argc: 0,
            args: Vec::new(),
            in_multi: false,
            valid_up_to: 0,
            valid_before_multi: 0,
        }
    }

    /// Appends the file's next bytes.
    pub fn feed(&mut self, data: &[u8]) {
        debug_assert!(!self.eof, "feed after finish");
        self.buf.extend_from_slice(data);
    }

    /// Says that the file has no more bytes.
    pub fn finish(&mut self) {
        self.eof = true;
    }

    /// Whether the commands read so far leave a MULTI open (commands would be queued).
    pub fn in_multi(&self) -> bool {
        self.in_multi
    }

    /// Offset just past the last complete command.
    pub fn valid_up_to(&self) -> u64 {
        self.valid_up_to
    }

    /// Bytes fed but not yet consumed.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// The next event. After an error, the same error is returned again.
    pub fn next_event(&mut self) -> Result<Event, FormatError> {
        loop {
            match self.state {
                State::Ended(ending) => return Ok(Event::End(ending)),
                State::Failed(err) => return Err(err),
                State::Start => {
                    let start = self.pos;
                    let Some(line) = self.take_line() else {
                        if self.eof {
                            return Ok(Event::End(self.end_clean()));
                        }
                        return Ok(Event::NeedData);
                    };
                    if line[0] == b'#' {
                        let mut text = line.freeze();
                        let mut n = text.len();
                        if text.ends_with(b"\n") {
                            n -= 1;
                            if text[..n].ends_with(b"\r") {
                                n -= 1;
                            }
                        }
                        text.truncate(n);
                        let end = self.pos;
                        return Ok(Event::Entry(Entry {
                            offset: start,
                            end,
                            kind: EntryKind::Annotation(text),
                        }));
                    }
                    if line[0] != b'*' {
                        return self.fail(start, FormatErrorKind::NotACommand);
                    }
                    if line.get(1).is_none_or(|&c| c == 0) {
                        if self.eof && self.buf.is_empty() && !line.ends_with(b"\n") {
                            // fgets stopped at the end of the file: a short read.
                            return Ok(Event::End(self.end_short()));
                        }
                        return self.fail(start, FormatErrorKind::NulAfterStar);
                    }
                    let argc = strtol(&line[1..]) as i32;
                    if argc < 1 {
                        return self.fail(start, FormatErrorKind::BadArgCount);
                    }
                    self.cmd_start = start;
                    self.argc = argc as usize;
                    self.args = Vec::with_capacity(self.argc.min(MAX_ARGS_PREALLOC));
                    self.state = State::ArgHeader;
                }
                State::ArgHeader => {
                    let start = self.pos;
                    let Some(line) = self.take_line() else {
                        return self.wait_or_short();
                    };
                    if line[0] != b'$' {
                        return self.fail(start, FormatErrorKind::NotABulk);
                    }
                    let len = strtol(&line[1..]);
                    if len < 0 {
                        return self.fail(start, FormatErrorKind::NegativeLength);
                    }
                    self.state = State::ArgBody { len: len as u64 };
                }
                State::ArgBody { len } => {
                    if (self.buf.len() as u64) < len {
                        return self.wait_or_short();
                    }
                    let arg = self.buf.split_to(len as usize).freeze();
                    self.consumed(len as usize);
                    self.args.push(arg);
                    self.state = State::ArgEnd;
                }
                State::ArgEnd => {
                    if self.buf.len() < 2 {
                        return self.wait_or_short();
                    }
                    let _ = self.buf.split_to(2);
                    self.consumed(2);
                    if self.args.len() < self.argc {
                        self.state = State::ArgHeader;
                        continue;
                    }
                    self.state = State::Start;
                    let argv = std::mem::take(&mut self.args);
                    match tx_role(&argv) {
                        TxRole::Multi => {
                            self.valid_before_multi = self.valid_up_to;
                            self.in_multi = true;
                        }
                        TxRole::Exec => self.in_multi = false,
                        TxRole::Other => {}
                    }
                    self.valid_up_to = self.pos;
                    return Ok(Event::Entry(Entry {
                        offset: self.cmd_start,
                        end: self.pos,
                        kind: EntryKind::Command(argv),
                    }));
                }
            }
        }
    }

    fn fail(&mut self, offset: u64, kind: FormatErrorKind) -> Result<Event, FormatError> {
        let err = FormatError { offset, kind };
        self.state = State::Failed(err);
        Err(err)
    }

    fn wait_or_short(&mut self) -> Result<Event, FormatError> {
        if self.eof {
            Ok(Event::End(self.end_short()))
        } else {
            Ok(Event::NeedData)
        }
    }

    fn file_len(&self) -> u64 {
        self.pos + self.buf.len() as u64
    }

    fn end_short(&mut self) -> Ending {
        let ending = Ending::Truncated {
            valid_up_to: self.valid_up_to,
            len: self.file_len(),
            in_multi: self.in_multi,
        };
        self.args = Vec::new();
        self.state = State::Ended(ending);
        ending
    }

    fn end_clean(&mut self) -> Ending {
        let len = self.file_len();
        let ending = if self.in_multi {
            Ending::IncompleteMulti {
                valid_up_to: self.valid_before_multi,
                len,
            }
        } else if len == 0 {
            Ending::Empty
        } else {
            Ending::Complete { len }
        };
        self.state = State::Ended(ending);
        ending
    }

    fn consumed(&mut self, n: usize) {
        self.pos += n as u64;
        self.scanned = self.scanned.saturating_sub(n);
    }

    /// The next line as `fgets` with a [`LINE_MAX`] buffer reads it: through `\n`, or
    /// `LINE_MAX - 1` bytes, or what is left at the end of the file. `None` when more bytes
    /// are needed (or none are left).
    fn take_line(&mut self) -> Option<BytesMut> {
        let window = self.buf.len().min(LINE_MAX - 1);
        let from = self.scanned.min(window);
        let n = match self.buf[from..window].iter().position(|&b| b == b'\n') {
            Some(i) => from + i + 1,
            None if window == LINE_MAX - 1 || (self.eof && window > 0) => window,
            None => {
                self.scanned = window;
                return None;
            }
        };
        let line = self.buf.split_to(n);
        self.pos += n as u64;
        self.scanned = 0;
        Some(line)
    }
}

/// C's `strtol(s, NULL, 10)` (64-bit `long`): leading blanks, a sign, digits; saturating; 0
/// when there are no digits.
fn strtol(b: &[u8]) -> i64 {
    crate::manifest::atoll(b)
}

/// Reads a whole file in one go: its entries and how it ended.
pub fn read_all(data: &[u8]) -> Result<(Vec<Entry>, Ending), FormatError> {
    let mut reader = Reader::new();
    reader.feed(data);
    reader.finish();
    let mut entries = Vec::new();
    loop {
        match reader.next_event()? {
            Event::Entry(e) => entries.push(e),
            Event::End(ending) => return Ok((entries, ending)),
            Event::NeedData => unreachable!("finished reader needs no data"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commands(data: &[u8]) -> (Vec<Vec<Vec<u8>>>, Ending) {
        let (entries, ending) = read_all(data).unwrap();
        let cmds = entries
            .iter()
            .filter_map(|e| e.argv().map(|a| a.iter().map(|b| b.to_vec()).collect()))
            .collect();
        (cmds, ending)
    }

    fn format_err(data: &[u8]) -> FormatError {
        read_all(data).expect_err("should be a format error")
    }

    #[test]
    fn reads_commands_with_offsets() {
        let data = b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n";
        let (entries, ending) = read_all(data).unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!((entries[0].offset, entries[0].end), (0, 23));
        assert_eq!((entries[1].offset, entries[1].end), (23, data.len() as u64));
        assert_eq!(entries[1].argv().unwrap(), [&b"SET"[..], b"k", b""]);
        assert_eq!(
            ending,
            Ending::Complete {
                len: data.len() as u64
            }
        );
    }

    #[test]
    fn empty_file_is_empty() {
        assert_eq!(read_all(b"").unwrap().1, Ending::Empty);
    }

    #[test]
    fn timestamp_annotations_are_reported() {
        let data = b"#TS:1700000000\r\n*1\r\n$4\r\nPING\r\n#other\n";
        let (entries, ending) = read_all(data).unwrap();
        assert_eq!(entries[0].timestamp(), Some(1_700_000_000));
        assert_eq!(
            entries[0].kind,
            EntryKind::Annotation(Bytes::from_static(b"#TS:1700000000"))
        );
        assert_eq!((entries[0].offset, entries[0].end), (0, 16));
        assert_eq!(
            entries[2].kind,
            EntryKind::Annotation(Bytes::from_static(b"#other"))
        );
        assert_eq!(entries[2].timestamp(), None);
        assert_eq!(
            ending,
            Ending::Complete {
                len: data.len() as u64
            }
        );
    }

    #[test]
    fn partial_annotation_at_the_end_is_not_a_truncation() {
        let data = b"*1\r\n$4\r\nPING\r\n#TS:17";
        let (_, ending) = commands(data);
        assert_eq!(
            ending,
            Ending::Complete {
                len: data.len() as u64
            }
        );
    }

    #[test]
    fn lenient_numbers_as_atoi_and_strtol_read_them() {
        let (cmds, _) = commands(b"*1abc\r\n$ 4x\r\nPING\r\n");
        assert_eq!(cmds, [[b"PING".to_vec()]]);
    }

    #[test]
    fn the_two_bytes_after_an_argument_are_not_checked() {
        let (cmds, _) = commands(b"*1\r\n$4\r\nPINGxy*1\r\n$4\r\nECHOzz");
        assert_eq!(cmds.len(), 2);
    }

    #[test]
    fn line_not_starting_with_star_is_a_format_error_at_its_offset() {
        let e = format_err(b"*1\r\n$4\r\nPING\r\nGET x\r\n");
        assert_eq!(
            e,
            FormatError {
                offset: 14,
                kind: FormatErrorKind::NotACommand
            }
        );
        assert_eq!(
            e.log_line("appendonly.aof.1.incr.aof"),
            "Bad file format reading the append only file appendonly.aof.1.incr.aof: make a backup \
             of your AOF file, then use ./redis-check-aof --fix <filename.manifest>"
        );
    }

    #[test]
    fn rdb_bytes_are_a_format_error() {
        assert_eq!(
            format_err(b"REDIS0011\xfa").kind,
            FormatErrorKind::NotACommand
        );
    }

    #[test]
    fn count_below_one_is_a_format_error() {
        for data in [
            &b"*0\r\n"[..],
            b"*-1\r\n",
            b"*x\r\n",
            b"*\r\n",
            b"*4294967296\r\n",
        ] {
            assert_eq!(
                format_err(data).kind,
                FormatErrorKind::BadArgCount,
                "{data:?}"
            );
        }
        // atoi truncates strtol's value to an int.
        assert_eq!(commands(b"*4294967297\r\n$1\r\nx\r\n").0.len(), 1);
    }

    #[test]
    fn nul_after_star_is_a_format_error() {
        assert_eq!(format_err(b"*\0\r\n").kind, FormatErrorKind::NulAfterStar);
    }

    #[test]
    fn argument_line_not_starting_with_dollar_is_a_format_error() {
        let e = format_err(b"*2\r\n$3\r\nGET\r\n:1\r\n");
        assert_eq!(
            e,
            FormatError {
                offset: 13,
                kind: FormatErrorKind::NotABulk
            }
        );
    }

    #[test]
    fn negative_length_is_a_format_error() {
        assert_eq!(
            format_err(b"*1\r\n$-1\r\n").kind,
            FormatErrorKind::NegativeLength
        );
    }

    #[test]
    fn errors_are_sticky() {
        let mut r = Reader::new();
        r.feed(b"x\n*1\r\n$1\r\na\r\n");
        let e = r.next_event().unwrap_err();
        assert_eq!(r.next_event(), Err(e));
    }

    #[test]
    fn long_lines_are_read_in_1023_byte_pieces() {
        // A 2000-byte annotation: its rest is read as a line, which is not a command.
        let mut data = b"#".to_vec();
        data.resize(2000, b'c');
        data.extend_from_slice(b"\r\n");
        assert_eq!(
            format_err(&data),
            FormatError {
                offset: 1023,
                kind: FormatErrorKind::NotACommand
            }
        );
        // Whose rest is a command: read as one.
        let mut data = b"#".to_vec();
        data.resize(1023, b'c');
        data.extend_from_slice(b"*1\r\n$1\r\nx\r\n");
        let (entries, _) = read_all(&data).unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[1].offset, 1023);
    }

    #[test]
    fn short_read_inside_a_command_is_a_truncation_after_the_last_complete_command() {
        let full = b"*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nECHO\r\n$5\r\nhello\r\n";
        for cut in 15..full.len() {
            let (cmds, ending) = commands(&full[..cut]);
            assert_eq!(cmds.len(), 1, "cut at {cut}");
            assert_eq!(
                ending,
                Ending::Truncated {
                    valid_up_to: 14,
                    len: cut as u64,
                    in_multi: false
                }
            );
        }
        // A lone '*' at the end is a short read too.
        assert_eq!(
            commands(b"*").1,
            Ending::Truncated {
                valid_up_to: 0,
                len: 1,
                in_multi: false
            }
        );
    }

    #[test]
    fn truncation_inside_a_transaction_keeps_the_queued_commands_offset() {
        let data = b"*1\r\n$5\r\nMULTI\r\n*1\r\n$4\r\nINCR\r\n*1\r\n$4\r\nEX";
        let (_, ending) = commands(data);
        assert_eq!(
            ending,
            Ending::Truncated {
                valid_up_to: 29,
                len: data.len() as u64,
                in_multi: true
            }
        );
    }

    #[test]
    fn multi_without_exec_at_the_end_reverts_to_before_the_multi() {
        let data = b"*1\r\n$4\r\nPING\r\n*1\r\n$5\r\nmulti\r\n*1\r\n$4\r\nINCR\r\n";
        let (cmds, ending) = commands(data);
        assert_eq!(cmds.len(), 3);
        assert_eq!(
            ending,
            Ending::IncompleteMulti {
                valid_up_to: 14,
                len: data.len() as u64
            }
        );
        assert_eq!(
            ending.log_lines("f.aof"),
            [
                "Revert incomplete MULTI/EXEC transaction in AOF file f.aof",
                "!!! Warning: short read while loading the AOF file f.aof!!!",
                "!!! Truncating the AOF f.aof at offset 14 !!!",
                "AOF f.aof loaded anyway because aof-load-truncated is enabled",
            ]
        );
        assert_eq!(ending.fatal_message("f.aof").unwrap().len(), 2);
        // With EXEC the file is complete.
        let mut done = data.to_vec();
        done.extend_from_slice(b"*1\r\n$4\r\nExec\r\n");
        assert_eq!(
            commands(&done).1,
            Ending::Complete {
                len: done.len() as u64
            }
        );
    }

    #[test]
    fn complete_file_logs_nothing() {
        let ending = Ending::Complete { len: 3 };
        assert!(ending.log_lines("x").is_empty());
        assert_eq!(ending.fatal_message("x"), None);
        assert_eq!(ending.truncate_to(), None);
    }

    #[test]
    fn detects_rdb_and_resp_files() {
        assert_eq!(detect_format(b"REDIS0011"), FileFormat::Rdb);
        assert_eq!(detect_format(b"REDI"), FileFormat::Resp);
        assert_eq!(detect_format(b"*1\r\n$"), FileFormat::Resp);
    }

    #[test]
    fn starting_at_offsets_entries_from_there() {
        let mut r = Reader::starting_at(100);
        r.feed(b"*1\r\n$4\r\nPING\r\n*1");
        r.finish();
        let Event::Entry(e) = r.next_event().unwrap() else {
            panic!()
        };
        assert_eq!((e.offset, e.end), (100, 114));
        assert_eq!(
            r.next_event().unwrap(),
            Event::End(Ending::Truncated {
                valid_up_to: 114,
                len: 116,
                in_multi: false
            })
        );
    }

    #[test]
    fn needs_data_until_finished() {
        let mut r = Reader::new();
        r.feed(b"*1\r\n$4\r\nPI");
        assert_eq!(r.next_event().unwrap(), Event::NeedData);
        r.feed(b"NG\r\n");
        assert!(matches!(r.next_event().unwrap(), Event::Entry(_)));
        assert_eq!(r.next_event().unwrap(), Event::NeedData);
        r.finish();
        assert_eq!(
            r.next_event().unwrap(),
            Event::End(Ending::Complete { len: 14 })
        );
        assert_eq!(
            r.next_event().unwrap(),
            Event::End(Ending::Complete { len: 14 })
        );
    }
}
