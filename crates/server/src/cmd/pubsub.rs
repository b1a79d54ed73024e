//! Pub/Sub commands: SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE, SSUBSCRIBE,
//! SUNSUBSCRIBE, PUBLISH, SPUBLISH and PUBSUB's introspection subcommands.
//!
//! All of them are `Conn` handlers: they run on the client's own thread and work on the
//! process-wide registry (`crate::pubsub`), never on a shard. SPUBLISH and SSUBSCRIBE name their
//! channel as a key in the command table (so that cluster clients route them by slot), but a
//! shard channel holds no data here either.

use super::{ConnCtx, Reg};
use crate::pubsub::{self, Kind};
use darner_resp::ReplyWriter;

pub fn register(r: &mut Reg) {
    r.conn("subscribe", subscribe);
    r.conn("psubscribe", psubscribe);
    r.conn("ssubscribe", ssubscribe);
    r.conn("unsubscribe", unsubscribe);
    r.conn("punsubscribe", punsubscribe);
    r.conn("sunsubscribe", sunsubscribe);
    r.conn("publish", publish);
    r.conn("spublish", spublish);
    r.conn("pubsub|channels", pubsub_channels);
    r.conn("pubsub|shardchannels", pubsub_shardchannels);
    r.conn("pubsub|numsub", pubsub_numsub);
    r.conn("pubsub|shardnumsub", pubsub_shardnumsub);
    r.conn("pubsub|numpat", pubsub_numpat);
    r.conn("pubsub|help", pubsub_help);
}

fn subscribe_kind(ctx: &mut ConnCtx, kind: Kind, args: &[&[u8]], w: &mut ReplyWriter) {
    pubsub::subscribe(ctx.shared, ctx.client, ctx.thread, kind, &args[1..], w);
}

fn subscribe(ctx: &mut ConnCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    subscribe_kind(ctx, Kind::Channel, args, w);
}

fn psubscribe(ctx: &mut ConnCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    subscribe_kind(ctx, Kind::Pattern, args, w);
}

fn ssubscribe(ctx: &mut ConnCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    subscribe_kind(ctx, Kind::Shard, args, w);
}

fn unsubscribe(ctx: &mut ConnCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    pubsub::unsubscribe(ctx.shared, ctx.client, Kind::Channel, &args[1..], w);
}

fn punsubscribe(ctx: &mut ConnCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    pubsub::unsubscribe(ctx.shared, ctx.client, Kind::Pattern, &args[1..], w);
}

fn sunsubscribe(ctx: &mut ConnCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    pubsub::unsubscribe(ctx.shared, ctx.client, Kind::Shard, &args[1..], w);
}

fn publish_kind(ctx: &mut ConnCtx, kind: Kind, args: &[&[u8]], w: &mut ReplyWriter) {
    // A message to the publisher itself follows PUBLISH's reply (and EXEC's, inside MULTI).
    let mut own = std::mem::take(&mut ctx.client.own_pushes);
    let n = {
        let mut ow = ReplyWriter::new(&mut own, ctx.client.resp3);
        pubsub::publish(
            ctx.shared,
            kind,
            args[1],
            args[2],
            Some((ctx.client.id, &mut ow)),
        )
    };
    ctx.client.own_pushes = own;
    w.int(n as i64);
}

fn publish(ctx: &mut ConnCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    publish_kind(ctx, Kind::Channel, args, w);
}

fn spublish(ctx: &mut ConnCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    publish_kind(ctx, Kind::Shard, args, w);
}

/// PUBSUB CHANNELS / SHARDCHANNELS [pattern].
fn channels(ctx: &mut ConnCtx, kind: Kind, args: &[&[u8]], w: &mut ReplyWriter) {
    if args.len() > 3 {
        let mut e = b"ERR unknown subcommand or wrong number of arguments for '".to_vec();
        // As typed, with line breaks made spaces (an error reply is one line).
        e.extend(
            args[1]
                .iter()
                .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
        );
        e.extend_from_slice(b"'. Try PUBSUB HELP.");
        w.error(&e);
        return;
    }
    let names = ctx.shared.pubsub.names(kind, args.get(2).copied());
    w.array(names.len());
    for n in &names {
        w.bulk(n);
    }
}

fn pubsub_channels(ctx: &mut ConnCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    channels(ctx, Kind::Channel, args, w);
}

fn pubsub_shardchannels(ctx: &mut ConnCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    channels(ctx, Kind::Shard, args, w);
}

/// PUBSUB NUMSUB / SHARDNUMSUB [channel ...]: a flat array of channel, count (Redis sends
/// an array in RESP3 too).
fn numsub(ctx: &mut ConnCtx, kind: Kind, args: &[&[u8]], w: &mut ReplyWriter) {
    w.array((args.len() - 2) * 2);
    for &ch in &args[2..] {
        w.bulk(ch);
        w.int(ctx.shared.pubsub.subscribers(kind, ch) as i64);
    }
}

fn pubsub_numsub(ctx: &mut ConnCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    numsub(ctx, Kind::Channel, args, w);
}

fn pubsub_shardnumsub(ctx: &mut ConnCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    numsub(ctx, Kind::Shard, args, w);
}

/// PUBSUB NUMPAT: distinct patterns subscribed to.
fn pubsub_numpat(ctx: &mut ConnCtx, _: &[&[u8]], w: &mut ReplyWriter) {
    w.int(ctx.shared.pubsub.distinct(Kind::Pattern) as i64);
}

fn pubsub_help(_: &mut ConnCtx, _: &[&[u8]], w: &mut ReplyWriter) {
    const HELP: &[&str] = &[
        "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CHANNELS [<pattern>]",
        "    List the channels that have subscribers, all or those matching <pattern>.",
        "NUMPAT",
        "    Count the distinct patterns that clients are subscribed to.",
        "NUMSUB [<channel> ...]",
        "    Count the subscribers of each channel given (pattern subscriptions excluded).",
        "SHARDCHANNELS [<pattern>]",
        "    List the shard channels that have subscribers, all or those matching <pattern>.",
        "SHARDNUMSUB [<shardchannel> ...]",
        "    Count the subscribers of each shard channel given.",
        "HELP",
        "    Print this help.",
    ];
    w.array(HELP.len());
    for line in HELP {
        w.simple(line.as_bytes());
    }
}
