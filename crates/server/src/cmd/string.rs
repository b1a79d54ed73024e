//! String commands.

use super::Reg;
use crate::shard::ShardCtx;
use bytes::Bytes;
use darner_engine::{Entry, ValueType};
use darner_resp::ReplyWriter;

pub fn register(r: &mut Reg) {
    r.key("get", get);
    r.key("set", set);
}

fn get(ctx: &mut ShardCtx, args: &[Bytes], w: &mut ReplyWriter) {
    match ctx.db().get(&args[1]) {
        None => w.null(),
        Some(e) if e.value_type() != ValueType::String => w.error(super::ERR_WRONGTYPE),
        Some(e) => w.bulk(e.str_value()),
    }
}

fn set(ctx: &mut ShardCtx, args: &[Bytes], w: &mut ReplyWriter) {
    let lru = ctx.clock.lru;
    ctx.db()
        .set(Entry::new_str(&args[1], &args[2], None, false, lru));
    w.ok();
}
