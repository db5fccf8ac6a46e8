//! The YCSB core workloads (not a seed report: the benchmark users compare engines with besides
//! db_bench's): YCSB's load, then workloads A, B, C, F, D and E at each client count, on
//! records of ten 100-byte fields stored as one value (docs/design/bench-method.md, "YCSB").
//! The report gives the load, a table of throughput per workload and client count, the
//! latency of each operation, and the throughput against clients for each workload.

use super::chart::{BarPanel, Figure, LinePanel, Panel};
use super::plan::{base_flags, list, set_num, timed, Params, Run};
use super::render::{bars, engine_legend, f, lines_vs_threads, mib, n0, n2, s, table, u};
use super::render::{Out, Results};
use super::Suite;
use crate::error::Result;
use crate::flags::YCSB_BENCHMARKS;
use crate::ycsb::{FIELD_COUNT_DEFAULT, FIELD_LENGTH_DEFAULT};
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::path::Path;

/// The run phases in the order they run, with YCSB's name for each.
const PHASES: &[(&str, &str)] = &[
    ("ycsb_a", "A: 50% read, 50% update"),
    ("ycsb_b", "B: 95% read, 5% update"),
    ("ycsb_c", "C: 100% read"),
    ("ycsb_f", "F: 50% read, 50% read-modify-write"),
    ("ycsb_d", "D: 95% read latest, 5% insert"),
    ("ycsb_e", "E: 95% scan (1-100), 5% insert"),
];

/// YCSB's record, which the suite runs with: 10 fields of 100 bytes.
const RECORD_BYTES: u64 = (FIELD_COUNT_DEFAULT * FIELD_LENGTH_DEFAULT) as u64;

/// The YCSB suite.
pub struct Ycsb;

impl Suite for Ycsb {
    fn name(&self) -> &'static str {
        "ycsb"
    }

    fn title(&self) -> &'static str {
        "YCSB core workloads A-F (Cooper et al., SoCC 2010; not a seed report)"
    }

    fn params(&self, p: &Params) -> Value {
        json!({"records": p.ycsb_num, "record_bytes": RECORD_BYTES,
               "fields": FIELD_COUNT_DEFAULT, "field_bytes": FIELD_LENGTH_DEFAULT, "clients": p.ycsb_threads,
               "load_cap_s": p.ycsb_load_cap_s, "cache_size": ycsb_cache(p.ycsb_num)})
    }

    fn run_s(&self, p: &Params) -> Option<u64> {
        Some(p.ycsb_run_s)
    }

    fn plan(&self, p: &Params, db: &Path, seed: u64) -> Result<Vec<Run>> {
        let mut f = base_flags(db, seed, p);
        set_num(&mut f, p.ycsb_num, p);
        f.benchmarks = list(YCSB_BENCHMARKS);
        f.threads = p.ycsb_threads.clone();
        f.cache_size = ycsb_cache(p.ycsb_num);
        f.fill_duration_s = p.ycsb_load_cap_s;
        f.series_interval_ms = 0;
        timed(&mut f, p.ycsb_run_s, p);
        Ok(vec![Run::new("load+A-F", f)])
    }

    fn render(&self, r: &Results, o: &mut Out) -> Result<()> {
        report(r, o)
    }
}

/// The engines' caches: the whole data set and its keys (the YCSB runs are in memory, as
/// YCSB's published comparisons of embedded stores mostly are), at least 64 MiB.
fn ycsb_cache(records: u64) -> u64 {
    (records.saturating_mul(RECORD_BYTES + 32).saturating_mul(2) >> 20 << 20).max(64 << 20)
}

fn report(r: &Results, o: &mut Out) -> Result<()> {
    let p = &r.header["params"];
    let run = match u(p, "run_s") {
        0 => format!("{} operations per client", u(p, "reads_per_reader")),
        secs => format!("{secs} s"),
    };
    let _ = writeln!(
        o.md,
        "{} records of {} B (10 fields of 100 B, stored as one value) under `user<hash>` keys; \
         engine caches {}. The load inserts one record a transaction; each workload then runs \
         {run} on each client count, the workloads in YCSB's order (A, B, C, F, D, E: the two \
         that insert last). Updates write a whole record, read-modify-writes read it and write \
         it back with one field changed, each write its own transaction without a sync.\n",
        u(p, "records"),
        u(p, "record_bytes"),
        mib(u(p, "cache_size")),
    );
    let _ = writeln!(o.md, "### Load\n");
    let mut rows = Vec::new();
    for e in r.engines() {
        let Some(x) = r.find(&e, "ycsb_load").into_iter().next() else {
            continue;
        };
        rows.push(vec![
            e.clone(),
            u(x, "ops").to_string(),
            n0(f(x, "ops_per_sec")),
            n2(f(x, "wall_s")),
            n2(f(x, "p99_us")),
            n2(f(x, "wamp")),
            format!("{:.0}", u(x, "db_bytes") as f64 / 1048576.0),
        ]);
    }
    o.md.push_str(&table(
        &[
            "Engine",
            "Records",
            "Inserts/s",
            "Wall s",
            "P99 us",
            "wamp",
            "DB MiB",
        ],
        &rows,
    ));
    let capped: Vec<String> = r
        .ok()
        .filter(|x| s(x, "benchmark") == "ycsb_load" && s(x, "message").contains("capped"))
        .map(|x| format!("{} {}", s(x, "engine"), s(x, "message")))
        .collect();
    if !capped.is_empty() {
        let _ = writeln!(
            o.md,
            "\nLoads stopped by the cap, their workloads run on the records loaded: {}.",
            capped.join("; ")
        );
    }
    let threads = thread_counts(r);
    let _ = writeln!(o.md, "\n### Throughput (operations per second)\n");
    let mut head = vec!["Workload".to_string(), "Clients".to_string()];
    let engines = r.engines();
    head.extend(engines.iter().cloned());
    let mut rows = Vec::new();
    for (bench, what) in PHASES {
        for &t in &threads {
            let mut row = vec![what.to_string(), t.to_string()];
            for e in &engines {
                let x = r.find(e, bench).into_iter().find(|x| u(x, "threads") == t);
                row.push(x.map_or(String::new(), |x| n0(f(x, "ops_per_sec"))));
            }
            rows.push(row);
        }
    }
    let head: Vec<&str> = head.iter().map(String::as_str).collect();
    o.md.push_str(&table(&head, &rows));
    let _ = writeln!(
        o.md,
        "\n### Latency of each operation (P99, microseconds)\n"
    );
    let top = threads.last().copied().unwrap_or(1);
    let mut rows = Vec::new();
    for (bench, what) in PHASES {
        for e in &engines {
            let Some(x) = r
                .find(e, bench)
                .into_iter()
                .find(|x| u(x, "threads") == top)
            else {
                continue;
            };
            rows.push(vec![
                what.to_string(),
                e.clone(),
                op_p99s(s(x, "message")),
                n2(f(x, "p999_us")),
            ]);
        }
    }
    let _ = writeln!(
        o.md,
        "At {top} client(s); each operation's P99 from its own histogram, P99.9 of all \
         operations together.\n"
    );
    o.md.push_str(&table(
        &["Workload", "Engine", "P99 by operation", "P99.9 all us"],
        &rows,
    ));
    let mut panels = Vec::new();
    if threads.len() > 1 {
        for (bench, what) in PHASES {
            panels.push(Panel::Lines(LinePanel {
                title: what.to_string(),
                x_label: "Client threads".into(),
                y_label: "Operations per second".into(),
                x_log: false,
                y_log: true,
                lines: lines_vs_threads(r, bench, "ops_per_sec", |_| true),
                marks: vec![],
            }));
        }
    } else {
        for (bench, what) in PHASES {
            panels.push(Panel::Bars(BarPanel {
                title: what.to_string(),
                y_label: "Operations per second".into(),
                y_log: false,
                bars: bars(r, |e| r.find(e, bench).first().map(|x| f(x, "ops_per_sec"))),
            }));
        }
    }
    o.figure(
        "ycsb_throughput",
        Figure {
            title: "YCSB core workloads: throughput against client threads".into(),
            panels,
            cols: 3,
            legend: engine_legend(r),
        },
    )?;
    o.figure(
        "ycsb_load",
        Figure {
            title: "YCSB load: inserts per second, one record a transaction".into(),
            panels: vec![Panel::Bars(BarPanel {
                title: "Load".into(),
                y_label: "Inserts per second".into(),
                y_log: false,
                bars: bars(r, |e| {
                    r.find(e, "ycsb_load").first().map(|x| f(x, "ops_per_sec"))
                }),
            })],
            cols: 1,
            legend: vec![],
        },
    )
}

/// The client counts the run phases ran at, ascending.
fn thread_counts(r: &Results) -> Vec<u64> {
    let mut t: Vec<u64> = r
        .ok()
        .filter(|x| s(x, "benchmark").starts_with("ycsb_") && s(x, "benchmark") != "ycsb_load")
        .map(|x| u(x, "threads"))
        .collect();
    t.sort_unstable();
    t.dedup();
    t
}

/// "read 3.1, update 12.0" from a run phase's message "(read 475123 p99 3.1us, update 24877
/// p99 12.0us; found:475123)".
fn op_p99s(message: &str) -> String {
    message
        .trim_start_matches('(')
        .split(';')
        .next()
        .unwrap_or("")
        .split(", ")
        .filter_map(|part| {
            let mut w = part.split(' ');
            let op = w.next()?;
            let p99 = w.nth(2)?.trim_end_matches("us");
            Some(format!("{op} {p99}"))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_operation_p99s_come_from_the_message() {
        assert_eq!(
            op_p99s("(read 475123 p99 3.1us, update 24877 p99 12.0us; found:475123)"),
            "read 3.1, update 12.0"
        );
        assert_eq!(op_p99s(""), "");
    }
}
