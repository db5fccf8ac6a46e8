//! Which benchmark a name means: its kind, whether it starts from an empty database, how
//! many operations each thread does, and how it commits (db_bench's semantics, and the
//! additions documented in docs/design/bench-method.md).

use crate::error::{Error, Result};
use crate::flags::Flags;

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
    /// YCSB's load phase: records 0..num, one insert a transaction (`--batch_size` a commit),
    /// on `--threads` clients.
    YcsbLoad,
    /// A YCSB core workload's run phase, by letter (`'a'..='f'`), on `--threads` clients.
    YcsbRun(char),
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

/// The letter of a YCSB core workload's name suffix ("a".."f").
fn ycsb_letter(suffix: &str) -> Option<char> {
    let mut c = suffix.chars();
    match (c.next(), c.next()) {
        (Some(l @ 'a'..='f'), None) => Some(l),
        _ => None,
    }
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
            "ycsb_load" => (Kind::YcsbLoad, true, f.num, f.sync, f.batch_size),
            other => match other.strip_prefix("ycsb_").and_then(ycsb_letter) {
                Some(letter) => (Kind::YcsbRun(letter), false, f.reads, f.sync, 1),
                None => return Err(Error::Usage(format!("unknown benchmark {other:?}"))),
            },
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
        if matches!(self.kind, Kind::YcsbLoad) {
            return true;
        }
        self.name == "fillsync_mt"
            || !matches!(
                self.kind,
                Kind::Fill(_) | Kind::Delete(_) | Kind::OverwritePinned
            )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let load = Workload::resolve("ycsb_load", &f).unwrap();
        assert!(load.fresh && load.uses_threads() && load.ops == 5000);
        let e = Workload::resolve("ycsb_e", &f).unwrap();
        assert!(e.kind == Kind::YcsbRun('e') && !e.fresh && e.uses_threads());
        assert!(Workload::resolve("ycsb_g", &f).is_err());
        assert!(Workload::resolve("ycsb_", &f).is_err());
    }
}
