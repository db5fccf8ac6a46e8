//! End-to-end: the driver runs engines in child processes, prints db_bench lines that the
//! db_bench parser reads, and writes JSON and CSV with the required fields. redb is linked in,
//! so it always runs; the dlopen'ed engines either run or are reported unavailable.

use larch_bench::report::parse_result_line;
use serde_json::Value;
use std::process::Command;

/// Runs larch-bench with `args` on databases under a fresh scratch folder `name`, asserts that
/// it succeeded, and returns its stdout and the JSON rows it wrote.
fn run_with_json(name: &str, args: &[&str]) -> (String, Vec<Value>) {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("out.jsonl");
    let out = Command::new(env!("CARGO_BIN_EXE_larch-bench"))
        .args(args)
        .arg(format!("--db={}", dir.join("db").display()))
        .arg(format!("--json={}", json.display()))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "stdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows = std::fs::read_to_string(&json)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    (stdout, rows)
}

#[test]
fn small_comparison_produces_parsable_lines_json_and_csv() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("driver-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("out.jsonl");
    let csv = dir.join("out.csv");
    let out = Command::new(env!("CARGO_BIN_EXE_larch-bench"))
        .args([
            "--engine=redb,lmdb",
            "--num=2000",
            "--benchmarks=fillrandom,readrandom,readwhilewriting",
            "--threads=1,2",
            "--seed=7",
            "--progress=0",
        ])
        .arg(format!("--db={}", dir.join("db").display()))
        .arg(format!("--json={}", json.display()))
        .arg(format!("--csv={}", csv.display()))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "stdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let parsed: Vec<_> = stdout.lines().filter_map(parse_result_line).collect();
    assert!(parsed.iter().any(|p| p.name == "fillrandom"));
    assert!(parsed.iter().any(|p| p.name == "writer"));
    let rows: Vec<Value> = std::fs::read_to_string(&json)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let redb: Vec<_> = rows.iter().filter(|r| r["engine"] == "redb").collect();
    // fillrandom once, readrandom and readwhilewriting at 1 and 2 threads.
    assert_eq!(redb.len(), 5, "{redb:?}");
    for r in &redb {
        assert_eq!(r["status"], "ok");
        assert_eq!(r["num"], 2000);
        assert!(r["ops_per_sec"].as_f64().unwrap() > 0.0);
        assert!(r["config"].is_object());
        assert!(r["db_bytes"].as_u64().unwrap() > 0);
    }
    let fill = redb
        .iter()
        .find(|r| r["benchmark"] == "fillrandom")
        .unwrap();
    assert_eq!(fill["ops"], 2000);
    assert_eq!(fill["user_bytes_written"], 2000 * 116);
    let rww: Vec<_> = redb
        .iter()
        .filter(|r| r["benchmark"] == "readwhilewriting")
        .collect();
    assert_eq!(rww[1]["threads"], 2);
    assert!(rww.iter().all(|r| r["writer_ops_per_sec"].is_number()));
    // LMDB either ran or says why not.
    assert!(rows
        .iter()
        .filter(|r| r["engine"] == "lmdb")
        .all(|r| r["status"] == "ok" || r["status"] == "unavailable"));
    let csv_text = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(csv_text.lines().count(), rows.len() + 1);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn unknown_engine_is_a_usage_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_larch-bench"))
        .args(["--engine=nosuchdb", "--num=10"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown engine"));
}

/// `--background_nice` reaches Larch's options (printed in its configuration) through the
/// child process's flags, with write admission's fixed policy beside readers; out of range is
/// a usage error.
#[test]
fn background_nice_reaches_larch_and_is_range_checked() {
    let (_, rows) = run_with_json(
        "nice",
        &[
            "--engine=larch",
            "--num=2000",
            "--benchmarks=fillrandom",
            "--background_nice=3",
            "--progress=0",
        ],
    );
    assert_eq!(rows.len(), 1, "{rows:?}");
    let config = &rows[0]["config"];
    let said = |key: &str| config[key].as_str().unwrap_or_default().to_string();
    assert!(said("background_nice").starts_with("3 "), "{config:?}");
    let beside = larchdb::CHECKPOINT_NICE_BESIDE_READERS;
    assert!(
        said("beside_readers").contains(&format!(" {beside} nice steps")),
        "{config:?}"
    );
    for bad in ["--background_nice=20", "--checkpoint_nice_beside_readers=5"] {
        let out = Command::new(env!("CARGO_BIN_EXE_larch-bench"))
            .args(["--engine=larch", "--num=10", bad])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad}");
    }
}

/// Regression: reopening a dlopen'ed engine for a second fresh fill must not load a second copy
/// of the library beside the first one's background threads (LevelDB hung in compaction).
#[test]
fn repeated_fresh_fills_on_a_threaded_engine_finish() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("refill-{}", std::process::id()));
    let mut child = Command::new(env!("CARGO_BIN_EXE_larch-bench"))
        .args([
            "--engine=leveldb",
            "--num=100000",
            "--benchmarks=fillseq,fillrandom,fillseq,readrandom",
            "--reads=1000",
            "--progress=0",
        ])
        .arg(format!("--db={}", dir.display()))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            panic!("larch-bench did not finish: engine reopen hung");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    // Exit 0 whether LevelDB ran or was reported unavailable.
    assert!(status.success());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn fill_threads_loads_afresh_for_each_thread_count() {
    let (_, rows) = run_with_json(
        "fill-threads",
        &[
            "--engine=lmdb,larch",
            "--num=1000",
            "--benchmarks=fillseq,readseq,fillrandom",
            "--threads=1,2",
            "--fill_threads=1",
            "--key_size=8",
            "--key_format=rocksdb",
            "--value_size=8",
            "--seed=3",
            "--progress=0",
        ],
    );
    for e in ["lmdb", "larch"] {
        let get = |b: &str, t: u64| {
            rows.iter()
                .find(|r| r["engine"] == e && r["benchmark"] == b && r["threads"] == t)
                .unwrap_or_else(|| panic!("{e} {b} {t}: {rows:?}"))
                .clone()
        };
        // Each thread does the whole count; sequential threads put the same keys, so the
        // database after the 2-thread fillseq still holds 1000 entries.
        assert_eq!(get("fillseq", 1)["ops"], 1000);
        assert_eq!(get("fillseq", 2)["ops"], 2000);
        // Each reader passes over the 1000 entries until its passes took 0.1 s.
        let found = get("readseq", 2)["found"].as_u64().unwrap_or(0);
        assert!(
            found >= 2000 && found % 1000 == 0,
            "two readers of whole passes over 1000 entries: {found}"
        );
        assert_eq!(get("fillrandom", 2)["ops"], 2000);
        assert_eq!(get("fillrandom", 2)["status"], "ok");
    }
}

/// YCSB's load and A-F on two engines, twice each: every read finds its record (the choosers
/// draw only loaded or acknowledged keys, D's latest ones included), D and E insert, E scans,
/// and the JSON carries the runs, the medians and the verdict.
#[test]
fn ycsb_runs_the_load_and_the_six_workloads_with_medians() {
    let (stdout, rows) = run_with_json(
        "driver-ycsb",
        &[
            "--engine=redb,larch",
            "--num=3000",
            "--reads=1000",
            "--benchmarks=ycsb",
            "--threads=1,2",
            "--repeat=2",
            "--seed=11",
            "--progress=0",
        ],
    );
    for engine in ["redb", "larch"] {
        let runs: Vec<_> = rows
            .iter()
            .filter(|r| r["engine"] == engine && r["status"] == "ok")
            .collect();
        // Per repeat: the load once, then A-F at 1 and at 2 threads.
        assert_eq!(runs.len(), 2 * (1 + 6 * 2), "{engine}: {runs:?}");
        for r in &runs {
            let bench = r["benchmark"].as_str().unwrap();
            let ops = r["ops"].as_u64().unwrap();
            let threads = r["threads"].as_u64().unwrap();
            let msg = r["message"].as_str().unwrap();
            assert_eq!(r["value_size"], 1000, "{engine} {bench}");
            match bench {
                "ycsb_load" => assert_eq!(ops, 3000),
                "ycsb_e" => {
                    assert_eq!(ops, 1000 * threads);
                    assert!(op_count(msg, "insert") > 0, "{msg}");
                    // Every scan starts at an existing key, so it finds at least one record.
                    assert_eq!(r["found"].as_u64().unwrap(), op_count(msg, "scan"), "{msg}");
                }
                _ => {
                    assert_eq!(ops, 1000 * threads, "{engine} {bench}");
                    // Reads and read-modify-writes find their records: found counts them.
                    let reads = op_count(msg, "read") + op_count(msg, "rmw");
                    assert_eq!(
                        r["found"].as_u64().unwrap(),
                        reads,
                        "{engine} {bench}: {msg}"
                    );
                    if bench == "ycsb_d" {
                        assert!(op_count(msg, "insert") > 0, "{msg}");
                    }
                }
            }
        }
        let medians = rows
            .iter()
            .filter(|r| r["engine"] == engine && r["status"] == "median")
            .count();
        assert_eq!(medians, 1 + 6 * 2, "{engine}");
    }
    assert!(rows
        .iter()
        .any(|r| r["kind"] == "verdict" && r["benchmark"] == "ycsb_f"));
    assert!(stdout.contains("Verdict"), "{stdout}");
}

/// The count of operation `op` in a YCSB result's message, "(read 950 p99 3.1us, ...)".
fn op_count(message: &str, op: &str) -> u64 {
    message
        .trim_start_matches('(')
        .split(", ")
        .filter_map(|part| part.strip_prefix(op)?.strip_prefix(' '))
        .filter_map(|rest| rest.split(' ').next()?.parse::<u64>().ok())
        .sum()
}
