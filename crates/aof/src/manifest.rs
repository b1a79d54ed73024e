//! The manifest of a multi-part AOF directory (`<appendfilename>.manifest`), as Redis 7.0–7.2
//! reads and writes it, and the operations the server performs on it.
//!
//! The file is one line per AOF file: `file <name> seq <n> type <b|h|i>\n`. The base file
//! (at most one) comes first, then the history files, then the incr files in load order.
//! Names that contain spaces, quotes, control or non-ASCII bytes are written in double quotes
//! with C-style escapes (Redis's `sdscatrepr`) and read back with Redis's `sdssplitargs` rules.
//!
//! Parsing follows `aofLoadManifestFromFile` (Redis 7.2) exactly, including its quirks, since a
//! manifest Redis accepts must load here and one it refuses must be refused with the same
//! message:
//! - lines are read as `fgets` reads them, at most 1024 bytes at a time; a line (or a last line
//!   without `\n`, or one with a NUL byte before its `\n`) that does not fit is "too long";
//! - lines starting with `#` are skipped (even a long one, whose rest is then read as a line);
//! - keys are case-insensitive, unknown keys are ignored, there must be an even number of at
//!   least 6 words, and a later `file`/`seq`/`type` overrides an earlier one;
//! - `seq` is read with `atoll` (so `seq x` is 0, which counts as missing); `type` is the first
//!   byte of its word;
//! - the sequence numbers of incr files must increase strictly (starting above 0).
//!
//! Every error has Redis's text ([`ManifestError::message`]) and, where Redis shows it, the line
//! number and the offending line ([`ManifestError::log_lines`]).

use std::fmt;

/// `fgets` buffer of `aofLoadManifestFromFile`: `MANIFEST_MAX_LINE + 1` bytes.
pub const MANIFEST_MAX_LINE: usize = 1024;

/// The kind of an AOF file in the manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileType {
    /// `b`: the snapshot of the last rewrite (RDB or RESP); at most one.
    Base,
    /// `h`: a base or incr file that a rewrite has superseded, waiting to be deleted.
    History,
    /// `i`: the commands written since the base, in sequence order.
    Incr,
}

impl FileType {
    /// The letter in the manifest.
    pub fn as_char(self) -> u8 {
        match self {
            FileType::Base => b'b',
            FileType::History => b'h',
            FileType::Incr => b'i',
        }
    }

    /// The type for a manifest letter.
    pub fn from_char(c: u8) -> Option<FileType> {
        match c {
            b'b' => Some(FileType::Base),
            b'h' => Some(FileType::History),
            b'i' => Some(FileType::Incr),
            _ => None,
        }
    }
}

/// One line of the manifest.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AofInfo {
    /// The file name (a base name: no `/` or `\`), as bytes.
    pub name: Vec<u8>,
    /// The sequence number.
    pub seq: i64,
    /// The kind of file.
    pub file_type: FileType,
}

impl AofInfo {
    /// Appends the manifest line for this file (with its `\n`), as Redis's `aofInfoFormat`.
    pub fn render(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"file ");
        if needs_repr(&self.name) {
            cat_repr(&self.name, out);
        } else {
            out.extend_from_slice(&self.name);
        }
        out.extend_from_slice(b" seq ");
        darner_resp::write_i64(self.seq, out);
        out.extend_from_slice(b" type ");
        out.push(self.file_type.as_char());
        out.push(b'\n');
    }
}

/// The parsed manifest: Redis's `aofManifest`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Manifest {
    /// The base file, if any.
    pub base: Option<AofInfo>,
    /// History files, in manifest order (deleted after a rewrite unless GC is off).
    pub history: Vec<AofInfo>,
    /// Incr files in load order; the last one is the file being appended to.
    pub incr: Vec<AofInfo>,
    /// The sequence number of the current base (0 when there has been none); the next base
    /// gets this plus one.
    pub curr_base_seq: i64,
    /// The sequence number of the last incr file (0 when there has been none); the next incr
    /// file gets this plus one.
    pub curr_incr_seq: i64,
}

/// Name of the manifest file: `<appendfilename>.manifest`.
pub fn manifest_name(appendfilename: &[u8]) -> Vec<u8> {
    [appendfilename, b".manifest"].concat()
}

/// Name of the temporary manifest the server writes, fsyncs and renames over the manifest:
/// `temp-<appendfilename>.manifest`.
pub fn temp_manifest_name(appendfilename: &[u8]) -> Vec<u8> {
    [b"temp-", appendfilename, b".manifest"].concat()
}

/// Name of a base file: `<appendfilename>.<seq>.base.rdb` with an RDB preamble
/// (`aof-use-rdb-preamble yes`), `<appendfilename>.<seq>.base.aof` otherwise.
pub fn base_name(appendfilename: &[u8], seq: i64, rdb: bool) -> Vec<u8> {
    let mut out = appendfilename.to_vec();
    out.push(b'.');
    darner_resp::write_i64(seq, &mut out);
    out.extend_from_slice(if rdb { b".base.rdb" } else { b".base.aof" });
    out
}

/// Name of an incr file: `<appendfilename>.<seq>.incr.aof`.
pub fn incr_name(appendfilename: &[u8], seq: i64) -> Vec<u8> {
    let mut out = appendfilename.to_vec();
    out.push(b'.');
    darner_resp::write_i64(seq, &mut out);
    out.extend_from_slice(b".incr.aof");
    out
}

/// Name of the incr file that collects writes while AOF is being switched on (before the
/// first rewrite finishes): `temp-<appendfilename>.incr`.
pub fn temp_incr_name(appendfilename: &[u8]) -> Vec<u8> {
    [b"temp-", appendfilename, b".incr"].concat()
}

impl Manifest {
    /// An empty manifest (no files).
    pub fn new() -> Manifest {
        Manifest::default()
    }

    /// The manifest Redis writes when it moves an old single-file AOF (`appendfilename` in the
    /// working directory) into the AOF directory: that file as base, seq 1.
    pub fn for_upgrade(appendfilename: &[u8]) -> Manifest {
        Manifest {
            base: Some(AofInfo {
                name: appendfilename.to_vec(),
                seq: 1,
                file_type: FileType::Base,
            }),
            curr_base_seq: 1,
            ..Manifest::default()
        }
    }

    /// Whether the manifest lists no base and no incr file (nothing to load).
    pub fn is_empty(&self) -> bool {
        self.base.is_none() && self.incr.is_empty()
    }

    /// The files to load, in order: the base, then the incr files.
    pub fn files_to_load(&self) -> impl Iterator<Item = &AofInfo> {
        self.base.iter().chain(self.incr.iter())
    }

    /// Adds a new incr file (sequence number one above the last) at the end and returns its
    /// name: the file to append to from now on (Redis's `getNewIncrAofName`).
    pub fn new_incr(&mut self, appendfilename: &[u8]) -> &AofInfo {
        self.curr_incr_seq += 1;
        let info = AofInfo {
            name: incr_name(appendfilename, self.curr_incr_seq),
            seq: self.curr_incr_seq,
            file_type: FileType::Incr,
        };
        self.incr.push(info);
        self.incr.last().expect("just pushed")
    }

    /// The file to append to on start-up: the last incr file, or a new one when there is none
    /// (Redis's `getLastIncrAofName`).
    pub fn last_or_new_incr(&mut self, appendfilename: &[u8]) -> &AofInfo {
        if self.incr.is_empty() {
            self.new_incr(appendfilename);
        }
        self.incr.last().expect("not empty")
    }

    /// A rewrite produced a new base: the old base (if any) becomes the first history file and
    /// the new one (sequence number one above the old) is returned
    /// (Redis's `getNewBaseFileNameAndMarkPreAsHistory`).
    pub fn new_base(&mut self, appendfilename: &[u8], rdb: bool) -> &AofInfo {
        if let Some(mut old) = self.base.take() {
            old.file_type = FileType::History;
            self.history.insert(0, old);
        }
        self.curr_base_seq += 1;
        self.base.insert(AofInfo {
            name: base_name(appendfilename, self.curr_base_seq, rdb),
            seq: self.curr_base_seq,
            file_type: FileType::Base,
        })
    }

    /// After a successful rewrite, the incr files the new base contains become history
    /// (Redis's `markRewrittenIncrAofAsHistory`). With `keep_last` (AOF is on: the last incr
    /// file is the one being written, opened when the rewrite started) the last one stays.
    /// They go to the front of the history list, in their order.
    pub fn mark_rewritten_incr_as_history(&mut self, keep_last: bool) {
        let keep = usize::from(keep_last).min(self.incr.len());
        let moved: Vec<AofInfo> = self.incr.drain(..self.incr.len() - keep).collect();
        let mut history: Vec<AofInfo> = moved
            .into_iter()
            .map(|mut info| {
                info.file_type = FileType::History;
                info
            })
            .collect();
        history.append(&mut self.history);
        self.history = history;
    }

    /// Everything a successful rewrite changes, in Redis's order (`backgroundRewriteDoneHandler`):
    /// a new base (the old one becomes history); when AOF was being switched on
    /// (`from_temp_incr`), a new incr file, which the server renames the temporary incr file
    /// ([`temp_incr_name`]) to; then the rewritten incr files become history (all but the last
    /// when `aof_open`). Returns the new base's name and the new incr file's name.
    pub fn rewrite_done(
        &mut self,
        appendfilename: &[u8],
        rdb: bool,
        from_temp_incr: bool,
        aof_open: bool,
    ) -> (Vec<u8>, Option<Vec<u8>>) {
        let base = self.new_base(appendfilename, rdb).name.clone();
        let incr = from_temp_incr.then(|| self.new_incr(appendfilename).name.clone());
        self.mark_rewritten_incr_as_history(aof_open);
        (base, incr)
    }

    /// Removes the history files from the manifest and returns them: the server deletes them
    /// and writes the manifest (Redis's `aofDelHistoryFiles`).
    pub fn take_history(&mut self) -> Vec<AofInfo> {
        std::mem::take(&mut self.history)
    }

    /// The manifest's bytes (Redis's `getAofManifestAsString`): base, history, incr.
    pub fn render(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for info in self.base.iter().chain(&self.history).chain(&self.incr) {
            info.render(&mut out);
        }
        out
    }

    /// Parses a manifest file's contents with Redis's rules and error texts.
    pub fn parse(data: &[u8]) -> Result<Manifest, ManifestError> {
        let mut manifest = Manifest::new();
        let mut maxseq: i64 = 0;
        let mut linenum = 0usize;
        let mut pos = 0usize;
        while pos < data.len() {
            // fgets into a MANIFEST_MAX_LINE + 1 buffer: through '\n', or 1024 bytes.
            let limit = data.len().min(pos + MANIFEST_MAX_LINE);
            let end = match data[pos..limit].iter().position(|&b| b == b'\n') {
                Some(i) => pos + i + 1,
                None => limit,
            };
            let chunk = &data[pos..end];
            pos = end;
            linenum += 1;
            if chunk[0] == b'#' {
                continue;
            }
            // From here on Redis treats the buffer as a C string.
            let chunk = c_str(chunk);
            if !chunk.contains(&b'\n') {
                return Err(ManifestError::new(ManifestErrorKind::TooLongLine, None));
            }
            let line = trim(chunk);
            let at = || Some((linenum, line.to_vec()));
            let invalid = || ManifestError::new(ManifestErrorKind::InvalidFormat, at());
            if line.is_empty() {
                return Err(invalid());
            }
            // Redis's `sdssplitargs` (the inline request splitter's rules).
            let argv = darner_resp::split_args(line).ok_or_else(invalid)?;
            if argv.len() < 6 || argv.len() % 2 != 0 {
                return Err(invalid());
            }
            let (mut name, mut seq, mut type_char) = (None, 0i64, 0u8);
            for pair in argv.chunks_exact(2) {
                let (key, value) = (c_str(&pair[0]), c_str(&pair[1]));
                if key.eq_ignore_ascii_case(b"file") {
                    if value.contains(&b'/') || value.contains(&b'\\') {
                        return Err(ManifestError::new(ManifestErrorKind::PathNotBaseName, at()));
                    }
                    name = Some(value.to_vec());
                } else if key.eq_ignore_ascii_case(b"seq") {
                    seq = atoll(value);
                } else if key.eq_ignore_ascii_case(b"type") {
                    type_char = value.first().copied().unwrap_or(0);
                }
            }
            let name = match name {
                Some(name) if seq != 0 && type_char != 0 => name,
                _ => return Err(invalid()),
            };
            let err = |kind| Err(ManifestError::new(kind, at()));
            match FileType::from_char(type_char) {
                Some(FileType::Base) => {
                    if manifest.base.is_some() {
                        return err(ManifestErrorKind::DuplicateBase);
                    }
                    manifest.base = Some(AofInfo {
                        name,
                        seq,
                        file_type: FileType::Base,
                    });
                    manifest.curr_base_seq = seq;
                }
                Some(FileType::History) => manifest.history.push(AofInfo {
                    name,
                    seq,
                    file_type: FileType::History,
                }),
                Some(FileType::Incr) => {
                    if seq <= maxseq {
                        return err(ManifestErrorKind::NonMonotonicSeq);
                    }
                    manifest.incr.push(AofInfo {
                        name,
                        seq,
                        file_type: FileType::Incr,
                    });
                    manifest.curr_incr_seq = seq;
                    maxseq = seq;
                }
                None => return err(ManifestErrorKind::UnknownType),
            }
        }
        if linenum == 0 {
            return Err(ManifestError::new(ManifestErrorKind::Empty, None));
        }
        Ok(manifest)
    }
}

/// What is wrong with a manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ManifestErrorKind {
    /// The file is empty.
    Empty,
    /// A line does not fit in 1024 bytes (or lacks its `\n`).
    TooLongLine,
    /// A blank line, unbalanced quotes, fewer than 6 or an odd number of words, or a missing
    /// (or zero) file, seq or type.
    InvalidFormat,
    /// A file name with `/` or `\`.
    PathNotBaseName,
    /// A second base file.
    DuplicateBase,
    /// An incr file whose seq is not above the previous incr file's (or not above 0).
    NonMonotonicSeq,
    /// A type other than `b`, `h` or `i`.
    UnknownType,
}

/// A manifest Redis would refuse to load (it exits); the kind, and the line where Redis reports
/// it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestError {
    /// What is wrong.
    pub kind: ManifestErrorKind,
    /// The line number (counting from 1, comments included) and the line (trimmed), for the
    /// errors Redis shows them with.
    pub line: Option<(usize, Vec<u8>)>,
}

impl ManifestError {
    fn new(kind: ManifestErrorKind, line: Option<(usize, Vec<u8>)>) -> ManifestError {
        ManifestError { kind, line }
    }

    /// Redis's error text.
    pub fn message(&self) -> &'static str {
        match self.kind {
            ManifestErrorKind::Empty => "Found an empty AOF manifest",
            ManifestErrorKind::TooLongLine => "The AOF manifest file contains too long line",
            ManifestErrorKind::InvalidFormat => "Invalid AOF manifest file format",
            ManifestErrorKind::PathNotBaseName => "File can't be a path, just a filename",
            ManifestErrorKind::DuplicateBase => "Found duplicate base file information",
            ManifestErrorKind::NonMonotonicSeq => "Found a non-monotonic sequence number",
            ManifestErrorKind::UnknownType => "Unknown AOF file type",
        }
    }

    /// The warning-level log messages Redis writes before exiting, each as Redis passes it to
    /// its logger (embedded newlines included).
    pub fn log_lines(&self) -> Vec<String> {
        let mut lines = vec!["\n*** FATAL AOF MANIFEST FILE ERROR ***\n".to_string()];
        if let Some((linenum, line)) = &self.line {
            lines.push(format!("Reading the manifest file, at line {linenum}\n"));
            lines.push(format!(">>> '{}'\n", String::from_utf8_lossy(line)));
        }
        lines.push(format!("{}\n", self.message()));
        lines
    }
}

impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.line {
            Some((n, _)) => write!(f, "{} (line {n})", self.message()),
            None => f.write_str(self.message()),
        }
    }
}

impl std::error::Error for ManifestError {}

/// The bytes before the first NUL: what C string functions see.
fn c_str(b: &[u8]) -> &[u8] {
    match b.iter().position(|&c| c == 0) {
        Some(i) => &b[..i],
        None => b,
    }
}

/// `sdstrim(line, " \t\r\n")`.
fn trim(mut b: &[u8]) -> &[u8] {
    let strip = |c: &u8| matches!(c, b' ' | b'\t' | b'\r' | b'\n');
    while b.first().is_some_and(strip) {
        b = &b[1..];
    }
    while b.last().is_some_and(strip) {
        b = &b[..b.len() - 1];
    }
    b
}

/// C's `isspace` in the C locale.
fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// C's `isprint` in the C locale.
fn is_print(c: u8) -> bool {
    (0x20..0x7f).contains(&c)
}

/// Redis's `sdsneedsrepr`, plus two cases Redis writes bare and then cannot read back: a name
/// with a single quote (`sdssplitargs` takes it as the start of a quoted word) and the empty
/// name (the line loses a word). Quoted, Redis reads both, so Darner quotes them.
fn needs_repr(name: &[u8]) -> bool {
    name.is_empty()
        || name.iter().any(|&c| {
            matches!(
                c,
                b'\\' | b'"' | b'\'' | b'\n' | b'\r' | b'\t' | 0x07 | 0x08
            ) || !is_print(c)
                || is_space(c)
        })
}

/// Redis's `sdscatrepr`: the bytes in double quotes with C escapes.
fn cat_repr(b: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &c in b {
        match c {
            b'\\' | b'"' => out.extend_from_slice(&[b'\\', c]),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x07 => out.extend_from_slice(b"\\a"),
            0x08 => out.extend_from_slice(b"\\b"),
            c if is_print(c) => out.push(c),
            c => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(&[
                    b'\\',
                    b'x',
                    HEX[usize::from(c >> 4)],
                    HEX[usize::from(c & 15)],
                ]);
            }
        }
    }
    out.push(b'"');
}

/// C's `atoll` (glibc: `strtoll`, saturating): leading blanks, a sign, digits; 0 when none.
pub(crate) fn atoll(b: &[u8]) -> i64 {
    darner_resp::strtoll(b).0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(data: &[u8]) -> ManifestError {
        Manifest::parse(data).expect_err("manifest should be refused")
    }

    #[test]
    fn parses_base_history_and_incr_lines_and_their_sequence_numbers() {
        let m = Manifest::parse(
            b"file a.2.base.rdb seq 2 type b\nfile a.1.incr.aof seq 1 type h\n\
              file a.3.incr.aof seq 3 type i\nfile a.4.incr.aof seq 4 type i\n",
        )
        .unwrap();
        assert_eq!(m.base.as_ref().unwrap().name, b"a.2.base.rdb");
        assert_eq!(m.history.len(), 1);
        assert_eq!(m.incr.iter().map(|i| i.seq).collect::<Vec<_>>(), [3, 4]);
        assert_eq!((m.curr_base_seq, m.curr_incr_seq), (2, 4));
    }

    #[test]
    fn comment_lines_are_skipped_and_keys_are_case_insensitive_in_any_order() {
        let m = Manifest::parse(b"# hello\nTYPE i SEQ 7 FILE x.7.incr.aof extra 1\n").unwrap();
        assert_eq!(
            m.incr[0],
            AofInfo {
                name: b"x.7.incr.aof".to_vec(),
                seq: 7,
                file_type: FileType::Incr
            }
        );
    }

    #[test]
    fn quoted_names_with_escapes_are_read() {
        let m = Manifest::parse(b"file \"a b\\x41\\n\\\"\" seq 1 type b\n").unwrap();
        assert_eq!(m.base.unwrap().name, b"a bA\n\"");
        let m = Manifest::parse(b"file 'it\\'s' seq 1 type b\n").unwrap();
        assert_eq!(m.base.unwrap().name, b"it's");
    }

    #[test]
    fn empty_file_is_an_empty_manifest() {
        let e = err(b"");
        assert_eq!(e.message(), "Found an empty AOF manifest");
        assert_eq!(e.line, None);
    }

    #[test]
    fn only_comments_is_an_empty_but_valid_manifest() {
        assert!(Manifest::parse(b"# nothing\n").unwrap().is_empty());
    }

    #[test]
    fn line_over_1024_bytes_is_too_long() {
        let mut data = b"file ".to_vec();
        data.resize(1024, b'x');
        data.extend_from_slice(b" seq 1 type b\n");
        let e = err(&data);
        assert_eq!(e.message(), "The AOF manifest file contains too long line");
        assert_eq!(e.line, None);
        // 1023 bytes and the newline fit.
        let mut ok = b"file ".to_vec();
        let tail = b" seq 1 type b";
        ok.resize(1023 - tail.len(), b'x');
        ok.extend_from_slice(tail);
        ok.push(b'\n');
        assert_eq!(ok.len(), 1024);
        assert!(Manifest::parse(&ok).is_ok());
    }

    #[test]
    fn last_line_without_newline_is_too_long() {
        assert_eq!(
            err(b"file a seq 1 type b").kind,
            ManifestErrorKind::TooLongLine
        );
    }

    #[test]
    fn nul_byte_before_the_newline_makes_the_line_too_long() {
        assert_eq!(
            err(b"file a seq 1 type b\0\n").kind,
            ManifestErrorKind::TooLongLine
        );
    }

    #[test]
    fn long_comment_rest_is_read_as_a_line() {
        let mut data = b"#".to_vec();
        data.resize(1500, b'c');
        data.push(b'\n');
        let e = err(&data);
        assert_eq!(e.kind, ManifestErrorKind::InvalidFormat);
        assert_eq!(e.line.unwrap().0, 2);
    }

    #[test]
    fn blank_line_is_invalid_with_its_line_number() {
        let e = err(b"file a seq 1 type b\n  \r\n");
        assert_eq!(e.message(), "Invalid AOF manifest file format");
        assert_eq!(e.line, Some((2, Vec::new())));
    }

    #[test]
    fn too_few_or_odd_words_are_invalid() {
        assert_eq!(
            err(b"file a seq 1\n").kind,
            ManifestErrorKind::InvalidFormat
        );
        assert_eq!(
            err(b"file a seq 1 type b x\n").kind,
            ManifestErrorKind::InvalidFormat
        );
    }

    #[test]
    fn unbalanced_quotes_are_invalid() {
        assert_eq!(
            err(b"file \"a seq 1 type b\n").kind,
            ManifestErrorKind::InvalidFormat
        );
        assert_eq!(
            err(b"file \"a\"b seq 1 type b\n").kind,
            ManifestErrorKind::InvalidFormat
        );
        assert_eq!(
            err(b"file 'a seq 1 type b\n").kind,
            ManifestErrorKind::InvalidFormat
        );
    }

    #[test]
    fn missing_or_zero_fields_are_invalid() {
        for line in [
            &b"name a seq 1 type b\n"[..],
            b"file a seq 0 type b\n",
            b"file a seq x type b\n",
            b"file a seq 1 kind b\n",
            b"file a seq 1 type \"\"\n",
        ] {
            let e = err(line);
            assert_eq!(
                e.kind,
                ManifestErrorKind::InvalidFormat,
                "{}",
                String::from_utf8_lossy(line)
            );
            assert_eq!(e.line.as_ref().unwrap().1, trim(line));
        }
    }

    #[test]
    fn path_is_refused() {
        for line in [
            &b"file d/a seq 1 type b\n"[..],
            b"file d\\\\a seq 1 type b\n",
        ] {
            let e = err(line);
            assert_eq!(e.message(), "File can't be a path, just a filename");
            assert_eq!(e.line.unwrap().0, 1);
        }
    }

    #[test]
    fn duplicate_base_is_refused() {
        let e = err(b"file a seq 1 type b\nfile b seq 2 type b\n");
        assert_eq!(e.message(), "Found duplicate base file information");
        assert_eq!(e.line, Some((2, b"file b seq 2 type b".to_vec())));
    }

    #[test]
    fn non_increasing_incr_seq_is_refused() {
        let e = err(b"file a seq 2 type i\nfile b seq 2 type i\n");
        assert_eq!(e.message(), "Found a non-monotonic sequence number");
        assert_eq!(
            err(b"file a seq -1 type i\n").kind,
            ManifestErrorKind::NonMonotonicSeq
        );
        // History and base sequence numbers are not checked.
        assert!(Manifest::parse(
            b"file a seq 5 type h\nfile b seq 1 type h\nfile c seq -3 type b\n"
        )
        .is_ok());
    }

    #[test]
    fn unknown_type_is_refused() {
        let e = err(b"file a seq 1 type x\n");
        assert_eq!(e.message(), "Unknown AOF file type");
        // Only the first letter counts.
        assert!(Manifest::parse(b"file a seq 1 type base\n")
            .unwrap()
            .base
            .is_some());
    }

    #[test]
    fn error_log_lines_are_redis_texts() {
        let e = err(b"file a seq 1 type x\n");
        assert_eq!(
            e.log_lines(),
            [
                "\n*** FATAL AOF MANIFEST FILE ERROR ***\n",
                "Reading the manifest file, at line 1\n",
                ">>> 'file a seq 1 type x'\n",
                "Unknown AOF file type\n"
            ]
        );
        assert_eq!(err(b"").log_lines().len(), 2);
    }

    #[test]
    fn render_quotes_names_as_redis_does() {
        let info = |name: &[u8], seq| AofInfo {
            name: name.to_vec(),
            seq,
            file_type: FileType::Incr,
        };
        let mut out = Vec::new();
        info(b"plain.aof", 3).render(&mut out);
        info(b"a b\"\t\x01\xff'", 4).render(&mut out);
        assert_eq!(
            out,
            b"file plain.aof seq 3 type i\nfile \"a b\\\"\\t\\x01\\xff'\" seq 4 type i\n"
        );
        let back = Manifest::parse(&out).unwrap();
        assert_eq!(
            back.incr,
            [info(b"plain.aof", 3), info(b"a b\"\t\x01\xff'", 4)]
        );
    }

    #[test]
    fn file_names_follow_redis_naming() {
        assert_eq!(
            base_name(b"appendonly.aof", 2, true),
            b"appendonly.aof.2.base.rdb"
        );
        assert_eq!(
            base_name(b"appendonly.aof", 2, false),
            b"appendonly.aof.2.base.aof"
        );
        assert_eq!(
            incr_name(b"appendonly.aof", 12),
            b"appendonly.aof.12.incr.aof"
        );
        assert_eq!(manifest_name(b"appendonly.aof"), b"appendonly.aof.manifest");
        assert_eq!(
            temp_manifest_name(b"appendonly.aof"),
            b"temp-appendonly.aof.manifest"
        );
        assert_eq!(
            temp_incr_name(b"appendonly.aof"),
            b"temp-appendonly.aof.incr"
        );
    }

    #[test]
    fn rewrite_cycle_moves_files_as_redis_does() {
        let name = b"appendonly.aof";
        let mut m = Manifest::new();
        // Start with an empty dataset: a base and an incr file.
        m.new_base(name, true);
        m.last_or_new_incr(name);
        assert_eq!(m.render(), b"file appendonly.aof.1.base.rdb seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\n");
        // A rewrite starts: a new incr file; a failed rewrite leaves both.
        m.new_incr(name);
        m.new_incr(name);
        // It succeeds: new base, old base and all incr files but the last are history.
        let (base, incr) = m.rewrite_done(name, true, false, true);
        assert_eq!(
            (base.as_slice(), incr),
            (&b"appendonly.aof.2.base.rdb"[..], None)
        );
        assert_eq!(
            String::from_utf8(m.render()).unwrap(),
            "file appendonly.aof.2.base.rdb seq 2 type b\n\
             file appendonly.aof.1.incr.aof seq 1 type h\n\
             file appendonly.aof.2.incr.aof seq 2 type h\n\
             file appendonly.aof.1.base.rdb seq 1 type h\n\
             file appendonly.aof.3.incr.aof seq 3 type i\n"
        );
        assert_eq!(Manifest::parse(&m.render()).unwrap(), m);
        let removed = m.take_history();
        assert_eq!(removed.len(), 3);
        assert_eq!(m.render(), b"file appendonly.aof.2.base.rdb seq 2 type b\nfile appendonly.aof.3.incr.aof seq 3 type i\n");
    }

    #[test]
    fn rewrite_while_switching_aof_on_adds_the_renamed_temp_incr() {
        let mut m = Manifest::new();
        let (base, incr) = m.rewrite_done(b"ao", false, true, true);
        assert_eq!(base, b"ao.1.base.aof");
        assert_eq!(incr.unwrap(), b"ao.1.incr.aof");
        assert_eq!(
            m.render(),
            b"file ao.1.base.aof seq 1 type b\nfile ao.1.incr.aof seq 1 type i\n"
        );
        // With AOF off, every incr file becomes history.
        m.rewrite_done(b"ao", false, false, false);
        assert!(m.incr.is_empty());
        assert_eq!(m.history.len(), 2);
    }

    #[test]
    fn upgrade_manifest_has_the_old_file_as_base() {
        assert_eq!(
            Manifest::for_upgrade(b"appendonly.aof").render(),
            b"file appendonly.aof seq 1 type b\n"
        );
    }

    #[test]
    fn atoll_is_lenient_and_saturates() {
        assert_eq!(atoll(b" 12x"), 12);
        assert_eq!(atoll(b"-9223372036854775808"), i64::MIN);
        assert_eq!(atoll(b"99999999999999999999"), i64::MAX);
        assert_eq!(atoll(b"-99999999999999999999"), i64::MIN);
        assert_eq!(atoll(b"+"), 0);
    }
}
