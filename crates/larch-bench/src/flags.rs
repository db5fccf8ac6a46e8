//! Command-line flags with db_bench's names, syntax (`--name=value`, booleans 0/1) and defaults.

use crate::error::{Error, Result};
use std::path::PathBuf;

/// How integer key `k` becomes bytes. Both keep lexical order equal to numeric order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyFormat {
    /// `snprintf("%016d", k)` as LevelDB's db_bench and Symas' drivers (width = --key_size).
    Decimal,
    /// RocksDB's `GenerateKeyFromInt`: 8 bytes big-endian, padded with ASCII '0' to key_size.
    RocksDb,
}

/// Every flag the driver understands, resolved to its final value.
#[derive(Debug, Clone)]
pub struct Flags {
    pub engines: Vec<String>,
    pub db: PathBuf,
    pub benchmarks: Vec<String>,
    pub num: u64,
    /// -1 in db_bench terms resolves to `num`.
    pub reads: u64,
    pub writes: u64,
    pub deletes: u64,
    pub threads: Vec<usize>,
    pub duration_s: u64,
    pub key_size: usize,
    pub value_size: usize,
    pub batch_size: usize,
    pub sync: bool,
    pub use_existing_db: bool,
    pub histogram: bool,
    pub stats_interval: u64,
    pub seed: u64,
    pub cache_size: u64,
    pub compression_ratio: f64,
    pub memory_limit: Option<u64>,
    pub drop_caches: bool,
    pub json: Option<PathBuf>,
    pub csv: Option<PathBuf>,
    pub key_format: KeyFormat,
    pub readwritepercent: u32,
    pub seek_nexts: u64,
    pub bloom_bits: u32,
    /// Larch's `Options::background_nice` (0: the engine's default).
    pub background_nice: u8,
    /// Larch's `Options::checkpoint_slices` (0: the engine's default, by the file's size; 1:
    /// the whole overlay).
    pub checkpoint_slices: u32,
    pub progress: bool,
    /// First index of the key permutation that the *unique_mt benchmarks use (0).
    pub key_offset: u64,
    /// Per-thread cumulative-ops samples every this many ms, in the JSON `series` (0: off).
    pub series_interval_ms: u64,
    /// Caps fresh fills at this many seconds (0: no cap; they run --writes operations).
    pub fill_duration_s: u64,
    /// Fills run on --threads threads, each doing --writes puts (db_bench's semantics); with a
    /// thread list, each pass then loads afresh.
    pub fill_threads: bool,
    /// db_bench's `--benchmark_write_rate_limit`: the writer of readwhilewriting is held to
    /// this many bytes of key and value a second (0: as fast as it goes), so that readers can
    /// be compared beside writers going at one rate. Other benchmarks ignore it.
    pub write_rate_limit: u64,
    /// YCSB's `fieldcount` and `fieldlength`: a record of the ycsb_* benchmarks is one value
    /// of fieldcount x fieldlength bytes (10 x 100).
    pub ycsb_fieldcount: usize,
    pub ycsb_fieldlength: usize,
    /// Each engine runs the whole benchmark list this many times, each in a process of its
    /// own; the summary and the verdict give the median and the spread (1).
    pub repeat: usize,
}

pub const NUM_MAX: u64 = 1 << 40;
pub const THREADS_MAX: usize = 1024;
pub const KEY_BYTES_MAX: usize = 4096;
pub const VALUE_BYTES_MAX: usize = 64 << 20;
pub const BATCH_MAX: usize = 1 << 20;

pub const DEFAULT_BENCHMARKS: &str =
    "fillseq,fillsync,fillrandom,overwrite,readrandom,readseq,readreverse,readmissing,seekrandom";

/// Benchmarks the runner knows; anything else is a usage error before any engine starts.
pub const KNOWN_BENCHMARKS: &[&str] = &[
    "fillseq",
    "fillrandom",
    "filluniquerandom",
    "overwrite",
    "overwritepinned",
    "fillsync",
    "fillseqsync",
    "fillrandsync",
    "fillsync_mt",
    "fillbatch",
    "fillseqbatch",
    "fillrandbatch",
    "readseq",
    "readreverse",
    "readrandom",
    "readmissing",
    "seekrandom",
    "readwhilewriting",
    "readrandomwriterandom",
    "updaterandom",
    "deleterandom",
    "deleteseq",
    "fillunique_mt",
    "updateunique_mt",
    "insertunique_mt",
    "ycsb_load",
    "ycsb_a",
    "ycsb_b",
    "ycsb_c",
    "ycsb_d",
    "ycsb_e",
    "ycsb_f",
];

/// `--benchmarks=ycsb`: YCSB's load, then the core workloads in the order YCSB's documentation
/// runs them (A, B, C, F, D, E: the two that insert last, so the others see the loaded
/// records only).
pub const YCSB_BENCHMARKS: &[&str] = &[
    "ycsb_load",
    "ycsb_a",
    "ycsb_b",
    "ycsb_c",
    "ycsb_f",
    "ycsb_d",
    "ycsb_e",
];

/// Most runs of each engine `--repeat` takes.
pub const REPEAT_MAX: usize = 100;

impl Default for Flags {
    fn default() -> Self {
        // SAFETY: getuid has no preconditions and cannot fail.
        let uid = unsafe { libc::getuid() };
        Flags {
            engines: vec!["larch".into(), "lmdb".into(), "rocksdb".into()],
            db: PathBuf::from(format!("/tmp/dbbench-{uid}")),
            benchmarks: DEFAULT_BENCHMARKS.split(',').map(String::from).collect(),
            num: 1_000_000,
            reads: 1_000_000,
            writes: 1_000_000,
            deletes: 1_000_000,
            threads: vec![1],
            duration_s: 0,
            key_size: 16,
            value_size: 100,
            batch_size: 1,
            sync: false,
            use_existing_db: false,
            histogram: false,
            stats_interval: 0,
            seed: 0,
            cache_size: 32 << 20,
            compression_ratio: 0.5,
            memory_limit: None,
            drop_caches: false,
            json: None,
            csv: None,
            key_format: KeyFormat::Decimal,
            readwritepercent: 90,
            seek_nexts: 0,
            bloom_bits: 10,
            background_nice: 0,
            checkpoint_slices: 0,
            progress: true,
            key_offset: 0,
            series_interval_ms: 0,
            fill_duration_s: 0,
            fill_threads: false,
            write_rate_limit: 0,
            ycsb_fieldcount: crate::ycsb::FIELD_COUNT_DEFAULT,
            ycsb_fieldlength: crate::ycsb::FIELD_LENGTH_DEFAULT,
            repeat: 1,
        }
    }
}

pub fn usage() -> String {
    format!(
        "larch-bench: db_bench-compatible driver for Larch and its peers\n\n\
Usage: larch-bench [--flag=value ...]\n\
\x20      larch-bench suite NAME [--scale=S] [--out=DIR]   (see larch-bench suite --help)\n\
\x20      larch-bench report DIR\n\n\
  --engine=LIST          comma list, run one after another, each in its own process\n\
\x20                      (larch,larch-pages,lmdb,libmdbx,rocksdb,leveldb,bdb,wiredtiger,\n\
\x20                      wiredtiger-lsm,redb,canopydb,fjall; 'all')\n\
  --db=DIR               parent directory; each engine uses DIR/<engine> (/tmp/dbbench-<uid>)\n\
  --benchmarks=LIST      default {DEFAULT_BENCHMARKS}\n\
\x20                      also: filluniquerandom fillseqsync fillrandsync fillsync_mt (fillsync\n\
\x20                      on each of --threads threads at once) fillbatch fillseqbatch\n\
\x20                      fillrandbatch readwhilewriting readrandomwriterandom updaterandom\n\
\x20                      deleterandom deleteseq\n\
\x20                      fillunique_mt updateunique_mt insertunique_mt (--threads writers\n\
\x20                      over a seeded permutation of 0..num; see docs/design/bench-method.md)\n\
\x20                      ycsb (= ycsb_load,ycsb_a,ycsb_b,ycsb_c,ycsb_f,ycsb_d,ycsb_e): YCSB's load\n\
\x20                      and core workloads A-F on --threads clients, --reads ops per client\n\
  --ycsb_fieldcount=N (10)  --ycsb_fieldlength=B (100): a YCSB record is one value of N x B\n\
  --repeat=N             run each engine N times; summary and verdict give median and spread\n\
  --num=N                entries (1000000)      --reads/--writes/--deletes=N (-1 = num)\n\
  --threads=T|T1,T2,..   reader threads; a list runs each count after one load (1)\n\
  --duration=S           run read/mixed benchmarks for S seconds instead of a count (0)\n\
  --key_size=B (16)  --value_size=B (100)  --batch_size=N (1)  --sync=0|1 (0)\n\
  --key_format=decimal|rocksdb (decimal = %016d)   --compression_ratio=F (0.5)\n\
  --use_existing_db=0|1  --histogram=0|1  --stats_interval=N (per-thread lines every N ops)\n\
  --seed=N (0: derived from time, printed)   --cache_size=BYTES (33554432)\n\
  --readwritepercent=P (90)  --seek_nexts=N (0)  --bloom_bits=N (10)\n\
  --background_nice=N    Larch's background threads N nice steps below the benchmark's (0)\n\
  --checkpoint_slices=N  Larch's overlays in N key ranges, merged one a checkpoint (0: by the data\n\
\x20                      file's size; 1: whole)\n\
  --fill_duration=S      cap fresh fills at S seconds (0)  --key_offset=N (0)\n\
  --fill_threads=0|1     fills on --threads threads, each --writes puts; each pass reloads (0)\n\
  --benchmark_write_rate_limit=BYTES  readwhilewriting's writer held to BYTES of key+value a\n\
\x20                      second, as db_bench's (0: unlimited)\n\
  --series_interval_ms=N per-thread ops-over-time samples in the JSON `series` (0: off)\n\
  --memory_limit=BYTES   run each engine's process in a memory cgroup (v1 or v2)\n\
  --drop_caches=0|1      reopen the engine, sync and drop the page cache before each\n\
\x20                      non-fill benchmark\n\
  --json=FILE            one JSON object per line per (engine, benchmark, threads)\n\
  --csv=FILE             the same as CSV          --progress=0|1 (stderr bar on a terminal)\n\
Sizes accept K, M, G suffixes (powers of 1024).\n"
    )
}

fn parse_bool(name: &str, v: &str) -> Result<bool> {
    match v {
        "1" | "true" | "yes" => Ok(true),
        "0" | "false" | "no" => Ok(false),
        _ => Err(Error::Usage(format!("--{name} expects 0 or 1, got {v:?}"))),
    }
}

/// Parses a non-negative integer with an optional K/M/G/T suffix (powers of 1024).
pub fn parse_size(name: &str, v: &str) -> Result<u64> {
    let bad = || {
        Error::Usage(format!(
            "--{name} expects a non-negative integer, got {v:?}"
        ))
    };
    let t = v.trim();
    let (digits, shift) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 10),
        Some('m' | 'M') => (&t[..t.len() - 1], 20),
        Some('g' | 'G') => (&t[..t.len() - 1], 30),
        Some('t' | 'T') => (&t[..t.len() - 1], 40),
        _ => (t, 0),
    };
    let n: u64 = digits.parse().map_err(|_| bad())?;
    n.checked_mul(1u64 << shift).ok_or_else(bad)
}

/// Parses a count where db_bench allows -1 to mean "use --num".
fn parse_count_or_num(name: &str, v: &str) -> Result<Option<u64>> {
    if v.trim() == "-1" {
        return Ok(None);
    }
    parse_size(name, v).map(Some)
}

fn in_range(name: &str, v: u64, min: u64, max: u64) -> Result<u64> {
    if v < min || v > max {
        return Err(Error::Usage(format!(
            "--{name}={v} is out of range [{min}, {max}]"
        )));
    }
    Ok(v)
}

fn list(v: &str) -> Vec<String> {
    v.split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

impl Flags {
    /// Parses db_bench-style arguments: `--name=value`, `--name value`, or a bare boolean.
    pub fn parse(args: &[String]) -> Result<Flags> {
        let mut f = Flags::default();
        let (mut reads, mut writes, mut deletes) = (None, None, None);
        let mut i = 0;
        while i < args.len() {
            let arg = &args[i];
            let Some(body) = arg.strip_prefix("--") else {
                return Err(Error::Usage(format!("unexpected argument {arg:?}")));
            };
            let (name, value) = match body.split_once('=') {
                Some((n, v)) => (n.to_string(), v.to_string()),
                None => {
                    let takes_value = !matches!(
                        body,
                        "histogram"
                            | "sync"
                            | "use_existing_db"
                            | "drop_caches"
                            | "progress"
                            | "fill_threads"
                    );
                    if takes_value {
                        i += 1;
                        match args.get(i) {
                            Some(v) => (body.to_string(), v.clone()),
                            None => return Err(Error::Usage(format!("--{body} needs a value"))),
                        }
                    } else {
                        (body.to_string(), "1".to_string())
                    }
                }
            };
            let n = name.as_str();
            let v = value.as_str();
            match n {
                "engine" | "engines" => f.engines = list(v),
                "db" => f.db = PathBuf::from(v),
                "benchmarks" => {
                    f.benchmarks = list(v)
                        .into_iter()
                        .flat_map(|b| {
                            if b == "ycsb" {
                                YCSB_BENCHMARKS.iter().map(|s| s.to_string()).collect()
                            } else {
                                vec![b]
                            }
                        })
                        .collect()
                }
                "ycsb_fieldcount" => {
                    f.ycsb_fieldcount = in_range(n, parse_size(n, v)?, 1, 1024)? as usize
                }
                "ycsb_fieldlength" => {
                    f.ycsb_fieldlength = in_range(n, parse_size(n, v)?, 1, 1 << 20)? as usize
                }
                "repeat" => {
                    f.repeat = in_range(n, parse_size(n, v)?, 1, REPEAT_MAX as u64)? as usize
                }
                "num" => f.num = in_range(n, parse_size(n, v)?, 1, NUM_MAX)?,
                "reads" => reads = parse_count_or_num(n, v)?,
                "writes" => writes = parse_count_or_num(n, v)?,
                "deletes" => deletes = parse_count_or_num(n, v)?,
                "threads" => {
                    let mut t = Vec::new();
                    for s in list(v) {
                        let x = parse_size(n, &s)?;
                        t.push(in_range(n, x, 1, THREADS_MAX as u64)? as usize);
                    }
                    if t.is_empty() {
                        return Err(Error::Usage("--threads is empty".into()));
                    }
                    f.threads = t;
                }
                "duration" => f.duration_s = parse_size(n, v)?,
                "benchmark_write_rate_limit" => f.write_rate_limit = parse_size(n, v)?,
                "key_size" => {
                    f.key_size = in_range(n, parse_size(n, v)?, 1, KEY_BYTES_MAX as u64)? as usize
                }
                "value_size" => {
                    f.value_size =
                        in_range(n, parse_size(n, v)?, 0, VALUE_BYTES_MAX as u64)? as usize
                }
                "batch_size" => {
                    f.batch_size = in_range(n, parse_size(n, v)?, 1, BATCH_MAX as u64)? as usize
                }
                "sync" => f.sync = parse_bool(n, v)?,
                "use_existing_db" => f.use_existing_db = parse_bool(n, v)?,
                "histogram" => f.histogram = parse_bool(n, v)?,
                "drop_caches" => f.drop_caches = parse_bool(n, v)?,
                "progress" => f.progress = parse_bool(n, v)?,
                "stats_interval" => f.stats_interval = parse_size(n, v)?,
                "seed" => f.seed = parse_size(n, v)?,
                "cache_size" => f.cache_size = parse_size(n, v)?,
                "compression_ratio" => {
                    let r: f64 = v.parse().map_err(|_| {
                        Error::Usage(format!("--compression_ratio expects a number, got {v:?}"))
                    })?;
                    if !(r > 0.0 && r <= 1.0) {
                        return Err(Error::Usage(format!(
                            "--compression_ratio={r} must be in (0, 1]"
                        )));
                    }
                    f.compression_ratio = r;
                }
                "memory_limit" => {
                    let m = parse_size(n, v)?;
                    f.memory_limit = if m == 0 { None } else { Some(m) };
                }
                "json" => f.json = Some(PathBuf::from(v)),
                "csv" => f.csv = Some(PathBuf::from(v)),
                "key_format" => {
                    f.key_format = match v {
                        "decimal" | "leveldb" => KeyFormat::Decimal,
                        "rocksdb" => KeyFormat::RocksDb,
                        _ => {
                            return Err(Error::Usage(format!(
                                "--key_format expects decimal or rocksdb, got {v:?}"
                            )))
                        }
                    }
                }
                "readwritepercent" => {
                    f.readwritepercent = in_range(n, parse_size(n, v)?, 0, 100)? as u32
                }
                "seek_nexts" => f.seek_nexts = parse_size(n, v)?,
                "bloom_bits" => f.bloom_bits = in_range(n, parse_size(n, v)?, 0, 64)? as u32,
                "background_nice" => {
                    f.background_nice = in_range(n, parse_size(n, v)?, 0, 19)? as u8
                }
                "checkpoint_slices" => {
                    f.checkpoint_slices = in_range(n, parse_size(n, v)?, 0, 1024)? as u32
                }
                "key_offset" => f.key_offset = parse_size(n, v)?,
                "series_interval_ms" => {
                    f.series_interval_ms = in_range(n, parse_size(n, v)?, 0, 3_600_000)?
                }
                "fill_duration" => f.fill_duration_s = parse_size(n, v)?,
                "fill_threads" => f.fill_threads = parse_bool(n, v)?,
                _ => return Err(Error::Usage(format!("unknown flag --{n}"))),
            }
            i += 1;
        }
        f.reads = reads.unwrap_or(f.num);
        f.writes = writes.unwrap_or(f.num);
        f.deletes = deletes.unwrap_or(f.num);
        f.validate()?;
        Ok(f)
    }

    fn validate(&self) -> Result<()> {
        if self.engines.is_empty() {
            return Err(Error::Usage("--engine is empty".into()));
        }
        for b in &self.benchmarks {
            if !KNOWN_BENCHMARKS.contains(&b.as_str()) {
                return Err(Error::Usage(format!(
                    "unknown benchmark {b:?}; known: {}",
                    KNOWN_BENCHMARKS.join(",")
                )));
            }
        }
        let mt = ["fillunique_mt", "updateunique_mt", "insertunique_mt"];
        if self.benchmarks.iter().any(|b| mt.contains(&b.as_str()))
            && self.key_offset.saturating_add(self.writes) > self.num
        {
            return Err(Error::Usage(format!(
                "--key_offset={} + --writes={} exceeds --num={}: the *unique_mt benchmarks \
                 take distinct keys from a permutation of 0..num",
                self.key_offset, self.writes, self.num
            )));
        }
        match self.key_format {
            KeyFormat::Decimal => {
                let digits = (self.num.max(2) - 1).to_string().len();
                if digits > self.key_size {
                    return Err(Error::Usage(format!(
                        "--key_size={} cannot hold {digits}-digit keys for --num={}",
                        self.key_size, self.num
                    )));
                }
            }
            KeyFormat::RocksDb => {
                if self.key_size < 8 {
                    return Err(Error::Usage(
                        "--key_format=rocksdb needs --key_size >= 8".into(),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Arguments that reproduce these flags in a child, for one engine and one thread list.
    pub fn to_child_args(&self, engine: &str) -> Vec<String> {
        let mut a = vec![
            format!("--engine={engine}"),
            format!("--db={}", self.db.display()),
            format!("--benchmarks={}", self.benchmarks.join(",")),
            format!("--num={}", self.num),
            format!("--reads={}", self.reads),
            format!("--writes={}", self.writes),
            format!("--deletes={}", self.deletes),
            format!(
                "--threads={}",
                self.threads
                    .iter()
                    .map(|t| t.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            format!("--duration={}", self.duration_s),
            format!("--key_size={}", self.key_size),
            format!("--value_size={}", self.value_size),
            format!("--batch_size={}", self.batch_size),
            format!("--sync={}", self.sync as u8),
            format!("--use_existing_db={}", self.use_existing_db as u8),
            format!("--histogram={}", self.histogram as u8),
            format!("--stats_interval={}", self.stats_interval),
            format!("--seed={}", self.seed),
            format!("--cache_size={}", self.cache_size),
            format!("--compression_ratio={}", self.compression_ratio),
            format!("--drop_caches={}", self.drop_caches as u8),
            format!(
                "--key_format={}",
                match self.key_format {
                    KeyFormat::Decimal => "decimal",
                    KeyFormat::RocksDb => "rocksdb",
                }
            ),
            format!("--readwritepercent={}", self.readwritepercent),
            format!("--seek_nexts={}", self.seek_nexts),
            format!("--bloom_bits={}", self.bloom_bits),
            format!("--background_nice={}", self.background_nice),
            format!("--checkpoint_slices={}", self.checkpoint_slices),
            format!("--progress={}", self.progress as u8),
            format!("--key_offset={}", self.key_offset),
            format!("--series_interval_ms={}", self.series_interval_ms),
            format!("--fill_duration={}", self.fill_duration_s),
            format!("--fill_threads={}", self.fill_threads as u8),
            format!("--benchmark_write_rate_limit={}", self.write_rate_limit),
            format!("--ycsb_fieldcount={}", self.ycsb_fieldcount),
            format!("--ycsb_fieldlength={}", self.ycsb_fieldlength),
        ];
        if let Some(m) = self.memory_limit {
            a.push(format!("--memory_limit={m}"));
        }
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Result<Flags> {
        Flags::parse(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn defaults_follow_db_bench() {
        let f = p(&[]).unwrap();
        assert_eq!(f.num, 1_000_000);
        assert_eq!(f.reads, f.num);
        assert_eq!(f.key_size, 16);
        assert_eq!(f.value_size, 100);
        assert_eq!(f.readwritepercent, 90);
        assert_eq!(f.compression_ratio, 0.5);
    }

    #[test]
    fn parses_lists_sizes_and_negative_reads() {
        let f = p(&[
            "--engine=lmdb,rocksdb",
            "--threads=1,2,4",
            "--num",
            "1000",
            "--reads=-1",
            "--cache_size=1G",
            "--histogram",
        ])
        .unwrap();
        assert_eq!(f.engines, vec!["lmdb", "rocksdb"]);
        assert_eq!(f.threads, vec![1, 2, 4]);
        assert_eq!(f.reads, 1000);
        assert_eq!(f.cache_size, 1 << 30);
        assert!(f.histogram);
    }

    #[test]
    fn bad_input_is_a_usage_error() {
        for bad in [
            &["--num=abc"][..],
            &["--nosuchflag=1"],
            &["--benchmarks=fillseq,bogus"],
            &["--sync=2"],
            &["--threads=0"],
            &["--num=100000", "--key_size=3"],
            &["--compression_ratio=0"],
            &["--benchmarks=ycsb_z"],
            &["positional"],
        ] {
            match p(bad) {
                Err(Error::Usage(_)) => {}
                other => panic!("{bad:?} gave {other:?}"),
            }
        }
    }

    #[test]
    fn child_args_round_trip() {
        let f = p(&[
            "--num=1234",
            "--threads=2,8",
            "--memory_limit=1G",
            "--sync=1",
            "--key_offset=100",
            "--series_interval_ms=250",
            "--fill_duration=9",
            "--fill_threads=1",
            "--benchmark_write_rate_limit=8M",
            "--ycsb_fieldcount=4",
            "--ycsb_fieldlength=50",
        ])
        .unwrap();
        let g = Flags::parse(&f.to_child_args("lmdb")).unwrap();
        assert_eq!(g.engines, vec!["lmdb"]);
        assert_eq!(g.num, 1234);
        assert_eq!(g.threads, vec![2, 8]);
        assert_eq!(g.memory_limit, Some(1 << 30));
        assert!(g.sync);
        assert_eq!(g.key_offset, 100);
        assert_eq!(g.series_interval_ms, 250);
        assert_eq!(g.fill_duration_s, 9);
        assert!(g.fill_threads);
        assert_eq!(g.write_rate_limit, 8 << 20);
        assert_eq!((g.ycsb_fieldcount, g.ycsb_fieldlength), (4, 50));
    }

    #[test]
    fn ycsb_expands_to_the_load_and_the_six_workloads() {
        let f = p(&["--benchmarks=fillseq,ycsb,readseq", "--repeat=3"]).unwrap();
        assert_eq!(f.benchmarks.len(), 2 + YCSB_BENCHMARKS.len());
        assert_eq!(f.benchmarks[1], "ycsb_load");
        assert_eq!(f.benchmarks[7], "ycsb_e");
        assert_eq!(f.repeat, 3);
        assert!(p(&["--repeat=0"]).is_err());
        assert!(p(&["--ycsb_fieldcount=0"]).is_err());
    }

    #[test]
    fn unique_mt_range_must_fit_in_num() {
        assert!(p(&["--benchmarks=fillunique_mt", "--num=100", "--writes=100"]).is_ok());
        match p(&[
            "--benchmarks=insertunique_mt",
            "--num=100",
            "--writes=50",
            "--key_offset=60",
        ]) {
            Err(Error::Usage(_)) => {}
            other => panic!("{other:?}"),
        }
    }
}
