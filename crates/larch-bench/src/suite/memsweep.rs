//! Seed 002, Symas' Optane SSD / IMDT report: the on-disk database loaded once at the lowest
//! memory limit, then readwhilewriting at each memory limit (some below the database's size,
//! one above it) and each reader count. The report gives the seed's load table, every memory
//! limit and reader count, throughput against memory, and each engine at each limit.

use super::chart::{series_color, Figure, Line, LinePanel, Panel};
use super::plan::{
    list, ondisk_flags, timed, Params, Run, MIB, ONDISK_KEY_BYTES, ONDISK_VALUE_BYTES,
};
use super::render::{
    engine_legend, engine_lines, f, load_table, mib, n0, n2, plural, s, table, u, Out, Results,
    LOAD_NOTE,
};
use super::Suite;
use crate::error::Result;
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::path::Path;

/// The memsweep levels, as multiples of the on-disk memory limit: 5x is where the DB fits.
pub const MEMSWEEP_LEVELS: &[u64] = &[1, 2, 6];

/// The memory limits the sweep runs at (the tiny scale's are fixed: its DB is a few MB).
pub fn memsweep_levels(p: &Params) -> Vec<u64> {
    if p.scale == "tiny" {
        return vec![128 * MIB, 192 * MIB, 256 * MIB];
    }
    MEMSWEEP_LEVELS
        .iter()
        .map(|l| l * p.ondisk_memory)
        .collect()
}

/// Seed 002: the memory sweep over the on-disk database.
pub struct Memsweep;

impl Suite for Memsweep {
    fn name(&self) -> &'static str {
        "memsweep"
    }

    fn title(&self) -> &'static str {
        "002: Symas, Optane SSD / IMDT: the on-disk DB at several memory sizes"
    }

    fn params(&self, p: &Params) -> Value {
        json!({"num": p.ondisk_num(), "key_size": ONDISK_KEY_BYTES,
               "value_size": ONDISK_VALUE_BYTES, "memory_levels": memsweep_levels(p),
               "readers": p.memsweep_readers})
    }

    fn run_s(&self, p: &Params) -> Option<u64> {
        Some(p.sweep_run_s)
    }

    fn plan(&self, p: &Params, db: &Path, seed: u64) -> Result<Vec<Run>> {
        let levels = memsweep_levels(p);
        let mut f = ondisk_flags(db, seed, p);
        f.benchmarks = list(&["fillseqbatch"]);
        f.memory_limit = Some(levels[0]);
        f.cache_size = levels[0] / 4;
        let mut runs = vec![Run::new("load", f.clone())];
        for &m in &levels {
            let mut g = f.clone();
            g.benchmarks = list(&["readwhilewriting"]);
            g.use_existing_db = true;
            g.threads = p.memsweep_readers.clone();
            g.memory_limit = Some(m);
            g.cache_size = m / 4;
            g.drop_caches = true;
            timed(&mut g, p.sweep_run_s, p);
            runs.push(Run::after_previous(format!("mem={}MiB", m / MIB), g));
        }
        Ok(runs)
    }

    fn headline(&self, row: &Value) -> Option<String> {
        Some(format!(
            "{} at {}",
            s(row, "benchmark"),
            mib(u(row, "memory_limit_bytes"))
        ))
    }

    fn render(&self, r: &Results, o: &mut Out) -> Result<()> {
        report(r, o)
    }
}

fn report(r: &Results, o: &mut Out) -> Result<()> {
    let p = &r.header["params"];
    let _ = writeln!(
        o.md,
        "Loading the DB ({} records of 16 B keys and 4000 B values, at the lowest memory \
         limit), the seed's load table:\n",
        u(p, "num")
    );
    o.md.push_str(&load_table(r, "fillseqbatch", false));
    let _ = writeln!(o.md, "\n{LOAD_NOTE}\n");
    let _ = writeln!(
        o.md,
        "readwhilewriting at each memory limit (engine reopened and page cache dropped before \
         each run; engine caches a quarter of the limit):\n"
    );
    let mut rows = Vec::new();
    let mut levels: Vec<u64> = Vec::new();
    for e in r.engines() {
        let mut runs = r.find(&e, "readwhilewriting");
        runs.sort_by_key(|x| (u(x, "memory_limit_bytes"), u(x, "threads")));
        for x in runs {
            let m = u(x, "memory_limit_bytes");
            if !levels.contains(&m) {
                levels.push(m);
            }
            rows.push(vec![
                e.clone(),
                mib(m),
                u(x, "threads").to_string(),
                n0(f(x, "writer_ops_per_sec")),
                n0(f(x, "ops_per_sec")),
                n2(f(x, "p99_us")),
                u(x, "fs_in").to_string(),
            ]);
        }
    }
    levels.sort();
    o.md.push_str(&table(
        &[
            "Engine",
            "Memory",
            "Readers",
            "Writes/Sec",
            "Reads/Sec",
            "Read P99 us",
            "In",
        ],
        &rows,
    ));
    let readers = r
        .ok()
        .filter(|x| s(x, "benchmark") == "readwhilewriting")
        .map(|x| u(x, "threads"))
        .max()
        .unwrap_or(0);
    let vs_mem = |key: &str| -> Vec<Line> {
        let memory_mib = |x: &Value| (u(x, "memory_limit_bytes") >> 20) as f64;
        engine_lines(r, "readwhilewriting", memory_mib, key, |x| {
            u(x, "threads") == readers
        })
    };
    o.figure(
        "memsweep_memory",
        Figure {
            title: format!(
                "Throughput against memory ({}, 1 writer)",
                plural(readers, "reader")
            ),
            panels: vec![
                Panel::Lines(LinePanel {
                    title: "Write throughput".into(),
                    x_label: "Memory limit (MiB)".into(),
                    y_label: "Writes per second (ops/s)".into(),
                    x_log: false,
                    y_log: false,
                    lines: vs_mem("writer_ops_per_sec"),
                    marks: vec![],
                }),
                Panel::Lines(LinePanel {
                    title: "Read throughput".into(),
                    x_label: "Memory limit (MiB)".into(),
                    y_label: "Reads per second (ops/s)".into(),
                    x_log: false,
                    y_log: true,
                    lines: vs_mem("ops_per_sec"),
                    marks: vec![],
                }),
            ],
            cols: 2,
            legend: engine_legend(r),
        },
    )?;
    // The seed's per-engine graphs: one line per memory size, against reader count.
    let mut panels = Vec::new();
    for e in r.engines() {
        if r.find(&e, "readwhilewriting").is_empty() {
            continue;
        }
        for (key, what) in [("ops_per_sec", "Reads"), ("writer_ops_per_sec", "Writes")] {
            let lines: Vec<Line> = levels
                .iter()
                .enumerate()
                .map(|(i, &m)| {
                    let mut pts: Vec<(f64, f64)> = r
                        .find(&e, "readwhilewriting")
                        .into_iter()
                        .filter(|x| u(x, "memory_limit_bytes") == m)
                        .map(|x| (u(x, "threads") as f64, f(x, key)))
                        .collect();
                    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                    Line {
                        name: mib(m),
                        color: series_color(i),
                        points: pts,
                        markers: true,
                    }
                })
                .filter(|l| !l.points.is_empty())
                .collect();
            panels.push(Panel::Lines(LinePanel {
                title: format!("{e}: {what}/s"),
                x_label: "Reader threads".into(),
                y_label: format!("{what} per second (ops/s)"),
                x_log: false,
                y_log: false,
                lines,
                marks: vec![],
            }));
        }
    }
    if !panels.is_empty() {
        o.figure(
            "memsweep_engines",
            Figure {
                title: "Each engine at each memory limit (readwhilewriting)".into(),
                panels,
                cols: 2,
                legend: vec![],
            },
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ondisk_db_is_five_times_memory() {
        let d = Params::default_scale();
        let db = d.ondisk_num() * 4016;
        assert!(db >= 5 * d.ondisk_memory - 4016 && db <= 5 * d.ondisk_memory);
        let levels = memsweep_levels(&d);
        assert!(
            levels.len() >= 3 && *levels.last().unwrap() > db,
            "{levels:?}"
        );
    }
}
