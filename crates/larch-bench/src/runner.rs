//! The benchmark child: opens one engine, runs the benchmark list for each thread count, and
//! measures each benchmark (throughput, latency histograms, rusage and /proc/self/io deltas,
//! size on disk). Results go to stdout as db_bench lines and to the parent as JSON lines.

use crate::engines::{self, Engine, EngineSpec, Op, OpenOptions, Opened, Session, WriteOpts};
use crate::error::{Error, Result};
use crate::flags::{Flags, KeyFormat};
use crate::gen::{KeyGen, Permutation, Rng, ValueGenerator};
use crate::hist::Latency;
use crate::report::{result_line, BenchResult};
use crate::sys::{self, ProcIo, Usage};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// Order in which a write benchmark visits keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    Seq,
    /// db_bench's `rand % num` (repeats allowed).
    Random,
    /// A permutation of 0..num (each key once).
    Unique,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Fill(Order),
    Delete(Order),
    ReadSeq,
    ReadReverse,
    ReadRandom,
    ReadMissing,
    SeekRandom,
    ReadWhileWriting,
    ReadRandomWriteRandom,
    UpdateRandom,
    /// overwrite's one writer while another thread holds a read snapshot taken before the
    /// first commit: what an engine does with the space a long reader pins.
    OverwritePinned,
    /// `--threads` writers over disjoint streams of a key permutation (the Tupl test):
    /// `Insert` adds keys not yet in the database, `Update` rewrites those inserted before.
    UniqueMt(MtMode),
}

/// What a *unique_mt benchmark does with its thread's stream of permutation indices
/// `key_offset + tid + k * threads`, k = 0, 1, ...
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MtMode {
    /// fillunique_mt (fresh) and insertunique_mt: k from where the previous insert of this
    /// process stopped (0 for a fresh fill) while the index stays below the end of the range.
    Insert,
    /// updateunique_mt: k over every key the inserts of this process put (or the whole
    /// `--writes` range when none ran in this process).
    Update,
}

/// A benchmark name resolved against the flags.
#[derive(Debug, Clone)]
pub struct Workload {
    pub name: String,
    pub kind: Kind,
    /// Starts from an empty database (db_bench's fill* except overwrite).
    pub fresh: bool,
    /// Operations per thread.
    pub ops: u64,
    pub sync: bool,
    pub batch: usize,
}

/// Entries per transaction of the *batch benchmarks (Symas' FLAGS_batch).
pub const FILL_BATCH_DEFAULT: usize = 1000;

impl Workload {
    pub fn resolve(name: &str, f: &Flags) -> Result<Workload> {
        let sync_ops = (f.writes / 1000).max(1);
        let batch_n = if f.batch_size > 1 {
            f.batch_size
        } else {
            FILL_BATCH_DEFAULT
        };
        let (kind, fresh, ops, sync, batch) = match name {
            "fillseq" => (Kind::Fill(Order::Seq), true, f.writes, f.sync, f.batch_size),
            "fillrandom" => (
                Kind::Fill(Order::Random),
                true,
                f.writes,
                f.sync,
                f.batch_size,
            ),
            "filluniquerandom" => (
                Kind::Fill(Order::Unique),
                true,
                f.writes,
                f.sync,
                f.batch_size,
            ),
            "overwrite" => (
                Kind::Fill(Order::Random),
                false,
                f.writes,
                f.sync,
                f.batch_size,
            ),
            "overwritepinned" => (Kind::OverwritePinned, false, f.writes, f.sync, f.batch_size),
            "fillsync" | "fillrandsync" => (Kind::Fill(Order::Random), true, sync_ops, true, 1),
            "fillseqsync" => (Kind::Fill(Order::Seq), true, sync_ops, true, 1),
            // Group commit: fillsync on every --threads thread at once.
            "fillsync_mt" => (Kind::Fill(Order::Random), true, sync_ops, true, 1),
            "fillbatch" | "fillseqbatch" => {
                (Kind::Fill(Order::Seq), true, f.writes, f.sync, batch_n)
            }
            "fillrandbatch" => (Kind::Fill(Order::Random), true, f.writes, f.sync, batch_n),
            "deleterandom" => (
                Kind::Delete(Order::Random),
                false,
                f.deletes,
                f.sync,
                f.batch_size,
            ),
            "deleteseq" => (
                Kind::Delete(Order::Seq),
                false,
                f.deletes,
                f.sync,
                f.batch_size,
            ),
            "readseq" => (Kind::ReadSeq, false, f.reads, false, 1),
            "readreverse" => (Kind::ReadReverse, false, f.reads, false, 1),
            "readrandom" => (Kind::ReadRandom, false, f.reads, false, 1),
            "readmissing" => (Kind::ReadMissing, false, f.reads, false, 1),
            "seekrandom" => (Kind::SeekRandom, false, f.reads, false, 1),
            "readwhilewriting" => (Kind::ReadWhileWriting, false, f.reads, f.sync, 1),
            "readrandomwriterandom" => (Kind::ReadRandomWriteRandom, false, f.reads, f.sync, 1),
            "updaterandom" => (Kind::UpdateRandom, false, f.reads, f.sync, 1),
            "fillunique_mt" => (
                Kind::UniqueMt(MtMode::Insert),
                true,
                f.writes,
                f.sync,
                f.batch_size,
            ),
            "insertunique_mt" => (
                Kind::UniqueMt(MtMode::Insert),
                false,
                f.num - f.key_offset.min(f.num),
                f.sync,
                f.batch_size,
            ),
            "updateunique_mt" => (
                Kind::UniqueMt(MtMode::Update),
                false,
                f.writes,
                f.sync,
                f.batch_size,
            ),
            other => return Err(Error::Usage(format!("unknown benchmark {other:?}"))),
        };
        Ok(Workload {
            name: name.to_string(),
            kind,
            fresh,
            ops,
            sync,
            batch,
        })
    }

    /// Write benchmarks run on one thread (every engine here serialises writers), except
    /// fillsync_mt (durable commits from --threads threads at once: what group commit is
    /// for); reads and mixed workloads use --threads.
    pub fn uses_threads(&self) -> bool {
        self.name == "fillsync_mt"
            || !matches!(
                self.kind,
                Kind::Fill(_) | Kind::Delete(_) | Kind::OverwritePinned
            )
    }
}

/// One thread's counters, latency histogram, and interval reporting.
pub struct ThreadStats {
    tid: usize,
    name: String,
    pub ops: u64,
    pub bytes: u64,
    pub found: u64,
    pub reads: u64,
    pub writes: u64,
    pub lat: Latency,
    start: Instant,
    last: Instant,
    finish: Instant,
    stats_interval: u64,
    next_report: u64,
    interval_start: Instant,
    interval_ops: u64,
    progress_total: Option<u64>,
    next_progress: u64,
    scan_pending: u64,
    series: Option<Series>,
}

/// A thread's cumulative operation count sampled over time (`--series_interval_ms`): the data
/// behind throughput-over-time charts. Samples start 1 ms apart and the gap grows by a tenth of
/// the elapsed time up to the interval, so that a log time axis has points from the start.
#[derive(Debug, Clone)]
pub struct Series {
    interval_s: f64,
    next_s: f64,
    /// (seconds since the thread started, operations done by then).
    pub points: Vec<(f64, u64)>,
}

/// Samples kept per thread; past it the series stops growing (the final point is still added).
pub const SERIES_POINTS_MAX: usize = 20_000;

impl Series {
    pub fn new(interval_ms: u64) -> Series {
        Series {
            interval_s: interval_ms as f64 / 1000.0,
            next_s: 0.001_f64.min(interval_ms as f64 / 1000.0),
            points: vec![(0.0, 0)],
        }
    }

    /// Records `ops` at `t_s` when a sample is due.
    #[inline]
    pub fn observe(&mut self, t_s: f64, ops: u64) {
        if t_s >= self.next_s && self.points.len() < SERIES_POINTS_MAX {
            self.points.push((t_s, ops));
            let gap = (t_s * 0.1).clamp(0.001, self.interval_s.max(0.001));
            self.next_s = t_s + gap;
        }
    }

    /// The last point, at the thread's finish.
    pub fn finish(&mut self, t_s: f64, ops: u64) {
        if self.points.last().is_none_or(|&(t, o)| t < t_s || o != ops) {
            self.points.push((t_s, ops));
        }
    }

    pub fn to_json(&self, tid: usize, role: &str) -> serde_json::Value {
        let r6 = |x: f64| (x * 1e6).round() / 1e6;
        serde_json::json!({
            "tid": tid,
            "role": role,
            "t_s": self.points.iter().map(|p| r6(p.0)).collect::<Vec<_>>(),
            "ops": self.points.iter().map(|p| p.1).collect::<Vec<_>>(),
        })
    }
}

/// Iteration steps per latency sample in readseq/readreverse (see finished_scan_step).
pub const SCAN_TIMING_GROUP: u64 = 64;

impl ThreadStats {
    fn new(tid: usize, name: &str, f: &Flags, progress_total: Option<u64>) -> Self {
        let now = Instant::now();
        ThreadStats {
            tid,
            name: name.to_string(),
            ops: 0,
            bytes: 0,
            found: 0,
            reads: 0,
            writes: 0,
            lat: Latency::new(),
            start: now,
            last: now,
            finish: now,
            stats_interval: f.stats_interval,
            next_report: f.stats_interval,
            interval_start: now,
            interval_ops: 0,
            progress_total,
            next_progress: 1 << 14,
            scan_pending: 0,
            series: (f.series_interval_ms > 0).then(|| Series::new(f.series_interval_ms)),
        }
    }

    fn start(&mut self) {
        let now = Instant::now();
        self.start = now;
        self.last = now;
        self.interval_start = now;
    }

    /// Records `n` operations finished now, timed since the previous one (db_bench's
    /// FinishedOps: one latency sample per call).
    #[inline]
    fn finished(&mut self, n: u64) {
        let now = Instant::now();
        self.lat.record_ns((now - self.last).as_nanos() as u64);
        self.last = now;
        self.ops += n;
        if let Some(s) = self.series.as_mut() {
            s.observe((now - self.start).as_secs_f64(), self.ops);
        }
        if self.stats_interval > 0 && self.ops >= self.next_report {
            self.report(now);
            self.next_report = self.ops + self.stats_interval;
        }
        if self.progress_total.is_some() && self.ops >= self.next_progress {
            self.progress();
        }
    }

    /// Records one operation of an iteration, reading the clock only every SCAN_TIMING_GROUP
    /// operations and recording the group's mean: a clock read costs about as much as an
    /// LMDB cursor step, so timing each step would halve the measured scan rate.
    #[inline]
    fn finished_scan_step(&mut self) {
        self.scan_pending += 1;
        if self.scan_pending == SCAN_TIMING_GROUP {
            self.flush_scan_steps();
        }
    }

    fn flush_scan_steps(&mut self) {
        if self.scan_pending == 0 {
            return;
        }
        let n = self.scan_pending;
        self.scan_pending = 0;
        let now = Instant::now();
        let ns = (now - self.last).as_nanos() as u64;
        self.lat.record_ns_n(ns / n, n);
        self.last = now;
        self.ops += n;
        if let Some(s) = self.series.as_mut() {
            s.observe((now - self.start).as_secs_f64(), self.ops);
        }
        if self.stats_interval > 0 && self.ops >= self.next_report {
            self.report(now);
            self.next_report = self.ops + self.stats_interval;
        }
        if self.progress_total.is_some() && self.ops >= self.next_progress {
            self.progress();
        }
    }

    /// db_bench's per-thread incremental line (stderr), interval and cumulative.
    fn report(&mut self, now: Instant) {
        let total_s = (now - self.start).as_secs_f64().max(1e-9);
        let int_s = (now - self.interval_start).as_secs_f64().max(1e-9);
        let int_ops = self.ops - self.interval_ops;
        eprintln!(
            "{:.3}s {} ... thread {}: ({},{}) ops and ({:.1},{:.1}) ops/second in ({:.6},{:.6}) seconds",
            total_s,
            self.name,
            self.tid,
            int_ops,
            self.ops,
            int_ops as f64 / int_s,
            self.ops as f64 / total_s,
            int_s,
            total_s
        );
        self.interval_start = now;
        self.interval_ops = self.ops;
    }

    fn progress(&mut self) {
        self.next_progress = self.ops + (1 << 14);
        if let Some(total) = self.progress_total {
            let pct = if total > 0 {
                self.ops as f64 * 100.0 / total as f64
            } else {
                0.0
            };
            let width = 30usize;
            let filled = ((pct / 100.0) * width as f64).min(width as f64) as usize;
            eprint!(
                "\r{:<12} [{}{}] {:5.1}% {} ops",
                self.name,
                "#".repeat(filled),
                " ".repeat(width - filled),
                pct.min(100.0),
                self.ops
            );
        }
    }

    fn stop(&mut self) {
        self.flush_scan_steps();
        self.finish = Instant::now();
        let (t, ops) = ((self.finish - self.start).as_secs_f64(), self.ops);
        if let Some(s) = self.series.as_mut() {
            s.finish(t, ops);
        }
        if self.progress_total.is_some() && self.next_progress > 1 << 14 {
            eprint!("\r{}\r", " ".repeat(72));
        }
    }
}

/// The threads' figures combined as db_bench does.
struct Merged {
    ops: u64,
    bytes: u64,
    found: u64,
    reads: u64,
    writes: u64,
    lat: Latency,
    /// max finish - min start.
    wall_s: f64,
    /// Sum of per-thread elapsed times (db_bench's micros/op numerator).
    thread_s: f64,
}

fn merge(stats: &[ThreadStats]) -> Merged {
    let mut m = Merged {
        ops: 0,
        bytes: 0,
        found: 0,
        reads: 0,
        writes: 0,
        lat: Latency::new(),
        wall_s: 0.0,
        thread_s: 0.0,
    };
    let (Some(start), Some(finish)) = (
        stats.iter().map(|s| s.start).min(),
        stats.iter().map(|s| s.finish).max(),
    ) else {
        return m;
    };
    for s in stats {
        m.ops += s.ops;
        m.bytes += s.bytes;
        m.found += s.found;
        m.reads += s.reads;
        m.writes += s.writes;
        m.lat.merge(&s.lat);
        m.thread_s += (s.finish - s.start).as_secs_f64();
    }
    m.wall_s = (finish - start).as_secs_f64();
    m
}

/// Stops a loop after `ops` iterations, or after --duration seconds when that is set.
struct Budget {
    ops: u64,
    deadline: Option<Instant>,
    calls: u64,
    /// The count bounds the loop even with a deadline (a cap, not a replacement).
    count_too: bool,
}

impl Budget {
    fn new(ops: u64, duration_s: u64) -> Budget {
        Budget {
            ops,
            deadline: (duration_s > 0).then(|| Instant::now() + Duration::from_secs(duration_s)),
            calls: 0,
            count_too: false,
        }
    }

    /// `ops` iterations, or fewer when `cap_s` (> 0) seconds pass first.
    fn capped(ops: u64, cap_s: u64) -> Budget {
        Budget {
            count_too: true,
            ..Budget::new(ops, cap_s)
        }
    }

    /// Whether the count alone decides how much work is left.
    fn counted(&self) -> bool {
        self.deadline.is_none() || self.count_too
    }

    #[inline]
    fn more(&mut self, done: u64) -> bool {
        self.calls += 1;
        match self.deadline {
            Some(_) if self.count_too && done >= self.ops => false,
            Some(d) => self.calls % 64 != 1 || Instant::now() < d,
            None => done < self.ops,
        }
    }
}

struct Outcome {
    stats: Vec<ThreadStats>,
    writer: Option<ThreadStats>,
    user_bytes_written: u64,
    message: String,
    threads: usize,
}

/// The key streams the *unique_mt benchmarks of one child have inserted so far: for each
/// thread, how many indices of its stream are in the database (see [`MtMode`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MtState {
    pub threads: usize,
    pub inserted: Vec<u64>,
}

/// Index `k` of thread `tid`'s stream: the threads interleave over the permutation.
pub fn mt_index(key_offset: u64, tid: usize, threads: usize, k: u64) -> u64 {
    key_offset + tid as u64 + k * threads as u64
}

/// Stream positions of thread `tid` below `end` (exclusive) of the permutation index range.
pub fn mt_count_below(key_offset: u64, tid: usize, threads: usize, end: u64) -> u64 {
    let first = key_offset + tid as u64;
    if end <= first {
        0
    } else {
        (end - first).div_ceil(threads as u64)
    }
}

/// `threads` writers over disjoint streams of a seeded permutation of 0..num (Tupl's
/// multi-threaded random inserts of distinct keys, then updates of those keys). Returns the
/// outcome and the per-thread stream positions reached.
fn run_unique_mt(
    engine: &dyn Engine,
    w: &Workload,
    f: &Flags,
    threads: usize,
    mode: MtMode,
    state: Option<&MtState>,
) -> Result<(Outcome, MtState)> {
    let progress = (f.progress && is_tty_stderr()).then_some(w.ops / threads as u64);
    let state = state.filter(|s| s.threads == threads && !w.fresh);
    let cap_s = if w.fresh {
        f.fill_duration_s
    } else {
        f.duration_s
    };
    let end = match (w.fresh, mode) {
        (true, _) | (false, MtMode::Update) => f.key_offset + f.writes,
        (false, MtMode::Insert) => f.num,
    };
    let reached: Vec<AtomicU64> = (0..threads).map(|_| AtomicU64::new(0)).collect();
    let stats = run_threads(engine, threads, &w.name, f, progress, None, |tid, s, st| {
        let mut g = Gen::new(f, 2000 + tid as u64);
        let perm = Permutation::new(f.num, f.seed);
        let limit = mt_count_below(f.key_offset, tid, threads, end);
        let (from, to) = match (mode, state) {
            (MtMode::Insert, Some(s)) => (s.inserted[tid], limit),
            (MtMode::Insert, None) => (0, limit),
            (MtMode::Update, Some(s)) => (0, s.inserted[tid]),
            (MtMode::Update, None) => (0, limit),
        };
        let mut budget = Budget::capped(to.saturating_sub(from), cap_s);
        let opts = WriteOpts {
            sync: w.sync,
            append: false,
        };
        let mut buf: Vec<u8> = Vec::with_capacity(w.batch * (f.key_size + f.value_size + 1));
        let mut spans: Vec<(usize, usize)> = Vec::with_capacity(w.batch);
        let mut done = 0u64;
        let r = (|| -> Result<()> {
            while budget.more(done) {
                let n = (w.batch as u64).min(to - from - done);
                buf.clear();
                spans.clear();
                for j in 0..n {
                    let idx = mt_index(f.key_offset, tid, threads, from + done + j);
                    let at = buf.len();
                    buf.extend_from_slice(g.keys.key(perm.get(idx)));
                    let kl = buf.len() - at;
                    buf.extend_from_slice(g.values.generate(g.value_size));
                    spans.push((at, kl));
                }
                let vl = g.value_size;
                let ops: Vec<Op<'_>> = spans
                    .iter()
                    .map(|&(at, kl)| Op::Put(&buf[at..at + kl], &buf[at + kl..at + kl + vl]))
                    .collect();
                s.write(&ops, opts)?;
                st.bytes += buf.len() as u64;
                st.writes += n;
                done += n;
                st.finished(n);
            }
            Ok(())
        })();
        let pos = match mode {
            MtMode::Insert => from + done,
            MtMode::Update => state.map_or(from + done, |s| s.inserted[tid]),
        };
        reached[tid].store(pos, Ordering::Relaxed);
        r
    })?;
    let m = merge(&stats);
    let next = MtState {
        threads,
        inserted: reached.iter().map(|a| a.load(Ordering::Relaxed)).collect(),
    };
    let verb = match mode {
        MtMode::Insert => "inserts",
        MtMode::Update => "updates",
    };
    Ok((
        Outcome {
            user_bytes_written: m.bytes,
            message: format!("({verb}:{} threads:{threads})", m.writes),
            stats,
            writer: None,
            threads,
        },
        next,
    ))
}

fn is_tty_stderr() -> bool {
    // SAFETY: isatty only inspects the descriptor.
    unsafe { libc::isatty(2) == 1 }
}

/// Runs `body` on `n` threads that start together; each gets its own session and stats.
/// `failed`, when given, is set as soon as any thread fails (so that a writer looping until the
/// readers finish stops even when a reader never started).
fn run_threads<F>(
    engine: &dyn Engine,
    n: usize,
    name: &str,
    f: &Flags,
    progress_total: Option<u64>,
    failed: Option<&AtomicBool>,
    body: F,
) -> Result<Vec<ThreadStats>>
where
    F: Fn(usize, &mut dyn Session, &mut ThreadStats) -> Result<()> + Sync,
{
    let barrier = Barrier::new(n);
    std::thread::scope(|sc| {
        let handles: Vec<_> = (0..n)
            .map(|tid| {
                let (barrier, body) = (&barrier, &body);
                sc.spawn(move || -> Result<ThreadStats> {
                    let session = engine.session();
                    // Every thread reaches the barrier, even one whose session failed.
                    barrier.wait();
                    let mark_failed = || {
                        if let Some(flag) = failed {
                            flag.store(true, Ordering::Relaxed);
                        }
                    };
                    let mut session = session.inspect_err(|_| mark_failed())?;
                    let mut st = ThreadStats::new(
                        tid,
                        name,
                        f,
                        if tid == 0 { progress_total } else { None },
                    );
                    st.start();
                    let r = body(tid, &mut *session, &mut st);
                    st.stop();
                    if r.is_err() {
                        mark_failed();
                    }
                    r.map(|()| st)
                })
            })
            .collect();
        let mut out = Vec::with_capacity(n);
        let mut first_err = None;
        for h in handles {
            match h.join() {
                Ok(Ok(st)) => out.push(st),
                Ok(Err(e)) => {
                    first_err.get_or_insert(e);
                }
                Err(_) => {
                    first_err.get_or_insert(Error::Child("a benchmark thread panicked".into()));
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(out),
        }
    })
}

/// Key, value and RNG state for one thread.
struct Gen {
    keys: KeyGen,
    values: ValueGenerator,
    rng: Rng,
    num: u64,
    value_size: usize,
}

impl Gen {
    fn new(f: &Flags, stream: u64) -> Gen {
        Gen {
            keys: KeyGen::new(f.key_format, f.key_size),
            values: ValueGenerator::new(f.compression_ratio, f.value_size),
            rng: Rng::new(f.seed, stream),
            num: f.num,
            value_size: f.value_size,
        }
    }
}

/// Write benchmarks. Fills run on `threads` threads with `--fill_threads=1` (db_bench's and
/// pmemkv-bench's semantics: each thread does `--writes` puts; sequential fills put the same
/// keys in the same order on every thread, random fills draw from each thread's own stream),
/// on one thread otherwise.
fn run_write(
    engine: &dyn Engine,
    w: &Workload,
    f: &Flags,
    order: Order,
    delete: bool,
    threads: usize,
) -> Result<Outcome> {
    let threads = if delete { 1 } else { threads.max(1) };
    let progress = (f.progress && is_tty_stderr()).then_some(w.ops);
    let budget_s = if w.fresh {
        f.fill_duration_s
    } else {
        f.duration_s
    };
    // overwritepinned: when the writer passed each tenth of its commits.
    let pinned = w.kind == Kind::OverwritePinned;
    let tenths = std::sync::Mutex::new(Vec::with_capacity(11));
    let stats = run_threads(engine, threads, &w.name, f, progress, None, |tid, s, st| {
        let mut g = Gen::new(f, tid as u64);
        let perm = Permutation::new(f.num, f.seed);
        let mut marks = Vec::with_capacity(11);
        let tenth = (w.ops / 10).max(1);
        if pinned {
            marks.push(Instant::now());
        }
        let mut budget = if w.fresh {
            Budget::capped(w.ops, budget_s)
        } else {
            Budget::new(w.ops, budget_s)
        };
        let mut buf: Vec<u8> = Vec::with_capacity(w.batch * (f.key_size + f.value_size + 1));
        let mut spans: Vec<(usize, usize, usize)> = Vec::with_capacity(w.batch);
        // Appending is only right when this thread's keys follow every key in the database.
        let append = order == Order::Seq && w.fresh && !delete && threads == 1;
        let mut i = 0u64;
        while budget.more(i) {
            let n = if budget.counted() {
                (w.batch as u64).min(w.ops - i)
            } else {
                w.batch as u64
            };
            buf.clear();
            spans.clear();
            for j in 0..n {
                let k = match order {
                    Order::Seq => i + j,
                    Order::Random => g.rng.below(g.num),
                    Order::Unique => perm.get((i + j) % g.num),
                };
                let at = buf.len();
                buf.extend_from_slice(g.keys.key(k));
                let klen = buf.len() - at;
                let vlen = if delete {
                    0
                } else {
                    buf.extend_from_slice(g.values.generate(g.value_size));
                    g.value_size
                };
                spans.push((at, klen, vlen));
            }
            let op_of = |&(at, kl, vl): &(usize, usize, usize)| {
                if delete {
                    Op::Delete(&buf[at..at + kl])
                } else {
                    Op::Put(&buf[at..at + kl], &buf[at + kl..at + kl + vl])
                }
            };
            let opts = WriteOpts {
                sync: w.sync,
                append,
            };
            if let [one] = spans.as_slice() {
                s.write(&[op_of(one)], opts)?;
            } else {
                let ops: Vec<Op<'_>> = spans.iter().map(op_of).collect();
                s.write(&ops, opts)?;
            }
            st.bytes += buf.len() as u64;
            st.writes += n;
            st.finished(n);
            if pinned && (i + n) / tenth > i / tenth {
                marks.push(Instant::now());
            }
            i += n;
        }
        if pinned {
            *tenths.lock().unwrap_or_else(|p| p.into_inner()) = marks;
        }
        Ok(())
    })?;
    let written = stats.iter().map(|s| s.bytes).sum();
    let marks = tenths.into_inner().unwrap_or_else(|p| p.into_inner());
    let message = match marks.as_slice() {
        [a, b, .., y, z] if pinned => {
            let tenth = (w.ops / 10).max(1) as f64;
            let rate = |from: &Instant, to: &Instant| {
                tenth / to.duration_since(*from).as_secs_f64().max(1e-9)
            };
            format!(
                "(writer {:.0} ops/s over the first tenth, {:.0} over the last; a reader pinned throughout)",
                rate(a, b),
                rate(y, z)
            )
        }
        _ => String::new(),
    };
    Ok(Outcome {
        stats,
        writer: None,
        user_bytes_written: written,
        message,
        threads,
    })
}

/// overwritepinned: overwrite (random puts of existing keys, `--batch_size` a commit) on one
/// writer while another thread holds a read snapshot taken before the first commit and kept
/// until the last: a cursor on the first key, its callback waiting. In LMDB the pages freed
/// meanwhile cannot be reused, so the file grows; an engine whose commit cost depends on the
/// free or pinned space slows down over the run, which the message's first and last tenth
/// show.
fn run_pinned(engine: &dyn Engine, w: &Workload, f: &Flags) -> Result<Outcome> {
    let done = AtomicBool::new(false);
    let (pinned_tx, pinned_rx) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|sc| {
        let done = &done;
        let pinner = sc.spawn(move || -> Result<u64> {
            let mut s = engine.session()?;
            let tx = pinned_tx;
            s.scan(None, false, 1, &mut |_, _| {
                // The receiver is gone only when the writer side already failed.
                let _ = tx.send(());
                while !done.load(Ordering::Acquire) {
                    std::thread::sleep(Duration::from_millis(1));
                }
            })
        });
        // An error or an empty database drops the sender without a message.
        if pinned_rx.recv().is_err() {
            return match pinner.join() {
                Ok(Err(e)) => Err(e),
                Ok(Ok(_)) => Err(Error::Usage(format!(
                    "{} needs a filled database (run a fill first)",
                    w.name
                ))),
                Err(_) => Err(Error::Child("the pinning reader panicked".into())),
            };
        }
        let out = run_write(engine, w, f, Order::Random, false, 1);
        done.store(true, Ordering::Release);
        let held = match pinner.join() {
            Ok(r) => r,
            Err(_) => Err(Error::Child("the pinning reader panicked".into())),
        };
        let out = out?;
        held?;
        Ok(out)
    })
}

fn run_reads(engine: &dyn Engine, w: &Workload, f: &Flags, threads: usize) -> Result<Outcome> {
    let progress = (f.progress && is_tty_stderr()).then_some(w.ops);
    let stats = run_threads(engine, threads, &w.name, f, progress, None, |tid, s, st| {
        let mut g = Gen::new(f, 1000 + tid as u64);
        let mut out = Vec::with_capacity(f.value_size);
        let mut budget = Budget::new(w.ops, f.duration_s);
        match w.kind {
            Kind::ReadSeq | Kind::ReadReverse => {
                let reverse = w.kind == Kind::ReadReverse;
                s.scan(None, reverse, w.ops, &mut |k, v| {
                    st.bytes += (k.len() + v.len()) as u64;
                    st.found += 1;
                    st.finished_scan_step();
                })?;
            }
            Kind::ReadRandom | Kind::ReadMissing => {
                let missing = w.kind == Kind::ReadMissing;
                while budget.more(st.ops) {
                    let k = g.rng.below(g.num);
                    let key = if missing {
                        g.keys.missing_key(k)
                    } else {
                        g.keys.key(k)
                    };
                    if s.get(key, &mut out)? {
                        st.found += 1;
                        st.bytes += (key.len() + out.len()) as u64;
                    }
                    st.reads += 1;
                    st.finished(1);
                }
            }
            Kind::SeekRandom => {
                while budget.more(st.ops) {
                    let k = g.rng.below(g.num);
                    let key = g.keys.key(k);
                    let mut bytes = 0u64;
                    let n = s.scan(Some(key), false, f.seek_nexts + 1, &mut |k, v| {
                        bytes += (k.len() + v.len()) as u64;
                    })?;
                    st.bytes += bytes;
                    if n > 0 {
                        st.found += 1;
                    }
                    st.finished(1);
                }
            }
            _ => return Err(Error::Child(format!("{} is not a read benchmark", w.name))),
        }
        Ok(())
    })?;
    let m = merge(&stats);
    let message = match w.kind {
        Kind::ReadRandom | Kind::ReadMissing | Kind::SeekRandom => {
            format!("({} of {} found)", m.found, m.ops)
        }
        _ => String::new(),
    };
    Ok(Outcome {
        stats,
        writer: None,
        user_bytes_written: 0,
        message,
        threads,
    })
}

/// Reads-with-writes benchmarks: readrandomwriterandom and updaterandom on `threads` threads.
fn run_mixed(engine: &dyn Engine, w: &Workload, f: &Flags, threads: usize) -> Result<Outcome> {
    let progress = (f.progress && is_tty_stderr()).then_some(w.ops);
    let stats = run_threads(engine, threads, &w.name, f, progress, None, |tid, s, st| {
        let mut g = Gen::new(f, 1000 + tid as u64);
        let mut out = Vec::with_capacity(f.value_size);
        let mut budget = Budget::new(w.ops, f.duration_s);
        let opts = WriteOpts {
            sync: w.sync,
            append: false,
        };
        let mut i = 0u64;
        while budget.more(i) {
            let k = g.rng.below(g.num);
            let key = g.keys.key(k).to_vec();
            let update = w.kind == Kind::UpdateRandom;
            let read = update || (i % 100) < f.readwritepercent as u64;
            if read {
                if s.get(&key, &mut out)? {
                    st.found += 1;
                    st.bytes += (key.len() + out.len()) as u64;
                }
                st.reads += 1;
            }
            if update || !read {
                let v = g.values.generate(g.value_size);
                s.write(&[Op::Put(&key, v)], opts)?;
                st.bytes += (key.len() + v.len()) as u64;
                st.writes += 1;
            }
            st.finished(1);
            i += 1;
        }
        Ok(())
    })?;
    let m = merge(&stats);
    let written = m.writes * (f.key_size + f.value_size) as u64;
    let message = if w.kind == Kind::UpdateRandom {
        format!("( updates:{} found:{})", m.writes, m.found)
    } else {
        format!(
            "( reads:{} writes:{} total:{} found:{})",
            m.reads, m.writes, m.ops, m.found
        )
    };
    Ok(Outcome {
        stats,
        writer: None,
        user_bytes_written: written,
        message,
        threads,
    })
}

/// `threads` readers doing readrandom plus one writer updating existing keys until the
/// readers finish. Both rates are reported.
fn run_readwhilewriting(
    engine: &dyn Engine,
    w: &Workload,
    f: &Flags,
    threads: usize,
) -> Result<Outcome> {
    let progress = (f.progress && is_tty_stderr()).then_some(w.ops);
    let stop = AtomicBool::new(false);
    let readers_left = AtomicUsize::new(threads);
    let mut all = run_threads(
        engine,
        threads + 1,
        &w.name,
        f,
        progress,
        Some(&stop),
        |tid, s, st| {
            let mut g = Gen::new(f, 1000 + tid as u64);
            if tid == threads {
                // The writer: updates of existing keys, not counted in the readers' rate.
                let opts = WriteOpts {
                    sync: w.sync,
                    append: false,
                };
                let pace = Pace::new(f.write_rate_limit);
                while !stop.load(Ordering::Relaxed) {
                    let k = g.rng.below(g.num);
                    let key = g.keys.key(k).to_vec();
                    let v = g.values.generate(g.value_size);
                    s.write(&[Op::Put(&key, v)], opts)?;
                    st.bytes += (key.len() + v.len()) as u64;
                    st.writes += 1;
                    st.finished(1);
                    pace.wait(st.bytes, &stop);
                }
                return Ok(());
            }
            let mut out = Vec::with_capacity(f.value_size);
            let mut budget = Budget::new(w.ops, f.duration_s);
            let r = (|| -> Result<()> {
                while budget.more(st.ops) {
                    let k = g.rng.below(g.num);
                    let key = g.keys.key(k);
                    if s.get(key, &mut out)? {
                        st.found += 1;
                        st.bytes += (key.len() + out.len()) as u64;
                    }
                    st.reads += 1;
                    st.finished(1);
                }
                Ok(())
            })();
            if readers_left.fetch_sub(1, Ordering::AcqRel) == 1 {
                stop.store(true, Ordering::Relaxed);
            }
            r
        },
    )?;
    let writer = all.pop();
    let m = merge(&all);
    let written = writer.as_ref().map_or(0, |w| w.bytes);
    Ok(Outcome {
        message: format!("({} of {} found)", m.found, m.ops),
        stats: all,
        writer,
        user_bytes_written: written,
        threads,
    })
}

/// Holds a writer to `--benchmark_write_rate_limit` bytes a second, as db_bench's rate
/// limiter does: a writer more than a millisecond ahead of the rate sleeps until it is not
/// (in steps of at most 10 ms, so that it sees the readers' stop), giving its core to the
/// others; within the millisecond it writes at its own pace.
struct Pace {
    bytes_per_sec: u64,
    start: Instant,
}

impl Pace {
    fn new(bytes_per_sec: u64) -> Pace {
        Pace {
            bytes_per_sec,
            start: Instant::now(),
        }
    }

    fn wait(&self, bytes: u64, stop: &AtomicBool) {
        if self.bytes_per_sec == 0 {
            return;
        }
        let due = Duration::from_secs_f64(bytes as f64 / self.bytes_per_sec as f64);
        if due < self.start.elapsed() + Duration::from_millis(1) {
            return;
        }
        loop {
            let now = self.start.elapsed();
            if now >= due || stop.load(Ordering::Relaxed) {
                return;
            }
            std::thread::sleep((due - now).min(Duration::from_millis(10)));
        }
    }
}

/// The state of a child run.
struct Child {
    flags: Flags,
    spec: EngineSpec,
    dir: PathBuf,
    opened: Option<Opened>,
    results: std::fs::File,
    printed_config: bool,
    threads_max: usize,
    /// The durability the open engine was configured for.
    open_sync: bool,
    /// Where the *unique_mt inserts of this process stopped.
    mt: Option<MtState>,
}

impl Child {
    /// (Re)opens the engine, emptied first when `fresh`. `sync` picks the engine-level
    /// durability configuration: the fill*sync benchmarks open it durable even under --sync=0,
    /// since several engines (LMDB's MDB_NOSYNC, WiredTiger without a log) cannot make one
    /// commit durable otherwise.
    fn open_engine(&mut self, fresh: bool, sync: bool) -> Result<()> {
        self.opened = None; // closes the previous handle first
        if fresh {
            self.mt = None;
            match std::fs::remove_dir_all(&self.dir) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io(format!("remove {}", self.dir.display()), e)),
            }
        }
        std::fs::create_dir_all(&self.dir)
            .map_err(|e| Error::io(format!("create {}", self.dir.display()), e))?;
        let f = &self.flags;
        let o = OpenOptions {
            dir: self.dir.clone(),
            cache_bytes: f.cache_size,
            sync,
            num: f.num,
            key_size: f.key_size,
            value_size: f.value_size,
            threads_max: self.threads_max,
            memory_limit: f.memory_limit,
            bloom_bits: f.bloom_bits,
        };
        let opened = (self.spec.open)(&o)?;
        self.open_sync = sync;
        if !self.printed_config || sync != f.sync {
            println!("Engine:     {} {}", self.spec.name, opened.version);
            println!("Config:     {}", engines::describe(&opened.config));
            println!("DB path:    {}", self.dir.display());
            self.printed_config = true;
        }
        self.opened = Some(opened);
        Ok(())
    }

    fn run_one(&mut self, w: &Workload, threads: usize) -> Result<()> {
        let f = self.flags.clone();
        if f.drop_caches && !w.fresh {
            sys::drop_caches()?;
        }
        let Some(opened) = self.opened.as_ref() else {
            return Err(Error::Child("engine not open".into()));
        };
        let engine: &dyn Engine = opened.engine.as_ref();
        let usage0 = Usage::of_self();
        let io0 = ProcIo::of_self();
        let t0 = Instant::now();
        let out = match w.kind {
            Kind::Fill(o) => run_write(engine, w, &f, o, false, threads)?,
            Kind::Delete(o) => run_write(engine, w, &f, o, true, 1)?,
            Kind::ReadSeq
            | Kind::ReadReverse
            | Kind::ReadRandom
            | Kind::ReadMissing
            | Kind::SeekRandom => run_reads(engine, w, &f, threads)?,
            Kind::ReadRandomWriteRandom | Kind::UpdateRandom => run_mixed(engine, w, &f, threads)?,
            Kind::ReadWhileWriting => run_readwhilewriting(engine, w, &f, threads)?,
            Kind::OverwritePinned => run_pinned(engine, w, &f)?,
            Kind::UniqueMt(mode) => {
                let (out, next) = run_unique_mt(engine, w, &f, threads, mode, self.mt.as_ref())?;
                if mode == MtMode::Insert {
                    self.mt = Some(next);
                }
                out
            }
        };
        let window_s = t0.elapsed().as_secs_f64();
        let usage = Usage::of_self().since(&usage0);
        let io = match (ProcIo::of_self(), io0) {
            (Some(b), Some(a)) => b.since(&a),
            _ => ProcIo::default(),
        };
        let db_bytes = sys::du_bytes(&self.dir);
        let m = merge(&out.stats);
        let ops_per_sec = if m.wall_s > 0.0 {
            m.ops as f64 / m.wall_s
        } else {
            0.0
        };
        let micros_per_op = if m.ops > 0 {
            m.thread_s * 1e6 / m.ops as f64
        } else {
            0.0
        };
        let mb_per_sec = if m.wall_s > 0.0 {
            m.bytes as f64 / 1_048_576.0 / m.wall_s
        } else {
            0.0
        };
        let lat = m.lat.percentiles();
        let writer_m = out.writer.as_ref().map(|w| merge(std::slice::from_ref(w)));
        if let Some(wm) = &writer_m {
            let wr = if wm.wall_s > 0.0 {
                wm.ops as f64 / wm.wall_s
            } else {
                0.0
            };
            let wu = if wm.ops > 0 {
                wm.thread_s * 1e6 / wm.ops as f64
            } else {
                0.0
            };
            println!(
                "{}",
                result_line(
                    "writer",
                    wu,
                    wr,
                    wm.wall_s,
                    wm.ops,
                    wm.bytes as f64 / 1_048_576.0 / wm.wall_s.max(1e-9),
                    &format!("(writer of {})", w.name)
                )
            );
        }
        println!(
            "{}",
            result_line(
                &w.name,
                micros_per_op,
                ops_per_sec,
                m.wall_s,
                m.ops,
                mb_per_sec,
                &out.message
            )
        );
        if f.histogram {
            let kind = match w.kind {
                Kind::Fill(_) | Kind::Delete(_) | Kind::UniqueMt(_) | Kind::OverwritePinned => {
                    "write"
                }
                Kind::ReadSeq | Kind::ReadReverse => "iterate",
                Kind::SeekRandom => "seek",
                _ => "op",
            };
            print!("{}", m.lat.render(kind));
            if let Some(wm) = &writer_m {
                print!("{}", wm.lat.render("write (writer)"));
            }
        }
        let cpu_pct = if window_s > 0.0 {
            (usage.user_s + usage.sys_s) * 100.0 / window_s
        } else {
            0.0
        };
        let wamp = (out.user_bytes_written > 0)
            .then(|| io.write_bytes as f64 / out.user_bytes_written as f64);
        println!(
            "rusage       : wall {window_s:.3} user {:.3} sys {:.3} cpu% {cpu_pct:.1} maxrss_kb {} vcsw {} ivcsw {} fs_in {} fs_out {}",
            usage.user_s, usage.sys_s, usage.maxrss_kb, usage.vcsw, usage.ivcsw, usage.fs_in, usage.fs_out
        );
        println!(
            "io           : user_bytes {} proc_write_bytes {} proc_read_bytes {} wamp_proc {} db_kb {}",
            out.user_bytes_written,
            io.write_bytes,
            io.read_bytes,
            wamp.map_or("-".to_string(), |x| format!("{x:.2}")),
            db_bytes / 1024
        );
        let opened = self
            .opened
            .as_ref()
            .ok_or_else(|| Error::Child("engine closed".into()))?;
        let r = BenchResult {
            engine: self.spec.name.to_string(),
            engine_version: opened.version.clone(),
            benchmark: w.name.clone(),
            threads: out.threads,
            num: f.num,
            key_size: f.key_size,
            value_size: f.value_size,
            ops: m.ops,
            ops_per_sec,
            micros_per_op,
            mb_per_sec,
            writer_ops: writer_m.as_ref().map(|w| w.ops),
            writer_ops_per_sec: writer_m.as_ref().map(|w| {
                if w.wall_s > 0.0 {
                    w.ops as f64 / w.wall_s
                } else {
                    0.0
                }
            }),
            lat,
            writer_lat: writer_m.as_ref().map(|w| w.lat.percentiles()),
            wall_s: window_s,
            user_s: usage.user_s,
            sys_s: usage.sys_s,
            cpu_pct,
            vcsw: usage.vcsw,
            ivcsw: usage.ivcsw,
            fs_in: usage.fs_in,
            fs_out: usage.fs_out,
            read_bytes: io.read_bytes,
            write_bytes: io.write_bytes,
            user_bytes_written: out.user_bytes_written,
            wamp,
            db_bytes,
            maxrss_kb: usage.maxrss_kb,
            found: Some(m.found),
            message: out.message.clone(),
            config: opened.config.clone(),
        };
        let mut line = r.to_json();
        if let serde_json::Value::Object(map) = &mut line {
            if f.series_interval_ms > 0 {
                let role = if w.kind == Kind::ReadWhileWriting {
                    "reader"
                } else {
                    "worker"
                };
                let mut threads: Vec<serde_json::Value> = out
                    .stats
                    .iter()
                    .filter_map(|s| s.series.as_ref().map(|x| x.to_json(s.tid, role)))
                    .collect();
                if let Some(wr) = &out.writer {
                    if let Some(x) = &wr.series {
                        threads.push(x.to_json(wr.tid, "writer"));
                    }
                }
                map.insert(
                    "series".into(),
                    serde_json::json!({"interval_ms": f.series_interval_ms, "threads": threads}),
                );
            }
            map.insert("status".into(), "ok".into());
            map.insert("seed".into(), f.seed.into());
            map.insert("sync".into(), f.sync.into());
            map.insert("write_rate_limit".into(), f.write_rate_limit.into());
            map.insert(
                "key_format".into(),
                match f.key_format {
                    KeyFormat::Decimal => "decimal",
                    KeyFormat::RocksDb => "rocksdb",
                }
                .into(),
            );
        }
        writeln!(self.results, "{line}").map_err(|e| Error::io("write results", e))?;
        std::io::stdout().flush().ok();
        Ok(())
    }
}

/// `larch-bench __child RESULTS_FILE --flags...`: runs one engine (the parent's --engine has
/// been narrowed to one name) and appends one JSON line per benchmark to RESULTS_FILE.
pub fn child_main(args: &[String]) -> Result<()> {
    let Some(results_path) = args.first() else {
        return Err(Error::Usage("__child RESULTS_FILE [flags]".into()));
    };
    let flags = Flags::parse(&args[1..])?;
    let [name] = flags.engines.as_slice() else {
        return Err(Error::Usage("__child takes exactly one --engine".into()));
    };
    let spec = engines::find(name)?;
    let results = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(results_path)
        .map_err(|e| Error::io(format!("open {results_path}"), e))?;
    let workloads = flags
        .benchmarks
        .iter()
        .map(|b| Workload::resolve(b, &flags))
        .collect::<Result<Vec<_>>>()?;
    let threads_max = flags.threads.iter().copied().max().unwrap_or(1) + 1;
    let mut child = Child {
        dir: flags.db.join(spec.name),
        flags: flags.clone(),
        spec,
        opened: None,
        results,
        printed_config: false,
        threads_max,
        open_sync: flags.sync,
        mt: None,
    };
    for (pass, &threads) in flags.threads.iter().enumerate() {
        if flags.threads.len() > 1 {
            println!("Threads:    {threads}");
        }
        for w in &workloads {
            if w.fresh && flags.use_existing_db {
                println!("{:<12} : skipped (--use_existing_db is true)", w.name);
                continue;
            }
            let threaded_fill =
                (flags.fill_threads && matches!(w.kind, Kind::Fill(_))) || w.name == "fillsync_mt";
            if w.fresh && pass > 0 && !threaded_fill {
                println!("{:<12} : skipped (loaded in the first thread pass)", w.name);
                continue;
            }
            let sync = flags.sync || (w.fresh && w.sync);
            if w.fresh || child.opened.is_none() || child.open_sync != sync {
                child.open_engine(w.fresh, sync)?;
            }
            child.run_one(
                w,
                if w.uses_threads() || threaded_fill {
                    threads
                } else {
                    1
                },
            )?;
        }
    }
    drop(child.opened.take());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pace_holds_a_writer_to_its_rate() {
        let stop = AtomicBool::new(false);
        // No limit: never waits, whatever was written.
        let free = Pace::new(0);
        let t = Instant::now();
        free.wait(u64::MAX, &stop);
        assert!(t.elapsed() < Duration::from_secs(1));
        // 1,000 bytes a second: 50 bytes are due 50 ms after the start, not before (a
        // lower bound: `sleep` never returns early).
        let pace = Pace::new(1000);
        pace.wait(50, &stop);
        assert!(pace.start.elapsed() >= Duration::from_millis(49));
        // A stopped run does not wait for its rate (the readers are done).
        stop.store(true, Ordering::Relaxed);
        let t = Instant::now();
        Pace::new(1).wait(1 << 40, &stop);
        assert!(t.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn resolves_db_bench_semantics() {
        let f = Flags::parse(&["--num=5000".to_string()]).unwrap();
        let w = Workload::resolve("fillsync", &f).unwrap();
        assert!(w.sync && w.fresh);
        assert_eq!(w.ops, 5);
        let w = Workload::resolve("fillrandbatch", &f).unwrap();
        assert_eq!(w.batch, FILL_BATCH_DEFAULT);
        let w = Workload::resolve("overwrite", &f).unwrap();
        assert!(!w.fresh);
        assert!(Workload::resolve("readwhilewriting", &f)
            .unwrap()
            .uses_threads());
        assert!(!Workload::resolve("fillseq", &f).unwrap().uses_threads());
        let mt = Workload::resolve("fillsync_mt", &f).unwrap();
        assert!(mt.uses_threads() && mt.sync && mt.fresh && mt.batch == 1);
        assert!(Workload::resolve("nope", &f).is_err());
    }

    #[test]
    fn series_samples_early_then_at_the_interval() {
        let mut s = Series::new(1000);
        let mut t = 0.0;
        let mut ops = 0;
        while t < 30.0 {
            t += 0.0001;
            ops += 1;
            s.observe(t, ops);
        }
        s.finish(30.0, ops);
        let p = &s.points;
        assert_eq!(p[0], (0.0, 0));
        assert!(p[1].0 < 0.002, "first sample at {}", p[1].0);
        // Gaps grow to the interval and no further.
        let gaps: Vec<f64> = p.windows(2).map(|w| w[1].0 - w[0].0).collect();
        assert!(gaps.iter().all(|g| *g <= 1.0 + 1e-3), "{gaps:?}");
        assert!(gaps.iter().any(|g| *g > 0.99), "{gaps:?}");
        assert_eq!(*p.last().unwrap(), (30.0, ops));
        assert!(p.windows(2).all(|w| w[1].1 >= w[0].1));
    }

    #[test]
    fn unique_mt_streams_partition_the_range() {
        let (offset, threads, end) = (5u64, 3usize, 105u64);
        let mut seen = std::collections::BTreeSet::new();
        for tid in 0..threads {
            let n = mt_count_below(offset, tid, threads, end);
            for k in 0..n {
                let i = mt_index(offset, tid, threads, k);
                assert!((offset..end).contains(&i));
                assert!(seen.insert(i));
            }
        }
        assert_eq!(seen.len() as u64, end - offset);
        let f = Flags::parse(&[
            "--benchmarks=fillunique_mt,updateunique_mt,insertunique_mt".to_string(),
            "--num=100".to_string(),
            "--writes=80".to_string(),
        ])
        .unwrap();
        let w = Workload::resolve("insertunique_mt", &f).unwrap();
        assert!(!w.fresh && w.uses_threads());
        assert!(Workload::resolve("fillunique_mt", &f).unwrap().fresh);
    }

    #[test]
    fn a_capped_budget_stops_at_the_count() {
        let mut b = Budget::capped(3, 60);
        assert!(b.counted());
        assert!(b.more(0) && b.more(2) && !b.more(3));
    }

    #[test]
    fn budget_counts_or_times() {
        let mut b = Budget::new(3, 0);
        assert!(b.more(0) && b.more(2) && !b.more(3));
        let mut t = Budget::new(0, 1);
        assert!(t.more(0));
    }
}
