//! Seed 004, Intel's pmemkv 1.4 performance report: for each value size, fillseq then readseq,
//! and fillrandom then readrandom, readwhilewriting and readrandomwriterandom, at each power of
//! two threads up to the core count. The report gives pmemkv-bench's CSV table and the figures
//! against threads, against value size, and of P99.9 latency.

use super::chart::{BarPanel, Figure, LinePanel, Panel};
use super::plan::{base_flags, inmem_cache, list, set_num, timed, Params, Run};
use super::render::{
    bars, engine_legend, engine_lines, f, lines_vs_threads, n0, n2, s, table, u, Out, Results,
};
use super::Suite;
use crate::error::Result;
use crate::flags::KeyFormat;
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::path::Path;

/// pmemkv's value sizes (seed 004).
pub const PMEMKV_VALUE_SIZES: &[usize] = &[8, 128, 1024];

fn pow2_up_to(n: usize) -> Vec<usize> {
    let mut v = vec![1];
    while v[v.len() - 1] * 2 <= n.max(1) {
        let next = v[v.len() - 1] * 2;
        v.push(next);
    }
    v
}

/// Thread counts for pmemkv: powers of two up to the core count (1 and 2 here).
pub fn pmemkv_threads() -> Vec<usize> {
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let v = pow2_up_to(cores);
    if v.len() < 2 {
        vec![1, 2]
    } else {
        v
    }
}

/// Seed 004: pmemkv-bench's benchmarks.
pub struct Pmemkv;

impl Suite for Pmemkv {
    fn name(&self) -> &'static str {
        "pmemkv"
    }

    fn title(&self) -> &'static str {
        "004: Intel pmemkv 1.4 performance report"
    }

    fn params(&self, p: &Params) -> Value {
        json!({"num": p.pmemkv_num, "key_size": 8,
               "value_sizes": PMEMKV_VALUE_SIZES, "threads": pmemkv_threads(),
               "fill_cap_s": p.pmemkv_fill_cap_s})
    }

    fn run_s(&self, p: &Params) -> Option<u64> {
        Some(p.pmemkv_run_s)
    }

    fn plan(&self, p: &Params, db: &Path, seed: u64) -> Result<Vec<Run>> {
        let mut runs = Vec::new();
        for &v in PMEMKV_VALUE_SIZES {
            let mut f = base_flags(db, seed, p);
            set_num(&mut f, p.pmemkv_num, p);
            f.key_size = 8;
            f.key_format = KeyFormat::RocksDb;
            f.value_size = v;
            f.threads = pmemkv_threads();
            f.cache_size = inmem_cache(p.pmemkv_num, 8 + v as u64);
            f.fill_duration_s = p.pmemkv_fill_cap_s;
            f.fill_threads = true;
            f.series_interval_ms = 0;
            timed(&mut f, p.pmemkv_run_s, p);
            let mut seq = f.clone();
            seq.benchmarks = list(&["fillseq", "readseq"]);
            seq.reads = p.pmemkv_num;
            runs.push(Run::new(format!("v={v} seq"), seq));
            let mut rnd = f;
            rnd.benchmarks = list(&[
                "fillrandom",
                "readrandom",
                "readwhilewriting",
                "readrandomwriterandom",
            ]);
            runs.push(Run::new(format!("v={v} random"), rnd));
        }
        Ok(runs)
    }

    fn headline(&self, row: &Value) -> Option<String> {
        Some(format!(
            "{} {} B values",
            s(row, "benchmark"),
            u(row, "value_size")
        ))
    }

    fn render(&self, r: &Results, o: &mut Out) -> Result<()> {
        report(r, o)
    }
}

const PMEMKV_BENCHES: &[(&str, &str)] = &[
    ("fillseq", "fillseq"),
    ("fillrandom", "fillrandom"),
    ("readseq", "readseq (after fillseq)"),
    ("readrandom", "readrandom (after fillrandom)"),
    ("readrandomwriterandom", "readrandomwriterandom (90/10)"),
    ("readwhilewriting", "readwhilewriting"),
];

fn report(r: &Results, o: &mut Out) -> Result<()> {
    let _ = writeln!(
        o.md,
        "pmemkv-bench's CSV table, one row per benchmark, engine, thread count and value size \
         (8-byte keys). micros/op is db_bench's (summed thread time / ops), ops/sec is wall \
         throughput; percentiles in microseconds (pmemkv-bench's P90 is not measured; P99 is \
         shown in its place). As in pmemkv-bench, every thread of a benchmark does the whole \
         count: fillseq's threads put the same keys in the same order, fillrandom's draw from \
         their own streams, each thread count loading afresh. readwhilewriting's ops/sec counts \
         the readers, its writer rate is in extra_data.\n"
    );
    let mut rows = Vec::new();
    for (bench, _) in PMEMKV_BENCHES {
        for e in r.engines() {
            let mut xs = r.find(&e, bench);
            xs.sort_by_key(|x| (u(x, "value_size"), u(x, "threads")));
            for x in xs {
                let mut extra = s(x, "message").to_string();
                if let Some(w) = x.get("writer_ops_per_sec").and_then(Value::as_f64) {
                    extra = format!("{extra} writer {w:.0} ops/s").trim().to_string();
                }
                rows.push(vec![
                    bench.to_string(),
                    e.clone(),
                    u(x, "threads").to_string(),
                    u(x, "key_size").to_string(),
                    u(x, "value_size").to_string(),
                    u(x, "num").to_string(),
                    format!("{:.3}", f(x, "micros_per_op")),
                    n0(f(x, "ops_per_sec")),
                    n2(f(x, "mb_per_sec")),
                    extra,
                    n2(f(x, "p50_us")),
                    n2(f(x, "p75_us")),
                    n2(f(x, "p99_us")),
                    n2(f(x, "p999_us")),
                    n2(f(x, "p9999_us")),
                ]);
            }
        }
    }
    o.md.push_str(&table(
        &[
            "Benchmark",
            "Engine",
            "Threads",
            "Keys",
            "Values",
            "Entries",
            "micros/op (average)",
            "ops/sec",
            "throughput [MB/s]",
            "extra_data",
            "P50 [micros/op]",
            "P75 [micros/op]",
            "P99 [micros/op]",
            "P99.9 [micros/op]",
            "P99.99 [micros/op]",
        ],
        &rows,
    ));
    let v8 = |x: &Value| u(x, "value_size") == 8;
    let panels: Vec<Panel> = PMEMKV_BENCHES
        .iter()
        .map(|(b, t)| {
            Panel::Lines(LinePanel {
                title: (*t).into(),
                x_label: "Threads".into(),
                y_label: "Throughput (ops/s)".into(),
                x_log: false,
                y_log: false,
                lines: lines_vs_threads(r, b, "ops_per_sec", v8),
                marks: vec![],
            })
        })
        .collect();
    o.figure(
        "pmemkv_threads",
        Figure {
            title: "ops/sec against threads, 8 B keys and 8 B values".into(),
            panels,
            cols: 2,
            legend: engine_legend(r),
        },
    )?;
    let panels: Vec<Panel> = PMEMKV_BENCHES[..4]
        .iter()
        .map(|(b, t)| {
            let value_size = |x: &Value| u(x, "value_size") as f64;
            let lines = engine_lines(r, b, value_size, "ops_per_sec", |x| u(x, "threads") == 1);
            Panel::Lines(LinePanel {
                title: (*t).into(),
                x_label: "Value size (bytes, log scale)".into(),
                y_label: "Throughput (ops/s)".into(),
                x_log: true,
                y_log: false,
                lines,
                marks: vec![],
            })
        })
        .collect();
    o.figure(
        "pmemkv_value_size",
        Figure {
            title: "ops/sec against value size, 8 B keys, single thread".into(),
            panels,
            cols: 2,
            legend: engine_legend(r),
        },
    )?;
    let panels: Vec<Panel> = PMEMKV_BENCHES[..4]
        .iter()
        .map(|(b, t)| {
            Panel::Bars(BarPanel {
                title: (*t).into(),
                y_label: "P99.9 latency (microseconds, log scale)".into(),
                y_log: true,
                bars: bars(r, |e| {
                    r.find(e, b)
                        .into_iter()
                        .find(|x| v8(x) && u(x, "threads") == 1)
                        .map(|x| f(x, "p999_us"))
                }),
            })
        })
        .collect();
    o.figure(
        "pmemkv_p999",
        Figure {
            title: "Latency P99.9 per engine, 8 B keys and values, 1 thread".into(),
            panels,
            cols: 2,
            legend: engine_legend(r),
        },
    )
}
