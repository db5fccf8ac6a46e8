//! The YCSB core workloads on an engine: the load phase (`ycsb_load`: records 0..num inserted
//! one per transaction, `--batch_size` per commit, by `--threads` clients) and
//! the run phases `ycsb_a`..`ycsb_f` (each client draws operations by its workload's mix and
//! keys by its chooser, crate::ycsb). A record is one value of `--ycsb_fieldcount` x
//! `--ycsb_fieldlength` bytes under the key `user<fnv hash of its number>`.
//!
//! How an operation maps onto a key-value engine (docs/design/bench-method.md, "YCSB"):
//! read = one get; update = one put of a whole new record (YCSB's `writeallfields=true`: with
//! the record stored as one value, the record is the unit of a write); insert = one put of a
//! new record number, acknowledged once it returns; scan = a cursor from the chosen key over
//! 1..=100 records; read-modify-write = a get, then a put of the record read with one field
//! rewritten. Each write is one transaction through the engine's own write path.

use super::exec::{run_threads, Budget, Outcome};
use super::stats::merge;
use super::workload::Workload;
use crate::engines::{Engine, Op, WriteOpts};
use crate::error::Result;
use crate::flags::Flags;
use crate::gen::{Rng, ValueGenerator};
use crate::hist::Latency;
use crate::ycsb::{key_name, scan_length, Chooser, InsertSequence, Mix, Operation};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Bytes of one record.
pub fn record_bytes(f: &Flags) -> usize {
    f.ycsb_fieldcount * f.ycsb_fieldlength
}

/// `ycsb_load`: records 0..num inserted by `threads` clients, each taking the next
/// `--batch_size` record numbers from one counter (YCSB's load hands out numbers the same
/// way); `--fill_duration` stops the clients taking more, and every number taken is inserted,
/// so the load leaves records 0..loaded with nothing missing below. Returns the outcome and
/// the records loaded.
pub(crate) fn run_load(
    engine: &dyn Engine,
    w: &Workload,
    f: &Flags,
    threads: usize,
) -> Result<(Outcome, u64)> {
    let record = record_bytes(f);
    let next = AtomicU64::new(0);
    let deadline =
        (f.fill_duration_s > 0).then(|| Instant::now() + Duration::from_secs(f.fill_duration_s));
    let stats = run_threads(engine, threads, &w.name, f, None, None, |_, s, st| {
        let mut values = ValueGenerator::new(f.compression_ratio, record);
        let opts = WriteOpts {
            sync: w.sync,
            append: false,
        };
        let mut keys: Vec<Vec<u8>> = (0..w.batch).map(|_| Vec::new()).collect();
        let mut vals: Vec<Vec<u8>> = (0..w.batch).map(|_| Vec::new()).collect();
        while deadline.is_none_or(|d| Instant::now() < d) {
            let first = next.fetch_add(w.batch as u64, Ordering::Relaxed);
            if first >= f.num {
                break;
            }
            let n = (w.batch as u64).min(f.num - first) as usize;
            for j in 0..n {
                key_name(first + j as u64, &mut keys[j]);
                vals[j].clear();
                vals[j].extend_from_slice(values.generate(record));
            }
            let ops: Vec<Op<'_>> = (0..n).map(|j| Op::Put(&keys[j], &vals[j])).collect();
            s.write(&ops, opts)?;
            st.bytes += (0..n).map(|j| (keys[j].len() + record) as u64).sum::<u64>();
            st.writes += n as u64;
            st.finished(n as u64);
        }
        Ok(())
    })?;
    let m = merge(&stats);
    let loaded = next.load(Ordering::Relaxed).min(f.num);
    let capped = if loaded < f.num {
        format!(
            " capped at {} s: {loaded} of {} records",
            f.fill_duration_s, f.num
        )
    } else {
        String::new()
    };
    Ok((
        Outcome {
            user_bytes_written: m.bytes,
            message: format!("(inserts:{} record_bytes:{record}{capped})", m.writes),
            stats,
            writer: None,
            threads,
        },
        loaded,
    ))
}

/// Per operation: how many ran and their latencies, and the bytes written, summed over the
/// clients.
struct OpTally {
    count: [u64; 5],
    lat: [Latency; 5],
    written: u64,
}

impl OpTally {
    fn new() -> OpTally {
        OpTally {
            count: [0; 5],
            lat: std::array::from_fn(|_| Latency::new()),
            written: 0,
        }
    }

    fn add(&mut self, other: &OpTally) {
        for i in 0..5 {
            self.count[i] += other.count[i];
            self.lat[i].merge(&other.lat[i]);
        }
        self.written += other.written;
    }

    /// "read 475123 p99 3.1us, update 24877 p99 12.0us" over the operations that ran.
    fn describe(&self) -> String {
        Operation::ALL
            .iter()
            .enumerate()
            .filter(|(i, _)| self.count[*i] > 0)
            .map(|(i, op)| {
                format!(
                    "{} {} p99 {:.1}us",
                    op.name(),
                    self.count[i],
                    self.lat[i].percentiles().p99_us
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// A run phase: workload `letter`'s mix on `threads` clients, each doing `--reads`
/// operations (or running `--duration` seconds).
pub(crate) fn run_phase(
    engine: &dyn Engine,
    w: &Workload,
    f: &Flags,
    threads: usize,
    mix: Mix,
    inserted: u64,
) -> Result<(Outcome, u64)> {
    let record = record_bytes(f);
    let field = f.ycsb_fieldlength;
    // The records in the database: the load's, and the inserts of earlier phases of this
    // process (D and E insert; the key choosers cover them).
    let records = inserted.max(1);
    let expected_ops = if f.duration_s > 0 {
        records
    } else {
        w.ops * threads as u64
    };
    let seq = InsertSequence::new(records);
    let tally = Mutex::new(OpTally::new());
    let stats = run_threads(engine, threads, &w.name, f, None, None, |tid, s, st| {
        let mut rng = Rng::new(f.seed, 3000 + tid as u64);
        let mut chooser = Chooser::new(mix.distribution, records, expected_ops, mix.insert);
        let mut values = ValueGenerator::new(f.compression_ratio, record);
        let mut budget = Budget::new(w.ops, f.duration_s);
        let opts = WriteOpts {
            sync: w.sync,
            append: false,
        };
        let mut key = Vec::with_capacity(32);
        let mut out = Vec::with_capacity(record);
        let mut mine = OpTally::new();
        let r = (|| -> Result<()> {
            while budget.more(st.ops) {
                let op = mix.choose(&mut rng);
                match op {
                    Operation::Read => {
                        key_name(chooser.next(seq.last(), &mut rng), &mut key);
                        if s.get(&key, &mut out)? {
                            st.found += 1;
                            st.bytes += (key.len() + out.len()) as u64;
                        }
                        st.reads += 1;
                    }
                    Operation::Update => {
                        key_name(chooser.next(seq.last(), &mut rng), &mut key);
                        let v = values.generate(record);
                        s.write(&[Op::Put(&key, v)], opts)?;
                        st.bytes += (key.len() + v.len()) as u64;
                        mine.written += (key.len() + v.len()) as u64;
                        st.writes += 1;
                    }
                    Operation::Insert => {
                        let n = seq.next();
                        key_name(n, &mut key);
                        let v = values.generate(record);
                        s.write(&[Op::Put(&key, v)], opts)?;
                        seq.acknowledge(n)?;
                        st.bytes += (key.len() + v.len()) as u64;
                        mine.written += (key.len() + v.len()) as u64;
                        st.writes += 1;
                    }
                    Operation::Scan => {
                        key_name(chooser.next(seq.last(), &mut rng), &mut key);
                        let len = scan_length(&mut rng);
                        let mut bytes = 0u64;
                        let n = s.scan(Some(&key), false, len, &mut |k, v| {
                            bytes += (k.len() + v.len()) as u64;
                        })?;
                        if n > 0 {
                            st.found += 1;
                        }
                        st.bytes += bytes;
                        st.reads += n;
                    }
                    Operation::ReadModifyWrite => {
                        key_name(chooser.next(seq.last(), &mut rng), &mut key);
                        let found = s.get(&key, &mut out)?;
                        if found {
                            st.found += 1;
                        }
                        // One field rewritten in the record read; a record of another size
                        // (or none) is written whole.
                        if found && out.len() == record && field > 0 {
                            let i = rng.below(f.ycsb_fieldcount as u64) as usize * field;
                            out[i..i + field].copy_from_slice(values.generate(field));
                        } else {
                            out.clear();
                            out.extend_from_slice(values.generate(record));
                        }
                        s.write(&[Op::Put(&key, &out)], opts)?;
                        st.bytes += (key.len() + out.len()) as u64;
                        mine.written += (key.len() + out.len()) as u64;
                        st.reads += 1;
                        st.writes += 1;
                    }
                }
                // The operation's sample is the benchmark's own (since the previous one
                // finished, its draw included), kept by operation too.
                let ns = st.finished(1);
                let i = op as usize;
                mine.count[i] += 1;
                mine.lat[i].record_ns(ns);
            }
            Ok(())
        })();
        tally.lock().unwrap_or_else(|p| p.into_inner()).add(&mine);
        r
    })?;
    let m = merge(&stats);
    let tally = tally.into_inner().unwrap_or_else(|p| p.into_inner());
    let inserts = tally.count[Operation::Insert as usize];
    Ok((
        Outcome {
            user_bytes_written: tally.written,
            message: format!("({}; found:{})", tally.describe(), m.found),
            stats,
            writer: None,
            threads,
        },
        records + inserts,
    ))
}
