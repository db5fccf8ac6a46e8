//! `larch copy` and `larch check` of a database that a writer in another process keeps
//! changing: each copy is clean and holds exactly one committed state. The writer is this
//! test binary re-executed; commit n is deterministic, so the state after any commit can be
//! recomputed and compared with a copy entry by entry.

mod common;
use common::*;
use larchdb::{Database, Durability, Options};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const CHILD_ENV: &str = "LARCH_HOT_COPY_WRITER_DB";
const KEYS: u64 = 2000;

fn key(n: u64) -> [u8; 8] {
    (n % KEYS).to_be_bytes()
}

/// The value commit n writes; some are overflow runs, some empty.
fn value(n: u64) -> Vec<u8> {
    let len = match n % 13 {
        0 => 6000,
        1 => 0,
        _ => (n as usize * 31) % 1500,
    };
    (0..len).map(|i| (n as usize ^ i) as u8).collect()
}

/// Commit n: puts key(n), deletes key(3n) every fifth commit, records n under "last".
fn apply(n: u64, data: &mut BTreeMap<Vec<u8>, Vec<u8>>) {
    data.insert(key(n).to_vec(), value(n));
    if n % 5 == 4 {
        data.remove(&key(3 * n)[..]);
    }
}

/// The state after commit n, recomputed.
fn state_after(last: u64) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut data = BTreeMap::new();
    for n in 0..=last {
        apply(n, &mut data);
    }
    data
}

#[test]
fn writer_entry() {
    let Ok(path) = std::env::var(CHILD_ENV) else {
        return;
    };
    let path = PathBuf::from(path);
    let stop = path.with_extension("stop");
    let db = Database::open(&path, Options::default()).expect("writer open");
    let mut n = 0u64;
    loop {
        let mut w = db.begin_write().unwrap();
        w.ensure_table("data").unwrap();
        w.ensure_table("meta").unwrap();
        {
            let mut t = w.table("data").unwrap();
            t.put(&key(n), &value(n)).unwrap();
            if n % 5 == 4 {
                t.delete(&key(3 * n)).unwrap();
            }
        }
        w.table("meta")
            .unwrap()
            .put(b"last", &n.to_be_bytes())
            .unwrap();
        let d = if n.is_multiple_of(10) {
            Durability::Immediate
        } else {
            Durability::None
        };
        w.commit_with(d).unwrap();
        if n == 200 {
            println!("warmed-up");
        }
        n += 1;
        if n > 200 && stop.exists() {
            break;
        }
    }
    println!("commits {n}");
}

/// The "last" commit recorded in a database, read through a read-only handle.
fn last_commit(path: &Path) -> u64 {
    let db = Database::open(path, Options::default().read_only(true)).unwrap();
    let r = db.begin_read().unwrap();
    let v = r
        .table("meta")
        .unwrap()
        .get(b"last")
        .unwrap()
        .unwrap()
        .to_vec();
    u64::from_be_bytes(v.try_into().unwrap())
}

fn contents(path: &Path) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let db = Database::open(path, Options::default().read_only(true)).unwrap();
    let r = db.begin_read().unwrap();
    let t = r.table("data").unwrap();
    t.iter()
        .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect::<Result<_, _>>()
        .unwrap()
}

#[test]
fn hot_copy_while_another_process_writes_is_one_clean_committed_state() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("live.larch");
    let mut writer = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "writer_entry", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, &src)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(writer.stdout.take().unwrap()).lines();
    let mut wait_for = |word: &str| -> String {
        for line in lines.by_ref() {
            let line = line.unwrap();
            if let Some(at) = line.find(word) {
                return line[at + word.len()..].trim().to_string();
            }
        }
        panic!("writer ended without printing {word:?}");
    };
    wait_for("warmed-up");

    let s = src.to_str().unwrap();
    let mut copies = Vec::new();
    let mut raced = 0;
    for i in 0..5 {
        let dst = dir.path().join(format!("copy{i}.larch"));
        let before = last_commit(&src);
        larch_ok(&["copy", s, dst.to_str().unwrap()], b"");
        let after = last_commit(&src);
        if after > before {
            raced += 1;
        }
        copies.push((dst, before, after));
        // check of the live source, from this process, beside the writer.
        let r = larch(&["check", s], b"");
        assert_eq!(r.code, 0, "check of the live database: {}", r.stderr);
    }
    std::fs::write(src.with_extension("stop"), b"").unwrap();
    let commits: u64 = wait_for("commits ").parse().unwrap();
    assert!(writer.wait().unwrap().success(), "writer failed");

    let mut figures = Vec::new();
    for (dst, before, after) in &copies {
        let d = dst.to_str().unwrap();
        let r = larch(&["check", d], b"");
        assert_eq!(r.code, 0, "check of {d}: {}", r.stdout_str());
        let last = last_commit(dst);
        assert!(
            (*before..=*after).contains(&last),
            "copy holds commit {last}, taken between {before} and {after}"
        );
        assert!(
            contents(dst) == state_after(last),
            "{d} is not the state after commit {last}"
        );
        figures.push(format!("{last} (source at {before}..{after})"));
    }
    eprintln!(
        "hot copy: writer made {commits} commits; copies hold commits {}; {raced} of {} \
         copies overlapped commits",
        figures.join(", "),
        copies.len()
    );
    assert!(
        raced > 0,
        "no copy overlapped a commit; the test proves nothing"
    );
}
