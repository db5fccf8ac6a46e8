//! Output formats: db_bench result lines (which existing db_bench parsers read), one JSON object
//! per line, CSV, and the end-of-run summary table.

use crate::hist::Percentiles;
use serde_json::{json, Map, Value};

/// Everything measured for one (engine, benchmark, thread count).
#[derive(Debug, Clone, Default)]
pub struct BenchResult {
    pub engine: String,
    pub engine_version: String,
    pub benchmark: String,
    pub threads: usize,
    pub num: u64,
    pub key_size: usize,
    pub value_size: usize,
    pub ops: u64,
    pub ops_per_sec: f64,
    /// db_bench's definition: sum of per-thread elapsed time / ops.
    pub micros_per_op: f64,
    pub mb_per_sec: f64,
    pub writer_ops: Option<u64>,
    pub writer_ops_per_sec: Option<f64>,
    pub lat: Percentiles,
    pub writer_lat: Option<Percentiles>,
    pub wall_s: f64,
    pub user_s: f64,
    pub sys_s: f64,
    pub cpu_pct: f64,
    /// CPU seconds the benchmark's own threads used over the run (each thread's
    /// `CLOCK_THREAD_CPUTIME_ID`); `None` where a thread's clock could not be read.
    pub client_cpu_s: Option<f64>,
    /// The process's CPU seconds beside them (`sys::background_cpu_s`): an engine's threads of
    /// its own, which LMDB has none of (docs/design/bench-method.md, "Background CPU").
    pub bg_cpu_s: Option<f64>,
    pub vcsw: u64,
    pub ivcsw: u64,
    pub fs_in: u64,
    pub fs_out: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub user_bytes_written: u64,
    pub wamp: Option<f64>,
    /// Bytes the device under the database wrote over the run and a `syncfs` after it
    /// (`sys::DeviceIo`); `None` where the directory is on no counted block device.
    pub dev_write_bytes: Option<u64>,
    /// `dev_write_bytes` over the bytes of keys and values written.
    pub wamp_dev: Option<f64>,
    /// Of `dev_write_bytes`, those the device wrote within the timed window, before the
    /// `syncfs` after it: what the engine's writes cost the device while the benchmark ran.
    /// An engine that leaves its writes dirty in the page cache (LMDB with `MDB_NOSYNC`)
    /// writes them after the window, at the sync, and its readers meanwhile have the device
    /// to themselves (docs/design/bench-method.md, "The device's writes in the run").
    pub dev_write_bytes_run: Option<u64>,
    /// Write requests the device completed over the same window (`sys::DeviceIo`).
    pub dev_writes: Option<u64>,
    /// Read requests the device completed over the run, and the bytes they read.
    pub dev_reads: Option<u64>,
    pub dev_read_bytes: Option<u64>,
    pub db_bytes: u64,
    pub maxrss_kb: u64,
    /// The peak of the process's anonymous memory over the run (`sys::AnonPeak`), in KB: the
    /// memory an engine holds itself, beside the file pages in `maxrss_kb`.
    pub anon_peak_kb: Option<u64>,
    pub found: Option<u64>,
    pub message: String,
    pub config: Vec<(String, String)>,
}

/// db_bench (RocksDB) result line:
/// `name : %11.3f micros/op %ld ops/sec %.3f seconds %lu operations;%s%s`.
pub fn result_line(
    name: &str,
    micros_per_op: f64,
    ops_per_sec: f64,
    secs: f64,
    ops: u64,
    mb_per_sec: f64,
    message: &str,
) -> String {
    let mut extra = String::new();
    if mb_per_sec > 0.0 {
        extra.push_str(&format!(" {mb_per_sec:6.1} MB/s"));
    }
    if !message.is_empty() {
        extra.push(' ');
        extra.push_str(message);
    }
    format!(
        "{name:<12} : {micros_per_op:11.3} micros/op {} ops/sec {secs:.3} seconds {ops} operations;{extra}",
        ops_per_sec.round() as u64
    )
}

/// A parsed db_bench result line (the regex `^(\S+)\s+:\s+(\d+\.\d+) micros/op (\d+) ops/sec`
/// used by existing db_bench parsers).
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedLine {
    pub name: String,
    pub micros_per_op: f64,
    pub ops_per_sec: u64,
}

/// Parses any db_bench result-line variant (LevelDB without ops/sec returns None).
pub fn parse_result_line(line: &str) -> Option<ParsedLine> {
    let (name, rest) = line.split_once(':')?;
    let name = name.trim_end();
    if name.is_empty() || name.contains(char::is_whitespace) {
        return None;
    }
    let rest = rest.trim_start();
    let (micros, rest) = rest.split_once(" micros/op ")?;
    if !micros.contains('.') {
        return None;
    }
    let micros_per_op: f64 = micros.parse().ok()?;
    let (ops, rest) = rest.split_once(' ')?;
    if !rest.starts_with("ops/sec") {
        return None;
    }
    Some(ParsedLine {
        name: name.to_string(),
        micros_per_op,
        ops_per_sec: ops.parse().ok()?,
    })
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

impl BenchResult {
    pub fn to_json(&self) -> Value {
        let config: Map<String, Value> = self
            .config
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        let mut v = json!({
            "engine": self.engine,
            "engine_version": self.engine_version,
            "benchmark": self.benchmark,
            "threads": self.threads,
            "num": self.num,
            "key_size": self.key_size,
            "value_size": self.value_size,
            "ops": self.ops,
            "ops_per_sec": round3(self.ops_per_sec),
            "micros_per_op": round3(self.micros_per_op),
            "mb_per_sec": round3(self.mb_per_sec),
            "writer_ops": self.writer_ops,
            "writer_ops_per_sec": self.writer_ops_per_sec.map(round3),
            "p50_us": round3(self.lat.p50_us),
            "p75_us": round3(self.lat.p75_us),
            "p99_us": round3(self.lat.p99_us),
            "p999_us": round3(self.lat.p999_us),
            "p9999_us": round3(self.lat.p9999_us),
            "max_us": round3(self.lat.max_us),
            "mean_us": round3(self.lat.mean_us),
            "wall_s": round3(self.wall_s),
            "user_s": round3(self.user_s),
            "sys_s": round3(self.sys_s),
            "cpu_pct": round3(self.cpu_pct),
            "vcsw": self.vcsw,
            "ivcsw": self.ivcsw,
            "fs_in": self.fs_in,
            "fs_out": self.fs_out,
            "read_bytes": self.read_bytes,
            "write_bytes": self.write_bytes,
            "user_bytes_written": self.user_bytes_written,
            "wamp": self.wamp.map(round3),
            "dev_write_bytes": self.dev_write_bytes,
            "wamp_dev": self.wamp_dev.map(round3),
            "db_bytes": self.db_bytes,
            "maxrss_kb": self.maxrss_kb,
            "anon_peak_kb": self.anon_peak_kb,
            "found": self.found,
            "message": self.message,
            "config": Value::Object(config),
        });
        if let Value::Object(m) = &mut v {
            // Outside `json!`, whose expansion a longer object takes past the recursion limit.
            m.insert("dev_writes".into(), json!(self.dev_writes));
            m.insert(
                "dev_write_bytes_run".into(),
                json!(self.dev_write_bytes_run),
            );
            m.insert("dev_reads".into(), json!(self.dev_reads));
            m.insert("dev_read_bytes".into(), json!(self.dev_read_bytes));
            m.insert("client_cpu_s".into(), json!(self.client_cpu_s.map(round3)));
            m.insert("bg_cpu_s".into(), json!(self.bg_cpu_s.map(round3)));
        }
        if let (Some(w), Value::Object(m)) = (&self.writer_lat, &mut v) {
            m.insert("writer_p50_us".into(), json!(round3(w.p50_us)));
            m.insert("writer_p99_us".into(), json!(round3(w.p99_us)));
            m.insert("writer_p999_us".into(), json!(round3(w.p999_us)));
        }
        v
    }
}

/// CSV columns, in order; every one is a key of the JSON object.
pub const CSV_COLUMNS: &[&str] = &[
    "engine",
    "engine_version",
    "benchmark",
    "threads",
    "num",
    "key_size",
    "value_size",
    "ops",
    "ops_per_sec",
    "micros_per_op",
    "mb_per_sec",
    "writer_ops_per_sec",
    "p50_us",
    "p75_us",
    "p99_us",
    "p999_us",
    "p9999_us",
    "max_us",
    "wall_s",
    "user_s",
    "sys_s",
    "cpu_pct",
    "client_cpu_s",
    "bg_cpu_s",
    "vcsw",
    "ivcsw",
    "fs_in",
    "fs_out",
    "write_bytes",
    "user_bytes_written",
    "wamp",
    "dev_write_bytes",
    "wamp_dev",
    "dev_write_bytes_run",
    "dev_writes",
    "dev_reads",
    "dev_read_bytes",
    "db_bytes",
    "maxrss_kb",
    "anon_peak_kb",
    "status",
    "config",
];

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// One CSV row from a JSON result object (missing fields are empty).
pub fn csv_row(v: &Value) -> String {
    CSV_COLUMNS
        .iter()
        .map(|c| {
            let f = match v.get(*c) {
                None | Some(Value::Null) => String::new(),
                Some(Value::String(s)) => s.clone(),
                Some(Value::Object(m)) => m
                    .iter()
                    .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                    .collect::<Vec<_>>()
                    .join(";"),
                Some(other) => other.to_string(),
            };
            csv_field(&f)
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// `secs` since the Unix epoch as "YYYY-MM-DD HH:MM:SS UTC" (Howard Hinnant's
/// civil-from-days: the proleptic Gregorian calendar, valid for any date after 1970).
pub fn utc_datetime(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The order in which the summary shows `rows`: grouped by (benchmark, threads) in the order
/// each first ran, the engines within a group in their own order, so that the figures to
/// compare stand on adjacent lines; rows that are not results (unavailable engines) last.
fn summary_order(rows: &[Value]) -> Vec<&Value> {
    let key = |r: &Value| {
        (
            r.get("benchmark")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            r.get("threads").and_then(Value::as_u64).unwrap_or(0),
        )
    };
    let mut groups: Vec<((String, u64), Vec<&Value>)> = Vec::new();
    let mut rest = Vec::new();
    for r in rows {
        if r.get("status").and_then(Value::as_str) != Some("ok") {
            rest.push(r);
            continue;
        }
        let k = key(r);
        match groups.iter_mut().find(|(g, _)| *g == k) {
            Some((_, v)) => v.push(r),
            None => groups.push((k, vec![r])),
        }
    }
    groups
        .into_iter()
        .flat_map(|(_, v)| v)
        .chain(rest)
        .collect()
}

/// A Markdown summary table of all results (Symas' columns plus throughput and latency),
/// grouped by benchmark. A run shorter than [`crate::verdict::MIN_WALL_S`] shows "short"
/// instead of its rates; a median of repeats shows its spread beside it.
pub fn summary_table(rows: &[Value]) -> String {
    let mut s = String::from(
        "| benchmark | thr | engine | ops/sec | writer ops/sec | micros/op | P50 us | P99 us | \
         P99.9 us | wall s | user s | sys s | CPU% | bg CPU% | DB KB | RSS KB | anon KB | \
         vcsw/ivcsw | wamp | dev wamp | dev wamp in run |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let num = |v: &Value, k: &str| v.get(k).and_then(Value::as_f64);
    let mut short_seen = false;
    for r in summary_order(rows) {
        let text = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        if r.get("status").and_then(Value::as_str) == Some("unavailable") {
            s.push_str(&format!(
                "| {} | | {} | unavailable: {} | | | | | | | | | | | | | | | | | |\n",
                text("benchmark"),
                text("engine"),
                text("message")
            ));
            continue;
        }
        let f0 = |k: &str| num(r, k).map(|x| format!("{x:.0}")).unwrap_or_default();
        let f1 = |k: &str| num(r, k).map(|x| format!("{x:.1}")).unwrap_or_default();
        let f2 = |k: &str| num(r, k).map(|x| format!("{x:.2}")).unwrap_or_default();
        let f3 = |k: &str| num(r, k).map(|x| format!("{x:.3}")).unwrap_or_default();
        let short = num(r, "wall_s").is_none_or(|w| w < crate::verdict::MIN_WALL_S);
        short_seen |= short;
        let spread = num(r, "spread_pct")
            .map(|p| format!(" ±{p:.0}%"))
            .unwrap_or_default();
        let (ops, writer_ops) = if short {
            ("short".to_string(), String::new())
        } else {
            (
                format!("{}{spread}", f0("ops_per_sec")),
                f0("writer_ops_per_sec"),
            )
        };
        let run_wamp = match (num(r, "dev_write_bytes_run"), num(r, "user_bytes_written")) {
            (Some(d), Some(u)) if u > 0.0 => format!("{:.2}", d / u),
            _ => String::new(),
        };
        let bg_pct = match (num(r, "bg_cpu_s"), num(r, "wall_s")) {
            (Some(c), Some(w)) if w > 0.0 => format!("{:.1}", c * 100.0 / w),
            _ => String::new(),
        };
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {}/{} | {} | {} | {} |\n",
            text("benchmark"),
            f0("threads"),
            text("engine"),
            ops,
            writer_ops,
            f3("micros_per_op"),
            f2("p50_us"),
            f2("p99_us"),
            f2("p999_us"),
            f2("wall_s"),
            f2("user_s"),
            f2("sys_s"),
            f1("cpu_pct"),
            bg_pct,
            num(r, "db_bytes").map(|x| format!("{:.0}", x / 1024.0)).unwrap_or_default(),
            f0("maxrss_kb"),
            f0("anon_peak_kb"),
            f0("vcsw"),
            f0("ivcsw"),
            f2("wamp"),
            f2("wamp_dev"),
            run_wamp,
        ));
    }
    if short_seen {
        s.push_str(&format!(
            "\n\"short\": the run took under {} s, too short to trust as a rate; raise --num.\n",
            crate::verdict::MIN_WALL_S
        ));
    }
    if rows.iter().any(|r| r.get("spread_pct").is_some()) {
        s.push_str("\nops/sec: the median of the repeats, ± (max - min) / median.\n");
    }
    s
}

/// The legend of `--help`: every column the output prints, by where it is printed. Each
/// section is a heading and its rows (a column's name, what it is); `tests/help.rs` runs the
/// driver and checks that every column its output has is named here.
const LEGEND: &[(&str, &[(&str, &str)])] = &[
    (
        "Header, as db_bench's (Date and CPU on stderr), then each engine's:",
        &[
            (
                "Keys Values",
                "bytes of each key and value (and of a value's random part)",
            ),
            ("Entries", "--num"),
            (
                "RawSize FileSize",
                "keys and values, in full and with the values' random part only, MB",
            ),
            (
                "Seed Threads Sync",
                "--seed (the one used), --threads, --sync",
            ),
            (
                "Repeat MemLimit WriteRate",
                "--repeat, --memory_limit, --benchmark_write_rate_limit, when set",
            ),
            (
                "Date CPU",
                "when the run started (UTC); the cores and their model",
            ),
            ("Engine", "the engine and its library's version"),
            (
                "Config",
                "the engine's settings for the run (sync mode, cache, compression, ...)",
            ),
            ("DB path", "the engine's database"),
            ("cgroup", "with --memory_limit: the engine's memory cgroup"),
        ],
    ),
    (
        "Result lines, db_bench's (one per engine, benchmark and thread count; db_bench parsers \
         read them):",
        &[
            (
                "micros/op",
                "the threads' time summed over the operations, in microseconds (db_bench's \
                 definition)",
            ),
            (
                "ops/sec",
                "operations a second of the benchmark's wall time",
            ),
            ("seconds", "the benchmark's wall time"),
            ("operations", "operations done, by every thread"),
            ("MB/s", "bytes of keys and values a second"),
            ("(N of M found)", "reads that found their key"),
            (
                "writer",
                "the line of readwhilewriting's writer thread, in the same columns: its ops/sec \
                 is the summary's writer ops/sec",
            ),
        ],
    ),
    (
        "rusage: the benchmark's use of the engine's process (getrusage, over the benchmark):",
        &[
            ("wall", "seconds of the measured window"),
            ("user", "CPU seconds in user mode, every thread"),
            ("sys", "CPU seconds in the kernel, every thread"),
            (
                "cpu%",
                "(user + sys) / wall: 100 is one core busy throughout",
            ),
            (
                "maxrss_kb",
                "the process's peak resident memory so far, file pages included, KB",
            ),
            (
                "vcsw",
                "voluntary context switches: a thread waited (I/O, a lock, a sleep)",
            ),
            (
                "ivcsw",
                "involuntary context switches: the scheduler took a thread's core away",
            ),
            (
                "fs_in",
                "blocks (512 bytes) the file system read for the process",
            ),
            (
                "fs_out",
                "blocks (512 bytes) the file system wrote for the process",
            ),
            (
                "client_cpu_s",
                "CPU seconds of the benchmark's own threads (each thread's clock)",
            ),
            (
                "bg_cpu_s",
                "user + sys - client_cpu_s: CPU seconds of the engine's threads of its own \
                 (checkpoints, compactions, flushes) and the driver's memory sampler",
            ),
        ],
    ),
    (
        "io: bytes (over the benchmark):",
        &[
            ("user_bytes", "bytes of keys and values the benchmark wrote"),
            (
                "proc_write_bytes",
                "bytes the process sent to storage (/proc/self/io write_bytes)",
            ),
            (
                "proc_read_bytes",
                "bytes the process read from storage (/proc/self/io read_bytes)",
            ),
            (
                "wamp_proc",
                "write amplification: proc_write_bytes / user_bytes (- when nothing was written)",
            ),
            (
                "dev_write_bytes",
                "bytes the device under --db wrote over the benchmark and a syncfs after it (- \
                 where it is no block device the kernel counts)",
            ),
            (
                "wamp_dev",
                "dev_write_bytes / user_bytes: write amplification at the device, the engine's \
                 unsynced bytes included",
            ),
            (
                "dev_writes",
                "write requests the device completed over the same window (its fixed cost is \
                 per request: bytes alone do not say what the writes cost)",
            ),
            (
                "dev_reads",
                "read requests the device completed over the benchmark",
            ),
            ("dev_read_bytes", "bytes those reads read"),
            ("db_kb", "the engine's files at the end, KB allocated (du)"),
            (
                "anon_peak_kb",
                "the peak of the process's anonymous memory, the memory the engine holds itself, \
                 KB",
            ),
            (
                "dev_write_bytes_run",
                "of dev_write_bytes, those the device wrote within the timed window, before the \
                 syncfs after it (an engine that leaves its writes dirty in the page cache \
                 writes them at that sync, and its readers meanwhile had the device to \
                 themselves)",
            ),
        ],
    ),
    (
        "engine: Larch's counters over the benchmark (larch, larch-pages, larch-mapped):",
        &[
            (
                "logged_commits",
                "commits that went to the write-ahead log only",
            ),
            (
                "packed_commits",
                "of those, commits whose log record was packed (LZ4) while the log's room was short",
            ),
            (
                "runs_written",
                "large values a logged commit wrote into runs of the data file, named by its record",
            ),
            (
                "run_write_ms",
                "time the committer spent writing those runs to the data file",
            ),
            ("page_commits", "commits that wrote pages and a meta page"),
            (
                "checkpoints",
                "checkpoints written (pages of the log's commits merged into the tree)",
            ),
            (
                "checkpoint_slices",
                "of those, checkpoints that merged one key range (--checkpoint_slices)",
            ),
            (
                "durable_checkpoints",
                "of those, checkpoints made durable as written (each slice's, unless \
                 --log_room_bytes)",
            ),
            (
                "log_syncs",
                "syncs of the log for durable commits (group commit shares one)",
            ),
            (
                "paced_ms",
                "ms the writer was held back so that checkpoints keep up with the log",
            ),
            (
                "share_ms",
                "ms the writer was held back to share the CPU and the device with readers",
            ),
            (
                "log_full_waits",
                "write transactions that waited for a checkpoint to free room in the log",
            ),
            ("log_full_wait_ms", "ms those waits took"),
            (
                "read_ahead_pages",
                "leaves the checkpoints hinted to be read ahead of their merge (beyond memory)",
            ),
            (
                "read_ahead_requests",
                "the hints those took (consecutive leaves in one)",
            ),
            (
                "merge_ms",
                "ms the checkpoints' merges took (records gathered and merged, pages written)",
            ),
            (
                "sync_ms",
                "ms the checkpoints' syncs took on their own threads (log, data file, meta page)",
            ),
            (
                "sync_wait_ms",
                "ms waited for a checkpoint's sync to end (by the next checkpoint before its \
                 meta page, above all)",
            ),
        ],
    ),
    (
        "process: the engine's child process, once it has exited:",
        &[
            ("engine", "the engine's name"),
            ("exit", "the child's exit status (0: every benchmark ran)"),
            (
                "wall user sys",
                "seconds of the whole process: wall time, CPU in user mode and in the kernel",
            ),
            ("maxrss_kb vcsw", "as in rusage, for the whole process"),
            ("ivcsw fs_in fs_out", "as in rusage, for the whole process"),
            (
                "db_kb_closed",
                "the engine's files once it closed them, KB allocated",
            ),
            (
                "cgroup_peak_bytes",
                "with --memory_limit: the memory cgroup's peak",
            ),
        ],
    ),
    (
        "--histogram=1: RocksDB's block of each benchmark's latencies, in microseconds:",
        &[
            (
                "Microseconds per",
                "the block's heading: the operation timed (read, write, seek, ...)",
            ),
            ("Count", "operations timed"),
            ("Average StdDev", "their mean and standard deviation"),
            ("Min Median Max", "the fastest, the middle and the slowest"),
            ("Percentiles", "the percentiles that follow"),
            (
                "P50 P75 P99 P99.9 P99.99",
                "the latency that 50, 75, 99, 99.9 and 99.99 percent of operations took at most",
            ),
            (
                "[ a, b )",
                "a bucket: its operations, their percentage, the cumulative percentage and a bar",
            ),
        ],
    ),
    (
        "Summary table (at the end; one row per engine, benchmark and thread count):",
        &[
            ("benchmark", "the benchmark"),
            ("thr", "its threads (readers, for readwhilewriting)"),
            ("engine", "the engine"),
            (
                "ops/sec",
                "operations a second; short: the run took under 0.02 s, too short to give a rate; \
                 with --repeat, the median and its spread (± (max - min) / median)",
            ),
            (
                "writer ops/sec",
                "readwhilewriting's writer: its puts a second beside the readers",
            ),
            ("micros/op", "as in the result line"),
            ("P50 us", "the median latency of an operation, microseconds"),
            ("P99 us", "the 99th percentile latency, microseconds"),
            ("P99.9 us", "the 99.9th percentile latency, microseconds"),
            ("wall s", "rusage's wall"),
            ("user s", "rusage's user"),
            ("sys s", "rusage's sys"),
            ("CPU%", "rusage's cpu%"),
            (
                "bg CPU%",
                "rusage's bg_cpu_s / wall: the cores the engine's background threads kept busy",
            ),
            ("DB KB", "io's db_kb"),
            ("RSS KB", "rusage's maxrss_kb"),
            ("anon KB", "io's anon_peak_kb"),
            (
                "vcsw/ivcsw",
                "rusage's voluntary / involuntary context switches",
            ),
            (
                "wamp",
                "io's wamp_proc: bytes the process wrote / bytes of keys and values",
            ),
            (
                "dev wamp",
                "io's wamp_dev: bytes the device wrote / bytes of keys and values",
            ),
            (
                "dev wamp in run",
                "io's dev_write_bytes_run / bytes of keys and values: the part of dev wamp the \
                 device wrote while the benchmark ran, not at the sync after it",
            ),
        ],
    ),
    (
        "Verdict table (when Larch ran beside a peer):",
        &[
            (
                "<engine>",
                "one column per engine: its ops/sec (K, M), or short",
            ),
            (
                "best peer",
                "the engine other than Larch with the most ops/sec",
            ),
            (
                "larch / best",
                "Larch's ops/sec over the best peer's: win at 1.05 and above, loss (bold) at 0.95 \
                 and below, even between (one column per Larch engine: larch-pages / best, \
                 larch-mapped / best too)",
            ),
        ],
    ),
    (
        "--json and --csv: the columns above under these names, with the engine's version and \
         settings:",
        &[
            (
                "engine benchmark threads",
                "the summary's engine, benchmark and thr",
            ),
            ("engine_version", "the engine's library version"),
            ("num key_size value_size", "the flags the row ran with"),
            ("ops ops_per_sec", "operations, and operations a second"),
            ("micros_per_op mb_per_sec", "as micros/op and MB/s"),
            ("writer_ops_per_sec", "as writer ops/sec"),
            ("p50_us p75_us p99_us", "latency percentiles, microseconds"),
            (
                "p999_us p9999_us max_us",
                "latency percentiles and the slowest, microseconds",
            ),
            (
                "wall_s user_s sys_s cpu_pct",
                "as rusage's wall, user, sys and cpu%",
            ),
            ("client_cpu_s bg_cpu_s", "as in rusage"),
            ("write_bytes", "io's proc_write_bytes"),
            ("user_bytes_written", "io's user_bytes"),
            ("wamp", "io's wamp_proc"),
            (
                "db_bytes maxrss_kb",
                "io's db_kb in bytes; rusage's maxrss_kb",
            ),
            (
                "status",
                "ok, unavailable (the engine's library is missing) or error",
            ),
            (
                "config",
                "the engine's settings, as printed before its results",
            ),
        ],
    ),
];

/// The legend of the output's columns, for `--help` (see [`LEGEND`]).
pub fn legend() -> String {
    let mut s = String::from("Output columns:\n");
    for (heading, rows) in LEGEND {
        s.push('\n');
        for line in crate::flags::wrap(heading, crate::flags::HELP_LINE_CHARS) {
            s.push_str(&line);
            s.push('\n');
        }
        let rows: Vec<(&str, &str, &str)> = rows.iter().map(|(a, b)| (*a, "", *b)).collect();
        s.push_str(&crate::flags::columns(&rows, 28, 0));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_line_parses_back() {
        let l = result_line(
            "readrandom",
            1.234,
            810_372.4,
            1.234,
            1_000_000,
            89.6,
            "(1000 of 1000 found)",
        );
        assert!(
            l.starts_with("readrandom   :       1.234 micros/op 810372 ops/sec"),
            "{l}"
        );
        let p = parse_result_line(&l).unwrap();
        assert_eq!(p.name, "readrandom");
        assert_eq!(p.micros_per_op, 1.234);
        assert_eq!(p.ops_per_sec, 810_372);
    }

    #[test]
    fn parses_real_db_bench_variants() {
        // RocksDB 7.x
        let r = "fillseq      :       2.051 micros/op 487475 ops/sec 2.051 seconds 1000000 operations;   53.9 MB/s";
        assert_eq!(parse_result_line(r).unwrap().ops_per_sec, 487_475);
        // Older RocksDB / Symas drivers
        let s = "fillrandsync :       2.317 micros/op 431592 ops/sec; 47.7 MB/s (1000 ops)";
        let p = parse_result_line(s).unwrap();
        assert_eq!(p.name, "fillrandsync");
        assert_eq!(p.micros_per_op, 2.317);
        // Non-result lines are ignored.
        for l in [
            "Keys:       16 bytes each",
            "LevelDB:    version 1.23",
            "rusage       : wall 2.401 user 2.210",
            "fillseq      :       2.051 micros/op;   53.9 MB/s",
            "",
        ] {
            assert_eq!(parse_result_line(l), None, "{l}");
        }
    }

    #[test]
    fn json_has_the_required_fields_and_csv_quotes() {
        let r = BenchResult {
            engine: "lmdb".into(),
            benchmark: "fillseq".into(),
            config: vec![("flags".into(), "MDB_NOSYNC,MDB_WRITEMAP".into())],
            ..Default::default()
        };
        let v = r.to_json();
        for k in [
            "engine",
            "benchmark",
            "threads",
            "num",
            "key_size",
            "value_size",
            "ops_per_sec",
            "micros_per_op",
            "writer_ops_per_sec",
            "p50_us",
            "p99_us",
            "p999_us",
            "wall_s",
            "user_s",
            "sys_s",
            "cpu_pct",
            "vcsw",
            "ivcsw",
            "fs_in",
            "fs_out",
            "write_bytes",
            "wamp",
            "db_bytes",
            "maxrss_kb",
            "config",
        ] {
            assert!(v.get(k).is_some(), "missing {k}");
        }
        let row = csv_row(&v);
        assert!(row.starts_with("lmdb,,fillseq,"), "{row}");
        assert!(row.contains("\"flags=MDB_NOSYNC,MDB_WRITEMAP\""), "{row}");
        let table = summary_table(&[v]);
        assert_eq!(table.lines().filter(|l| l.starts_with('|')).count(), 3);
    }

    /// The summary's "bg CPU%" is the CPU the process used beside the benchmark's threads, as
    /// a share of the run's wall time; empty where it was not measured. Every row, the
    /// unavailable engine's too, has as many cells as the header.
    #[test]
    fn the_summary_shows_the_cpu_used_beside_the_benchmarks_threads() {
        let rows = vec![
            json!({"status": "ok", "engine": "larch", "benchmark": "fillrandom", "threads": 1,
                   "ops_per_sec": 1000.0, "wall_s": 2.0, "cpu_pct": 160.0,
                   "client_cpu_s": 2.0, "bg_cpu_s": 1.2}),
            json!({"status": "ok", "engine": "lmdb", "benchmark": "fillrandom", "threads": 1,
                   "ops_per_sec": 900.0, "wall_s": 2.0, "cpu_pct": 100.0}),
            json!({"status": "unavailable", "engine": "bdb", "benchmark": "fillrandom",
                   "message": "no libdb"}),
        ];
        let t = summary_table(&rows);
        let lines: Vec<&str> = t.lines().filter(|l| l.starts_with('|')).collect();
        let cells = |l: &str| l.trim().trim_matches('|').split('|').count();
        let header: Vec<&str> = lines[0]
            .trim_matches('|')
            .split('|')
            .map(str::trim)
            .collect();
        let at = header.iter().position(|c| *c == "bg CPU%").unwrap();
        assert_eq!(header[at - 1], "CPU%");
        for l in &lines {
            assert_eq!(cells(l), header.len(), "{l}");
        }
        let cell = |l: &str| {
            l.trim_matches('|')
                .split('|')
                .nth(at)
                .unwrap()
                .trim()
                .to_string()
        };
        assert_eq!(cell(lines[2]), "60.0", "{t}");
        assert_eq!(cell(lines[3]), "", "{t}");
    }

    #[test]
    fn dates_are_calendar_dates() {
        assert_eq!(utc_datetime(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc_datetime(951_782_400), "2000-02-29 00:00:00 UTC");
        assert_eq!(utc_datetime(1_795_705_825), "2026-11-26 15:10:25 UTC");
    }

    #[test]
    fn the_summary_groups_by_benchmark_and_flags_short_runs() {
        let row = |e: &str, b: &str, ops: f64, wall: f64| {
            json!({"status": "ok", "engine": e, "benchmark": b, "threads": 1,
                   "ops_per_sec": ops, "wall_s": wall})
        };
        let rows = vec![
            row("larch", "fillseq", 1000.0, 1.0),
            row("larch", "readseq", 2000.0, 0.001),
            json!({"status": "unavailable", "engine": "bdb", "benchmark": "fillseq,readseq",
                   "message": "no libdb"}),
            row("lmdb", "fillseq", 900.0, 1.0),
            row("lmdb", "readseq", 1800.0, 1.0),
        ];
        let t = summary_table(&rows);
        let lines: Vec<&str> = t.lines().skip(2).take(5).collect();
        assert!(
            lines[0].starts_with("| fillseq | 1 | larch | 1000 |"),
            "{t}"
        );
        assert!(lines[1].starts_with("| fillseq | 1 | lmdb | 900 |"), "{t}");
        assert!(
            lines[2].starts_with("| readseq | 1 | larch | short |"),
            "{t}"
        );
        assert!(lines[3].starts_with("| readseq | 1 | lmdb | 1800 |"), "{t}");
        assert!(lines[4].contains("unavailable: no libdb"), "{t}");
        assert!(t.contains("too short to trust"), "{t}");
    }
}
