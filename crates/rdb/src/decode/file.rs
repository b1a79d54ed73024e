//! The file decoder: a state machine over a buffer the caller fills (see the module essay in
//! `decode/mod.rs`), and [`decode_file`] on top of it for a file already in memory.

use super::reader::{Fail, Reader, R};
use super::value::{self, Elements, Kind};
use crate::crc64::crc64;
use crate::{opcode as op, Entry, Error, ErrorKind, Value, MAX_VERSION};

/// Default for [`FileDecoder::set_inline_limit`].
pub const DEFAULT_INLINE_LIMIT: u64 = 1024;
/// Default for [`FileDecoder::set_batch_limit`].
pub const DEFAULT_BATCH_LIMIT: usize = 1024;

/// What the decoder found next.
#[derive(Clone, Debug, PartialEq)]
pub enum Item {
    /// `REDIS` and the version (always first).
    Header { version: u16 },
    /// An auxiliary field (`redis-ver`, `ctime`, `aof-base`, ...).
    Aux { key: Vec<u8>, value: Vec<u8> },
    /// Following keys belong to this database.
    SelectDb(u32),
    /// Size hints for the current database.
    ResizeDb { db_size: u64, expires_size: u64 },
    /// Cluster slot size hints (Redis 7.4 / Valkey 8).
    SlotInfo {
        slot: u64,
        slot_size: u64,
        expires_slot_size: u64,
    },
    /// A function library's code.
    Function { code: Vec<u8> },
    /// A whole key.
    Key(Entry),
    /// A big collection starts; its elements follow in [`Item::Elements`] batches until
    /// [`Item::KeyEnd`].
    KeyStart(KeyStart),
    /// Elements of the key in progress, as a value of its kind (possibly empty when only
    /// empty quicklist nodes were read). Duplicates across batches are not checked here.
    Elements(Value),
    /// The key in progress is complete. If no batch held an element, it is an empty key.
    KeyEnd,
    /// A collection with no elements, which Redis skips when loading.
    EmptyKey { db: u32, key: Vec<u8> },
    /// The end of the file. Bytes after it (an AOF tail) are the caller's.
    End { checksum: Checksum },
}

/// The header of a key that comes in batches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyStart {
    pub db: u32,
    pub key: Vec<u8>,
    pub expire_at_ms: Option<u64>,
    pub idle_seconds: Option<u64>,
    pub lfu_freq: Option<u8>,
    pub kind: Kind,
    /// Elements (or quicklist nodes) the file claims: a hint, not to be trusted for an
    /// allocation.
    pub len_hint: u64,
    /// Where the key starts in the file (after its type byte): the offset an error about the
    /// whole value (duplicate members) names, as for a key decoded whole.
    pub offset: u64,
}

/// The file's checksum trailer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Checksum {
    /// Present and matching.
    Verified(u64),
    /// 0: written with `rdbchecksum no`; not checked (as Redis does).
    Disabled,
    /// Versions before 5 have none.
    Absent,
}

/// What [`FileDecoder::next`] returns.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// The input ends inside the next item: call again with at least this many more bytes
    /// (the same unconsumed bytes first).
    Need(u64),
    /// An item, which took the first `consumed` bytes of the input.
    Item { item: Item, consumed: usize },
}

#[derive(Clone, Debug)]
enum State {
    Header,
    Top,
    Batches(Elements),
    Done,
}

/// Key modifiers that precede a key (expiry, LRU, LFU).
#[derive(Clone, Copy, Debug, Default)]
struct Modifiers {
    expire_at_ms: Option<u64>,
    idle_seconds: Option<u64>,
    lfu_freq: Option<u8>,
}

/// An incremental RDB file decoder. Feed it the unconsumed bytes; see [`Step`].
#[derive(Clone, Debug)]
pub struct FileDecoder {
    state: State,
    /// Absolute file offset of the next byte to be given.
    offset: u64,
    crc: u64,
    version: u16,
    db: u32,
    pending: Modifiers,
    inline_limit: u64,
    batch_limit: usize,
}

impl Default for FileDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl FileDecoder {
    pub fn new() -> Self {
        FileDecoder {
            state: State::Header,
            offset: 0,
            crc: 0,
            version: 0,
            db: 0,
            pending: Modifiers::default(),
            inline_limit: DEFAULT_INLINE_LIMIT,
            batch_limit: DEFAULT_BATCH_LIMIT,
        }
    }

    /// Element-by-element collections with more than `n` elements (or quicklist nodes) come
    /// in batches; smaller ones whole. 0 batches every one of them.
    pub fn set_inline_limit(&mut self, n: u64) {
        self.inline_limit = n;
    }

    /// Most elements (or quicklist nodes) read into one [`Item::Elements`] (at least 1).
    pub fn set_batch_limit(&mut self, n: usize) {
        self.batch_limit = n.max(1);
    }

    /// Absolute offset of the next byte the decoder expects.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The file's RDB version (0 before the header).
    pub fn version(&self) -> u16 {
        self.version
    }

    /// Decodes the next item from `input`, which starts at [`FileDecoder::offset`].
    pub fn next(&mut self, input: &[u8]) -> Result<Step, Error> {
        let res = match self.state.clone() {
            State::Header => self.header(input),
            State::Top => self.top(input),
            State::Batches(el) => self.batch(input, el),
            State::Done => {
                return Err(Error {
                    offset: self.offset,
                    kind: ErrorKind::Corrupt("decoding past the end of the file"),
                })
            }
        };
        match res {
            Ok((item, consumed)) => {
                self.crc = crc64(self.crc, &input[..consumed]);
                self.offset += consumed as u64;
                Ok(Step::Item { item, consumed })
            }
            Err(Fail::Need(n)) => Ok(Step::Need(n)),
            Err(Fail::Bad(e)) => {
                self.state = State::Done;
                Err(e)
            }
        }
    }

    fn header(&mut self, input: &[u8]) -> R<(Item, usize)> {
        let mut r = Reader::new(input, self.offset);
        let magic = r.take(9)?;
        let bad = || Reader::fail_at(0, ErrorKind::BadMagic);
        if &magic[..5] != b"REDIS" || !magic[5..].iter().all(u8::is_ascii_digit) {
            return Err(bad());
        }
        let v = magic[5..]
            .iter()
            .fold(0u16, |v, d| v * 10 + (d - b'0') as u16);
        if v == 0 || v > MAX_VERSION {
            return Err(Reader::fail_at(5, ErrorKind::UnsupportedVersion(v)));
        }
        self.version = v;
        self.state = State::Top;
        Ok((Item::Header { version: v }, 9))
    }

    fn top(&mut self, input: &[u8]) -> R<(Item, usize)> {
        let mut r = Reader::new(input, self.offset);
        let mut m = self.pending;
        loop {
            let at = r.offset();
            let t = r.u8()?;
            let item = match t {
                op::EXPIRETIME_MS => {
                    m.expire_at_ms = Some(r.millis()?);
                    continue;
                }
                op::EXPIRETIME => {
                    m.expire_at_ms = Some(r.seconds_as_millis()?);
                    continue;
                }
                op::IDLE => {
                    m.idle_seconds = Some(r.length()?);
                    continue;
                }
                op::FREQ => {
                    m.lfu_freq = Some(r.u8()?);
                    continue;
                }
                op::AUX => Item::Aux {
                    key: r.string()?,
                    value: r.string()?,
                },
                op::SELECTDB => {
                    let db = r.length()?;
                    let db = u32::try_from(db).map_err(|_| {
                        Reader::fail_at(at, ErrorKind::Corrupt("database number too big"))
                    })?;
                    self.db = db;
                    Item::SelectDb(db)
                }
                op::RESIZEDB => Item::ResizeDb {
                    db_size: r.length()?,
                    expires_size: r.length()?,
                },
                op::SLOT_INFO => Item::SlotInfo {
                    slot: r.length()?,
                    slot_size: r.length()?,
                    expires_slot_size: r.length()?,
                },
                op::FUNCTION2 => Item::Function { code: r.string()? },
                op::EOF => {
                    let checksum = if self.version >= 5 {
                        let upto = r.pos();
                        let at = r.offset();
                        let stored = r.u64_le()?;
                        let crc = crc64(self.crc, &input[..upto]);
                        if stored == 0 {
                            Checksum::Disabled
                        } else if stored == crc {
                            Checksum::Verified(crc)
                        } else {
                            return Err(Reader::fail_at(at, ErrorKind::BadChecksum));
                        }
                    } else {
                        Checksum::Absent
                    };
                    self.state = State::Done;
                    Item::End { checksum }
                }
                _ if !value::is_object_type(t) => {
                    return Err(Reader::fail_at(at, ErrorKind::UnsupportedType(t)))
                }
                _ if value::is_element_type(t) => {
                    let key = r.string()?;
                    let mut el = Elements::start(&mut r, t)?;
                    if el.remaining > self.inline_limit {
                        self.pending = Modifiers::default();
                        let kind = el.kind();
                        let len_hint = el.remaining;
                        self.state = State::Batches(el);
                        return Ok((
                            Item::KeyStart(KeyStart {
                                db: self.db,
                                key,
                                expire_at_ms: m.expire_at_ms,
                                idle_seconds: m.idle_seconds,
                                lfu_freq: m.lfu_freq,
                                kind,
                                len_hint,
                                offset: at + 1,
                            }),
                            r.pos(),
                        ));
                    }
                    let mut v = el.kind().empty();
                    while el.remaining > 0 {
                        el.read_one(&mut r, &mut v)?;
                    }
                    let start = at + 1;
                    self.key_item(key, m, Some(v), start)?
                }
                _ => {
                    let key = r.string()?;
                    let v = value::read_value(&mut r, t)?;
                    self.key_item(key, m, v, at + 1)?
                }
            };
            self.pending = if matches!(item, Item::Key(_) | Item::EmptyKey { .. }) {
                Modifiers::default()
            } else {
                m
            };
            return Ok((item, r.pos()));
        }
    }

    /// The item for a whole key: checked for duplicates, or an empty key.
    fn key_item(&self, key: Vec<u8>, m: Modifiers, v: Option<Value>, at: u64) -> R<Item> {
        let Some(v) = v.filter(|v| !value::is_empty(v)) else {
            return Ok(Item::EmptyKey { db: self.db, key });
        };
        value::check_unique(&v).map_err(|e| Reader::fail_at(at, ErrorKind::Corrupt(e)))?;
        Ok(Item::Key(Entry {
            db: self.db,
            key,
            expire_at_ms: m.expire_at_ms,
            idle_seconds: m.idle_seconds,
            lfu_freq: m.lfu_freq,
            value: v,
        }))
    }

    fn batch(&mut self, input: &[u8], mut el: Elements) -> R<(Item, usize)> {
        if el.remaining == 0 {
            self.state = State::Top;
            return Ok((Item::KeyEnd, 0));
        }
        let mut batch = el.kind().empty();
        let mut pos = 0usize;
        let mut units = 0usize;
        while el.remaining > 0 && units < self.batch_limit {
            let mut r = Reader::new(&input[pos..], self.offset + pos as u64);
            match el.read_one(&mut r, &mut batch) {
                Ok(()) => {
                    pos += r.pos();
                    units += 1;
                }
                Err(Fail::Need(n)) if units == 0 => return Err(Fail::Need(n)),
                Err(Fail::Need(_)) => break,
                Err(e) => return Err(e),
            }
        }
        self.state = State::Batches(el);
        Ok((Item::Elements(batch), pos))
    }
}

/// What [`decode_file`] learned besides the keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileInfo {
    pub version: u16,
    /// Auxiliary fields in file order.
    pub aux: Vec<(Vec<u8>, Vec<u8>)>,
    pub checksum: Checksum,
    /// Empty collections skipped, as Redis skips them.
    pub empty_keys_skipped: u64,
    /// Offset just past the checksum: where an AOF tail would start.
    pub end_offset: u64,
}

/// What [`decode_file`] returns: the file's info, its keys, its function libraries' code.
pub type DecodedFile = (FileInfo, Vec<Entry>, Vec<Vec<u8>>);

/// Builds a [`DecodedFile`] from the items of a [`FileDecoder`], assembling batched keys and
/// refusing their duplicates: [`decode_file`] for callers that feed the decoder themselves.
#[derive(Clone, Debug)]
pub struct Collector {
    info: FileInfo,
    keys: Vec<Entry>,
    functions: Vec<Vec<u8>>,
    /// The key arriving in batches, and where it starts.
    current: Option<Entry>,
    current_at: u64,
}

impl Default for Collector {
    fn default() -> Self {
        Self::new()
    }
}

impl Collector {
    pub fn new() -> Self {
        Collector {
            info: FileInfo {
                version: 0,
                aux: Vec::new(),
                checksum: Checksum::Absent,
                empty_keys_skipped: 0,
                end_offset: 0,
            },
            keys: Vec::new(),
            functions: Vec::new(),
            current: None,
            current_at: 0,
        }
    }

    /// Takes the next item; `offset` is the decoder's [`FileDecoder::offset`] after it.
    /// Returns true at the end of the file.
    pub fn push(&mut self, item: Item, offset: u64) -> Result<bool, Error> {
        match item {
            Item::Header { version } => self.info.version = version,
            Item::Aux { key, value } => self.info.aux.push((key, value)),
            Item::Function { code } => self.functions.push(code),
            Item::Key(e) => self.keys.push(e),
            Item::EmptyKey { .. } => self.info.empty_keys_skipped += 1,
            Item::KeyStart(k) => {
                self.current_at = k.offset;
                self.current = Some(Entry {
                    db: k.db,
                    key: k.key,
                    expire_at_ms: k.expire_at_ms,
                    idle_seconds: k.idle_seconds,
                    lfu_freq: k.lfu_freq,
                    value: k.kind.empty(),
                })
            }
            Item::Elements(batch) => {
                if let Some(e) = self.current.as_mut() {
                    value::append(&mut e.value, batch);
                }
            }
            Item::KeyEnd => {
                if let Some(e) = self.current.take() {
                    if value::is_empty(&e.value) {
                        self.info.empty_keys_skipped += 1;
                    } else {
                        value::check_unique(&e.value).map_err(|m| Error {
                            offset: self.current_at,
                            kind: ErrorKind::Corrupt(m),
                        })?;
                        self.keys.push(e);
                    }
                }
            }
            Item::End { checksum } => {
                self.info.checksum = checksum;
                self.info.end_offset = offset;
                return Ok(true);
            }
            Item::SelectDb(_) | Item::ResizeDb { .. } | Item::SlotInfo { .. } => {}
        }
        Ok(false)
    }

    /// What was collected.
    pub fn finish(self) -> DecodedFile {
        (self.info, self.keys, self.functions)
    }
}

/// Decodes a whole file in memory: its info, its keys in file order (expired ones included:
/// dropping them is the loader's choice), and its function libraries' code. Bytes after the
/// end are ignored (an AOF tail).
pub fn decode_file(bytes: &[u8]) -> Result<DecodedFile, Error> {
    let mut d = FileDecoder::new();
    let mut c = Collector::new();
    let mut pos = 0usize;
    loop {
        match d.next(&bytes[pos..])? {
            Step::Need(_) => {
                return Err(Error {
                    offset: bytes.len() as u64,
                    kind: ErrorKind::Truncated,
                })
            }
            Step::Item { item, consumed } => {
                pos += consumed;
                if c.push(item, d.offset())? {
                    return Ok(c.finish());
                }
            }
        }
    }
}

/// [`decode_file`] with the bytes given in pieces of the sizes in `pieces` (cycled; a size
/// smaller than what the decoder asks for is raised to it), and the decoder's limits set: the
/// same result as [`decode_file`] whatever the pieces. For tests and fuzzing.
pub fn decode_file_in_pieces(
    bytes: &[u8],
    pieces: &[usize],
    inline_limit: u64,
    batch_limit: usize,
) -> Result<DecodedFile, Error> {
    let mut d = FileDecoder::new();
    d.set_inline_limit(inline_limit);
    d.set_batch_limit(batch_limit);
    let mut c = Collector::new();
    let mut buf: Vec<u8> = Vec::new();
    let mut fed = 0usize;
    let mut i = 0usize;
    loop {
        match d.next(&buf)? {
            Step::Need(n) => {
                if fed == bytes.len() {
                    return Err(Error {
                        offset: bytes.len() as u64,
                        kind: ErrorKind::Truncated,
                    });
                }
                let piece = pieces.get(i % pieces.len().max(1)).copied().unwrap_or(1);
                i += 1;
                let want = (n.min(usize::MAX as u64) as usize).max(piece);
                let take = want.min(bytes.len() - fed);
                buf.extend_from_slice(&bytes[fed..fed + take]);
                fed += take;
            }
            Step::Item { item, consumed } => {
                buf.drain(..consumed);
                if c.push(item, d.offset())? {
                    return Ok(c.finish());
                }
            }
        }
    }
}
