//! Per-thread measurement: operation counts, the latency histogram, db_bench's interval
//! lines, the progress bar, the time series behind the per-thread charts, and the threads'
//! figures combined as db_bench combines them.

use crate::flags::Flags;
use crate::hist::Latency;
use std::time::Instant;

/// One thread's counters, latency histogram, and interval reporting.
pub struct ThreadStats {
    pub(crate) tid: usize,
    name: String,
    pub ops: u64,
    pub bytes: u64,
    pub found: u64,
    pub reads: u64,
    pub writes: u64,
    pub lat: Latency,
    pub(crate) start: Instant,
    last: Instant,
    pub(crate) finish: Instant,
    stats_interval: u64,
    next_report: u64,
    interval_start: Instant,
    interval_ops: u64,
    progress_total: Option<u64>,
    next_progress: u64,
    scan_pending: u64,
    pub(crate) series: Option<Series>,
    /// The thread's CPU clock at `start` (`sys::thread_cpu_s`).
    cpu_at_start: Option<f64>,
    /// The CPU seconds the thread used from `start` to `stop`; `None` where its clock could
    /// not be read.
    pub(crate) cpu_s: Option<f64>,
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
    pub(crate) fn new(tid: usize, name: &str, f: &Flags, progress_total: Option<u64>) -> Self {
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
            cpu_at_start: None,
            cpu_s: None,
        }
    }

    /// Starts the thread's clocks: called on the thread that runs the operations, as `stop`.
    pub(crate) fn start(&mut self) {
        self.cpu_at_start = crate::sys::thread_cpu_s();
        let now = Instant::now();
        self.start = now;
        self.last = now;
        self.interval_start = now;
    }

    /// Records `n` operations finished now, timed since the previous one (db_bench's
    /// FinishedOps: one latency sample per call). Returns that sample (ns), for callers that
    /// also keep it by operation.
    #[inline]
    pub(crate) fn finished(&mut self, n: u64) -> u64 {
        let now = Instant::now();
        let ns = (now - self.last).as_nanos() as u64;
        self.lat.record_ns(ns);
        self.counted(n, now);
        ns
    }

    /// `n` more operations done at `now`, their latency recorded: the time series, the
    /// interval lines and the progress bar follow.
    #[inline]
    fn counted(&mut self, n: u64, now: Instant) {
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
    pub(crate) fn finished_scan_step(&mut self) {
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
        self.counted(n, now);
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

    pub(crate) fn stop(&mut self) {
        self.flush_scan_steps();
        self.finish = Instant::now();
        self.cpu_s = match (crate::sys::thread_cpu_s(), self.cpu_at_start) {
            (Some(now), Some(start)) => Some((now - start).max(0.0)),
            _ => None,
        };
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
pub(crate) struct Merged {
    pub(crate) ops: u64,
    pub(crate) bytes: u64,
    pub(crate) found: u64,
    pub(crate) reads: u64,
    pub(crate) writes: u64,
    pub(crate) lat: Latency,
    /// max finish - min start.
    pub(crate) wall_s: f64,
    /// Sum of per-thread elapsed times (db_bench's micros/op numerator).
    pub(crate) thread_s: f64,
    /// Sum of the threads' CPU seconds; `None` where one thread's clock could not be read.
    pub(crate) cpu_s: Option<f64>,
}

pub(crate) fn merge(stats: &[ThreadStats]) -> Merged {
    let mut m = Merged {
        ops: 0,
        bytes: 0,
        found: 0,
        reads: 0,
        writes: 0,
        lat: Latency::new(),
        wall_s: 0.0,
        thread_s: 0.0,
        cpu_s: Some(0.0),
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
        m.cpu_s = m.cpu_s.zip(s.cpu_s).map(|(a, b)| a + b);
    }
    m.wall_s = (finish - start).as_secs_f64();
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A thread's CPU seconds count the work it did between `start` and `stop`, not the time
    /// it slept, and the merge adds them up.
    #[test]
    fn a_threads_cpu_time_counts_its_work_not_its_sleep() {
        let run = |spin: bool| {
            std::thread::spawn(move || {
                let f = Flags::default();
                let mut st = ThreadStats::new(0, "t", &f, None);
                let (t0, cpu0) = (Instant::now(), crate::sys::thread_cpu_s().unwrap());
                st.start();
                if spin {
                    // Until the thread's clock has run 30 ms (however busy the machine).
                    let mut x = 0u64;
                    while crate::sys::thread_cpu_s().unwrap() - cpu0 < 0.03
                        && t0.elapsed().as_secs() < 30
                    {
                        x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                    }
                } else {
                    for _ in 0..12 {
                        std::thread::sleep(std::time::Duration::from_millis(5));
                    }
                }
                st.stop();
                (st, t0.elapsed().as_secs_f64())
            })
            .join()
            .unwrap()
        };
        let ((busy, busy_wall), (idle, _)) = (run(true), run(false));
        let (b, i) = (busy.cpu_s.unwrap(), idle.cpu_s.unwrap());
        assert!(
            b >= 0.029 && b <= busy_wall,
            "spinning used {b} s in {busy_wall} s"
        );
        assert!(i < 0.02, "sleeping 60 ms used {i} s");
        let m = merge(&[busy, idle]);
        assert!((m.cpu_s.unwrap() - (b + i)).abs() < 1e-9);
        assert_eq!(crate::sys::background_cpu_s(1.0, 0.25), 0.75);
        assert_eq!(crate::sys::background_cpu_s(0.2, 0.25), 0.0);
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
}
