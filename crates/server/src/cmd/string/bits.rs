//! Bitmap commands: SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP, BITFIELD, BITFIELD_RO
//! (Redis 7.2's bitops.c: argument checks in the same order, the same range arithmetic).

use super::{cstr, grow_zeroed, is_str, kw, max_len, raw_entry, ERR_NO_MEMORY, ERR_WRONGTYPE};
use crate::cmd::generic::by_shard;
use crate::cmd::{parse_int, Locks, Reg, TxFuture, ERR_NOT_INT, ERR_SYNTAX};
use crate::exec::Tx;
use crate::notify::{notify, GENERIC, STRING};
use crate::shard::ShardCtx;
use bytes::Bytes;
use darner_resp::ReplyWriter;

pub fn register(r: &mut Reg) {
    r.key("setbit", setbit);
    r.key("getbit", getbit);
    r.key("bitcount", bitcount);
    r.key("bitpos", bitpos);
    r.tx("bitop", Locks::Keys, bitop);
    r.key("bitfield", bitfield);
    r.key("bitfield_ro", bitfield_ro);
}

const ERR_BIT_OFFSET: &[u8] = b"ERR bit offset is not an integer or out of range";
const ERR_BIT_VALUE: &[u8] = b"ERR bit is not an integer or out of range";
const ERR_BF_TYPE: &[u8] =
    b"ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";

/// Redis's `getBitOffsetFromArgument`: a bit offset below `proto-max-bulk-len` bytes; with
/// `hash`, `#N` means N times the field width.
fn bit_offset(ctx: &ShardCtx, arg: &[u8], hash: bool, bits: u32) -> Option<u64> {
    let usehash = hash && bits > 0 && arg.first() == Some(&b'#');
    let mut v = parse_int(&arg[usehash as usize..])?;
    if usehash {
        // C multiplies without an overflow check; keep its (wrapping) result.
        v = v.wrapping_mul(bits as i64);
    }
    if v < 0 || (v >> 3) >= max_len(ctx) {
        return None;
    }
    Some(v as u64)
}

fn setbit(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let key = &args[1];
    let Some(off) = bit_offset(ctx, args[2], false, 0) else {
        return w.error(ERR_BIT_OFFSET);
    };
    let on = match parse_int(args[3]) {
        Some(v) if v & !1 == 0 => v as u8,
        _ => return w.error(ERR_BIT_VALUE),
    };
    let byte = (off >> 3) as usize;
    let shift = 7 - (off & 7) as u8;
    let lru = ctx.clock.lru;
    let mut db = ctx.db();
    match db.get_mut_quiet(key) {
        None => {
            let mut v = Vec::new();
            if !grow_zeroed(&mut v, byte + 1) {
                return w.error(ERR_NO_MEMORY);
            }
            v[byte] = on << shift;
            db.set(raw_entry(key, v, None, lru));
            notify(ctx, STRING, "setbit", key);
            w.int(0);
        }
        Some(e) if !is_str(e) => w.error(ERR_WRONGTYPE),
        Some(e) => {
            let s = e.str_mut();
            let grew = s.len() <= byte;
            if !grow_zeroed(s, byte + 1) {
                return w.error(ERR_NO_MEMORY);
            }
            let old = (s[byte] >> shift) & 1;
            let changed = grew || old != on;
            if changed {
                s[byte] = (s[byte] & !(1 << shift)) | (on << shift);
            }
            // Redis signals a write only when the string changed.
            if changed {
                db.signal(key);
                notify(ctx, STRING, "setbit", key);
            } else {
                ctx.unchanged_write();
            }
            w.int(old as i64);
        }
    }
}

fn getbit(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let Some(off) = bit_offset(ctx, args[2], false, 0) else {
        return w.error(ERR_BIT_OFFSET);
    };
    match ctx.db().get(args[1]) {
        None => w.int(0),
        Some(e) if !is_str(e) => w.error(ERR_WRONGTYPE),
        Some(e) => {
            let s = e.str_value();
            let byte = (off >> 3) as usize;
            let bit = s.get(byte).map_or(0, |b| (b >> (7 - (off & 7))) & 1);
            w.int(bit as i64);
        }
    }
}

/// Parses BITCOUNT/BITPOS's `[BIT|BYTE]` word: Some(is_bit).
fn unit(arg: &[u8]) -> Option<bool> {
    if kw(arg, b"bit") {
        Some(true)
    } else if kw(arg, b"byte") {
        Some(false)
    } else {
        None
    }
}

/// Turns `start..=end` (negative from the end) in bytes or bits into a byte range and the
/// masks of the bits outside the range in its first and last byte (Redis's arithmetic).
fn byte_range(mut start: i64, mut end: i64, strlen: i64, isbit: bool) -> (i64, i64, u8, u8) {
    let totlen = if isbit { strlen << 3 } else { strlen };
    if start < 0 {
        start += totlen;
    }
    if end < 0 {
        end += totlen;
    }
    start = start.max(0);
    end = end.max(0);
    if end >= totlen {
        end = totlen - 1;
    }
    let (mut first, mut last) = (0u8, 0u8);
    if isbit && start <= end {
        first = (!((1u32 << (8 - (start & 7))) - 1) & 0xff) as u8;
        last = ((1u32 << (7 - (end & 7))) - 1) as u8;
        start >>= 3;
        end >>= 3;
    }
    (start, end, first, last)
}

fn popcount(s: &[u8]) -> i64 {
    let mut chunks = s.chunks_exact(8);
    let mut n: u64 = 0;
    for c in &mut chunks {
        n += u64::from_ne_bytes(c.try_into().expect("8 bytes")).count_ones() as u64;
    }
    n += chunks
        .remainder()
        .iter()
        .map(|b| b.count_ones() as u64)
        .sum::<u64>();
    n as i64
}

fn bitcount(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    // Redis 7.2 looks the key up first: a missing key is 0 whatever the other arguments.
    let mut db = ctx.db();
    let s = match db.get(args[1]) {
        None => return w.int(0),
        Some(e) if !is_str(e) => return w.error(ERR_WRONGTYPE),
        Some(e) => e.str_value(),
    };
    let strlen = s.len() as i64;
    let (start, end, first, last) = match args.len() {
        4 | 5 => {
            let Some(start) = parse_int(args[2]) else {
                return w.error(ERR_NOT_INT);
            };
            let Some(end) = parse_int(args[3]) else {
                return w.error(ERR_NOT_INT);
            };
            if start < 0 && end < 0 && start > end {
                return w.int(0);
            }
            let isbit = if args.len() == 5 {
                match unit(args[4]) {
                    Some(b) => b,
                    None => return w.error(ERR_SYNTAX),
                }
            } else {
                false
            };
            byte_range(start, end, strlen, isbit)
        }
        2 => (0, strlen - 1, 0, 0),
        _ => return w.error(ERR_SYNTAX),
    };
    if start > end {
        return w.int(0);
    }
    let (start, end) = (start as usize, end as usize);
    let mut count = popcount(&s[start..=end]);
    count -= ((s[start] & first).count_ones() + (s[end] & last).count_ones()) as i64;
    w.int(count);
}

/// Redis's `redisBitpos`: the first bit equal to `bit`; for 0 with none found, the bit just
/// past the end (the string is zero-padded); for 1 with none found, -1.
fn first_bit(s: &[u8], bit: u8) -> i64 {
    let skip = if bit == 1 { 0u8 } else { 0xff };
    match s.iter().position(|&c| c != skip) {
        Some(i) => {
            let c = if bit == 1 { s[i] } else { !s[i] };
            (i as i64) * 8 + c.leading_zeros() as i64
        }
        None if bit == 1 => -1,
        None => (s.len() as i64) * 8,
    }
}

fn bitpos(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let bit = match parse_int(args[2]) {
        None => return w.error(ERR_NOT_INT),
        Some(b @ (0 | 1)) => b as u8,
        Some(_) => return w.error(b"ERR The bit argument must be 1 or 0."),
    };
    let mut db = ctx.db();
    let s = match db.get(args[1]) {
        // A missing key is an infinite run of zeros.
        None => return w.int(if bit == 1 { -1 } else { 0 }),
        Some(e) if !is_str(e) => return w.error(ERR_WRONGTYPE),
        Some(e) => e.str_value(),
    };
    let strlen = s.len() as i64;
    let mut end_given = false;
    let (start, end, first, last) = match args.len() {
        4..=6 => {
            let Some(start) = parse_int(args[3]) else {
                return w.error(ERR_NOT_INT);
            };
            let isbit = if args.len() == 6 {
                match unit(args[5]) {
                    Some(b) => b,
                    None => return w.error(ERR_SYNTAX),
                }
            } else {
                false
            };
            let end = if args.len() >= 5 {
                end_given = true;
                match parse_int(args[4]) {
                    Some(e) => e,
                    None => return w.error(ERR_NOT_INT),
                }
            } else {
                strlen - 1
            };
            byte_range(start, end, strlen, isbit)
        }
        3 => (0, strlen - 1, 0, 0),
        _ => return w.error(ERR_SYNTAX),
    };
    if start > end {
        return w.int(-1);
    }
    let (pos, start, bytes) = bitpos_in(s, bit, start as usize, end as usize, first, last);
    if end_given && bit == 0 && pos == (bytes as i64) << 3 {
        // An explicit range is not zero-padded: no clear bit in it.
        return w.int(-1);
    }
    w.int(if pos != -1 {
        pos + ((start as i64) << 3)
    } else {
        pos
    });
}

/// The scan of Redis's bitposCommand over `s[start..=end]` with edge masks: returns the
/// position found relative to the returned `start`, and the bytes left at that point.
fn bitpos_in(
    s: &[u8],
    bit: u8,
    mut start: usize,
    end: usize,
    first: u8,
    last: u8,
) -> (i64, usize, usize) {
    let mut bytes = end - start + 1;
    if first != 0 {
        let mut tmp = if bit == 1 {
            s[start] & !first
        } else {
            s[start] | first
        };
        if last != 0 && bytes == 1 {
            tmp = if bit == 1 { tmp & !last } else { tmp | last };
        }
        let pos = first_bit(&[tmp], bit);
        if bytes == 1 || (pos != -1 && pos != 8) {
            return (pos, start, bytes);
        }
        start += 1;
        bytes -= 1;
    }
    let curbytes = bytes - (last != 0) as usize;
    if curbytes > 0 {
        let pos = first_bit(&s[start..start + curbytes], bit);
        if bytes == curbytes || (pos != -1 && pos != (curbytes as i64) << 3) {
            return (pos, start, bytes);
        }
        start += curbytes;
        bytes -= curbytes;
    }
    let tmp = if bit == 1 {
        s[end] & !last
    } else {
        s[end] | last
    };
    (first_bit(&[tmp], bit), start, bytes)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum BitOp {
    And,
    Or,
    Xor,
    Not,
}

fn bitop(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let resp3 = tx.resp3();
        let name = cstr(&args[1]);
        let op = if name.eq_ignore_ascii_case(b"and") {
            BitOp::And
        } else if name.eq_ignore_ascii_case(b"or") {
            BitOp::Or
        } else if name.eq_ignore_ascii_case(b"xor") {
            BitOp::Xor
        } else if name.eq_ignore_ascii_case(b"not") {
            BitOp::Not
        } else {
            return crate::cmd::with_writer(resp3, |w| w.error(ERR_SYNTAX));
        };
        if op == BitOp::Not && args.len() != 4 {
            return crate::cmd::with_writer(resp3, |w| {
                w.error(b"ERR BITOP NOT must be called with a single source key.")
            });
        }
        // Each shard folds its own sources into one buffer, reading them in place: the
        // memory is one buffer per shard, however many sources (or copies of one big key)
        // the command names. The folds are combined here in the same way (the operations
        // are associative and commutative, with shorter operands padded with zeros).
        let keys = &args[3..];
        let hops: Vec<_> = by_shard(&tx, keys)
            .into_iter()
            .map(|(s, idx)| {
                let ks: Vec<Bytes> = idx.iter().map(|&i| keys[i].clone()).collect();
                tx.run(s, move |ctx| {
                    let mut db = ctx.db();
                    let mut acc: Option<Vec<u8>> = None;
                    for k in &ks {
                        let src = match db.get(k) {
                            None => &[][..],
                            Some(e) if !is_str(e) => return Err(()),
                            Some(e) => e.str_value(),
                        };
                        fold(op, &mut acc, src);
                    }
                    Ok(acc.unwrap_or_default())
                })
            })
            .collect();
        let mut res: Option<Vec<u8>> = None;
        let mut wrongtype = false;
        for hop in hops {
            match hop.await {
                Ok(part) if wrongtype => drop(part),
                Ok(part) => match res {
                    None => res = Some(part),
                    Some(_) => fold(op, &mut res, &part),
                },
                Err(()) => wrongtype = true,
            }
        }
        if wrongtype {
            return crate::cmd::with_writer(resp3, |w| w.error(ERR_WRONGTYPE));
        }
        let mut res = res.unwrap_or_default();
        let maxlen = res.len();
        if op == BitOp::Not {
            res.iter_mut().for_each(|r| *r = !*r);
        }
        // Store (or, for an empty result, delete) the destination; its TTL is cleared.
        let dest = args[2].clone();
        tx.run(tx.shard_of(&dest), move |ctx| {
            let lru = ctx.clock.lru;
            let mut db = ctx.db();
            if res.is_empty() {
                if db.delete(&dest) {
                    notify(ctx, GENERIC, "del", &dest);
                }
            } else {
                db.set(raw_entry(&dest, res, None, lru));
                notify(ctx, STRING, "set", &dest);
            }
        })
        .await;
        crate::cmd::with_writer(resp3, |w| w.int(maxlen as i64))
    })
}

/// Folds one BITOP source into `acc` (None before the first): the result is as long as the
/// longest source, and a shorter source counts as padded with zero bytes.
fn fold(op: BitOp, acc: &mut Option<Vec<u8>>, src: &[u8]) {
    let Some(res) = acc else {
        *acc = Some(src.to_vec());
        return;
    };
    let n = src.len();
    if res.len() < n {
        // The earlier sources were shorter: zeros there.
        res.resize(n, 0);
    }
    match op {
        BitOp::And => {
            res[..n].iter_mut().zip(src).for_each(|(r, s)| *r &= s);
            res[n..].fill(0);
        }
        BitOp::Or => res[..n].iter_mut().zip(src).for_each(|(r, s)| *r |= s),
        BitOp::Xor => res[..n].iter_mut().zip(src).for_each(|(r, s)| *r ^= s),
        BitOp::Not => {}
    }
}

// ---- BITFIELD -------------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq)]
enum Overflow {
    Wrap,
    Sat,
    Fail,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Get,
    Set,
    Incrby,
}

struct FieldOp {
    kind: Kind,
    offset: u64,
    value: i64,
    overflow: Overflow,
    bits: u32,
    signed: bool,
}

/// Redis's `getBitfieldTypeFromArgument`: `i1`..`i64` or `u1`..`u63`.
fn field_type(arg: &[u8]) -> Option<(bool, u32)> {
    let signed = match arg.first() {
        Some(b'i') => true,
        Some(b'u') => false,
        _ => return None,
    };
    let bits = parse_int(cstr(&arg[1..]))?;
    if bits < 1 || (signed && bits > 64) || (!signed && bits > 63) {
        return None;
    }
    Some((signed, bits as u32))
}

fn get_unsigned(p: &[u8], mut offset: u64, bits: u32) -> u64 {
    let mut v = 0u64;
    for _ in 0..bits {
        let byte = p[(offset >> 3) as usize];
        let bit = (byte >> (7 - (offset & 7))) & 1;
        v = (v << 1) | bit as u64;
        offset += 1;
    }
    v
}

fn get_signed(p: &[u8], offset: u64, bits: u32) -> i64 {
    let v = get_unsigned(p, offset, bits) as i64;
    if bits < 64 && v & (1i64 << (bits - 1)) != 0 {
        v | (-1i64 << bits)
    } else {
        v
    }
}

fn set_unsigned(p: &mut [u8], mut offset: u64, bits: u32, value: u64) {
    for j in 0..bits {
        let bitval = ((value >> (bits - 1 - j)) & 1) as u8;
        let byte = &mut p[(offset >> 3) as usize];
        let shift = 7 - (offset & 7);
        *byte = (*byte & !(1 << shift)) | (bitval << shift);
        offset += 1;
    }
}

/// Redis's `checkUnsignedBitfieldOverflow`: 0, 1 (overflow) or -1 (underflow), and the value
/// to store instead under WRAP or SAT.
fn check_unsigned(value: u64, incr: i64, bits: u32, ow: Overflow) -> (i32, u64) {
    let max: u64 = if bits == 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    let maxincr = max.wrapping_sub(value) as i64;
    let minincr = (value as i64).wrapping_neg();
    let wrap = || value.wrapping_add(incr as u64) & !(u64::MAX.checked_shl(bits).unwrap_or(0));
    if value > max || (incr > 0 && incr > maxincr) {
        let limit = match ow {
            Overflow::Wrap => wrap(),
            Overflow::Sat => max,
            Overflow::Fail => 0,
        };
        (1, limit)
    } else if incr < 0 && incr < minincr {
        let limit = match ow {
            Overflow::Wrap => wrap(),
            Overflow::Sat => 0,
            Overflow::Fail => 0,
        };
        (-1, limit)
    } else {
        (0, 0)
    }
}

/// Redis's `checkSignedBitfieldOverflow`.
fn check_signed(value: i64, incr: i64, bits: u32, ow: Overflow) -> (i32, i64) {
    let max: i64 = if bits == 64 {
        i64::MAX
    } else {
        (1i64 << (bits - 1)) - 1
    };
    let min = -max - 1;
    let maxincr = (max as u64).wrapping_sub(value as u64) as i64;
    let minincr = min.wrapping_sub(value);
    let wrap = || {
        let mut c = (value as u64).wrapping_add(incr as u64);
        if bits < 64 {
            let msb = 1u64 << (bits - 1);
            let mask = u64::MAX << bits;
            if c & msb != 0 {
                c |= mask;
            } else {
                c &= !mask;
            }
        }
        c as i64
    };
    if value > max || (bits != 64 && incr > maxincr) || (value >= 0 && incr > 0 && incr > maxincr) {
        let limit = match ow {
            Overflow::Wrap => wrap(),
            Overflow::Sat => max,
            Overflow::Fail => 0,
        };
        (1, limit)
    } else if value < min
        || (bits != 64 && incr < minincr)
        || (value < 0 && incr < 0 && incr < minincr)
    {
        let limit = match ow {
            Overflow::Wrap => wrap(),
            Overflow::Sat => min,
            Overflow::Fail => 0,
        };
        (-1, limit)
    } else {
        (0, 0)
    }
}

fn bitfield(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    bitfield_generic(ctx, args, w, false);
}

fn bitfield_ro(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    bitfield_generic(ctx, args, w, true);
}

fn bitfield_generic(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter, ro: bool) {
    let mut ops: Vec<FieldOp> = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut readonly = true;
    let mut highest: u64 = 0;
    let mut j = 2;
    while j < args.len() {
        let rem = args.len() - j - 1;
        let sub = &args[j];
        let kind = if kw(sub, b"get") && rem >= 2 {
            Kind::Get
        } else if kw(sub, b"set") && rem >= 3 {
            Kind::Set
        } else if kw(sub, b"incrby") && rem >= 3 {
            Kind::Incrby
        } else if kw(sub, b"overflow") && rem >= 1 {
            let t = &args[j + 1];
            overflow = if kw(t, b"wrap") {
                Overflow::Wrap
            } else if kw(t, b"sat") {
                Overflow::Sat
            } else if kw(t, b"fail") {
                Overflow::Fail
            } else {
                return w.error(b"ERR Invalid OVERFLOW type specified");
            };
            j += 2;
            continue;
        } else {
            return w.error(ERR_SYNTAX);
        };
        let Some((signed, bits)) = field_type(args[j + 1]) else {
            return w.error(ERR_BF_TYPE);
        };
        let Some(offset) = bit_offset(ctx, args[j + 2], true, bits) else {
            return w.error(ERR_BIT_OFFSET);
        };
        let mut value = 0;
        if kind != Kind::Get {
            readonly = false;
            highest = highest.max(offset + bits as u64 - 1);
            match parse_int(args[j + 3]) {
                Some(v) => value = v,
                None => return w.error(ERR_NOT_INT),
            }
        }
        ops.push(FieldOp {
            kind,
            offset,
            value,
            overflow,
            bits,
            signed,
        });
        j += if kind == Kind::Get { 3 } else { 4 };
    }
    let key = &args[1];
    if readonly {
        let mut db = ctx.db();
        let s: &[u8] = match db.get(key) {
            Some(e) if !is_str(e) => return w.error(ERR_WRONGTYPE),
            Some(e) => e.str_value(),
            None => b"",
        };
        w.array(ops.len());
        for op in &ops {
            w.int(get_field(s, op));
        }
        if !ro {
            // BITFIELD (a write command) with only GETs.
            ctx.unchanged_write();
        }
        return;
    }
    if ro {
        return w.error(b"ERR BITFIELD_RO only supports the GET subcommand");
    }
    let need = (highest >> 3) as usize + 1;
    let lru = ctx.clock.lru;
    let mut db = ctx.db();
    match db.get_mut_quiet(key) {
        None => {
            let mut v = Vec::new();
            if !grow_zeroed(&mut v, need) {
                return w.error(ERR_NO_MEMORY);
            }
            w.array(ops.len());
            let changes = run_ops(&mut v, &ops, true, w);
            db.set(raw_entry(key, v, None, lru));
            if changes > 0 {
                notify(ctx, STRING, "setbit", key);
            }
        }
        Some(e) if !is_str(e) => w.error(ERR_WRONGTYPE),
        Some(e) => {
            let s = e.str_mut();
            let grew = s.len() < need;
            if !grow_zeroed(s, need) {
                return w.error(ERR_NO_MEMORY);
            }
            w.array(ops.len());
            let changes = run_ops(s, &ops, grew, w);
            if changes > 0 {
                db.signal(key);
                notify(ctx, STRING, "setbit", key);
            } else {
                ctx.unchanged_write();
            }
        }
    }
}

/// A GET: reads through a zero-padded copy of up to 9 bytes, so a field may run past the end
/// of the string (a GET may reach further than the writes the string was grown for).
fn get_field(s: &[u8], op: &FieldOp) -> i64 {
    let byte = (op.offset >> 3) as usize;
    let mut buf = [0u8; 9];
    if byte < s.len() {
        let n = (s.len() - byte).min(9);
        buf[..n].copy_from_slice(&s[byte..byte + n]);
    }
    let off = op.offset - (byte as u64) * 8;
    if op.signed {
        get_signed(&buf, off, op.bits)
    } else {
        get_unsigned(&buf, off, op.bits) as i64
    }
}

/// Runs the operations on a string already long enough for every write; returns how many
/// changed it (`dirty`: the string was just created or grown, so every write counts).
fn run_ops(s: &mut [u8], ops: &[FieldOp], dirty: bool, w: &mut ReplyWriter) -> usize {
    let mut changes = 0;
    for op in ops {
        match op.kind {
            Kind::Get => w.int(get_field(s, op)),
            Kind::Set | Kind::Incrby => {
                let (ov, old_bits, new_bits, ret) = if op.signed {
                    let old = get_signed(s, op.offset, op.bits);
                    let (ov, new, ret) = if op.kind == Kind::Incrby {
                        let (ov, wrapped) = check_signed(old, op.value, op.bits, op.overflow);
                        let new = if ov != 0 {
                            wrapped
                        } else {
                            old.wrapping_add(op.value)
                        };
                        (ov, new, new)
                    } else {
                        let (ov, wrapped) = check_signed(op.value, 0, op.bits, op.overflow);
                        (ov, if ov != 0 { wrapped } else { op.value }, old)
                    };
                    (ov, old as u64, new as u64, ret)
                } else {
                    let old = get_unsigned(s, op.offset, op.bits);
                    let (ov, new, ret) = if op.kind == Kind::Incrby {
                        let (ov, wrapped) = check_unsigned(old, op.value, op.bits, op.overflow);
                        let new = if ov != 0 {
                            wrapped
                        } else {
                            old.wrapping_add(op.value as u64)
                        };
                        (ov, new, new as i64)
                    } else {
                        let v = op.value as u64;
                        let (ov, wrapped) = check_unsigned(v, 0, op.bits, op.overflow);
                        (ov, if ov != 0 { wrapped } else { v }, old as i64)
                    };
                    (ov, old, new, ret)
                };
                if ov != 0 && op.overflow == Overflow::Fail {
                    w.null();
                } else {
                    w.int(ret);
                    set_unsigned(s, op.offset, op.bits, new_bits);
                    if dirty || old_bits != new_bits {
                        changes += 1;
                    }
                }
            }
        }
    }
    changes
}
