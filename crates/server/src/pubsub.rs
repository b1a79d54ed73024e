//! Pub/Sub: who listens to which channel, and how a message gets to them.
//!
//! Three kinds of subscription share one mechanism: channels (SUBSCRIBE), glob patterns
//! (PSUBSCRIBE) and shard channels (SSUBSCRIBE, a namespace of their own that Redis Cluster
//! routes by slot). Channels are not keys: they live on no shard and hold no data.
//!
//! **Registry.** One process-wide table per kind, name → subscribers (client id, thread,
//! connection), each behind a read-write lock. PUBLISH must answer how many clients received
//! the message, so the publisher's thread has to see every subscriber at once; subscriptions
//! change rarely next to messages, so readers (publishers, PUBSUB NUMSUB) share the lock and
//! only (un)subscribing takes it exclusively. This lock is on the pub/sub path only: keys and
//! values are never behind it. The client keeps its own sets of names too (`Subscriptions`,
//! in its state): they answer the per-client counts in the replies and CLIENT LIST without
//! touching the registry, and tell a thread whether a message that was in flight when its
//! client unsubscribed must still be delivered (it must not).
//!
//! **Delivery.** The publisher's thread groups the receivers by thread and posts one message
//! per thread carrying the payload once (`Arc`) and the receiving connections; that thread
//! writes the frame into each connection's output buffer, between whole replies, never inside
//! one. All of a publisher's messages leave from its own thread and every pair of threads is
//! joined by a FIFO queue, so a subscriber receives one publisher's messages in publish order,
//! whatever channels they went to. A client that publishes to a channel it is subscribed to
//! itself (RESP3) gets its message before PUBLISH's reply, as from Redis: that one is written
//! straight into the reply. A subscriber that does not read is cut off by
//! `client-output-buffer-limit pubsub` (worker.rs), never buffered without bound.

use crate::conn::ClientState;
use crate::msg::{ConnRef, Msg};
use crate::shared::Shared;
use bytes::Bytes;
use darner_resp::ReplyWriter;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

/// The kind of a subscription.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Channel,
    Pattern,
    Shard,
}

impl Kind {
    fn index(self) -> usize {
        self as usize
    }

    fn subscribe_name(self) -> &'static [u8] {
        match self {
            Kind::Channel => b"subscribe",
            Kind::Pattern => b"psubscribe",
            Kind::Shard => b"ssubscribe",
        }
    }

    fn unsubscribe_name(self) -> &'static [u8] {
        match self {
            Kind::Channel => b"unsubscribe",
            Kind::Pattern => b"punsubscribe",
            Kind::Shard => b"sunsubscribe",
        }
    }
}

/// A subscribed connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Subscriber {
    pub id: u64,
    pub thread: usize,
    pub conn: ConnRef,
}

/// A client's own subscriptions, by kind.
#[derive(Clone, Debug, Default)]
pub struct Subscriptions {
    sets: [HashSet<Bytes>; 3],
}

impl Subscriptions {
    pub fn count(&self, kind: Kind) -> usize {
        self.sets[kind.index()].len()
    }

    pub fn contains(&self, kind: Kind, name: &[u8]) -> bool {
        self.sets[kind.index()].contains(name)
    }

    fn total(&self) -> usize {
        self.sets.iter().map(|s| s.len()).sum()
    }
}

/// The count a (un)subscribe reply carries: shard channels are counted apart (Redis does).
fn reply_count(subs: &Subscriptions, kind: Kind) -> usize {
    match kind {
        Kind::Shard => subs.count(Kind::Shard),
        _ => subs.count(Kind::Channel) + subs.count(Kind::Pattern),
    }
}

type Table = HashMap<Bytes, Vec<Subscriber>>;

/// Every subscription of the process.
#[derive(Default)]
pub struct Registry {
    tables: [RwLock<Table>; 3],
    /// Distinct subscribed patterns: lets PUBLISH skip the pattern table when there are none.
    patterns: AtomicUsize,
    /// Clients with at least one subscription of any kind (INFO's pubsub_clients).
    clients: AtomicUsize,
}

/// One published message, shared by every thread that delivers it.
#[derive(Debug)]
pub struct Published {
    /// Channel or Shard (pattern receivers are told by their target's pattern).
    pub kind: Kind,
    pub channel: Bytes,
    pub message: Bytes,
}

/// A receiver of a published message on one thread; `pattern` for pmessage.
#[derive(Debug)]
pub struct Target {
    pub conn: ConnRef,
    pub pattern: Option<Bytes>,
}

impl Registry {
    fn read(&self, kind: Kind) -> std::sync::RwLockReadGuard<'_, Table> {
        // A panic while holding the lock cannot leave a table half-changed (each change is
        // one insert or remove), so a poisoned lock is still usable.
        self.tables[kind.index()]
            .read()
            .unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self, kind: Kind) -> std::sync::RwLockWriteGuard<'_, Table> {
        self.tables[kind.index()]
            .write()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Names with at least one subscriber (PUBSUB CHANNELS / SHARDCHANNELS).
    pub fn names(&self, kind: Kind, pattern: Option<&[u8]>) -> Vec<Bytes> {
        self.read(kind)
            .keys()
            .filter(|n| pattern.is_none_or(|p| darner_engine::glob::glob_match(p, n, false)))
            .cloned()
            .collect()
    }

    /// Subscribers of one name (PUBSUB NUMSUB / SHARDNUMSUB).
    pub fn subscribers(&self, kind: Kind, name: &[u8]) -> usize {
        self.read(kind).get(name).map_or(0, |v| v.len())
    }

    /// Distinct names subscribed (INFO pubsub_channels, PUBSUB NUMPAT).
    pub fn distinct(&self, kind: Kind) -> usize {
        self.read(kind).len()
    }

    pub fn clients(&self) -> usize {
        self.clients.load(Ordering::Relaxed)
    }

    fn add(&self, kind: Kind, name: &Bytes, s: Subscriber) {
        let mut t = self.write(kind);
        let v = t.entry(name.clone()).or_default();
        if v.is_empty() && kind == Kind::Pattern {
            self.patterns.fetch_add(1, Ordering::Relaxed);
        }
        v.push(s);
    }

    fn remove(&self, kind: Kind, name: &[u8], id: u64) {
        let mut t = self.write(kind);
        if let Some(v) = t.get_mut(name) {
            v.retain(|s| s.id != id);
            if v.is_empty() {
                t.remove(name);
                if kind == Kind::Pattern {
                    self.patterns.fetch_sub(1, Ordering::Relaxed);
                }
            }
        }
    }
}

/// SUBSCRIBE / PSUBSCRIBE / SSUBSCRIBE: one confirmation per name, in argument order.
pub fn subscribe(
    shared: &Shared,
    client: &mut ClientState,
    thread: usize,
    kind: Kind,
    names: &[&[u8]],
    w: &mut ReplyWriter,
) {
    let before = client.pubsub.as_ref().map_or(0, |s| s.total());
    let me = Subscriber {
        id: client.id,
        thread,
        conn: client.conn,
    };
    let subs = client.pubsub.get_or_insert_with(Default::default);
    for &name in names {
        if !subs.contains(kind, name) {
            let name = Bytes::copy_from_slice(name);
            subs.sets[kind.index()].insert(name.clone());
            shared.pubsub.add(kind, &name, me);
        }
        w.push(3);
        w.bulk(kind.subscribe_name());
        w.bulk(name);
        w.int(reply_count(subs, kind) as i64);
    }
    if before == 0 && subs.total() > 0 {
        shared.pubsub.clients.fetch_add(1, Ordering::Relaxed);
    }
}

/// UNSUBSCRIBE / PUNSUBSCRIBE / SUNSUBSCRIBE: the names given, or all of this kind; with
/// nothing to remove, one confirmation with a null name.
pub fn unsubscribe(
    shared: &Shared,
    client: &mut ClientState,
    kind: Kind,
    names: &[&[u8]],
    w: &mut ReplyWriter,
) {
    let before = client.pubsub.as_ref().map_or(0, |s| s.total());
    let all: Vec<Bytes>;
    let names: Vec<&[u8]> = if names.is_empty() {
        all = client
            .pubsub
            .as_ref()
            .map(|s| s.sets[kind.index()].iter().cloned().collect())
            .unwrap_or_default();
        all.iter().map(|b| b.as_ref()).collect()
    } else {
        names.to_vec()
    };
    if names.is_empty() {
        let count = client.pubsub.as_ref().map_or(0, |s| reply_count(s, kind));
        w.push(3);
        w.bulk(kind.unsubscribe_name());
        w.null();
        w.int(count as i64);
    }
    let subs = client.pubsub.get_or_insert_with(Default::default);
    for name in names {
        if subs.sets[kind.index()].remove(name) {
            shared.pubsub.remove(kind, name, client.id);
        }
        w.push(3);
        w.bulk(kind.unsubscribe_name());
        w.bulk(name);
        w.int(reply_count(subs, kind) as i64);
    }
    if before > 0 && subs.total() == 0 {
        shared.pubsub.clients.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Drops every subscription of a client (disconnect, RESET), without replies.
pub fn forget(shared: &Shared, client: &mut ClientState) {
    let Some(subs) = client.pubsub.take() else {
        return;
    };
    if subs.total() == 0 {
        return;
    }
    for kind in [Kind::Channel, Kind::Pattern, Kind::Shard] {
        for name in &subs.sets[kind.index()] {
            shared.pubsub.remove(kind, name, client.id);
        }
    }
    shared.pubsub.clients.fetch_sub(1, Ordering::Relaxed);
}

/// Writes the frame a receiver gets: message / pmessage / smessage.
pub fn write_frame(w: &mut ReplyWriter, msg: &Published, pattern: Option<&[u8]>) {
    match (msg.kind, pattern) {
        (_, Some(p)) => {
            w.push(4);
            w.bulk(b"pmessage");
            w.bulk(p);
        }
        (Kind::Shard, None) => {
            w.push(3);
            w.bulk(b"smessage");
        }
        _ => {
            w.push(3);
            w.bulk(b"message");
        }
    }
    w.bulk(&msg.channel);
    w.bulk(&msg.message);
}

/// Whether a message in flight still goes to a client (it may have unsubscribed meanwhile).
pub fn still_subscribed(client: &ClientState, msg: &Published, pattern: Option<&[u8]>) -> bool {
    let Some(subs) = client.pubsub.as_ref() else {
        return false;
    };
    match pattern {
        Some(p) => subs.contains(Kind::Pattern, p),
        None => subs.contains(msg.kind, &msg.channel),
    }
}

/// PUBLISH / SPUBLISH (and, later, keyspace notifications): sends `message` to every
/// subscriber of `channel` (and, for plain channels, of every matching pattern); returns how
/// many receptions that makes. `own`: the publishing client and its reply writer; a message
/// for the publisher itself is written there, ahead of the reply.
pub fn publish(
    shared: &Shared,
    kind: Kind,
    channel: &[u8],
    message: &[u8],
    mut own: Option<(u64, &mut ReplyWriter)>,
) -> usize {
    let msg = Arc::new(Published {
        kind,
        channel: Bytes::copy_from_slice(channel),
        message: Bytes::copy_from_slice(message),
    });
    let mut per_thread: Vec<Vec<Target>> = Vec::new();
    let mut count = 0;
    let mut send = |s: &Subscriber, pattern: Option<&Bytes>| {
        count += 1;
        if let Some((id, w)) = own.as_mut() {
            if *id == s.id {
                write_frame(w, &msg, pattern.map(|p| p.as_ref()));
                return;
            }
        }
        if per_thread.len() <= s.thread {
            per_thread.resize_with(s.thread + 1, Vec::new);
        }
        per_thread[s.thread].push(Target {
            conn: s.conn,
            pattern: pattern.cloned(),
        });
    };
    if let Some(subs) = shared.pubsub.read(kind).get(channel) {
        for s in subs {
            send(s, None);
        }
    }
    if kind == Kind::Channel && shared.pubsub.patterns.load(Ordering::Relaxed) > 0 {
        for (p, subs) in shared.pubsub.read(Kind::Pattern).iter() {
            if darner_engine::glob::glob_match(p, channel, false) {
                for s in subs {
                    send(s, Some(p));
                }
            }
        }
    }
    for (t, targets) in per_thread.into_iter().enumerate() {
        if !targets.is_empty() {
            crate::exec::post(
                shared,
                t,
                Msg::Publish {
                    msg: msg.clone(),
                    targets,
                },
            );
        }
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sub(id: u64) -> Subscriber {
        Subscriber {
            id,
            thread: 0,
            conn: ConnRef {
                idx: id as u32,
                gen: 1,
            },
        }
    }

    #[test]
    fn registry_counts_names_and_patterns() {
        let r = Registry::default();
        let a = Bytes::from_static(b"news.*");
        r.add(Kind::Pattern, &a, sub(1));
        r.add(Kind::Pattern, &a, sub(2));
        assert_eq!(r.patterns.load(Ordering::Relaxed), 1);
        assert_eq!(r.subscribers(Kind::Pattern, b"news.*"), 2);
        r.remove(Kind::Pattern, b"news.*", 1);
        assert_eq!(r.patterns.load(Ordering::Relaxed), 1);
        r.remove(Kind::Pattern, b"news.*", 2);
        assert_eq!(r.patterns.load(Ordering::Relaxed), 0);
        assert_eq!(r.distinct(Kind::Pattern), 0);
        r.add(Kind::Channel, &Bytes::from_static(b"c1"), sub(3));
        r.add(Kind::Shard, &Bytes::from_static(b"c1"), sub(3));
        assert_eq!(
            r.names(Kind::Channel, Some(b"c?")),
            vec![Bytes::from_static(b"c1")]
        );
        assert!(r.names(Kind::Channel, Some(b"x*")).is_empty());
        assert_eq!(r.distinct(Kind::Shard), 1);
    }

    #[test]
    fn frames_in_both_protocols() {
        let msg = Published {
            kind: Kind::Channel,
            channel: Bytes::from_static(b"ch"),
            message: Bytes::from_static(b"hi"),
        };
        let mut out = Vec::new();
        write_frame(&mut ReplyWriter::new(&mut out, false), &msg, None);
        assert_eq!(out, b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n");
        out.clear();
        write_frame(&mut ReplyWriter::new(&mut out, true), &msg, Some(b"c*"));
        assert_eq!(
            out,
            b">4\r\n$8\r\npmessage\r\n$2\r\nc*\r\n$2\r\nch\r\n$2\r\nhi\r\n"
        );
    }
}
