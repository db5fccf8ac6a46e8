//! Seed 003, Tupl on an Intel Optane 900P: threads insert random distinct 8-byte keys with
//! empty values (one transaction each), then update every inserted record, then insert new
//! ones, each phase capped in time. The report gives each phase's count and rate per engine,
//! the rates over time and the records written over time.

use super::chart::{engine_color, series_color, Figure, Line, LinePanel, Panel};
use super::plan::{base_flags, list, set_num, Params, Run};
use super::render::{
    engine_legend, f, hms, mib, n0, process_kb, rates, series_threads, summed, table,
    thread_points, u, Out, Results,
};
use super::Suite;
use crate::error::Result;
use crate::flags::KeyFormat;
use plotters::style::RGBColor;
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::path::Path;

/// Seed 003: Tupl's insert, update, insert run.
pub struct Tupl;

impl Suite for Tupl {
    fn name(&self) -> &'static str {
        "tupl"
    }

    fn title(&self) -> &'static str {
        "003: Tupl, Intel Optane 900P: random inserts, then updates, then inserts"
    }

    fn params(&self, p: &Params) -> Value {
        json!({"inserts": p.tupl_inserts, "more_inserts": p.tupl_more,
               "key_size": 8, "value_size": 0, "threads": p.tupl_threads,
               "memory_limit": p.tupl_memory, "cache_size": p.tupl_memory / 4,
               "insert_cap_s": p.tupl_fill_cap_s, "phase_cap_s": p.tupl_phase_cap_s})
    }

    /// None: its phases are capped (insert_cap_s, phase_cap_s), not timed.
    fn run_s(&self, _: &Params) -> Option<u64> {
        None
    }

    fn plan(&self, p: &Params, db: &Path, seed: u64) -> Result<Vec<Run>> {
        let mut f = base_flags(db, seed, p);
        let universe = p.tupl_inserts + p.tupl_more;
        set_num(&mut f, universe, p);
        f.writes = p.tupl_inserts;
        f.key_size = 8;
        f.key_format = KeyFormat::RocksDb;
        f.value_size = 0;
        f.benchmarks = list(&["fillunique_mt", "updateunique_mt", "insertunique_mt"]);
        f.threads = vec![p.tupl_threads];
        f.memory_limit = Some(p.tupl_memory);
        f.cache_size = p.tupl_memory / 4;
        f.fill_duration_s = p.tupl_fill_cap_s;
        f.duration_s = p.tupl_phase_cap_s;
        Ok(vec![Run::new("insert+update+insert", f)])
    }

    fn render(&self, r: &Results, o: &mut Out) -> Result<()> {
        report(r, o)
    }
}

const TUPL_PHASES: &[(&str, &str)] = &[
    ("fillunique_mt", "inserts"),
    ("updateunique_mt", "updates"),
    ("insertunique_mt", "more inserts"),
];

fn report(r: &Results, o: &mut Out) -> Result<()> {
    let p = &r.header["params"];
    let _ = writeln!(
        o.md,
        "{} threads insert random distinct 8-byte keys with 0-byte values into a new database \
         (one transaction per insert) until {} records or the time cap, then update every \
         inserted record, then insert new records; memory limit {} per engine process.\n",
        u(p, "threads"),
        u(p, "inserts"),
        mib(u(p, "memory_limit"))
    );
    let mut rows = Vec::new();
    let mut rate_panels = Vec::new();
    let mut progress = Vec::new();
    for e in r.engines() {
        let mut row = vec![e.clone()];
        let mut offset = 0.0;
        let mut rate_lines = Vec::new();
        let mut marks = Vec::new();
        let mut cum_pts: Vec<(f64, f64)> = Vec::new();
        let mut cum = 0.0;
        let mut last: Option<&Value> = None;
        for (i, (bench, what)) in TUPL_PHASES.iter().enumerate() {
            let Some(x) = r.find(&e, bench).first().copied() else {
                row.extend([String::new(), String::new()]);
                continue;
            };
            row.push(u(x, "ops").to_string());
            row.push(n0(f(x, "ops_per_sec")));
            let threads: Vec<Vec<(f64, f64)>> =
                series_threads(x).iter().map(|t| thread_points(t)).collect();
            let sum = summed(&threads, 120);
            if i > 0 {
                marks.push((offset, (*what).to_string()));
            }
            rate_lines.push(Line {
                name: format!("{what}/s"),
                color: if i == 1 {
                    series_color(9)
                } else {
                    engine_color(&e)
                },
                points: rates(&sum)
                    .into_iter()
                    .map(|(t, v)| (t + offset, v))
                    .collect(),
                markers: false,
            });
            cum_pts.extend(sum.iter().map(|&(t, v)| (t + offset, cum + v)));
            cum += u(x, "ops") as f64;
            offset += f(x, "wall_s").max(0.0);
            last = Some(x);
        }
        if let Some(x) = last {
            row.push(n0(f(x, "db_bytes") / 1024.0));
            row.push(process_kb(r, &e).to_string());
            row.push(hms(offset));
        }
        rows.push(row);
        rate_panels.push(Panel::Lines(LinePanel {
            title: e.clone(),
            x_label: "Time (s)".into(),
            y_label: "Records per second (ops/s)".into(),
            x_log: false,
            y_log: false,
            lines: rate_lines,
            marks,
        }));
        progress.push(Line {
            name: e.clone(),
            color: engine_color(&e),
            points: cum_pts,
            markers: false,
        });
    }
    o.md.push_str(&table(
        &[
            "Engine",
            "Inserts",
            "Inserts/s",
            "Updates",
            "Updates/s",
            "More inserts",
            "Inserts/s (more)",
            "Final Size KB",
            "Process Size KB",
            "Total time",
        ],
        &rows,
    ));
    if rate_panels.is_empty() {
        return Ok(());
    }
    o.figure(
        "tupl_rates",
        Figure {
            title: "Inserts/s, then updates/s, then inserts/s over time (8 B keys, 0 B values)"
                .into(),
            panels: rate_panels,
            cols: 2,
            // Each panel is one engine: inserts in its colour, updates in one colour for all.
            legend: vec![
                (
                    "inserts/s (in the engine's colour)".into(),
                    RGBColor(90, 90, 90),
                ),
                ("updates/s".into(), series_color(9)),
            ],
        },
    )?;
    o.figure(
        "tupl_progress",
        Figure {
            title: "Records written over time (inserts, then updates, then inserts)".into(),
            panels: vec![Panel::Lines(LinePanel {
                title: "Cumulative records written (the slope is the rate)".into(),
                x_label: "Time (s)".into(),
                y_label: "Records written".into(),
                x_log: false,
                y_log: false,
                lines: progress,
                marks: vec![],
            })],
            cols: 1,
            legend: engine_legend(r),
        },
    )
}
