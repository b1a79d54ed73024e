//! The transaction scheduler over TCP (sched.rs): a multi-shard transaction holds its keys, not
//! its shards. While a long SUNIONSTORE over both shards runs, commands on other keys of those
//! shards are answered, and a read of the key it writes waits for it and sees its result.

mod common;
use common::{cmd, Server};
use darner_server::cmd::shard_of;
use std::io::Read;
use std::time::Duration;

/// A key named `prefix` + a number that lives on `shard` of 2.
fn key_on(prefix: &str, shard: usize) -> String {
    (0..)
        .map(|i| format!("{prefix}{i}"))
        .find(|k| shard_of(k.as_bytes(), 2) == shard)
        .unwrap()
}

#[test]
fn a_long_transaction_holds_its_keys_not_its_shards() {
    let s = Server::start(&[]);
    let mut c = s.client();
    // Four big sets, two on each shard: their union takes a good part of a second.
    let sets: Vec<String> = (0..4).map(|i| key_on(&format!("set{i}-"), i % 2)).collect();
    let per_set = 300_000usize;
    for name in &sets {
        let mut p = redis::pipe();
        for chunk in (0..per_set).collect::<Vec<_>>().chunks(5_000) {
            let members: Vec<String> = chunk.iter().map(|j| format!("{name}:{j}")).collect();
            p.cmd("SADD").arg(name).arg(members).ignore();
        }
        let () = p.query(&mut c).unwrap();
    }
    let others: Vec<String> = (0..2).map(|sh| key_on("other-", sh)).collect();
    for o in &others {
        let () = redis::cmd("SET").arg(o).arg("v").query(&mut c).unwrap();
    }
    let dst = key_on("dst-", 0);

    let mut long = s.raw();
    let mut args: Vec<&[u8]> = vec![b"SUNIONSTORE", dst.as_bytes()];
    args.extend(sets.iter().map(|k| k.as_bytes()));
    long.send(&cmd(&args));
    // Let it be scheduled and start its work.
    std::thread::sleep(Duration::from_millis(100));

    // Other keys of both shards are served meanwhile.
    for o in &others {
        let got: String = redis::cmd("GET").arg(o).query(&mut c).unwrap();
        assert_eq!(got, "v");
    }
    long.s.set_nonblocking(true).unwrap();
    let mut b = [0u8; 64];
    let early = long.s.read(&mut b);
    assert!(
        matches!(&early, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the union finished before the other keys were read ({early:?}): make it longer"
    );
    long.s.set_nonblocking(false).unwrap();

    // A read of the key it writes waits for it, and sees all of it.
    let n: usize = redis::cmd("SCARD").arg(&dst).query(&mut c).unwrap();
    assert_eq!(n, 4 * per_set);
    let want = format!(":{}\r\n", 4 * per_set);
    long.s
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    assert_eq!(long.read_n(want.len()), want.as_bytes());
}
