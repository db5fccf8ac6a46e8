//! The engine inside a memory cgroup well below the database's size (issue 58: never killed,
//! whatever the memory): larch-bench runs Larch in a child process limited to 48 MiB
//! (`--memory_limit`, a v1 or v2 memory cgroup) while it loads about 140 MB of 1 KB values,
//! overwrites a part of them at random, one put a commit, and reads them back; then the test
//! opens the database itself and checks every page and every record. Before the relocation
//! wrote its copies out as it went, the close's compaction held the tree in anonymous memory
//! and the cgroup killed the process there.
//!
//! The same with frames asked for far beyond the limit (`--frames_bytes`, 8 GiB in a 96 MiB
//! cgroup): the engine keeps them within half the memory beyond its reserve, and maps the
//! file once it outgrows them; asked for whole, the frames held the file in anonymous memory
//! and the cgroup killed the process in the load.
//!
//! The same with transactions of 20,000 records (`--batch_size`, 20 MB each) in a 64 MiB
//! cgroup: larch-bench holds each transaction's records, and the engine holds its writes up
//! to a quarter of its memory budget (`budget::resolve_batch`), then writes pages, whose
//! copies of cold pages it writes out beyond its budget (`WritePages::spill_cold`).
//! With the batch held up to half the process's memory, and those copies held until the
//! commit, the cgroup killed the debug build in 3 of 8 runs.
//!
//! The three run one at a time (`ONE_AT_A_TIME`): each cgroup is charged the page cache its
//! writes dirty, and run together their writeback shares the device.
//!
//! Where no memory cgroup can be made (no permission, no controller), the test says so and
//! passes: the limit is the machine's to grant.

use larchdb::{Database, Options};
use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

const RECORDS: u64 = 100_000;

/// Held by each test while its larch-bench runs: one cgroup's writes on the device at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn larch_completes_and_verifies_in_a_cgroup_far_below_its_database() {
    completes_and_verifies("memory-limit", 48, &[]);
}

#[test]
fn larch_with_frames_asked_beyond_the_cgroup_completes_and_verifies() {
    completes_and_verifies("memory-limit-frames", 96, &["--frames_bytes=8G"]);
}

#[test]
fn larch_with_large_transactions_completes_and_verifies() {
    completes_and_verifies("memory-limit-batches", 64, &["--batch_size=20000"]);
}

/// Loads, overwrites and reads `RECORDS` records of 1 KB in a cgroup of `limit_mib` MiB with
/// `more` flags, then checks the database outside it.
fn completes_and_verifies(name: &str, limit_mib: u64, more: &[&str]) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("results.jsonl");
    let out = Command::new(env!("CARGO_BIN_EXE_larch-bench"))
        .args([
            "--engine=larch",
            &format!("--db={}", dir.display()),
            &format!("--memory_limit={limit_mib}M"),
            &format!("--num={RECORDS}"),
            "--value_size=1000",
            "--benchmarks=fillseq,overwrite,readrandom",
            "--reads=10000",
            "--progress=0",
            "--seed=7",
            &format!("--json={}", json.display()),
        ])
        .args(more)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if text.contains("--memory_limit needs a writable memory cgroup") {
        eprintln!("no memory cgroup on this machine; not run: {text}");
        return;
    }
    assert!(out.status.success(), "larch-bench failed:\n{text}");
    let rows: Vec<Value> = std::fs::read_to_string(&json)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let row = |name: &str| {
        rows.iter()
            .find(|r| r["benchmark"] == name)
            .unwrap_or_else(|| panic!("no {name} row:\n{text}"))
    };
    for name in ["fillseq", "overwrite", "readrandom"] {
        assert_eq!(row(name)["status"], "ok", "{name}:\n{text}");
    }
    // Every key read back exists: the load wrote them all.
    assert_eq!(row("readrandom")["found"], 10_000, "{text}");
    // The database is larger than the limit: twice the 48 MiB one, and beyond the others.
    let db_bytes = row("overwrite")["db_bytes"].as_u64().unwrap();
    assert!(
        db_bytes > (96 << 20).max(limit_mib << 20),
        "database of {db_bytes} bytes"
    );

    // Opened again outside the cgroup: every page checks, and every record is there.
    let db = Database::open(dir.join("larch").join("data.larch"), Options::default()).unwrap();
    db.verify_all().unwrap();
    let r = db.begin_read().unwrap();
    assert_eq!(r.table("bench").unwrap().len().unwrap(), RECORDS);
    drop(r);
    drop(db);
    let _ = std::fs::remove_dir_all(&dir);
}
