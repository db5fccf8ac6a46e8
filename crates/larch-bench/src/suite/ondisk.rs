//! Seed 000, Symas' LMDB vs RocksDB on an Intel Optane SSD: a database five times the memory
//! limit (16-byte keys, 4000-byte values) loaded by fillseqbatch, then readwhilewriting at each
//! reader count with the page cache dropped first. The report gives the seed's load table,
//! readwhilewriting at every reader count, and the load and throughput figures.

use super::chart::{BarPanel, Figure, Panel};
use super::plan::{list, ondisk_flags, Params, Run, ONDISK_KEY_BYTES, ONDISK_VALUE_BYTES};
use super::render::{
    bars, engine_legend, f, load_table, mib, n0, n2, rww_vs_readers, table, u, Out, Results,
    LOAD_NOTE,
};
use super::Suite;
use crate::error::Result;
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::path::Path;

/// Seed 000: the on-disk suite.
pub struct Ondisk;

impl Suite for Ondisk {
    fn name(&self) -> &'static str {
        "ondisk"
    }

    fn title(&self) -> &'static str {
        "000: Symas, LMDB vs RocksDB, Intel Optane SSD (DB 5x RAM)"
    }

    fn params(&self, p: &Params) -> Value {
        json!({"num": p.ondisk_num(), "key_size": ONDISK_KEY_BYTES,
               "value_size": ONDISK_VALUE_BYTES, "memory_limit": p.ondisk_memory,
               "cache_size": p.ondisk_memory / 4, "readers": p.ondisk_readers})
    }

    fn plan(&self, p: &Params, db: &Path, seed: u64) -> Result<Vec<Run>> {
        let mut f = ondisk_flags(db, seed, p);
        f.benchmarks = list(&["fillseqbatch", "readwhilewriting"]);
        f.threads = p.ondisk_readers.clone();
        f.memory_limit = Some(p.ondisk_memory);
        f.cache_size = p.ondisk_memory / 4;
        f.drop_caches = true;
        Ok(vec![Run::new("load+run", f)])
    }

    fn render(&self, r: &Results, o: &mut Out) -> Result<()> {
        report(r, o)
    }
}

fn report(r: &Results, o: &mut Out) -> Result<()> {
    let p = &r.header["params"];
    let _ = writeln!(
        o.md,
        "Loading the DB ({} records of 16 B keys and 4000 B values, fillseqbatch with 1000 \
         records per transaction, memory limit {} for each engine's process, page cache \
         included):\n",
        u(p, "num"),
        mib(u(p, "memory_limit"))
    );
    o.md.push_str(&load_table(r, "fillseqbatch", true));
    let _ = writeln!(o.md, "\n{LOAD_NOTE}\n");
    let _ = writeln!(
        o.md,
        "readwhilewriting (engine reopened and page cache dropped before each run; one writer \
         updating existing records):\n"
    );
    let mut rows = Vec::new();
    for e in r.engines() {
        let mut runs = r.find(&e, "readwhilewriting");
        runs.sort_by_key(|x| u(x, "threads"));
        for x in runs {
            rows.push(vec![
                e.clone(),
                u(x, "threads").to_string(),
                n0(f(x, "writer_ops_per_sec")),
                n0(f(x, "ops_per_sec")),
                n2(f(x, "p99_us")),
                n0(f(x, "cpu_pct")),
                u(x, "fs_in").to_string(),
                u(x, "fs_out").to_string(),
                n0(f(x, "db_bytes") / 1024.0),
            ]);
        }
    }
    o.md.push_str(&table(
        &[
            "Engine",
            "Readers",
            "Writes/Sec",
            "Reads/Sec",
            "Read P99 us",
            "CPU%",
            "In",
            "Out",
            "Final Size KB",
        ],
        &rows,
    ));
    o.figure(
        "ondisk_load",
        Figure {
            title: "Loading the DB (5x the memory limit)".into(),
            panels: vec![
                Panel::Bars(BarPanel {
                    title: "Load wall time".into(),
                    y_label: "Wall time (s)".into(),
                    y_log: false,
                    bars: bars(r, |e| {
                        r.find(e, "fillseqbatch").first().map(|x| f(x, "wall_s"))
                    }),
                }),
                Panel::Bars(BarPanel {
                    title: "Write amplification".into(),
                    y_label: "FS blocks out per record (512 B)".into(),
                    y_log: false,
                    bars: bars(r, |e| {
                        r.find(e, "fillseqbatch")
                            .first()
                            .map(|x| u(x, "fs_out") as f64 / u(x, "ops").max(1) as f64)
                    }),
                }),
            ],
            cols: 2,
            legend: engine_legend(r),
        },
    )?;
    rww_vs_readers(r, o, "ondisk_readwhilewriting", |_| true, "")
}
