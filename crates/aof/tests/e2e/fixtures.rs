//! The AOF directories written by Redis 7.2.4 (shared/fixtures/aof, see its README.md): the
//! manifest parses to what `manifest.json` lists, the incr file reads to the commands the
//! fixture describes, and the cut variant ends where Redis truncated it, with Redis's log lines.
//! Every expected number comes from the fixture's JSON files.

use darner_aof::manifest::{base_name, incr_name, manifest_name};
use darner_aof::{
    detect_format, read_all, tx_role, Ending, FileFormat, FileType, Manifest, TxRole,
};
use serde_json::Value;
use std::path::PathBuf;

fn fixtures() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures");
    assert!(
        dir.join("aof").is_dir(),
        "AOF fixtures missing: expected {} (the shared persistence fixtures, see shared/fixtures/README.md)",
        dir.join("aof").display()
    );
    dir
}

fn read(path: &str) -> Vec<u8> {
    let p = fixtures().join(path);
    std::fs::read(&p).unwrap_or_else(|e| panic!("cannot read fixture {}: {e}", p.display()))
}

fn json(path: &str) -> Value {
    serde_json::from_slice(&read(path)).unwrap_or_else(|e| panic!("bad JSON in {path}: {e}"))
}

/// The value after `flag` in the manifest's `server_args`.
fn server_arg(manifest: &Value, flag: &str) -> String {
    let args = manifest["server_args"].as_array().expect("server_args");
    let i = args
        .iter()
        .position(|a| a == flag)
        .unwrap_or_else(|| panic!("no {flag} in server_args"));
    args[i + 1].as_str().unwrap().to_string()
}

fn file_size(manifest: &Value, name: &str) -> u64 {
    manifest["aof_files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["file"] == name)
        .expect("file in aof_files")["size"]
        .as_u64()
        .unwrap()
}

fn incr_file_name(m: &Manifest) -> String {
    assert_eq!(m.incr.len(), 1, "the fixture has one incr file");
    String::from_utf8(m.incr[0].name.clone()).unwrap()
}

struct Variant {
    dir: &'static str,
    manifest: Value,
}

fn variant(dir: &'static str) -> Variant {
    Variant {
        dir,
        manifest: json(&format!("aof/{dir}/manifest.json")),
    }
}

impl Variant {
    fn file(&self, name: &str) -> Vec<u8> {
        let appenddir = self.manifest["aof_dir"].as_str().unwrap();
        read(&format!("aof/{}/{appenddir}/{name}", self.dir))
    }

    fn aof_manifest(&self) -> Manifest {
        let name = self.manifest["aof_manifest_file"].as_str().unwrap();
        Manifest::parse(&self.file(name)).expect("Redis's manifest parses")
    }
}

#[test]
fn manifest_parses_to_the_lines_manifest_json_lists_and_renders_back_byte_for_byte() {
    for dir in ["redis-7.2.4", "redis-7.2.4-truncated"] {
        let v = variant(dir);
        let name = v.manifest["aof_manifest_file"].as_str().unwrap();
        let bytes = v.file(name);
        let m = Manifest::parse(&bytes).unwrap();
        let parsed: Vec<(String, String, String)> = m
            .base
            .iter()
            .chain(&m.history)
            .chain(&m.incr)
            .map(|i| {
                (
                    String::from_utf8(i.name.clone()).unwrap(),
                    i.seq.to_string(),
                    (i.file_type.as_char() as char).to_string(),
                )
            })
            .collect();
        let expected: Vec<(String, String, String)> = v.manifest["aof_manifest"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| {
                let s = |k: &str| l[k].as_str().unwrap().to_string();
                (s("file"), s("seq"), s("type"))
            })
            .collect();
        assert_eq!(parsed, expected, "{dir}");
        assert_eq!(
            m.render(),
            bytes,
            "{dir}: Darner writes the manifest as Redis did"
        );
        assert_eq!(file_size(&v.manifest, name), bytes.len() as u64);
    }
}

#[test]
fn file_names_are_the_ones_redis_generated() {
    let v = variant("redis-7.2.4");
    let appendfilename = server_arg(&v.manifest, "--appendfilename");
    let m = v.aof_manifest();
    assert_eq!(
        manifest_name(appendfilename.as_bytes()),
        v.manifest["aof_manifest_file"].as_str().unwrap().as_bytes()
    );
    let base = m.base.as_ref().unwrap();
    assert_eq!(base.file_type, FileType::Base);
    // aof-use-rdb-preamble yes: an RDB base.
    assert_eq!(
        base_name(appendfilename.as_bytes(), base.seq, true),
        base.name
    );
    assert_eq!(
        base.name,
        v.manifest["aof_base_rdb"]["file"]
            .as_str()
            .unwrap()
            .as_bytes()
    );
    assert_eq!(
        incr_name(appendfilename.as_bytes(), m.incr[0].seq),
        m.incr[0].name
    );
    assert_eq!(m.curr_incr_seq, m.incr[0].seq);
    assert_eq!(m.curr_base_seq, base.seq);
}

#[test]
fn incr_file_reads_fully_with_balanced_transactions_and_the_last_command_where_truncation_json_says(
) {
    let v = variant("redis-7.2.4");
    let cut = json("aof/redis-7.2.4-truncated/truncation.json");
    let m = v.aof_manifest();
    let name = incr_file_name(&m);
    assert_eq!(cut["file"].as_str().unwrap(), name);
    let data = v.file(&name);
    assert_eq!(data.len() as u64, file_size(&v.manifest, &name));
    assert_eq!(detect_format(&data[..5]), FileFormat::Resp);

    let (entries, ending) = read_all(&data).expect("Redis's incr file reads");
    assert_eq!(
        ending,
        Ending::Complete {
            len: data.len() as u64
        }
    );
    assert!(
        entries.iter().all(|e| e.argv().is_some()),
        "no annotations: aof-timestamp-enabled is off"
    );
    assert_eq!(
        entries.len() as u64,
        cut["commands_in_original_file"].as_u64().unwrap()
    );

    // MULTI/EXEC blocks are balanced and not nested; SELECT is the first command.
    let (mut open, mut blocks) = (false, 0);
    for e in &entries {
        match tx_role(e.argv().unwrap()) {
            TxRole::Multi => {
                assert!(!open, "nested MULTI at {}", e.offset);
                open = true;
            }
            TxRole::Exec => {
                assert!(open, "EXEC without MULTI at {}", e.offset);
                open = false;
                blocks += 1;
            }
            TxRole::Other => {}
        }
    }
    assert!(!open);
    assert!(blocks > 0, "the fixture has transactions");
    assert_eq!(entries[0].argv().unwrap()[0], "SELECT");

    let last = entries.last().unwrap();
    let want: Vec<&str> = cut["cut_command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(last.argv().unwrap(), want.as_slice());
    assert_eq!(last.offset, cut["cut_command_offset"].as_u64().unwrap());
    assert_eq!(last.end, cut["cut_command_end"].as_u64().unwrap());
    assert_eq!(last.end, cut["original_size"].as_u64().unwrap());
}

#[test]
fn truncated_incr_file_ends_where_redis_truncated_it() {
    let v = variant("redis-7.2.4-truncated");
    let cut = json("aof/redis-7.2.4-truncated/truncation.json");
    let m = v.aof_manifest();
    let name = incr_file_name(&m);
    let data = v.file(&name);
    assert_eq!(data.len() as u64, cut["truncated_size"].as_u64().unwrap());

    let (entries, ending) = read_all(&data).expect("a cut file is not a format error");
    let offset = cut["aof_load_truncated_yes"]["server_truncated_file_at_offset"]
        .as_u64()
        .unwrap();
    assert_eq!(offset, cut["cut_command_offset"].as_u64().unwrap());
    assert_eq!(
        ending,
        Ending::Truncated {
            valid_up_to: offset,
            len: data.len() as u64,
            in_multi: false
        }
    );
    assert_eq!(
        entries.len() as u64,
        cut["commands_in_original_file"].as_u64().unwrap() - 1
    );
    assert_eq!(entries.last().unwrap().end, offset);
}

/// The message part of a Redis log line (`pid:role date time <level> message`).
fn message(line: &str) -> &str {
    let at = line
        .find(" # ")
        .or_else(|| line.find(" * "))
        .expect("a Redis log line");
    &line[at + 3..]
}

#[test]
fn truncation_log_lines_are_redis_texts() {
    let v = variant("redis-7.2.4-truncated");
    let cut = json("aof/redis-7.2.4-truncated/truncation.json");
    let name = incr_file_name(&v.aof_manifest());
    let (_, ending) = read_all(&v.file(&name)).unwrap();

    let log_of = |key: &str| -> Vec<String> {
        cut[key]["log"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| message(l.as_str().unwrap()).to_string())
            .collect()
    };
    // aof-load-truncated yes: our lines appear, consecutively, in Redis's log.
    let yes = log_of("aof_load_truncated_yes");
    let ours = ending.log_lines(&name);
    assert_eq!(ours.len(), 3);
    assert!(
        yes.windows(ours.len()).any(|w| w == ours.as_slice()),
        "{ours:?} not in {yes:?}"
    );
    // aof-load-truncated no: Redis's last line before exiting.
    let no = log_of("aof_load_truncated_no");
    assert_eq!(
        ending.fatal_message(&name).unwrap(),
        [no.last().unwrap().clone()]
    );

    // load-log.txt holds the same lines.
    let text = String::from_utf8(read("aof/redis-7.2.4-truncated/load-log.txt")).unwrap();
    let logged: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(message)
        .collect();
    for line in ours.iter().chain(&ending.fatal_message(&name).unwrap()) {
        assert!(
            logged.contains(&line.as_str()),
            "{line} not in load-log.txt"
        );
    }
}
