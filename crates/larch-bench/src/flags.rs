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
    /// Larch's `Options::checkpoint_bytes` (0: the engine's default): the least log between
    /// checkpoints (by slices, of the overlays' memory: at least twice it).
    pub checkpoint_bytes: u64,
    /// Larch's `Options::log_room_bytes` (0: the engine's default, the ring the checkpoints
    /// call for): the log kept for records not yet in a durable checkpoint, at least.
    pub log_room_bytes: u64,
    /// Larch's `Options::memory_budget` (0: the engine's default, from the machine).
    pub memory_budget: u64,
    /// Larch's `Options::frames_bytes` (0: the engine's default, the frames' share of memory).
    pub frames_bytes: u64,
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
            checkpoint_bytes: 0,
            log_room_bytes: 0,
            memory_budget: 0,
            frames_bytes: 0,
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

/// One flag of `--help`: how it is written, its default, what it does.
struct FlagHelp {
    flag: &'static str,
    default: String,
    text: &'static str,
}

/// Width of `--help`'s flag column, and of its default column; the description follows them.
const HELP_FLAG_CHARS: usize = 32;
const HELP_DEFAULT_CHARS: usize = 20;
/// Width `--help` wraps its descriptions at.
pub const HELP_LINE_CHARS: usize = 100;

/// A size as `--help` shows it: with the largest suffix the flags accept that divides it
/// exactly (32M for 33554432), so that the default reads as one would type it.
fn size_text(bytes: u64) -> String {
    for (suffix, shift) in [("T", 40), ("G", 30), ("M", 20), ("K", 10)] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{}{suffix}", bytes >> shift);
        }
    }
    bytes.to_string()
}

/// Every flag the parser takes, in `--help`'s order, each with its default taken from
/// `Flags::default()` so that the two cannot disagree.
fn flag_help() -> Vec<FlagHelp> {
    let d = Flags::default();
    let b = |x: bool| (x as u8).to_string();
    let h = |flag, default: String, text| FlagHelp {
        flag,
        default,
        text,
    };
    vec![
        h(
            "--engine=LIST",
            d.engines.join(","),
            "engines to run, one after another, each in a process of its own; 'all' for every one",
        ),
        h(
            "--db=DIR",
            d.db.display().to_string(),
            "parent directory: each engine's database is DIR/<engine>",
        ),
        h(
            "--benchmarks=LIST",
            DEFAULT_BENCHMARKS.to_string(),
            "benchmarks to run, in order (the list is below)",
        ),
        h("--num=N", d.num.to_string(), "entries loaded"),
        h(
            "--reads=N",
            "-1".into(),
            "operations per thread of the read and mixed benchmarks; -1: --num",
        ),
        h(
            "--writes=N",
            "-1".into(),
            "puts of the fills and overwrites (the sync fills: a thousandth of them); -1: --num",
        ),
        h(
            "--deletes=N",
            "-1".into(),
            "deletes of deleterandom and deleteseq; -1: --num",
        ),
        h(
            "--threads=T[,T2,..]",
            d.threads
                .iter()
                .map(|t| t.to_string())
                .collect::<Vec<_>>()
                .join(","),
            "reader threads; a list runs each count after one load",
        ),
        h(
            "--duration=S",
            d.duration_s.to_string(),
            "run the read and mixed benchmarks for S seconds instead of a count (0: by count)",
        ),
        h("--key_size=B", d.key_size.to_string(), "bytes of each key"),
        h(
            "--value_size=B",
            d.value_size.to_string(),
            "bytes of each value",
        ),
        h(
            "--key_format=decimal|rocksdb",
            "decimal".into(),
            "decimal: %016d, as LevelDB's db_bench; rocksdb: 8 bytes big-endian padded with '0'",
        ),
        h(
            "--compression_ratio=F",
            d.compression_ratio.to_string(),
            "the part of each value that is random, as db_bench's (the rest repeats)",
        ),
        h(
            "--batch_size=N",
            d.batch_size.to_string(),
            "puts per write transaction or batch",
        ),
        h(
            "--sync=0|1",
            b(d.sync),
            "every write transaction durable (synced) when it returns",
        ),
        h(
            "--use_existing_db=0|1",
            b(d.use_existing_db),
            "run on the databases under --db as they are: no fresh load",
        ),
        h(
            "--histogram=0|1",
            b(d.histogram),
            "print RocksDB's latency histogram block after each result line",
        ),
        h(
            "--stats_interval=N",
            d.stats_interval.to_string(),
            "print each thread's progress every N operations (0: never)",
        ),
        h(
            "--seed=N",
            d.seed.to_string(),
            "seed of the key and value streams (0: from the time, and printed)",
        ),
        h(
            "--cache_size=BYTES",
            size_text(d.cache_size),
            "the cache of the engines that keep one (those that read through the OS page cache \
             have none)",
        ),
        h(
            "--readwritepercent=P",
            d.readwritepercent.to_string(),
            "readrandomwriterandom: the percentage of operations that read",
        ),
        h(
            "--seek_nexts=N",
            d.seek_nexts.to_string(),
            "seekrandom: entries read after each seek",
        ),
        h(
            "--bloom_bits=N",
            d.bloom_bits.to_string(),
            "bloom filter bits per key of RocksDB and LevelDB (0: no filter)",
        ),
        h(
            "--benchmark_write_rate_limit=BYTES",
            size_text(d.write_rate_limit),
            "readwhilewriting's writer held to BYTES of key and value a second, as db_bench's (0: \
             unlimited)",
        ),
        h(
            "--fill_duration=S",
            d.fill_duration_s.to_string(),
            "cap fresh fills at S seconds (0: no cap)",
        ),
        h(
            "--fill_threads=0|1",
            b(d.fill_threads),
            "fills on --threads threads, each doing --writes puts; each pass of a thread list \
             loads afresh",
        ),
        h(
            "--key_offset=N",
            d.key_offset.to_string(),
            "first index of the key permutation the *unique_mt benchmarks take",
        ),
        h(
            "--ycsb_fieldcount=N",
            d.ycsb_fieldcount.to_string(),
            "fields of a YCSB record (a record is one value of N x --ycsb_fieldlength bytes)",
        ),
        h(
            "--ycsb_fieldlength=B",
            d.ycsb_fieldlength.to_string(),
            "bytes of each YCSB field",
        ),
        h(
            "--repeat=N",
            d.repeat.to_string(),
            "run each engine N times, interleaved; the summary and the verdict give the median \
             and its spread",
        ),
        h(
            "--background_nice=N",
            d.background_nice.to_string(),
            "Larch's background threads N nice steps below the benchmark's (0: Larch's default)",
        ),
        h(
            "--checkpoint_slices=N",
            d.checkpoint_slices.to_string(),
            "Larch's overlays cut into N key ranges, one merged a checkpoint (0: by the data \
             file's size; 1: whole)",
        ),
        h(
            "--checkpoint_bytes=BYTES",
            d.checkpoint_bytes.to_string(),
            "Larch's checkpoints every BYTES of log at least, by slices of the overlays' \
             memory at least twice BYTES (0: Larch's default)",
        ),
        h(
            "--log_room_bytes=BYTES",
            d.log_room_bytes.to_string(),
            "Larch's log keeps BYTES at least for records not yet in a durable checkpoint, \
             whose checkpoints are then made durable only when it runs short (0: Larch's \
             default, the ring its checkpoints call for)",
        ),
        h(
            "--memory_budget=BYTES",
            d.memory_budget.to_string(),
            "Larch's memory budget for its overlays (0: Larch's default, a quarter of the \
             memory the process may use beyond 64 MiB, at least an eighth)",
        ),
        h(
            "--frames_bytes=BYTES",
            d.frames_bytes.to_string(),
            "Larch keeps the data file's pages in frames of its own, in huge pages, while the \
             file fits in BYTES (0: Larch's default, half the memory the process may use beyond \
             64 MiB; engine larch-mapped: none, the file mapped)",
        ),
        h(
            "--memory_limit=BYTES",
            d.memory_limit.map_or("0".into(), size_text),
            "run each engine's process in a memory cgroup (v1 or v2) of BYTES (0: none)",
        ),
        h(
            "--drop_caches=0|1",
            b(d.drop_caches),
            "reopen the engine, sync and drop the page cache before each benchmark that is not a \
             fill",
        ),
        h(
            "--series_interval_ms=N",
            d.series_interval_ms.to_string(),
            "each thread's operations over time, sampled every N ms, in the JSON's `series` (0: \
             off)",
        ),
        h(
            "--json=FILE",
            "none".into(),
            "one JSON object per line per (engine, benchmark, threads), then the verdict's rows",
        ),
        h("--csv=FILE", "none".into(), "the same results as CSV"),
        h(
            "--progress=0|1",
            b(d.progress),
            "a progress bar on stderr, when it is a terminal",
        ),
    ]
}

/// `text` cut into lines of at most `width` characters at spaces (a longer word stays whole).
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// Rows of three columns (the first two padded to their widths, the third wrapped), as
/// `--help` prints its flags and its legend. A first column too wide for its width goes on a
/// line of its own; so does a second.
pub fn columns(rows: &[(&str, &str, &str)], first: usize, second: usize) -> String {
    let indent = 2;
    let text_at = indent + first + second;
    let text_width = HELP_LINE_CHARS.saturating_sub(text_at).max(20);
    let mut s = String::new();
    /// Pads `line` with spaces to column `at`, first ending it (into `s`) if its text leaves
    /// no space before that column.
    fn pad_to(line: &mut String, s: &mut String, at: usize) {
        let text = line.trim_end().len();
        if text > 0 && text + 1 > at {
            s.push_str(line.trim_end());
            s.push('\n');
            line.clear();
        }
        while line.len() < at {
            line.push(' ');
        }
    }
    for &(a, b, c) in rows {
        let mut line = format!("{:indent$}{a}", "");
        pad_to(&mut line, &mut s, indent + first);
        line.push_str(b);
        pad_to(&mut line, &mut s, text_at);
        let text = wrap(c, text_width);
        if text.is_empty() {
            s.push_str(line.trim_end());
            s.push('\n');
        }
        for (i, t) in text.iter().enumerate() {
            if i > 0 {
                line = " ".repeat(text_at);
            }
            line.push_str(t);
            s.push_str(&line);
            s.push('\n');
        }
    }
    s
}

/// `larch-bench --help`: the flags in columns (flag, default, description), as db_bench lists
/// its own, the benchmarks, then the legend of every column the output prints
/// (`report::legend`).
pub fn usage() -> String {
    let flags = flag_help();
    let rows: Vec<(&str, &str, &str)> = flags
        .iter()
        .map(|f| {
            // The benchmarks' default list is too long for its column: it goes below.
            let default = if f.default.len() < HELP_DEFAULT_CHARS {
                f.default.as_str()
            } else {
                "(below)"
            };
            (f.flag, default, f.text)
        })
        .collect();
    let more: Vec<&str> = KNOWN_BENCHMARKS
        .iter()
        .copied()
        .filter(|b| !DEFAULT_BENCHMARKS.split(',').any(|d| d == *b) && !b.starts_with("ycsb_"))
        .collect();
    let benchmarks = [
        ("default", "", DEFAULT_BENCHMARKS.replace(',', " ")),
        ("also", "", more.join(" ")),
        (
            "ycsb",
            "",
            format!(
                "= {}: YCSB's load and core workloads A-F on --threads clients, --reads \
                 operations a client",
                YCSB_BENCHMARKS.join(",")
            ),
        ),
        (
            "notes",
            "",
            "fillsync_mt: fillsync on each of --threads threads at once; fillunique_mt, \
             updateunique_mt, insertunique_mt: --threads writers over a seeded permutation of \
             0..num (docs/design/bench-method.md in the repository)"
                .to_string(),
        ),
    ];
    let benchmark_rows: Vec<(&str, &str, &str)> = benchmarks
        .iter()
        .map(|(a, b, c)| (*a, *b, c.as_str()))
        .collect();
    let engines = wrap(
        &format!(
            "Engines (--engine): the default runs {}; 'all' runs every one: {}. Each is \
             configured as its documentation recommends for the workload, and prints its \
             settings.",
            Flags::default().engines.join(","),
            crate::engines::names().join(", ")
        ),
        HELP_LINE_CHARS,
    )
    .join("\n");
    format!(
        "larch-bench: db_bench-compatible driver for Larch and its peers\n\n\
Usage: larch-bench [--flag=value ...]\n\
\x20      larch-bench suite NAME [--scale=S] [--out=DIR]   (see larch-bench suite --help)\n\
\x20      larch-bench report DIR\n\n\
Flags have db_bench's names and syntax: --name=value or --name value; booleans 0 or 1 (a bare\n\
boolean flag is 1); sizes take K, M, G, T suffixes (powers of 1024).\n\n\
{}\n{engines}\n\nBenchmarks (--benchmarks):\n{}\n{}",
        columns(
            &[&[("flag", "default", "description")][..], &rows].concat(),
            HELP_FLAG_CHARS,
            HELP_DEFAULT_CHARS
        ),
        columns(&benchmark_rows, 10, 0),
        crate::report::legend(),
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
                "checkpoint_bytes" => {
                    f.checkpoint_bytes = in_range(n, parse_size(n, v)?, 0, 1 << 30)?
                }
                "log_room_bytes" => f.log_room_bytes = in_range(n, parse_size(n, v)?, 0, 1 << 40)?,
                "memory_budget" => f.memory_budget = parse_size(n, v)?,
                "frames_bytes" => f.frames_bytes = parse_size(n, v)?,
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
            format!("--checkpoint_bytes={}", self.checkpoint_bytes),
            format!("--log_room_bytes={}", self.log_room_bytes),
            format!("--memory_budget={}", self.memory_budget),
            format!("--frames_bytes={}", self.frames_bytes),
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

    /// Every flag `--help` lists parses with the default it shows, to the value
    /// `Flags::default()` has; every flag the parser takes is listed.
    #[test]
    fn the_help_lists_every_flag_with_its_real_default() {
        let d = Flags::default();
        for h in flag_help() {
            let name = h.flag.split('=').next().unwrap();
            if h.default == "none" {
                continue;
            }
            let f = p(&[&format!("{name}={}", h.default)])
                .unwrap_or_else(|e| panic!("{name}={}: {e}", h.default));
            assert_eq!(
                format!("{:?}", f),
                format!("{:?}", Flags::parse(&[]).unwrap()),
                "{name}: the default --help shows is not the parser's"
            );
        }
        assert_eq!(d.engines, vec!["larch", "lmdb", "rocksdb"]);
        // The parser's flags: the names its match arms take that are not "unknown flag".
        let source = include_str!("flags.rs");
        let arms = &source[source.find("let n = name.as_str();").unwrap()
            ..source.find("unknown flag --{n}").unwrap()];
        let listed: Vec<&str> = flag_help()
            .iter()
            .map(|h| h.flag.split('=').next().unwrap())
            .collect();
        for piece in arms.split('"').skip(1).step_by(2) {
            let taken = match p(&[&format!("--{piece}=1")]) {
                Err(Error::Usage(m)) => !m.contains("unknown flag"),
                _ => true,
            };
            // "engines" is an alias of "engine".
            if taken && piece != "engines" {
                assert!(
                    listed.contains(&format!("--{piece}").as_str()),
                    "--{piece} is not in --help"
                );
            }
        }
    }

    /// The flag table's columns line up: each flag's default and description start at the
    /// same columns (a flag too long for its column has them on the next line).
    #[test]
    fn the_help_is_in_columns() {
        let help = usage();
        let mut rows = 0;
        let lines: Vec<&str> = help.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            if !line.starts_with("  --") {
                continue;
            }
            rows += 1;
            // A flag alone on its line: its default and description are on the next.
            let row = if line.split_whitespace().count() == 1 {
                lines[i + 1]
            } else {
                line
            };
            let at = 2 + HELP_FLAG_CHARS;
            assert!(row[..at].ends_with(' '), "{row:?}");
            assert_ne!(&row[at..at + 1], " ", "the default of {line:?}");
            let text_at = at + HELP_DEFAULT_CHARS;
            assert!(row[..text_at].ends_with(' '), "{row:?}");
            assert_ne!(
                &row[text_at..text_at + 1],
                " ",
                "the description of {line:?}"
            );
            assert!(
                lines.iter().all(|l| l.len() <= HELP_LINE_CHARS),
                "a line too long"
            );
        }
        assert_eq!(rows, flag_help().len());
    }
}
