//! How each kind of benchmark drives an engine: threads started together on sessions of
//! their own, the key and value streams, the loop budget (a count or `--duration`), and one
//! function per family of workloads (writes, reads, mixed, readwhilewriting, the pinned
//! overwrite, the Tupl test's multi-threaded unique inserts).

use super::stats::{merge, ThreadStats};
use super::workload::{Kind, MtMode, Order, Workload};
use crate::engines::{Engine, Op, Session, WriteOpts};
use crate::error::{Error, Result};
use crate::flags::Flags;
use crate::gen::{KeyGen, Permutation, Rng, ValueGenerator};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// Stops a loop after `ops` iterations, or after --duration seconds when that is set.
pub(crate) struct Budget {
    ops: u64,
    deadline: Option<Instant>,
    calls: u64,
    /// The count bounds the loop even with a deadline (a cap, not a replacement).
    count_too: bool,
}

impl Budget {
    pub(crate) fn new(ops: u64, duration_s: u64) -> Budget {
        Budget {
            ops,
            deadline: (duration_s > 0).then(|| Instant::now() + Duration::from_secs(duration_s)),
            calls: 0,
            count_too: false,
        }
    }

    /// `ops` iterations, or fewer when `cap_s` (> 0) seconds pass first.
    pub(crate) fn capped(ops: u64, cap_s: u64) -> Budget {
        Budget {
            count_too: true,
            ..Budget::new(ops, cap_s)
        }
    }

    /// Whether the count alone decides how much work is left.
    pub(crate) fn counted(&self) -> bool {
        self.deadline.is_none() || self.count_too
    }

    #[inline]
    pub(crate) fn more(&mut self, done: u64) -> bool {
        self.calls += 1;
        match self.deadline {
            Some(_) if self.count_too && done >= self.ops => false,
            Some(d) => self.calls % 64 != 1 || Instant::now() < d,
            None => done < self.ops,
        }
    }
}

pub(crate) struct Outcome {
    pub(crate) stats: Vec<ThreadStats>,
    pub(crate) writer: Option<ThreadStats>,
    pub(crate) user_bytes_written: u64,
    pub(crate) message: String,
    pub(crate) threads: usize,
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
pub(crate) fn run_unique_mt(
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

pub(crate) fn is_tty_stderr() -> bool {
    // SAFETY: isatty only inspects the descriptor.
    unsafe { libc::isatty(2) == 1 }
}

/// Runs `body` on `n` threads that start together; each gets its own session and stats.
/// `failed`, when given, is set as soon as any thread fails (so that a writer looping until the
/// readers finish stops even when a reader never started).
pub(crate) fn run_threads<F>(
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
pub(crate) struct Gen {
    pub(crate) keys: KeyGen,
    pub(crate) values: ValueGenerator,
    pub(crate) rng: Rng,
    pub(crate) num: u64,
    pub(crate) value_size: usize,
}

impl Gen {
    pub(crate) fn new(f: &Flags, stream: u64) -> Gen {
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
pub(crate) fn run_write(
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
pub(crate) fn run_pinned(engine: &dyn Engine, w: &Workload, f: &Flags) -> Result<Outcome> {
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

/// How long readseq and readreverse pass over the table again, at least: five times the
/// verdict's floor.
const SCAN_PASSES_S: f64 = 5.0 * crate::verdict::MIN_WALL_S;

pub(crate) fn run_reads(
    engine: &dyn Engine,
    w: &Workload,
    f: &Flags,
    threads: usize,
) -> Result<Outcome> {
    let progress = (f.progress && is_tty_stderr()).then_some(w.ops);
    let stats = run_threads(engine, threads, &w.name, f, progress, None, |tid, s, st| {
        let mut g = Gen::new(f, 1000 + tid as u64);
        let mut out = Vec::with_capacity(f.value_size);
        let mut budget = Budget::new(w.ops, f.duration_s);
        match w.kind {
            Kind::ReadSeq | Kind::ReadReverse => {
                // Passes over the table until they took `SCAN_PASSES_S` together: a pass
                // under the verdict's floor (`verdict::MIN_WALL_S`) gets no figure, and an
                // in-memory pass over the README's 632K records took Larch under it.
                let reverse = w.kind == Kind::ReadReverse;
                let started = std::time::Instant::now();
                loop {
                    let n = s.scan(None, reverse, w.ops, &mut |k, v| {
                        st.bytes += (k.len() + v.len()) as u64;
                        st.found += 1;
                        st.finished_scan_step();
                    })?;
                    if n == 0 || started.elapsed().as_secs_f64() >= SCAN_PASSES_S {
                        break;
                    }
                }
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
pub(crate) fn run_mixed(
    engine: &dyn Engine,
    w: &Workload,
    f: &Flags,
    threads: usize,
) -> Result<Outcome> {
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
pub(crate) fn run_readwhilewriting(
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
