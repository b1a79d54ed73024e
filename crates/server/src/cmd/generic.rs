//! Key commands: DEL, UNLINK, EXISTS, TYPE, RENAME, COPY, MOVE, KEYS, SCAN, EXPIRE family, ...

use super::{Locks, Reg, TxFuture};
use crate::exec::Tx;
use bytes::Bytes;

pub fn register(r: &mut Reg) {
    r.tx("del", Locks::Keys, del);
    r.tx("exists", Locks::Keys, exists);
}

/// Groups argument indices by shard: (shard, indices) in ascending shard order.
pub fn by_shard(tx: &Tx, keys: &[Bytes]) -> Vec<(usize, Vec<usize>)> {
    let mut groups: Vec<(usize, Vec<usize>)> = Vec::new();
    for (i, k) in keys.iter().enumerate() {
        let s = tx.shard_of(k);
        match groups.iter_mut().find(|g| g.0 == s) {
            Some(g) => g.1.push(i),
            None => groups.push((s, vec![i])),
        }
    }
    groups.sort_by_key(|g| g.0);
    groups
}

/// Runs `f(ctx, key)` for every key on its shard (shards in parallel) and sums the results.
async fn count_keys(
    tx: &Tx,
    keys: Vec<Bytes>,
    f: fn(&mut crate::shard::ShardCtx, &[u8]) -> i64,
) -> i64 {
    let groups = by_shard(tx, &keys);
    let hops: Vec<_> = groups
        .into_iter()
        .map(|(s, idx)| {
            let ks: Vec<Bytes> = idx.iter().map(|&i| keys[i].clone()).collect();
            tx.run(s, move |ctx| ks.iter().map(|k| f(ctx, k)).sum::<i64>())
        })
        .collect();
    let mut n = 0;
    for h in hops {
        n += h.await;
    }
    n
}

fn del(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let n = count_keys(&tx, args[1..].to_vec(), |ctx, k| {
            ctx.db().remove(k).is_some() as i64
        })
        .await;
        super::with_writer(tx.resp3(), |w| w.int(n))
    })
}

fn exists(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let n = count_keys(&tx, args[1..].to_vec(), |ctx, k| ctx.db().exists(k) as i64).await;
        super::with_writer(tx.resp3(), |w| w.int(n))
    })
}
