//! The sizes each `--scale` gives the suites ([`Params`]), and what their plans share: the
//! [`Run`] a suite asks for, the flags every run starts from and the helpers that set counts,
//! and [`plan`], which makes a suite's runs into [`Step`]s, once for each engine.

use super::Suite;
use crate::error::{Error, Result};
use crate::flags::Flags;
use serde_json::{json, Value};
use std::path::Path;

pub(super) const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// Bytes of one on-disk record (16-byte key, 4000-byte value), seeds 000 and 002.
pub const ONDISK_KEY_BYTES: usize = 16;
pub const ONDISK_VALUE_BYTES: usize = 4000;
/// The on-disk database is this many times the memory limit (seed 000: 300 GB over 64 GB).
pub const ONDISK_DB_OVER_MEMORY: u64 = 5;
/// Memory limits under which an engine's process is not starved of its own working memory:
/// scaled-down limits stop here. Why: RocksDB with its default options (64 MiB memtables, a
/// second one being flushed, table readers' filters and indexes outside the cache) plus a
/// block cache of a quarter of the limit must fit, or the cgroup's OOM killer ends it. Seen:
/// with 4000-byte values it was killed at 128 MiB during the load, and during readwhilewriting
/// at 256 MiB (RSS 274 MB) and at 512 MiB (RSS 535 MB, growing by about 100 MB per 3-second
/// run as the writer adds SST files).
pub const ONDISK_MEMORY_MIN_BYTES: u64 = 1024 * MIB;
/// The same for tupl's 8-byte records (small memtable entries, 10-bit filters per key).
pub const TUPL_MEMORY_MIN_BYTES: u64 = 384 * MIB;
/// The tiny scale's limit: its databases are a few MB, so no engine comes near it.
pub const MEMORY_LIMIT_TINY_BYTES: u64 = 128 * MIB;

/// Every size a suite takes from `--scale`.
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    pub scale: String,
    /// Seconds a timed run (readwhilewriting and the other read phases) lasts; 0 = counted:
    /// each reader does `reads` operations.
    pub run_s: u64,
    pub reads: u64,
    /// Seconds of each memsweep readwhilewriting run and of each pmemkv read/mixed run (0:
    /// counted as `run_s`).
    pub sweep_run_s: u64,
    pub pmemkv_run_s: u64,
    /// Per-thread time-series sampling interval (ms).
    pub series_ms: u64,
    pub inmem_num: u64,
    pub inmem_readers: Vec<usize>,
    pub ondisk_memory: u64,
    pub ondisk_readers: Vec<usize>,
    pub memsweep_readers: Vec<usize>,
    pub tupl_memory: u64,
    pub tupl_threads: usize,
    pub tupl_inserts: u64,
    pub tupl_more: u64,
    /// Caps on the tupl phases (s): the first inserts, then updates and the later inserts.
    pub tupl_fill_cap_s: u64,
    pub tupl_phase_cap_s: u64,
    pub pmemkv_num: u64,
    pub pmemkv_fill_cap_s: u64,
    /// YCSB: records loaded, client thread counts, seconds of each workload at each count
    /// (0: counted, `reads` operations per client), cap on the load (s, 0: none).
    pub ycsb_num: u64,
    pub ycsb_threads: Vec<usize>,
    pub ycsb_run_s: u64,
    pub ycsb_load_cap_s: u64,
}

impl Params {
    /// The default: each suite in under 30 minutes on 2 cores and 24 GiB with all engines.
    pub fn default_scale() -> Params {
        Params {
            scale: "default".into(),
            run_s: 15,
            reads: 0,
            sweep_run_s: 10,
            pmemkv_run_s: 3,
            series_ms: 1000,
            inmem_num: 10_000_000,
            inmem_readers: vec![1, 2, 4],
            ondisk_memory: ONDISK_MEMORY_MIN_BYTES,
            ondisk_readers: vec![1, 2, 4],
            memsweep_readers: vec![1, 2, 4],
            tupl_memory: TUPL_MEMORY_MIN_BYTES,
            tupl_threads: 4,
            tupl_inserts: 32_000_000,
            tupl_more: 8_000_000,
            tupl_fill_cap_s: 90,
            tupl_phase_cap_s: 30,
            pmemkv_num: 1_000_000,
            pmemkv_fill_cap_s: 10,
            ycsb_num: 1_000_000,
            ycsb_threads: vec![1, 4],
            ycsb_run_s: 5,
            ycsb_load_cap_s: 60,
        }
    }

    pub fn for_scale(scale: &str) -> Result<Params> {
        let d = Params::default_scale();
        let p = match scale {
            "default" => d,
            "tiny" => Params {
                scale: "tiny".into(),
                run_s: 0,
                reads: 1000,
                sweep_run_s: 0,
                pmemkv_run_s: 0,
                series_ms: 50,
                inmem_num: 5000,
                inmem_readers: vec![1, 2],
                ondisk_memory: MEMORY_LIMIT_TINY_BYTES,
                ondisk_readers: vec![1, 2],
                memsweep_readers: vec![1],
                tupl_memory: MEMORY_LIMIT_TINY_BYTES,
                tupl_threads: 2,
                tupl_inserts: 20_000,
                tupl_more: 5_000,
                tupl_fill_cap_s: 0,
                tupl_phase_cap_s: 0,
                pmemkv_num: 3000,
                pmemkv_fill_cap_s: 0,
                ycsb_num: 3000,
                ycsb_threads: vec![1, 2],
                ycsb_run_s: 0,
                ycsb_load_cap_s: 0,
            },
            "small" => Params {
                scale: "small".into(),
                run_s: 4,
                sweep_run_s: 3,
                pmemkv_run_s: 1,
                series_ms: 250,
                inmem_num: 1_000_000,
                ondisk_memory: ONDISK_MEMORY_MIN_BYTES,
                tupl_memory: TUPL_MEMORY_MIN_BYTES,
                tupl_inserts: 6_000_000,
                tupl_more: 1_500_000,
                tupl_fill_cap_s: 30,
                tupl_phase_cap_s: 12,
                pmemkv_num: 200_000,
                pmemkv_fill_cap_s: 5,
                ycsb_num: 200_000,
                ycsb_run_s: 2,
                ycsb_load_cap_s: 20,
                ..d
            },
            "seed" => Params {
                scale: "seed".into(),
                run_s: 600,
                sweep_run_s: 600,
                pmemkv_run_s: 0,
                reads: 10_000_000,
                series_ms: 10_000,
                inmem_num: 1_000_000_000,
                inmem_readers: vec![1, 2, 4, 8, 16],
                ondisk_memory: 64 * GIB,
                ondisk_readers: vec![1, 2, 4, 8, 16, 32, 64],
                memsweep_readers: vec![1, 2, 4, 8, 16, 32, 63],
                tupl_memory: 16 * GIB,
                tupl_threads: 16,
                tupl_inserts: 5_400_000_000,
                tupl_more: 2_700_000_000,
                tupl_fill_cap_s: 12 * 3600,
                tupl_phase_cap_s: 6 * 3600,
                pmemkv_num: 10_000_000,
                pmemkv_fill_cap_s: 0,
                // YCSB's papers load 10^7-10^8 records and run each workload for minutes.
                ycsb_num: 100_000_000,
                ycsb_threads: vec![1, 2, 4, 8, 16],
                ycsb_run_s: 300,
                ycsb_load_cap_s: 0,
            },
            other => {
                let f: f64 = other.parse().map_err(|_| {
                    Error::Usage(format!(
                        "--scale expects tiny, small, default, seed or a number, got {other:?}"
                    ))
                })?;
                if !(f > 0.0 && f <= 1000.0) {
                    return Err(Error::Usage(format!("--scale={f} must be in (0, 1000]")));
                }
                let n = |x: u64| ((x as f64 * f).round() as u64).max(1000);
                let m = |x: u64, min: u64| ((x as f64 * f) as u64 / MIB * MIB).max(min);
                Params {
                    scale: other.to_string(),
                    inmem_num: n(d.inmem_num),
                    ondisk_memory: m(d.ondisk_memory, ONDISK_MEMORY_MIN_BYTES),
                    tupl_memory: m(d.tupl_memory, TUPL_MEMORY_MIN_BYTES),
                    tupl_inserts: n(d.tupl_inserts),
                    tupl_more: n(d.tupl_more),
                    pmemkv_num: n(d.pmemkv_num),
                    ycsb_num: n(d.ycsb_num),
                    ..d
                }
            }
        };
        Ok(p)
    }

    /// Records in the on-disk database: ONDISK_DB_OVER_MEMORY times the memory limit.
    pub fn ondisk_num(&self) -> u64 {
        if self.scale == "tiny" {
            return 2000;
        }
        self.ondisk_memory * ONDISK_DB_OVER_MEMORY / (ONDISK_KEY_BYTES + ONDISK_VALUE_BYTES) as u64
    }

    /// The header's "params": the sizes `suite` takes at this scale, how long its read phases
    /// run (when it has timed ones) and the sampling interval.
    pub fn to_json(&self, suite: &dyn Suite) -> Value {
        let run = match suite.run_s(self) {
            None => json!({}),
            Some(secs) if secs > 0 => json!({"run_s": secs}),
            Some(_) => json!({"reads_per_reader": self.reads}),
        };
        let mut v = suite.params(self);
        if let (Value::Object(m), Value::Object(r)) = (&mut v, run) {
            m.extend(r);
            m.insert("series_interval_ms".into(), self.series_ms.into());
        }
        v
    }
}

/// The in-memory suites' engine caches: three times the raw data, so that every engine with a
/// cache of its own holds the whole database (as the seed's 64 GB caches for a 116 GB DB on
/// 128 GB did for the engines that honoured them), at least 64 MiB.
pub fn inmem_cache(num: u64, record_bytes: u64) -> u64 {
    (num.saturating_mul(record_bytes).saturating_mul(3) / MIB * MIB).max(64 * MIB)
}

/// One driver run of a suite's plan, made for every engine by [`plan`].
#[derive(Debug, Clone)]
pub struct Run {
    pub label: String,
    pub flags: Flags,
    /// Runs on the database the engine's previous run made (see [`Step::needs_previous`]).
    pub needs_previous: bool,
}

impl Run {
    /// A run that makes its own database.
    pub fn new(label: impl Into<String>, flags: Flags) -> Run {
        Run {
            label: label.into(),
            flags,
            needs_previous: false,
        }
    }

    /// A run on the database the engine's previous run made.
    pub fn after_previous(label: impl Into<String>, flags: Flags) -> Run {
        Run {
            needs_previous: true,
            ..Run::new(label, flags)
        }
    }
}

/// One driver run for one engine.
#[derive(Debug, Clone)]
pub struct Step {
    pub engine: String,
    pub label: String,
    pub flags: Flags,
    /// Runs on a database an earlier step of this engine made (skipped if that one failed).
    pub needs_previous: bool,
    /// The engine's database can be removed after this step.
    pub last_for_engine: bool,
}

impl Step {
    /// The driver's arguments (the step's engine only).
    pub fn args(&self) -> Vec<String> {
        self.flags.to_child_args(&self.engine)
    }
}

pub(super) fn base_flags(db: &Path, seed: u64, p: &Params) -> Flags {
    let mut f = Flags {
        db: db.to_path_buf(),
        seed,
        progress: false,
        series_interval_ms: p.series_ms,
        duration_s: p.run_s,
        ..Flags::default()
    };
    f.threads = vec![1];
    f
}

/// The flags of a run on the on-disk database of seeds 000 and 002: its records and their sizes.
pub(super) fn ondisk_flags(db: &Path, seed: u64, p: &Params) -> Flags {
    let mut f = base_flags(db, seed, p);
    set_num(&mut f, p.ondisk_num(), p);
    f.key_size = ONDISK_KEY_BYTES;
    f.value_size = ONDISK_VALUE_BYTES;
    f
}

/// Sets num and the counts that follow it (db_bench's -1 = num), then reads for counted runs.
pub(super) fn set_num(f: &mut Flags, num: u64, p: &Params) {
    f.num = num;
    f.writes = num;
    f.deletes = num;
    f.reads = if p.run_s > 0 { num } else { p.reads.min(num) };
}

/// Runs the read phases of `f` for `secs` seconds, or counted (`reads` per reader) when 0.
pub(super) fn timed(f: &mut Flags, secs: u64, p: &Params) {
    f.duration_s = secs;
    f.reads = if secs > 0 { f.num } else { p.reads.min(f.num) };
}

pub(super) fn list(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// The plan of `suite` for `engines` (databases under `db`): the suite's runs for each engine
/// in turn, the last of an engine's marked so that its database is removed after it.
pub fn plan(
    suite: &dyn Suite,
    p: &Params,
    engines: &[String],
    db: &Path,
    seed: u64,
) -> Result<Vec<Step>> {
    let runs = suite.plan(p, db, seed)?;
    let mut steps = Vec::new();
    for e in engines {
        let first = steps.len();
        steps.extend(runs.iter().map(|r| Step {
            engine: e.clone(),
            label: r.label.clone(),
            flags: r.flags.clone(),
            needs_previous: r.needs_previous,
            last_for_engine: false,
        }));
        if steps.len() > first {
            if let Some(last) = steps.last_mut() {
                last.last_for_engine = true;
            }
        }
    }
    // Every step's flags must be a valid driver command line.
    for s in &steps {
        Flags::parse(&s.args())?;
    }
    Ok(steps)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_parse_and_grow() {
        let tiny = Params::for_scale("tiny").unwrap();
        let d = Params::for_scale("default").unwrap();
        let seed = Params::for_scale("seed").unwrap();
        assert!(tiny.inmem_num < d.inmem_num && d.inmem_num < seed.inmem_num);
        assert_eq!(seed.inmem_num, 1_000_000_000);
        assert_eq!(seed.ondisk_num(), 64 * GIB * 5 / 4016);
        let half = Params::for_scale("0.5").unwrap();
        assert_eq!(half.inmem_num, 5_000_000);
        assert!(half.ondisk_memory >= ONDISK_MEMORY_MIN_BYTES);
        assert!(half.tupl_memory >= TUPL_MEMORY_MIN_BYTES);
        assert!(Params::for_scale("huge").is_err());
        assert!(Params::for_scale("0").is_err());
    }

    #[test]
    fn every_suite_plans_valid_driver_runs() {
        let engines = vec!["larch".to_string(), "lmdb".to_string()];
        for scale in ["tiny", "small", "default", "seed", "2"] {
            let p = Params::for_scale(scale).unwrap();
            for &s in super::super::all() {
                let steps = plan(s, &p, &engines, Path::new("/tmp/x"), 42).unwrap();
                assert!(!steps.is_empty());
                assert_eq!(steps.iter().filter(|s| s.last_for_engine).count(), 2);
                for st in &steps {
                    let f = Flags::parse(&st.args()).unwrap();
                    assert_eq!(f.engines, vec![st.engine.clone()]);
                }
            }
        }
    }
}
