//! Latency histograms: one HdrHistogram per thread in nanoseconds, merged at the end, printed in
//! RocksDB's layout with microseconds.

use hdrhistogram::Histogram;

/// Highest latency recorded exactly (1 hour); longer ones saturate rather than fail.
pub const LATENCY_NS_MAX: u64 = 3_600_000_000_000;
const SIGNIFICANT_DIGITS: u8 = 3;

/// Per-thread latency histogram.
#[derive(Debug, Clone)]
pub struct Latency {
    h: Histogram<u64>,
}

impl Default for Latency {
    fn default() -> Self {
        Self::new()
    }
}

/// The figures reported for every benchmark, in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Percentiles {
    pub count: u64,
    pub mean_us: f64,
    pub stddev_us: f64,
    pub min_us: f64,
    pub p50_us: f64,
    pub p75_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub p9999_us: f64,
    pub max_us: f64,
}

impl Latency {
    pub fn new() -> Self {
        // The bounds are constants that satisfy new_with_bounds' preconditions
        // (1 <= low, 2*low <= high, digits <= 5), so this cannot fail.
        let h = Histogram::new_with_bounds(1, LATENCY_NS_MAX, SIGNIFICANT_DIGITS)
            .unwrap_or_else(|_| unreachable!("constant histogram bounds are valid"));
        Latency { h }
    }

    pub fn record_ns(&mut self, ns: u64) {
        self.h.saturating_record(ns.max(1));
    }

    /// Records `count` operations of `ns` each (an averaged group, see runner's scans).
    pub fn record_ns_n(&mut self, ns: u64, count: u64) {
        self.h.saturating_record_n(ns.max(1), count);
    }

    /// Adds `other` into `self`. Both have the same bounds, so no sample is lost.
    pub fn merge(&mut self, other: &Latency) {
        // Same bounds and auto-resize off: add can only fail on bounds mismatch, which
        // cannot happen between two `Latency` values; fall back to per-value recording.
        if self.h.add(&other.h).is_err() {
            for v in other.h.iter_recorded() {
                self.h
                    .saturating_record_n(v.value_iterated_to(), v.count_at_value());
            }
        }
    }

    pub fn count(&self) -> u64 {
        self.h.len()
    }

    pub fn percentiles(&self) -> Percentiles {
        if self.h.is_empty() {
            return Percentiles::default();
        }
        let us = |ns: u64| ns as f64 / 1000.0;
        Percentiles {
            count: self.h.len(),
            mean_us: self.h.mean() / 1000.0,
            stddev_us: self.h.stdev() / 1000.0,
            min_us: us(self.h.min()),
            p50_us: us(self.h.value_at_quantile(0.50)),
            p75_us: us(self.h.value_at_quantile(0.75)),
            p99_us: us(self.h.value_at_quantile(0.99)),
            p999_us: us(self.h.value_at_quantile(0.999)),
            p9999_us: us(self.h.value_at_quantile(0.9999)),
            max_us: us(self.h.max()),
        }
    }

    /// RocksDB's `--histogram=1` block (monitoring/histogram.cc), with buckets from the HDR
    /// histogram at powers of two microseconds.
    pub fn render(&self, op_kind: &str) -> String {
        let p = self.percentiles();
        let mut s = format!(
            "Microseconds per {op_kind}:\nCount: {} Average: {:.4}  StdDev: {:.2}\n\
             Min: {:.4}  Median: {:.4}  Max: {:.4}\n\
             Percentiles: P50: {:.2} P75: {:.2} P99: {:.2} P99.9: {:.2} P99.99: {:.2}\n{}\n",
            p.count,
            p.mean_us,
            p.stddev_us,
            p.min_us,
            p.p50_us,
            p.max_us,
            p.p50_us,
            p.p75_us,
            p.p99_us,
            p.p999_us,
            p.p9999_us,
            "-".repeat(54)
        );
        if p.count == 0 {
            return s;
        }
        let total = p.count as f64;
        let mut cumulative = 0u64;
        let mut lo_us = 0u64;
        let mut hi_us = 1u64;
        let max_ns = self.h.max();
        while lo_us * 1000 <= max_ns {
            let n = self
                .h
                .count_between((lo_us * 1000).max(1), (hi_us * 1000).saturating_sub(1));
            if n > 0 {
                cumulative += n;
                let pct = n as f64 * 100.0 / total;
                let cum = cumulative as f64 * 100.0 / total;
                let marks = "#".repeat((pct / 5.0).round() as usize);
                s.push_str(&format!(
                    "{} {:>7}, {:>7} ) {:>8} {:>7.3}% {:>7.3}% {marks}\n",
                    if lo_us == 0 { '[' } else { '(' },
                    lo_us,
                    hi_us,
                    n,
                    pct,
                    cum
                ));
            }
            lo_us = hi_us;
            hi_us = hi_us.saturating_mul(2);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merging_keeps_every_sample_and_the_extremes() {
        let mut a = Latency::new();
        let mut b = Latency::new();
        for i in 1..=1000u64 {
            a.record_ns(i * 1000); // 1..1000 us
        }
        for _ in 0..1000 {
            b.record_ns(5_000_000); // 5 ms
        }
        a.merge(&b);
        let p = a.percentiles();
        assert_eq!(p.count, 2000);
        assert!((p.min_us - 1.0).abs() < 0.01);
        assert!((p.max_us - 5000.0).abs() / 5000.0 < 0.001);
        // Half of the samples are <= 1 ms, so P50 is about 1 ms and P75 is 5 ms.
        assert!((p.p50_us - 1000.0).abs() / 1000.0 < 0.01, "{p:?}");
        assert!((p.p75_us - 5000.0).abs() / 5000.0 < 0.01, "{p:?}");
    }

    #[test]
    fn merge_of_thread_histograms_equals_one_histogram() {
        let mut parts: Vec<Latency> = (0..4).map(|_| Latency::new()).collect();
        let mut whole = Latency::new();
        for i in 0..10_000u64 {
            let v = (i * 7919) % 100_000 + 1;
            parts[(i % 4) as usize].record_ns(v);
            whole.record_ns(v);
        }
        let mut merged = Latency::new();
        for p in &parts {
            merged.merge(p);
        }
        assert_eq!(merged.percentiles(), whole.percentiles());
    }

    #[test]
    fn empty_and_saturating() {
        let mut h = Latency::new();
        assert_eq!(h.percentiles().count, 0);
        assert!(h.render("read").contains("Count: 0"));
        h.record_ns(0);
        h.record_ns(u64::MAX);
        assert_eq!(h.count(), 2);
        let r = h.render("write");
        assert!(r.contains("Percentiles: P50:"));
    }
}
