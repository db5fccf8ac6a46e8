//! Seed 001, Symas' In-Memory Microbenchmark (Large): 16-byte keys and 100-byte values loaded
//! by fillseqbatch into engines whose caches hold the whole database, then readwhilewriting
//! (one writer, each reader count). The report gives the seed's two tables (times, sizes and
//! rates; context switches), every reader count, and the load, per-thread, throughput and
//! space figures.

use super::chart::{BarPanel, Figure, LinePanel, Panel};
use super::plan::{base_flags, inmem_cache, list, set_num, Params, Run};
use super::render::{
    bars, engine_legend, f, hms, lines_vs_threads, load_lines, max_threads, n0, n2, plural,
    process_kb, s, table, thread_figure, u, Out, Results,
};
use super::Suite;
use crate::error::Result;
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::path::Path;

/// Seed 001: the in-memory suite.
pub struct Inmem;

impl Suite for Inmem {
    fn name(&self) -> &'static str {
        "inmem"
    }

    fn title(&self) -> &'static str {
        "001: Symas, In-Memory Microbenchmark (Large)"
    }

    fn params(&self, p: &Params) -> Value {
        json!({"num": p.inmem_num, "key_size": 16, "value_size": 100,
               "readers": p.inmem_readers, "cache_size": inmem_cache(p.inmem_num, 116)})
    }

    fn plan(&self, p: &Params, db: &Path, seed: u64) -> Result<Vec<Run>> {
        let mut f = base_flags(db, seed, p);
        set_num(&mut f, p.inmem_num, p);
        f.benchmarks = list(&["fillseqbatch", "readwhilewriting"]);
        f.threads = p.inmem_readers.clone();
        f.cache_size = inmem_cache(p.inmem_num, 116);
        Ok(vec![Run::new("load+run", f)])
    }

    fn render(&self, r: &Results, o: &mut Out) -> Result<()> {
        report(r, o)
    }
}

fn report(r: &Results, o: &mut Out) -> Result<()> {
    let mut main = Vec::new();
    let mut ctx = Vec::new();
    let mut per = Vec::new();
    for e in r.engines() {
        let Some(load) = r.find(&e, "fillseqbatch").first().copied() else {
            continue;
        };
        let runs = r.find(&e, "readwhilewriting");
        let run = max_threads(&runs);
        let g = |k: &str| run.map_or(f64::NAN, |x| f(x, k));
        main.push(vec![
            e.clone(),
            hms(f(load, "wall_s")),
            hms(f(load, "user_s")),
            hms(f(load, "sys_s")),
            n2((f(load, "user_s") + f(load, "sys_s")) / f(load, "wall_s")),
            n0(f(load, "db_bytes") / 1024.0),
            n0(g("writer_ops_per_sec")),
            n0(g("ops_per_sec")),
            hms(g("wall_s")),
            hms(g("user_s")),
            hms(g("sys_s")),
            n0(g("db_bytes") / 1024.0),
            n0(g("cpu_pct")),
            process_kb(r, &e).to_string(),
        ]);
        ctx.push(vec![
            e.clone(),
            u(load, "vcsw").to_string(),
            u(load, "ivcsw").to_string(),
            run.map_or(String::new(), |x| u(x, "vcsw").to_string()),
            run.map_or(String::new(), |x| u(x, "ivcsw").to_string()),
        ]);
        let mut sorted = runs.clone();
        sorted.sort_by_key(|x| u(x, "threads"));
        for x in sorted {
            per.push(vec![
                e.clone(),
                u(x, "threads").to_string(),
                n0(f(x, "writer_ops_per_sec")),
                n0(f(x, "ops_per_sec")),
                n2(f(x, "p99_us")),
                n2(f(x, "writer_p99_us")),
                n0(f(x, "cpu_pct")),
            ]);
        }
    }
    let readers = r
        .ok()
        .filter(|x| s(x, "benchmark") == "readwhilewriting")
        .map(|x| u(x, "threads"))
        .max()
        .unwrap_or(0);
    let _ = writeln!(
        o.md,
        "The seed's table (load = fillseqbatch of every record, 1000 per transaction; run = \
         readwhilewriting with one writer updating existing records and {}, the \
         largest reader count). Times are HH:MM:SS.ss; Overhead = (User + Sys) / Wall of the \
         load; sizes are allocated KB on disk; Process Size is the engine process's peak RSS (KB).\n",
        plural(readers, "reader")
    );
    o.md.push_str(&table(
        &[
            "Engine",
            "Load Wall",
            "Load User",
            "Load Sys",
            "Overhead",
            "Load Size KB",
            "Writes/Sec",
            "Reads/Sec",
            "Run Wall",
            "Run User",
            "Run Sys",
            "Final Size KB",
            "CPU%",
            "Process Size KB",
        ],
        &main,
    ));
    let _ = writeln!(
        o.md,
        "\nContext switches (the seed's second table), loading and running ({}):\n",
        plural(readers, "reader")
    );
    o.md.push_str(&table(
        &[
            "Engine",
            "Loading Voluntary",
            "Loading Involuntary",
            "Running Voluntary",
            "Running Involuntary",
        ],
        &ctx,
    ));
    let _ = writeln!(o.md, "\nreadwhilewriting at every reader count:\n");
    o.md.push_str(&table(
        &[
            "Engine",
            "Readers",
            "Writes/Sec",
            "Reads/Sec",
            "Read P99 us",
            "Write P99 us",
            "CPU%",
        ],
        &per,
    ));
    o.figure(
        "inmem_load_throughput",
        Figure {
            title: "Load throughput over time (fillseqbatch, 16 B keys, 100 B values)".into(),
            panels: vec![Panel::Lines(LinePanel {
                title: "Records loaded per second (log time axis, as the seed)".into(),
                x_label: "Time since load start (s, log scale)".into(),
                y_label: "Load throughput (records/s)".into(),
                x_log: true,
                y_log: false,
                lines: load_lines(r, "fillseqbatch"),
                marks: vec![],
            })],
            cols: 1,
            legend: engine_legend(r),
        },
    )?;
    thread_figure(r, o, "inmem_thread_throughput", "readwhilewriting")?;
    let wr =
        |e: &str| max_threads(&r.find(e, "readwhilewriting")).map(|x| f(x, "writer_ops_per_sec"));
    let rd = |e: &str| max_threads(&r.find(e, "readwhilewriting")).map(|x| f(x, "ops_per_sec"));
    o.figure(
        "inmem_throughput",
        Figure {
            title: format!(
                "readwhilewriting throughput: 1 writer updating, {}",
                plural(readers, "reader")
            ),
            panels: vec![
                Panel::Bars(BarPanel {
                    title: format!("Writes/s ({})", plural(readers, "reader")),
                    y_label: "Writes per second (ops/s)".into(),
                    y_log: false,
                    bars: bars(r, wr),
                }),
                Panel::Bars(BarPanel {
                    title: format!("Reads/s ({})", plural(readers, "reader")),
                    y_label: "Reads per second (ops/s)".into(),
                    y_log: false,
                    bars: bars(r, rd),
                }),
                Panel::Lines(LinePanel {
                    title: "Writes/s against reader count".into(),
                    x_label: "Reader threads".into(),
                    y_label: "Writes per second (ops/s)".into(),
                    x_log: false,
                    y_log: false,
                    lines: lines_vs_threads(r, "readwhilewriting", "writer_ops_per_sec", |_| true),
                    marks: vec![],
                }),
                Panel::Lines(LinePanel {
                    title: "Reads/s against reader count".into(),
                    x_label: "Reader threads".into(),
                    y_label: "Reads per second (ops/s)".into(),
                    x_log: false,
                    y_log: false,
                    lines: lines_vs_threads(r, "readwhilewriting", "ops_per_sec", |_| true),
                    marks: vec![],
                }),
            ],
            cols: 2,
            legend: engine_legend(r),
        },
    )?;
    let mb = |b: f64| b / 1_048_576.0;
    o.figure(
        "inmem_space",
        Figure {
            title: "Space used".into(),
            panels: vec![
                Panel::Bars(BarPanel {
                    title: "Load Size (after the load)".into(),
                    y_label: "Size on disk (MiB)".into(),
                    y_log: false,
                    bars: bars(r, |e| {
                        r.find(e, "fillseqbatch")
                            .first()
                            .map(|x| mb(f(x, "db_bytes")))
                    }),
                }),
                Panel::Bars(BarPanel {
                    title: "Final Size (after readwhilewriting)".into(),
                    y_label: "Size on disk (MiB)".into(),
                    y_log: false,
                    bars: bars(r, |e| {
                        max_threads(&r.find(e, "readwhilewriting")).map(|x| mb(f(x, "db_bytes")))
                    }),
                }),
                Panel::Bars(BarPanel {
                    title: "Process Size (peak RSS)".into(),
                    y_label: "Peak resident memory (MiB)".into(),
                    y_log: false,
                    bars: bars(r, |e| Some(process_kb(r, e) as f64 / 1024.0)),
                }),
            ],
            cols: 3,
            legend: engine_legend(r),
        },
    )
}
