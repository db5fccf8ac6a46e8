//! `larch-bench suite` and `larch-bench report`: the report's tables carry the seed reports'
//! columns, the charts are real PNG and SVG files, and a report re-renders from results.jsonl
//! alone.

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;

fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("suite-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn bench(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_larch-bench"))
        .args(args)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "larch-bench {args:?} failed:\n{text}");
    text
}

/// Checks a chart pair: a PNG with its signature and a non-trivial size, and an SVG that names
/// only the generic font family.
fn check_chart(dir: &Path, stem: &str) {
    let png = std::fs::read(dir.join("charts").join(format!("{stem}.png")))
        .unwrap_or_else(|e| panic!("{stem}.png: {e}"));
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "{stem}.png is not a PNG");
    // IHDR: width and height, big-endian, at bytes 16..24.
    let w = u32::from_be_bytes(png[16..20].try_into().unwrap());
    let h = u32::from_be_bytes(png[20..24].try_into().unwrap());
    assert!(w >= 600 && h >= 400, "{stem}.png is {w}x{h}");
    let svg = std::fs::read_to_string(dir.join("charts").join(format!("{stem}.svg"))).unwrap();
    assert!(
        svg.contains("<svg") && svg.trim_end().ends_with("</svg>"),
        "{stem}.svg"
    );
    assert!(svg.contains("<text"), "{stem}.svg has no text");
    for fam in svg.split("font-family=\"").skip(1) {
        let fam = fam.split('"').next().unwrap();
        assert_eq!(fam, "sans-serif", "{stem}.svg names a font family {fam:?}");
    }
}

/// Asserts that `report` has a table with exactly this header row, followed by its separator.
fn assert_table(report: &str, head: &str) {
    let lines: Vec<&str> = report.lines().collect();
    let at = lines
        .iter()
        .position(|l| *l == head)
        .unwrap_or_else(|| panic!("no table headed {head:?} in:\n{report}"));
    let cols = head.matches(" | ").count() + 1;
    assert_eq!(lines[at + 1], format!("|{}", "---|".repeat(cols)));
}

fn series(n: u64, dt: f64, rate: f64) -> Value {
    let t: Vec<f64> = (0..=n).map(|i| i as f64 * dt).collect();
    let ops: Vec<u64> = (0..=n).map(|i| (i as f64 * dt * rate) as u64).collect();
    json!({"t_s": t, "ops": ops})
}

fn row(engine: &str, bench: &str, threads: u64, extra: Value) -> Value {
    let mut r = json!({
        "kind": "result", "suite": "inmem", "step": "load+run", "status": "ok",
        "engine": engine, "engine_version": "1.0", "benchmark": bench, "threads": threads,
        "num": 1000000, "key_size": 16, "value_size": 100, "ops": 1000000,
        "ops_per_sec": 500000.0, "micros_per_op": 2.0, "mb_per_sec": 55.0,
        "p50_us": 1.0, "p75_us": 1.5, "p99_us": 4.0, "p999_us": 9.0, "p9999_us": 20.0,
        "wall_s": 2.0, "user_s": 1.8, "sys_s": 0.2, "cpu_pct": 100.0, "vcsw": 10, "ivcsw": 3,
        "fs_in": 0, "fs_out": 250000, "db_bytes": 130000000u64, "maxrss_kb": 150000,
        "config": {"cache": "64 MiB"}, "message": "",
    });
    if let (Value::Object(m), Value::Object(x)) = (&mut r, extra) {
        m.extend(x);
    }
    r
}

#[test]
fn report_rerenders_an_inmem_results_file_with_the_seed_tables_and_charts() {
    let dir = scratch("inmem-report");
    let mut lines = vec![json!({
        "kind": "header", "suite": "inmem", "scale": "hand", "seed": 42,
        "command": "larch-bench suite inmem --scale=hand", "larch_bench_version": "0.1.0",
        "params": {"num": 1000000, "readers": [1, 2], "cache_size": 67108864},
        "machine": {"cores": 2, "cpu": "test CPU", "mem_total_bytes": 25769803776u64,
                    "kernel": "6.1.0", "os": "Debian",
                    "storage": {"db_path": "/tmp/x", "source": "/dev/vda", "fstype": "ext4",
                                "device": "vda", "rotational": false, "journal": true}},
    })];
    for (e, rate) in [("larch", 400000.0), ("lmdb", 900000.0)] {
        let load_series = json!({"interval_ms": 100, "threads": [
            {"tid": 0, "role": "worker", "t_s": series(40, 0.05, rate)["t_s"],
             "ops": series(40, 0.05, rate)["ops"]}]});
        lines.push(row(e, "fillseqbatch", 1, json!({"series": load_series})));
        for t in [1u64, 2] {
            let mut threads = vec![];
            for tid in 0..t {
                let s = series(20, 0.1, rate / 2.0);
                threads
                    .push(json!({"tid": tid, "role": "reader", "t_s": s["t_s"], "ops": s["ops"]}));
            }
            let s = series(20, 0.1, rate / 20.0);
            threads.push(json!({"tid": t, "role": "writer", "t_s": s["t_s"], "ops": s["ops"]}));
            lines.push(row(
                e,
                "readwhilewriting",
                t,
                json!({"writer_ops_per_sec": rate / 20.0, "ops_per_sec": rate * t as f64,
                       "writer_p99_us": 30.0, "series": {"interval_ms": 100, "threads": threads}}),
            ));
        }
    }
    lines.push(json!({"kind": "result", "suite": "inmem", "engine": "bdb",
                      "status": "unavailable", "message": "libdb missing"}));
    lines.push(json!({"kind": "footer", "suite": "inmem", "elapsed_s": 12.5, "errors": 0}));
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(dir.join("results.jsonl"), text).unwrap();

    bench(&["report", dir.to_str().unwrap()]);
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    // Seed 001's tables: same columns, same order.
    assert_table(
        &report,
        "| Engine | Load Wall | Load User | Load Sys | Overhead | Load Size KB | Writes/Sec | \
         Reads/Sec | Run Wall | Run User | Run Sys | Final Size KB | CPU% | Process Size KB |",
    );
    assert!(report.contains(
        "| Engine | Loading Voluntary | Loading Involuntary | Running Voluntary | Running Involuntary |"
    ));
    // The largest reader count is the run; times in the seed's HH:MM:SS.ss.
    assert!(
        report.contains(
            "| lmdb | 00:00:02.00 | 00:00:01.80 | 00:00:00.20 | 1.00 | 126953 | 45000 | 1800000 |"
        ),
        "{report}"
    );
    assert!(report.contains("test CPU") && report.contains("Linux 6.1.0"));
    assert!(report.contains("ext4, journal on"));
    assert!(report.contains("| bdb | unavailable | libdb missing |"));
    for stem in [
        "inmem_load_throughput",
        "inmem_thread_throughput",
        "inmem_throughput",
        "inmem_space",
    ] {
        check_chart(&dir, stem);
        assert!(
            report.contains(&format!("](charts/{stem}.png)")),
            "{stem} not linked"
        );
    }
    // Re-rendering gives the same report.
    bench(&["report", dir.to_str().unwrap()]);
    assert_eq!(
        std::fs::read_to_string(dir.join("report.md")).unwrap(),
        report
    );
}

#[test]
fn tiny_suites_run_and_rerender() {
    for (suite, charts, table) in [
        (
            "pmemkv",
            &["pmemkv_threads", "pmemkv_value_size", "pmemkv_p999"][..],
            "| Benchmark | Engine | Threads | Keys | Values | Entries | micros/op (average) | \
             ops/sec | throughput [MB/s] | extra_data | P50 [micros/op] | P75 [micros/op] | \
             P99 [micros/op] | P99.9 [micros/op] | P99.99 [micros/op] |",
        ),
        (
            "tupl",
            &["tupl_rates", "tupl_progress"][..],
            "| Engine | Inserts | Inserts/s | Updates | Updates/s | More inserts | \
             Inserts/s (more) | Final Size KB | Process Size KB | Total time |",
        ),
    ] {
        let dir = scratch(suite);
        let out = dir.join("out");
        bench(&[
            "suite",
            suite,
            "--scale=tiny",
            "--engine=lmdb,larch",
            &format!("--out={}", out.display()),
            &format!("--db={}", dir.join("db").display()),
        ]);
        let rows: Vec<Value> = std::fs::read_to_string(out.join("results.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(rows[0]["kind"], "header");
        let results: Vec<&Value> = rows.iter().filter(|r| r["kind"] == "result").collect();
        assert!(results.iter().all(|r| r["status"] == "ok"), "{results:?}");
        for e in ["lmdb", "larch"] {
            assert!(results.iter().any(|r| r["engine"] == e), "{e} has no rows");
        }
        let report = std::fs::read_to_string(out.join("report.md")).unwrap();
        assert_table(&report, table);
        for c in charts {
            check_chart(&out, c);
        }
        if suite == "tupl" {
            // Every record inserted first was updated, and the later inserts added new ones.
            for e in ["lmdb", "larch"] {
                let get = |b: &str| {
                    results
                        .iter()
                        .find(|r| r["engine"] == e && r["benchmark"] == b)
                        .unwrap()["ops"]
                        .as_u64()
                        .unwrap()
                };
                assert_eq!(get("fillunique_mt"), 20_000);
                assert_eq!(get("updateunique_mt"), 20_000);
                assert_eq!(get("insertunique_mt"), 5_000);
            }
        }
        std::fs::remove_dir_all(out.join("charts")).unwrap();
        std::fs::remove_file(out.join("report.md")).unwrap();
        bench(&["report", out.to_str().unwrap()]);
        assert_eq!(
            std::fs::read_to_string(out.join("report.md")).unwrap(),
            report
        );
        for c in charts {
            check_chart(&out, c);
        }
    }
}

#[test]
fn bad_suite_arguments_are_usage_errors() {
    for args in [
        &["suite"][..],
        &["suite", "nosuch"],
        &["suite", "inmem", "--scale=huge"],
        &["report"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_larch-bench"))
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
}

/// The ycsb suite at the tiny scale on the engines linked in: the verdict opens its results,
/// the load, throughput and latency tables carry every workload, and the charts are drawn.
#[test]
fn ycsb_suite_runs_and_reports() {
    let dir = scratch("ycsb");
    let out = dir.join("out");
    bench(&[
        "suite",
        "ycsb",
        "--scale=tiny",
        "--engine=larch,redb",
        &format!("--out={}", out.display()),
        &format!("--db={}", dir.join("db").display()),
    ]);
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    let verdict = report.find("### Verdict").expect("no verdict");
    assert!(verdict < report.find("### Load").expect("no load table"));
    assert_table(
        &report,
        "| Engine | Records | Inserts/s | Wall s | P99 us | wamp | DB MiB |",
    );
    assert_table(&report, "| Workload | Clients | larch | redb |");
    for w in [
        "A: 50% read",
        "B: 95% read",
        "C: 100% read",
        "D: 95% read latest",
        "E: 95% scan",
        "F: 50% read",
    ] {
        assert_eq!(
            report
                .lines()
                .filter(|l| l.starts_with(&format!("| {w}")))
                .count(),
            2 + 2,
            "{w}: two client counts in the throughput table, two engines in the latency table"
        );
    }
    assert!(report.contains("| ycsb_e | 2 |"), "{report}");
    check_chart(&out, "ycsb_throughput");
    check_chart(&out, "ycsb_load");
    // The report re-renders from results.jsonl alone, to the same text.
    bench(&["report", &out.display().to_string()]);
    assert_eq!(
        std::fs::read_to_string(out.join("report.md")).unwrap(),
        report
    );
}
