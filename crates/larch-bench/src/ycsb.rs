//! The YCSB core workloads (Cooper et al., SoCC 2010) as YCSB's own `CoreWorkload` defines
//! them: the six workload files A-F (operation mixes and request distributions), the key
//! choosers (`ZipfianGenerator` after Gray et al.'s "Quickly generating billion-record
//! synthetic databases", `ScrambledZipfianGenerator` with its fixed 10^10-item zeta,
//! `SkewedLatestGenerator`, uniform), the key names (`"user"` + the FNV-1a hash of the record
//! number, YCSB's `insertorder=hashed`), the insert key sequence (`AcknowledgedCounterGenerator`:
//! a reader draws only keys whose insert has returned) and E's scan lengths (uniform in
//! 1..=`maxscanlength`). Each generator here is the Java original's arithmetic, cross-read
//! against go-ycsb's and ycsb-rs's ports; docs/design/bench-method.md says where the driver
//! departs from YCSB (one record stored as one value).
//!
//! Pure: no engine, no clock. `runner::ycsb` runs them.

use crate::error::{Error, Result};
use crate::gen::Rng;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

/// YCSB's `ZipfianGenerator.ZIPFIAN_CONSTANT`.
pub const ZIPFIAN_CONSTANT: f64 = 0.99;
/// `ScrambledZipfianGenerator.ITEM_COUNT`: the scrambled chooser draws from a Zipfian over this
/// many items and folds the hash of the draw onto the key range.
pub const SCRAMBLED_ITEM_COUNT: u64 = 10_000_000_000;
/// `ScrambledZipfianGenerator.ZETAN`: zeta(ITEM_COUNT, 0.99), precomputed by YCSB.
pub const SCRAMBLED_ZETAN: f64 = 26.469_028_201_783_02;
/// `CoreWorkload`'s defaults: ten fields of 100 bytes (a 1,000-byte record).
pub const FIELD_COUNT_DEFAULT: usize = 10;
pub const FIELD_LENGTH_DEFAULT: usize = 100;
/// workloade's `maxscanlength` (and `minscanlength`'s default).
pub const SCAN_LENGTH_MAX: u64 = 100;
pub const SCAN_LENGTH_MIN: u64 = 1;
/// Inserts a reader may run ahead of (`AcknowledgedCounterGenerator.WINDOW_SIZE` is 2^20).
pub const ACK_WINDOW: u64 = 1 << 20;

/// `Utils.fnvhash64`: FNV-1a over the 8 bytes of `v`, low byte first, made non-negative as
/// Java's `Math.abs` does (`Long.MIN_VALUE` stays itself; as u64 that is 2^63).
pub fn fnvhash64(v: u64) -> u64 {
    const OFFSET_BASIS: u64 = 0xCBF2_9CE4_8422_2325;
    const PRIME: u64 = 1_099_511_628_211;
    let mut h = OFFSET_BASIS;
    let mut v = v;
    for _ in 0..8 {
        h ^= v & 0xff;
        h = h.wrapping_mul(PRIME);
        v >>= 8;
    }
    (h as i64).unsigned_abs()
}

/// `CoreWorkload.buildKeyName` with `insertorder=hashed` and `zeropadding=1`: record `n`'s key.
pub fn key_name(n: u64, out: &mut Vec<u8>) {
    use std::io::Write;
    out.clear();
    // Writing to a Vec cannot fail.
    let _ = write!(out, "user{}", fnvhash64(n));
}

/// A double in [0, 1) from 53 random bits (`ThreadLocalRandom.nextDouble`'s construction).
pub fn next_f64(rng: &mut Rng) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// zeta(n, theta) = sum over i in 1..=n of 1 / i^theta, continued from `from` items whose sum
/// is `initial` (YCSB's incremental `zeta(st, n, theta, initialsum)`).
pub fn zeta_from(from: u64, n: u64, theta: f64, initial: f64) -> f64 {
    let mut sum = initial;
    for i in from..n {
        sum += 1.0 / ((i + 1) as f64).powf(theta);
    }
    sum
}

/// `ZipfianGenerator`: items `base..base + items` with item `base` the most popular, drawn by
/// Gray et al.'s method in O(1) once zeta(items) is known. `next_below(count)` follows a
/// growing item count (YCSB's `nextLong(itemcount)`), extending zeta incrementally.
#[derive(Debug, Clone)]
pub struct Zipfian {
    base: u64,
    theta: f64,
    alpha: f64,
    zeta2theta: f64,
    zetan: f64,
    eta: f64,
    /// The item count zetan and eta were computed for.
    count_for_zeta: u64,
}

impl Zipfian {
    /// Over `min..=max` with `theta`, computing zeta(items) (O(items)).
    pub fn new(min: u64, max: u64, theta: f64) -> Zipfian {
        let items = max - min + 1;
        Zipfian::with_zetan(min, max, theta, zeta_from(0, items, theta, 0.0))
    }

    /// Over `min..=max` with a zeta(items) computed elsewhere (the scrambled chooser's constant).
    pub fn with_zetan(min: u64, max: u64, theta: f64, zetan: f64) -> Zipfian {
        let items = max - min + 1;
        let zeta2theta = zeta_from(0, 2, theta, 0.0);
        let mut z = Zipfian {
            base: min,
            theta,
            alpha: 1.0 / (1.0 - theta),
            zeta2theta,
            zetan,
            eta: 0.0,
            count_for_zeta: items,
        };
        z.eta = z.eta_for(items);
        z
    }

    fn eta_for(&self, items: u64) -> f64 {
        (1.0 - (2.0 / items as f64).powf(1.0 - self.theta)) / (1.0 - self.zeta2theta / self.zetan)
    }

    /// The item count the generator draws over now.
    pub fn items(&self) -> u64 {
        self.count_for_zeta
    }

    /// A draw over the generator's own item count.
    pub fn next(&mut self, rng: &mut Rng) -> u64 {
        self.next_below(self.count_for_zeta, rng)
    }

    /// A draw over `count` items (`nextLong(itemcount)`): a count larger than the last one
    /// extends zeta by the new items' terms; a smaller one is drawn over with the larger
    /// zeta, as YCSB does without `allowitemcountdecrease`.
    pub fn next_below(&mut self, count: u64, rng: &mut Rng) -> u64 {
        if count > self.count_for_zeta {
            self.zetan = zeta_from(self.count_for_zeta, count, self.theta, self.zetan);
            self.count_for_zeta = count;
            self.eta = self.eta_for(count);
        }
        let u = next_f64(rng);
        let uz = u * self.zetan;
        if uz < 1.0 {
            return self.base;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return self.base + 1;
        }
        self.base + (count as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64
    }
}

/// The distribution of a workload's requests over the keys (`requestdistribution`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Distribution {
    /// `zipfian`: a ScrambledZipfianGenerator, popular keys spread over the key space.
    Zipfian,
    /// `latest`: a SkewedLatestGenerator, the most recently inserted keys the most popular.
    Latest,
    /// `uniform`.
    Uniform,
}

/// One thread's key chooser for a run phase (`CoreWorkload.nextKeynum`): a record number
/// whose insert has been acknowledged.
#[derive(Debug, Clone)]
pub enum Chooser {
    /// `ScrambledZipfianGenerator(0, items - 1)`: a Zipfian over 10^10 items, hashed onto
    /// `items` record numbers; draws past the last acknowledged insert are drawn again.
    Scrambled { zipf: Zipfian, items: u64 },
    /// `SkewedLatestGenerator`: the last acknowledged record minus a Zipfian draw over it.
    Latest { zipf: Zipfian },
    /// `UniformLongGenerator(0, records - 1)` (the records loaded; inserts are not chosen).
    Uniform { records: u64 },
}

impl Chooser {
    /// The chooser of `dist` for a run over `records` loaded records expecting `ops`
    /// operations of which `insert_proportion` insert (YCSB sizes the scrambled key space as
    /// records + 2 x the expected inserts, so that inserts do not move the popular keys).
    pub fn new(dist: Distribution, records: u64, ops: u64, insert_proportion: f64) -> Chooser {
        match dist {
            Distribution::Zipfian => {
                let expected_new = (ops as f64 * insert_proportion * 2.0) as u64;
                Chooser::Scrambled {
                    // `new ZipfianGenerator(0, ITEM_COUNT, ZIPFIAN_CONSTANT, ZETAN)`.
                    zipf: Zipfian::with_zetan(
                        0,
                        SCRAMBLED_ITEM_COUNT,
                        ZIPFIAN_CONSTANT,
                        SCRAMBLED_ZETAN,
                    ),
                    // YCSB builds it over insertstart..=insertstart + insertcount + expected.
                    items: records + expected_new + 1,
                }
            }
            // `new ZipfianGenerator(basis.lastValue())`: items 0..last, last = records - 1.
            Distribution::Latest => Chooser::Latest {
                zipf: Zipfian::new(0, records.max(3) - 2, ZIPFIAN_CONSTANT),
            },
            Distribution::Uniform => Chooser::Uniform { records },
        }
    }

    /// A record number no greater than `last` (the last acknowledged insert).
    pub fn next(&mut self, last: u64, rng: &mut Rng) -> u64 {
        match self {
            Chooser::Scrambled { zipf, items } => loop {
                let n = fnvhash64(zipf.next(rng)) % *items;
                if n <= last {
                    return n;
                }
            },
            Chooser::Latest { zipf } => {
                // SkewedLatestGenerator: max - zipfian.nextLong(max), max the last value.
                let max = last.max(1);
                max - zipf.next_below(max, rng).min(max)
            }
            Chooser::Uniform { records } => loop {
                let n = rng.below((*records).max(1));
                if n <= last {
                    return n;
                }
            },
        }
    }
}

/// YCSB's `AcknowledgedCounterGenerator`, shared by a run's threads: `next()` hands out record
/// numbers to insert; `acknowledge(n)` marks one inserted; `last()` is the highest number
/// below which every insert has been acknowledged, the bound of the key choosers (a reader
/// never asks for a key whose insert has not returned).
pub struct InsertSequence {
    counter: AtomicU64,
    limit: AtomicU64,
    window: Vec<AtomicBool>,
    lock: Mutex<()>,
}

impl InsertSequence {
    /// Inserts start at `records` (the loaded records are 0..records).
    pub fn new(records: u64) -> InsertSequence {
        InsertSequence {
            counter: AtomicU64::new(records),
            limit: AtomicU64::new(records.saturating_sub(1)),
            window: (0..ACK_WINDOW).map(|_| AtomicBool::new(false)).collect(),
            lock: Mutex::new(()),
        }
    }

    pub fn next(&self) -> u64 {
        self.counter.fetch_add(1, Ordering::Relaxed)
    }

    pub fn last(&self) -> u64 {
        self.limit.load(Ordering::Acquire)
    }

    /// Marks `n` inserted and, if no other thread is doing it, moves the limit over every
    /// acknowledged number after it. Errs when `n` is a window ahead of the limit (YCSB's
    /// "Too many unacknowledged insertion keys").
    pub fn acknowledge(&self, n: u64) -> Result<()> {
        let slot = &self.window[(n % ACK_WINDOW) as usize];
        if slot.swap(true, Ordering::AcqRel) {
            return Err(Error::Child(format!(
                "ycsb: more than {ACK_WINDOW} inserts unacknowledged at record {n}"
            )));
        }
        if let Ok(_guard) = self.lock.try_lock() {
            let mut index = self.limit.load(Ordering::Acquire) + 1;
            loop {
                let s = &self.window[(index % ACK_WINDOW) as usize];
                if !s.swap(false, Ordering::AcqRel) {
                    break;
                }
                index += 1;
            }
            self.limit.store(index - 1, Ordering::Release);
        }
        Ok(())
    }
}

/// One core workload's operation mix (its workload file's proportions).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Mix {
    pub read: f64,
    pub update: f64,
    pub insert: f64,
    pub scan: f64,
    pub read_modify_write: f64,
    pub distribution: Distribution,
}

/// An operation of a run phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Read,
    Update,
    Insert,
    Scan,
    ReadModifyWrite,
}

impl Operation {
    pub const ALL: [Operation; 5] = [
        Operation::Read,
        Operation::Update,
        Operation::Insert,
        Operation::Scan,
        Operation::ReadModifyWrite,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Operation::Read => "read",
            Operation::Update => "update",
            Operation::Insert => "insert",
            Operation::Scan => "scan",
            Operation::ReadModifyWrite => "rmw",
        }
    }
}

impl Mix {
    /// workloada..workloadf, by letter.
    pub fn of(letter: char) -> Option<Mix> {
        let m = |read, update, insert, scan, rmw, distribution| Mix {
            read,
            update,
            insert,
            scan,
            read_modify_write: rmw,
            distribution,
        };
        Some(match letter {
            // Update heavy: a session store recording recent actions.
            'a' => m(0.5, 0.5, 0.0, 0.0, 0.0, Distribution::Zipfian),
            // Read mostly: photo tagging.
            'b' => m(0.95, 0.05, 0.0, 0.0, 0.0, Distribution::Zipfian),
            // Read only: a user profile cache.
            'c' => m(1.0, 0.0, 0.0, 0.0, 0.0, Distribution::Zipfian),
            // Read latest: user status updates.
            'd' => m(0.95, 0.0, 0.05, 0.0, 0.0, Distribution::Latest),
            // Short ranges: threaded conversations.
            'e' => m(0.0, 0.0, 0.05, 0.95, 0.0, Distribution::Zipfian),
            // Read-modify-write: a user database.
            'f' => m(0.5, 0.0, 0.0, 0.0, 0.5, Distribution::Zipfian),
            _ => return None,
        })
    }

    /// `CoreWorkload.createOperationGenerator`'s DiscreteGenerator: one operation drawn by the
    /// proportions (in YCSB's order: read, update, insert, scan, read-modify-write).
    pub fn choose(&self, rng: &mut Rng) -> Operation {
        let weights = [
            self.read,
            self.update,
            self.insert,
            self.scan,
            self.read_modify_write,
        ];
        let total: f64 = weights.iter().sum();
        let mut x = next_f64(rng) * total;
        for (w, op) in weights.iter().zip(Operation::ALL) {
            if x < *w {
                return op;
            }
            x -= w;
        }
        // Rounding left x at the end: the last operation with a weight.
        Operation::ALL
            .into_iter()
            .zip(weights)
            .rev()
            .find(|(_, w)| *w > 0.0)
            .map_or(Operation::Read, |(op, _)| op)
    }
}

/// E's scan length: `UniformLongGenerator(minscanlength, maxscanlength)`.
pub fn scan_length(rng: &mut Rng) -> u64 {
    SCAN_LENGTH_MIN + rng.below(SCAN_LENGTH_MAX - SCAN_LENGTH_MIN + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// FNV-1a over bytes, as its authors define it.
    fn fnv1a(bytes: &[u8]) -> u64 {
        let mut h: u64 = 0xCBF2_9CE4_8422_2325;
        for b in bytes {
            h ^= *b as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01B3);
        }
        h
    }

    #[test]
    fn fnv_is_fnv1a_over_the_little_endian_bytes() {
        // The published FNV-1a 64 test vectors.
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
        for v in [0u64, 1, 255, 256, 1 << 40, 123_456_789, u64::MAX >> 1] {
            assert_eq!(
                fnvhash64(v),
                (fnv1a(&v.to_le_bytes()) as i64).unsigned_abs()
            );
        }
        let mut k = Vec::new();
        key_name(0, &mut k);
        assert_eq!(k, format!("user{}", fnvhash64(0)).into_bytes());
        let mut seen = std::collections::HashSet::new();
        for n in 0..100_000 {
            key_name(n, &mut k);
            assert!(seen.insert(k.clone()), "two records share key {k:?}");
        }
    }

    #[test]
    fn zipfian_follows_its_closed_form() {
        // P(item i) = 1 / ((i + 1)^theta zeta(n)): checked at the head, item by item, and on
        // the cumulative distribution further out.
        let n = 1000u64;
        let draws = 2_000_000u64;
        let mut z = Zipfian::new(0, n - 1, ZIPFIAN_CONSTANT);
        let mut rng = Rng::new(7, 1);
        let mut hist = vec![0u64; n as usize + 1];
        for _ in 0..draws {
            let x = z.next(&mut rng);
            assert!(x < n, "draw {x} out of 0..{n}");
            hist[x as usize] += 1;
        }
        let zetan = zeta_from(0, n, ZIPFIAN_CONSTANT, 0.0);
        let p = |i: u64| 1.0 / ((i + 1) as f64).powf(ZIPFIAN_CONSTANT) / zetan;
        // Gray's method draws items 0 and 1 exactly.
        for i in 0..2 {
            let seen = hist[i as usize] as f64 / draws as f64;
            assert!(
                (seen / p(i) - 1.0).abs() < 0.01,
                "item {i}: {seen} vs {}",
                p(i)
            );
        }
        // Further out Gray's method approximates the distribution: its cumulative share is
        // within 5% of Zipf's (4.1% off at item 9 for n = 1000, less further out), and within
        // 0.5% of the method's own closed form, P(X < k) = max((1 + 0.5^theta) / zeta(n),
        // 1 + ((k / n)^(1 - theta) - 1) / eta) for k >= 2.
        let eta = (1.0 - (2.0 / n as f64).powf(1.0 - ZIPFIAN_CONSTANT))
            / (1.0 - zeta_from(0, 2, ZIPFIAN_CONSTANT, 0.0) / zetan);
        let method_below = |k: u64| {
            let head = (1.0 + 0.5f64.powf(ZIPFIAN_CONSTANT)) / zetan;
            let u = 1.0 + ((k as f64 / n as f64).powf(1.0 - ZIPFIAN_CONSTANT) - 1.0) / eta;
            head.max(u).min(1.0)
        };
        let mut cum_seen = 0.0;
        let mut cum_p = 0.0;
        for i in 0..n {
            cum_seen += hist[i as usize] as f64 / draws as f64;
            cum_p += p(i);
            if [4, 9, 49, 99, 499].contains(&i) {
                assert!(
                    (cum_seen / cum_p - 1.0).abs() < 0.05,
                    "P(X <= {i}) {cum_seen} vs Zipf's {cum_p}"
                );
                let m = method_below(i + 1);
                assert!(
                    (cum_seen / m - 1.0).abs() < 0.005,
                    "P(X <= {i}) {cum_seen} vs the method's {m}"
                );
            }
        }
        // A growing count extends zeta as a fresh generator over the larger count has it.
        let mut grown = Zipfian::new(0, 99, ZIPFIAN_CONSTANT);
        grown.next_below(n, &mut rng);
        assert!((grown.zetan / zetan - 1.0).abs() < 1e-12);
        assert_eq!(grown.items(), n);
    }

    #[test]
    fn the_scrambled_chooser_spreads_the_popular_keys() {
        let records = 10_000u64;
        let mut c = Chooser::new(Distribution::Zipfian, records, 0, 0.0);
        let mut rng = Rng::new(9, 2);
        let mut hist = vec![0u64; records as usize];
        let draws = 500_000;
        for _ in 0..draws {
            let x = c.next(records - 1, &mut rng);
            hist[x as usize] += 1;
        }
        // Skewed: the hottest key takes far more than the uniform share, and the hottest 1%
        // of keys a large part of the draws...
        let mut sorted = hist.clone();
        sorted.sort_unstable_by(|a, b| b.cmp(a));
        let uniform = draws as f64 / records as f64;
        assert!(sorted[0] as f64 > 100.0 * uniform, "hottest {}", sorted[0]);
        let top: u64 = sorted[..(records / 100) as usize].iter().sum();
        // (Items 0..100 of the 10^10-item Zipfian alone are 19% of the draws.)
        assert!(top as f64 > 0.15 * draws as f64, "top 1% took {top}");
        // ... but not the lowest record numbers: the hash scatters them over the range.
        let low: u64 = hist[..(records / 100) as usize].iter().sum();
        assert!(
            low < top / 4,
            "records 0..1% took {low} of the top 1%'s {top}"
        );
        // Draws past the last acknowledged record are drawn again.
        for _ in 0..10_000 {
            assert!(c.next(99, &mut rng) <= 99);
        }
    }

    #[test]
    fn latest_favours_the_newest_records() {
        let records = 100_000u64;
        let mut c = Chooser::new(Distribution::Latest, records, 0, 0.0);
        let mut rng = Rng::new(11, 3);
        let draws = 200_000u64;
        let mut last = records - 1;
        let mut newest_10 = 0u64;
        let mut oldest_half = 0u64;
        for d in 0..draws {
            if d % 20 == 0 {
                last += 1; // an insert acknowledged every 20 draws, as in D's 5%
            }
            let x = c.next(last, &mut rng);
            assert!(x <= last, "{x} past the last record {last}");
            if x + 10 > last {
                newest_10 += 1;
            }
            if x < last / 2 {
                oldest_half += 1;
            }
        }
        // The ten newest records are drawn with P = zeta(10) / zeta(n), 23% at 10^5 records
        // (Gray's method within a few % of it), against 10 / 100,000 if uniform.
        let share = newest_10 as f64 / draws as f64;
        let closed =
            zeta_from(0, 10, ZIPFIAN_CONSTANT, 0.0) / zeta_from(0, records, ZIPFIAN_CONSTANT, 0.0);
        assert!(
            (share / closed - 1.0).abs() < 0.08,
            "newest ten took {share}, not {closed}"
        );
        assert!(
            (oldest_half as f64) < 0.1 * draws as f64,
            "older half took {oldest_half}"
        );
    }

    #[test]
    fn scan_lengths_are_uniform_over_one_to_max() {
        let mut rng = Rng::new(13, 4);
        let mut hist = vec![0u64; SCAN_LENGTH_MAX as usize + 2];
        let draws = 1_000_000u64;
        for _ in 0..draws {
            let l = scan_length(&mut rng);
            assert!(
                (SCAN_LENGTH_MIN..=SCAN_LENGTH_MAX).contains(&l),
                "length {l}"
            );
            hist[l as usize] += 1;
        }
        let expected = draws as f64 / SCAN_LENGTH_MAX as f64;
        for (l, &count) in hist
            .iter()
            .enumerate()
            .skip(1)
            .take(SCAN_LENGTH_MAX as usize)
        {
            assert!(
                (count as f64 / expected - 1.0).abs() < 0.05,
                "length {l}: {count} vs {expected}"
            );
        }
    }

    #[test]
    fn mixes_draw_their_proportions() {
        let mut rng = Rng::new(17, 5);
        for letter in 'a'..='f' {
            let m = Mix::of(letter).unwrap();
            let mut count = [0u64; 5];
            let draws = 200_000;
            for _ in 0..draws {
                count[m.choose(&mut rng) as usize] += 1;
            }
            let want = [m.read, m.update, m.insert, m.scan, m.read_modify_write];
            for i in 0..5 {
                let seen = count[i] as f64 / draws as f64;
                assert!(
                    (seen - want[i]).abs() < 0.01,
                    "{letter} op {i}: {seen} vs {}",
                    want[i]
                );
            }
        }
        assert!(Mix::of('g').is_none());
        assert_eq!(Mix::of('d').unwrap().distribution, Distribution::Latest);
    }

    #[test]
    fn the_insert_sequence_waits_for_every_earlier_insert() {
        let s = InsertSequence::new(10);
        assert_eq!(s.last(), 9);
        let (a, b, c) = (s.next(), s.next(), s.next());
        assert_eq!((a, b, c), (10, 11, 12));
        s.acknowledge(c).unwrap();
        s.acknowledge(b).unwrap();
        assert_eq!(s.last(), 9, "10 is not acknowledged yet");
        s.acknowledge(a).unwrap();
        assert_eq!(s.last(), 12);
        // A number acknowledged twice while still in the window is an error, not a hang.
        let d = s.next();
        let e = s.next();
        s.acknowledge(e).unwrap();
        assert!(s.acknowledge(e).is_err());
        s.acknowledge(d).unwrap();
        assert_eq!(s.last(), 14);
    }
}
