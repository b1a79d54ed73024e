//! Property tests: the reader gives the same result however a file is split; what the writer
//! renders reads back as the same commands; a manifest renders and parses back to itself; and
//! on arbitrary bytes neither the reader nor the manifest parser panics (the stable stand-ins
//! of the fuzz target `fuzz/fuzz_targets/aof.rs`).

use darner_aof::fuzz_support::{check_manifest, check_reader, read_in_pieces};
use darner_aof::manifest::{base_name, incr_name};
use darner_aof::{read_all, AofInfo, Ending, FileType, Manifest, Writer};
use proptest::prelude::*;
use std::path::PathBuf;
use std::sync::OnceLock;

/// The fixture's incr files (full and cut), read once.
fn fixture_files() -> &'static [Vec<u8>; 2] {
    static FILES: OnceLock<[Vec<u8>; 2]> = OnceLock::new();
    FILES.get_or_init(|| {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures/aof");
        assert!(
            root.is_dir(),
            "AOF fixtures missing: expected {}",
            root.display()
        );
        ["redis-7.2.4", "redis-7.2.4-truncated"].map(|dir| {
            let appenddir = root.join(dir).join("appendonlydir");
            let manifest =
                Manifest::parse(&std::fs::read(appenddir.join("appendonly.aof.manifest")).unwrap())
                    .unwrap();
            let name = String::from_utf8(manifest.incr[0].name.clone()).unwrap();
            std::fs::read(appenddir.join(name)).unwrap()
        })
    })
}

fn arg() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..40),
        // Bytes that look like the protocol.
        prop::collection::vec(
            prop::sample::select(b"*$#\r\n0123456789MULTIEXEC".to_vec()),
            0..20
        ),
    ]
}

fn argv() -> impl Strategy<Value = Vec<Vec<u8>>> {
    prop::collection::vec(arg(), 1..6)
}

/// What a server hands the writer: single commands and transactions, with a database and a time.
#[derive(Debug, Clone)]
enum Op {
    Command(Option<u32>, Vec<Vec<u8>>),
    Transaction(Vec<(u32, Vec<Vec<u8>>)>),
    ForceSelect,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (prop::option::of(0u32..16), argv()).prop_map(|(db, a)| Op::Command(db, a)),
        1 => prop::collection::vec((0u32..16, argv()), 2..5).prop_map(Op::Transaction),
        1 => Just(Op::ForceSelect),
    ]
}

fn name() -> impl Strategy<Value = Vec<u8>> {
    // Anything Redis accepts as a file name: no NUL (C strings), no '/' or '\'.
    prop::collection::vec(
        any::<u8>().prop_filter("base name byte", |b| !matches!(b, 0 | b'/' | b'\\')),
        0..60,
    )
}

fn manifest() -> impl Strategy<Value = Manifest> {
    (
        prop::option::of((name(), any::<i64>().prop_filter("non-zero", |s| *s != 0))),
        prop::collection::vec(
            (name(), any::<i64>().prop_filter("non-zero", |s| *s != 0)),
            0..4,
        ),
        prop::collection::btree_set(1i64..i64::MAX, 0..4),
        prop::collection::vec(name(), 4),
    )
        .prop_map(|(base, history, incr_seqs, incr_names)| {
            let mut m = Manifest::new();
            if let Some((name, seq)) = base {
                m.base = Some(AofInfo {
                    name,
                    seq,
                    file_type: FileType::Base,
                });
                m.curr_base_seq = seq;
            }
            m.history = history
                .into_iter()
                .map(|(name, seq)| AofInfo {
                    name,
                    seq,
                    file_type: FileType::History,
                })
                .collect();
            for (seq, name) in incr_seqs.into_iter().zip(incr_names) {
                m.incr.push(AofInfo {
                    name,
                    seq,
                    file_type: FileType::Incr,
                });
                m.curr_incr_seq = seq;
            }
            m
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn fixture_files_read_the_same_in_random_pieces(
        which in 0usize..2,
        sizes in prop::collection::vec(prop_oneof![1usize..8, 8usize..2000, 2000usize..50_000], 1..20),
    ) {
        let data = &fixture_files()[which];
        let whole = read_in_pieces(data, &[]);
        prop_assert!(whole.1.is_ok());
        prop_assert_eq!(read_in_pieces(data, &sizes), whole);
    }

    #[test]
    fn fixture_cut_anywhere_ends_after_the_last_complete_command(at in 0.0f64..=1.0) {
        let data = &fixture_files()[0];
        let cut = ((data.len() as f64 * at) as usize).min(data.len());
        let (all, _) = read_all(data).unwrap();
        let (entries, ending) = read_all(&data[..cut]).unwrap();
        let complete = all.iter().take_while(|e| e.end <= cut as u64).count();
        prop_assert_eq!(&entries[..], &all[..complete]);
        let last_end = entries.last().map_or(0, |e| e.end);
        if cut == 0 {
            prop_assert_eq!(ending, Ending::Empty);
        } else if last_end == cut as u64 {
            // At a command boundary: complete, unless it is inside a transaction.
            let ok = matches!(ending, Ending::Complete { .. } | Ending::IncompleteMulti { .. });
            prop_assert!(ok, "{:?}", ending);
        } else {
            let ok = matches!(ending, Ending::Truncated { valid_up_to, .. } if valid_up_to == last_end);
            prop_assert!(ok, "{:?}", ending);
        }
    }

    #[test]
    fn writer_output_reads_back_as_the_same_commands(
        ops in prop::collection::vec(op(), 0..30),
        timestamps in any::<bool>(),
        start in 1i64..2_000_000_000,
        sizes in prop::collection::vec(1usize..64, 1..8),
    ) {
        let mut writer = Writer::new(timestamps);
        let mut out = Vec::new();
        // (db in effect, argv) of every command the server wrote, in order.
        let mut expected: Vec<(Option<u32>, Vec<Vec<u8>>)> = Vec::new();
        let mut now = start;
        for op in &ops {
            now += 1;
            match op {
                Op::Command(db, argv) => {
                    writer.append(&mut out, *db, argv, now);
                    expected.push((*db, argv.clone()));
                }
                Op::Transaction(cmds) => {
                    let refs: Vec<(u32, &[Vec<u8>])> = cmds.iter().map(|(db, a)| (*db, a.as_slice())).collect();
                    writer.append_transaction(&mut out, &refs, now);
                    expected.push((Some(cmds[0].0), vec![b"MULTI".to_vec()]));
                    expected.extend(cmds.iter().map(|(db, a)| (Some(*db), a.clone())));
                    expected.push((Some(cmds[cmds.len() - 1].0), vec![b"EXEC".to_vec()]));
                }
                Op::ForceSelect => writer.force_select(),
            }
        }
        let (entries, ending) = read_in_pieces(&out, &sizes);
        let ending = ending.unwrap();
        let ok = matches!(ending, Ending::Complete { .. } | Ending::Empty);
        prop_assert!(ok, "{:?}", ending);
        // Replay as a loader does: SELECT switches the database (random arguments never spell
        // SELECT: the writer inserted them all), everything else is a command for that database.
        let mut db = None;
        let mut got: Vec<(Option<u32>, Vec<Vec<u8>>)> = Vec::new();
        let mut stamps = Vec::new();
        for e in &entries {
            if let Some(ts) = e.timestamp() {
                stamps.push(ts);
                continue;
            }
            let argv: Vec<Vec<u8>> = e.argv().unwrap().iter().map(|a| a.to_vec()).collect();
            if argv[0] == b"SELECT" {
                prop_assert_eq!(argv.len(), 2);
                db = Some(std::str::from_utf8(&argv[1]).unwrap().parse::<u32>().unwrap());
                continue;
            }
            got.push((db, argv));
        }
        prop_assert_eq!(got.len(), expected.len());
        for ((want_db, want), (got_db, got)) in expected.iter().zip(&got) {
            prop_assert_eq!(want, got);
            if want_db.is_some() {
                prop_assert_eq!(want_db, got_db);
            }
        }
        // One timestamp per write (each is a new second), increasing; none when disabled.
        let writes = ops.iter().filter(|o| !matches!(o, Op::ForceSelect)).count();
        prop_assert_eq!(stamps.len(), if timestamps { writes } else { 0 });
        prop_assert!(stamps.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn manifest_renders_and_parses_back(m in manifest()) {
        let rendered = m.render();
        if m.is_empty() && m.history.is_empty() {
            prop_assert!(rendered.is_empty());
        } else {
            prop_assert_eq!(Manifest::parse(&rendered), Ok(m));
        }
    }

    #[test]
    fn manifest_from_operations_renders_and_parses_back(steps in prop::collection::vec(0u8..5, 0..20), rdb in any::<bool>()) {
        let name = b"appendonly.aof";
        let mut m = Manifest::new();
        for step in steps {
            match step {
                0 => { m.new_incr(name); }
                1 => { m.last_or_new_incr(name); }
                2 => { m.rewrite_done(name, rdb, false, true); }
                3 => { m.rewrite_done(name, rdb, true, true); }
                _ => { m.take_history(); }
            }
        }
        if let Some(base) = &m.base {
            prop_assert_eq!(&base.name, &base_name(name, base.seq, rdb));
        }
        for i in &m.incr {
            prop_assert_eq!(&i.name, &incr_name(name, i.seq));
        }
        let rendered = m.render();
        if !rendered.is_empty() {
            prop_assert_eq!(Manifest::parse(&rendered), Ok(m));
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_read_the_same_in_pieces(
        data in prop_oneof![
            prop::collection::vec(any::<u8>(), 0..300),
            prop::collection::vec(prop::sample::select(b"*$#\r\n0123456789-MULTIEXEC \"'\\xfile seq type bhi".to_vec()), 0..300),
        ],
        sizes in prop::collection::vec(1usize..16, 1..8),
    ) {
        check_reader(&data, &sizes);
        check_manifest(&data);
    }
}
