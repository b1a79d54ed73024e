//! Streams (RDB types 15, 19, 21): the radix tree's nodes as (master id, listpack) pairs,
//! then the stream's metadata, then the consumer groups with their PELs and consumers.
//!
//! A node's listpack starts with its master entry: `count` (live entries), `deleted`,
//! `num-fields`, the field names, and a `0`. Then each entry: `flags` (1 deleted, 2 same
//! fields as the master), the id as (ms, seq) differences from the master id, either
//! `num-fields` and interleaved field/value pairs or (same fields) just the values, and
//! `lp-count`, the number of listpack items of the entry (to walk it backwards). Checked as
//! Redis's deep sanitization does (every count, every `lp-count`, nothing left over), plus
//! what a stream that works needs: node keys and entry ids strictly ascending, the live
//! count of each node and of the stream matching its entries, and the last entry not after
//! the stream's last id. Deleted entries are skipped.

use std::collections::{BTreeMap, HashSet};

use super::reader::{Reader, R};
use super::{listpack, Elem};
use crate::{
    object_type as ot, ErrorKind, PendingEntry, Stream, StreamConsumer, StreamEntry, StreamGroup,
    StreamId,
};

const FLAG_DELETED: i64 = 1;
const FLAG_SAMEFIELDS: i64 = 2;

fn id_from_be(b: &[u8]) -> StreamId {
    let mut ms = [0u8; 8];
    let mut seq = [0u8; 8];
    ms.copy_from_slice(&b[..8]);
    seq.copy_from_slice(&b[8..16]);
    StreamId {
        ms: u64::from_be_bytes(ms),
        seq: u64::from_be_bytes(seq),
    }
}

fn read_id(r: &mut Reader) -> R<StreamId> {
    Ok(StreamId {
        ms: r.length()?,
        seq: r.length()?,
    })
}

/// The live entries of one node, appended to `out` (whose last id they must follow).
fn node_entries(
    elems: &[Elem],
    master: StreamId,
    out: &mut Vec<StreamEntry>,
) -> Result<(), &'static str> {
    const SHORT: &str = "stream listpack ends inside an entry";
    let mut it = elems.iter();
    let int = |it: &mut std::slice::Iter<Elem>| -> Result<i64, &'static str> {
        it.next()
            .ok_or(SHORT)?
            .int()
            .ok_or("stream listpack has a string where an integer belongs")
    };
    let count = int(&mut it)?;
    let deleted = int(&mut it)?;
    let nfields = int(&mut it)?;
    if count < 0 || deleted < 0 || nfields < 0 || nfields as usize > elems.len() {
        return Err("stream master entry has invalid counts");
    }
    let mut fields = Vec::with_capacity(nfields as usize);
    for _ in 0..nfields {
        fields.push(it.next().ok_or(SHORT)?.to_vec());
    }
    if int(&mut it)? != 0 {
        return Err("stream master entry without its terminator");
    }
    let total = count
        .checked_add(deleted)
        .filter(|&t| t as usize <= elems.len())
        .ok_or("stream master entry has invalid counts")?;
    let mut live = 0;
    for _ in 0..total {
        let flags = int(&mut it)?;
        let ms = int(&mut it)?;
        let seq = int(&mut it)?;
        let id = StreamId {
            ms: master.ms.wrapping_add(ms as u64),
            seq: master.seq.wrapping_add(seq as u64),
        };
        let (pairs, expect) = if flags & FLAG_SAMEFIELDS != 0 {
            let mut pairs = Vec::with_capacity(fields.len());
            for f in &fields {
                pairs.push((f.clone(), it.next().ok_or(SHORT)?.to_vec()));
            }
            (pairs, nfields + 3)
        } else {
            let n = int(&mut it)?;
            if n < 0 || n as usize > elems.len() {
                return Err("stream entry has an invalid field count");
            }
            let mut pairs = Vec::with_capacity(n as usize);
            for _ in 0..n {
                let f = it.next().ok_or(SHORT)?.to_vec();
                pairs.push((f, it.next().ok_or(SHORT)?.to_vec()));
            }
            (pairs, 2 * n + 4)
        };
        if int(&mut it)? != expect {
            return Err("stream entry lp-count does not match");
        }
        if flags & FLAG_DELETED == 0 {
            if out.last().is_some_and(|e| e.id >= id) {
                return Err("stream entry ids not in ascending order");
            }
            live += 1;
            out.push(StreamEntry { id, fields: pairs });
        }
    }
    if it.next().is_some() {
        return Err("stream listpack has items after its last entry");
    }
    if live != count {
        return Err("stream node live count does not match its entries");
    }
    Ok(())
}

/// The `entries-read` Redis estimates for a group of an old (type 15) stream, which did not
/// store it (`streamEstimateDistanceFromFirstEverEntry`). None is "unknown".
fn estimate_entries_read(s: &Stream, id: StreamId) -> Option<u64> {
    if s.entries_added == 0 {
        return Some(0);
    }
    if s.length == 0 && id <= s.last_id {
        return Some(s.entries_added);
    }
    if id == s.last_id {
        return Some(s.entries_added);
    }
    if id > s.last_id {
        return None;
    }
    if s.max_deleted_id == StreamId::default() || s.max_deleted_id < s.first_id {
        if id < s.first_id {
            return Some(s.entries_added.saturating_sub(s.length));
        }
        if id == s.first_id {
            return Some(s.entries_added.saturating_sub(s.length) + 1);
        }
    }
    None
}

/// Reads a stream of type `t` (15, 19 or 21).
pub(crate) fn read(r: &mut Reader, t: u8) -> R<Stream> {
    let corrupt = |at: u64, m: &'static str| Reader::fail_at(at, ErrorKind::Corrupt(m));
    // A node is at least a 16-byte key and a listpack string.
    let nodes = r.count(18)?;
    let mut s = Stream::default();
    let mut prev_master: Option<StreamId> = None;
    for _ in 0..nodes {
        let at = r.offset();
        let key = r.string()?;
        if key.len() != 16 {
            return Err(corrupt(
                at,
                "stream node key is not the size of a stream ID",
            ));
        }
        let master = id_from_be(&key);
        if prev_master.is_some_and(|p| p >= master) {
            return Err(corrupt(at, "stream node keys not in ascending order"));
        }
        prev_master = Some(master);
        let at = r.offset();
        let lp = r.string()?;
        let elems = listpack::parse(&lp).map_err(|m| corrupt(at, m))?;
        if elems.is_empty() {
            return Err(corrupt(at, "empty listpack inside a stream"));
        }
        node_entries(&elems, master, &mut s.entries).map_err(|m| corrupt(at, m))?;
    }
    let at = r.offset();
    s.length = r.length()?;
    s.last_id = read_id(r)?;
    if t >= ot::STREAM_LISTPACKS_2 {
        s.first_id = read_id(r)?;
        s.max_deleted_id = read_id(r)?;
        s.entries_added = r.length()?;
    } else {
        s.entries_added = s.length;
        s.first_id = s.entries.first().map(|e| e.id).unwrap_or_default();
    }
    if s.length != s.entries.len() as u64 {
        return Err(corrupt(at, "stream length does not match its entries"));
    }
    if s.entries.last().is_some_and(|e| e.id > s.last_id) {
        return Err(corrupt(at, "stream entry after the stream's last id"));
    }

    let ngroups = r.count(4)?;
    let mut names = HashSet::new();
    for _ in 0..ngroups {
        let at = r.offset();
        let name = r.string()?;
        if !names.insert(name.clone()) {
            return Err(corrupt(at, "duplicate stream consumer group"));
        }
        let last_delivered_id = read_id(r)?;
        let entries_read = if t >= ot::STREAM_LISTPACKS_2 {
            // -1 (as a 64-bit length) is Redis's "unknown".
            Some(r.length()?).filter(|&n| n != u64::MAX)
        } else {
            estimate_entries_read(&s, last_delivered_id)
        };
        // PEL entry: 16-byte id, 8-byte time, a length.
        let npel = r.count(25)?;
        let mut pel: BTreeMap<StreamId, (u64, u64, Option<usize>)> = BTreeMap::new();
        for _ in 0..npel {
            let at = r.offset();
            let id = id_from_be(r.take(16)?);
            let time = r.millis()?;
            let count = r.length()?;
            if pel.insert(id, (time, count, None)).is_some() {
                return Err(corrupt(at, "duplicate stream PEL entry"));
            }
        }
        let nconsumers = r.count(10)?;
        let mut consumers: Vec<StreamConsumer> = Vec::new();
        let mut cnames = HashSet::new();
        for ci in 0..nconsumers {
            let at = r.offset();
            let name = r.string()?;
            if !cnames.insert(name.clone()) {
                return Err(corrupt(at, "duplicate stream consumer"));
            }
            let seen_time_ms = r.millis()?;
            let active_time_ms = if t >= ot::STREAM_LISTPACKS_3 {
                r.millis()?
            } else {
                seen_time_ms
            };
            let n = r.count(16)?;
            let mut pending = Vec::with_capacity(r.capacity(n, 16));
            for _ in 0..n {
                let at = r.offset();
                let id = id_from_be(r.take(16)?);
                let nack = pel
                    .get_mut(&id)
                    .ok_or_else(|| corrupt(at, "consumer PEL entry not in the group's PEL"))?;
                if nack.2.is_some() {
                    return Err(corrupt(at, "stream PEL entry owned twice"));
                }
                nack.2 = Some(ci as usize);
                pending.push(id);
            }
            pending.sort_unstable();
            consumers.push(StreamConsumer {
                name,
                seen_time_ms,
                active_time_ms,
                pending,
            });
        }
        let mut pending = Vec::with_capacity(pel.len());
        for (id, (delivery_time_ms, delivery_count, owner)) in pel {
            let owner = owner.ok_or_else(|| corrupt(at, "stream PEL entry without a consumer"))?;
            pending.push(PendingEntry {
                id,
                delivery_time_ms,
                delivery_count,
                consumer: consumers[owner].name.clone(),
            });
        }
        s.groups.push(StreamGroup {
            name,
            last_delivered_id,
            entries_read,
            pending,
            consumers,
        });
    }
    Ok(s)
}
