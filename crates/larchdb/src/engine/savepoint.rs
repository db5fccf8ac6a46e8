//! Savepoints inside a write transaction: points it can roll back to without aborting.
//!
//! A write transaction changes either its pages (copy-on-write, but a page it has copied once
//! is changed in place, and may already be written out) or its batch (one write per key,
//! replaced in place), depending on how it commits (`WriteTxn`'s docs). Neither keeps what a
//! key held before the transaction's own last write, so a savepoint cannot be a copy of
//! either without copying all of it. Instead, while any savepoint is live, every change
//! records how to undo it at the level of the API: the value a key had (or that it had none),
//! a table created, a table deleted with its entries and properties, properties replaced.
//! Rolling back applies those in reverse through the same calls, so it works the same in both
//! kinds of transaction and across a switch from one to the other. The data and counts come
//! back exactly; the pages do not (a rolled-back split stays split), which no reader can see.
//!
//! Cost: nothing while no savepoint is live; with one, a lookup of the old value before each
//! change and a copy of it (a blind `set` gives up its skipped lookup), and, for a range
//! delete, a clear or a deleted table, a copy of every entry it removes.
//!
//! The records are bounded in memory (`UndoLog`): past `undo_bound` bytes, those held are
//! written to a temporary file of their own, before the next change is made, and read back a
//! chunk at a time, newest first, as a rollback applies them.

use crate::error::{Error, Result};
use crate::pager::shift::crc32c;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// Numbers the write transactions that make savepoints, so that a savepoint of one is refused
/// by another.
static SERIALS: AtomicU64 = AtomicU64::new(1);

/// A point inside a write transaction, made by [`crate::WriteTxn::savepoint`], that
/// [`crate::WriteTxn::rollback_to`] returns the transaction to. It is only a name for the
/// point: dropping it releases nothing ([`crate::WriteTxn::release`] does, or the end of the
/// transaction).
#[derive(Debug)]
pub struct Savepoint {
    serial: u64,
    id: u64,
}

/// How to undo one change.
pub(crate) enum Undo {
    /// Key `key` of `table` held `old` (`None`: no value).
    Key {
        table: Arc<str>,
        key: Vec<u8>,
        old: Option<Vec<u8>>,
    },
    /// The table was created.
    Created(String),
    /// The table was deleted; it had these properties. Its entries are the `Key` records
    /// (each with its value) made just before this one, so that a rollback, newest first,
    /// makes the table again before it puts them back.
    Deleted { table: String, props: Vec<u8> },
    /// The table's properties were `old`.
    Props { table: String, old: Vec<u8> },
}

impl Undo {
    /// About the memory the record holds: its bytes and its vectors' headers.
    fn bytes(&self) -> usize {
        const HEADERS: usize = 64;
        HEADERS
            + match self {
                Undo::Key { key, old, .. } => key.len() + old.as_ref().map_or(0, Vec::len),
                Undo::Created(name) => name.len(),
                Undo::Deleted { table, props } => table.len() + props.len(),
                Undo::Props { table, old } => table.len() + old.len(),
            }
    }

    /// Appends the record's bytes to `out` (read back by `decode`): a kind byte, then each
    /// field as its length (4 bytes for names and keys, 8 for values and properties) and
    /// its bytes; an old value a presence byte first.
    fn encode(&self, out: &mut Vec<u8>) {
        fn short(out: &mut Vec<u8>, b: &[u8]) {
            out.extend_from_slice(&(b.len() as u32).to_le_bytes());
            out.extend_from_slice(b);
        }
        fn long(out: &mut Vec<u8>, b: &[u8]) {
            out.extend_from_slice(&(b.len() as u64).to_le_bytes());
            out.extend_from_slice(b);
        }
        match self {
            Undo::Key { table, key, old } => {
                out.push(0);
                short(out, table.as_bytes());
                short(out, key);
                match old {
                    Some(v) => {
                        out.push(1);
                        long(out, v);
                    }
                    None => out.push(0),
                }
            }
            Undo::Created(name) => {
                out.push(1);
                short(out, name.as_bytes());
            }
            Undo::Deleted { table, props } => {
                out.push(2);
                short(out, table.as_bytes());
                long(out, props);
            }
            Undo::Props { table, old } => {
                out.push(3);
                short(out, table.as_bytes());
                long(out, old);
            }
        }
    }

    /// The records `encode` wrote into `b`, in order (`None` if they do not parse). `Key`
    /// records of one table in a row share its name.
    fn decode_all(mut b: &[u8]) -> Option<Vec<Undo>> {
        fn take<'a>(b: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
            let (head, rest) = b.split_at_checked(n)?;
            *b = rest;
            Some(head)
        }
        fn short<'a>(b: &mut &'a [u8]) -> Option<&'a [u8]> {
            let n = u32::from_le_bytes(take(b, 4)?.try_into().ok()?);
            take(b, usize::try_from(n).ok()?)
        }
        fn long<'a>(b: &mut &'a [u8]) -> Option<&'a [u8]> {
            let n = u64::from_le_bytes(take(b, 8)?.try_into().ok()?);
            take(b, usize::try_from(n).ok()?)
        }
        fn name(b: &mut &[u8]) -> Option<String> {
            String::from_utf8(short(b)?.to_vec()).ok()
        }
        let mut out = Vec::new();
        let mut last: Option<Arc<str>> = None;
        while let Some(&kind) = b.first() {
            b = &b[1..];
            out.push(match kind {
                0 => {
                    let table = std::str::from_utf8(short(&mut b)?).ok()?;
                    let table = match &last {
                        Some(t) if **t == *table => t.clone(),
                        _ => last.insert(Arc::from(table)).clone(),
                    };
                    let key = short(&mut b)?.to_vec();
                    let old = match take(&mut b, 1)?[0] {
                        0 => None,
                        1 => Some(long(&mut b)?.to_vec()),
                        _ => return None,
                    };
                    Undo::Key { table, key, old }
                }
                1 => Undo::Created(name(&mut b)?),
                2 => Undo::Deleted {
                    table: name(&mut b)?,
                    props: long(&mut b)?.to_vec(),
                },
                3 => Undo::Props {
                    table: name(&mut b)?,
                    old: long(&mut b)?.to_vec(),
                },
                _ => return None,
            });
        }
        Some(out)
    }
}

/// Holders of the testing switch that spills the undo records at every change
/// (`testing::spill_undo_records_always`), so that tests of few records run the file's path.
pub(crate) static SPILL_ALWAYS: AtomicUsize = AtomicUsize::new(0);

/// The memory a transaction's undo records may hold before they go to a file: an eighth of
/// the bound on its batch (`Shared::batch_bytes_max`), at least 1 MiB.
pub(crate) fn undo_bound(batch_bytes_max: usize) -> usize {
    (batch_bytes_max / 8).max(1 << 20)
}

/// A transaction's undo records, oldest first: the newest in memory, the older, past the
/// bound, in a temporary file (`Spill`). Positions count records from the first, wherever
/// they lie.
#[derive(Default)]
pub(crate) struct UndoLog {
    /// The newest records.
    mem: Vec<Undo>,
    /// What `mem` holds (`Undo::bytes`).
    mem_bytes: usize,
    /// The records before `mem`, if any went to a file.
    spill: Option<Spill>,
    /// `undo_bound`, set by the first savepoint.
    bound: usize,
    /// Chunks written to the file in this transaction, the ones read back included
    /// (`CommitStats::undo_spills`).
    pub(crate) spills: u64,
}

/// Undo records written to a file: chunks one after the other, each what `mem` held when it
/// passed the bound.
struct Spill {
    /// Unlinked as soon as it is made: its space goes when it is closed (the records are
    /// dropped, or the transaction ends), whatever ends the process.
    file: File,
    /// Where it was made, for errors.
    dir: PathBuf,
    chunks: Vec<Chunk>,
    /// The records in the chunks.
    records: usize,
}

struct Chunk {
    offset: u64,
    len: usize,
    count: usize,
    crc: u32,
}

impl UndoLog {
    pub(crate) fn len(&self) -> usize {
        self.spill.as_ref().map_or(0, |s| s.records) + self.mem.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops every record, keeping the count of spills.
    fn clear(&mut self) {
        *self = UndoLog {
            spills: self.spills,
            ..UndoLog::default()
        };
    }

    pub(crate) fn push(&mut self, u: Undo) {
        self.mem_bytes += u.bytes();
        self.mem.push(u);
    }

    /// Makes room before a change records its undo: writes the records in memory to the
    /// file once they hold more than the bound (encoded into one buffer first: while a chunk
    /// is written, twice the bound). A failure leaves the records as they were, and the
    /// change is not made.
    pub(crate) fn make_room(&mut self) -> Result<()> {
        let always = SPILL_ALWAYS.load(Ordering::Relaxed) > 0 && !self.mem.is_empty();
        if self.mem_bytes <= self.bound.max(1) && !always {
            return Ok(());
        }
        let spill = match &mut self.spill {
            Some(s) => s,
            None => self.spill.insert(Spill::create()?),
        };
        let mut bytes = Vec::with_capacity(self.mem_bytes);
        for u in &self.mem {
            u.encode(&mut bytes);
        }
        let offset = spill.chunks.last().map_or(0, |c| c.offset + c.len as u64);
        spill
            .file
            .write_all_at(&bytes, offset)
            .map_err(|e| Error::io_at("write", &spill.dir, e))?;
        spill.chunks.push(Chunk {
            offset,
            len: bytes.len(),
            count: self.mem.len(),
            crc: crc32c(&bytes),
        });
        spill.records += self.mem.len();
        self.spills += 1;
        self.mem = Vec::new();
        self.mem_bytes = 0;
        Ok(())
    }

    /// Takes the newest record, reading the newest chunk back from the file when memory
    /// holds none.
    pub(crate) fn pop(&mut self) -> Result<Option<Undo>> {
        if self.mem.is_empty() {
            let Some(spill) = self.spill.as_mut() else {
                return Ok(None);
            };
            let Some(chunk) = spill.chunks.pop() else {
                return Ok(None);
            };
            let mut bytes = vec![0; chunk.len];
            spill
                .file
                .read_exact_at(&mut bytes, chunk.offset)
                .map_err(|e| Error::io_at("read", &spill.dir, e))?;
            let records = (crc32c(&bytes) == chunk.crc)
                .then(|| Undo::decode_all(&bytes))
                .flatten()
                .filter(|r| r.len() == chunk.count)
                .ok_or_else(|| Error::Io {
                    op: "read",
                    path: Some(spill.dir.clone()),
                    source: std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        "a savepoint's undo records read back damaged from their file",
                    ),
                })?;
            spill.records -= chunk.count;
            // The file keeps its length: the next spill writes over what was read back.
            self.mem_bytes = records.iter().map(Undo::bytes).sum();
            self.mem = records;
        }
        let u = self.mem.pop();
        if let Some(u) = &u {
            self.mem_bytes -= u.bytes();
        }
        Ok(u)
    }
}

impl Spill {
    /// An unnamed file in the temporary directory (`std::env::temp_dir`, so `TMPDIR`), as
    /// SQLite keeps its statement journals: made with a name no other can have, then
    /// unlinked.
    fn create() -> Result<Spill> {
        static FILES: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir();
        // A name left by another process of the same id (a directory shared across
        // containers) is passed over for the next.
        let mut tries = 0;
        let (file, path) = loop {
            let name = format!(
                ".larch-undo-{}-{}",
                std::process::id(),
                FILES.fetch_add(1, Ordering::Relaxed)
            );
            let path = dir.join(name);
            match std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(file) => break (file, path),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && tries < 16 => tries += 1,
                Err(e) => return Err(Error::io_at("open", &path, e)),
            }
        };
        std::fs::remove_file(&path).map_err(|e| Error::io_at("remove", &path, e))?;
        Ok(Spill {
            file,
            dir,
            chunks: Vec::new(),
            records: 0,
        })
    }
}

/// Where a table opened while savepoints are live records the undo of its changes.
pub(crate) struct UndoSink<'t> {
    pub(crate) log: &'t mut UndoLog,
    pub(crate) table: Arc<str>,
}

impl UndoSink<'_> {
    pub(crate) fn key(&mut self, key: Vec<u8>, old: Option<Vec<u8>>) {
        self.log.push(Undo::Key {
            table: self.table.clone(),
            key,
            old,
        });
    }
}

/// A live savepoint: its id, and the length of the undo records when it was made.
pub(crate) type Mark = (u64, usize);

/// A transaction's live savepoints and the undo records since the oldest.
#[derive(Default)]
pub(crate) struct Savepoints {
    /// The transaction's number (`SERIALS`), taken by its first savepoint; 0 until then.
    serial: u64,
    next_id: u64,
    /// Live savepoints, oldest first.
    marks: Vec<Mark>,
    pub(crate) undo: UndoLog,
}

impl Savepoints {
    /// Whether changes are to be recorded: some savepoint is live.
    pub(crate) fn active(&self) -> bool {
        !self.marks.is_empty()
    }

    /// A savepoint at the end of the records; `bound` is the memory they may hold
    /// (`undo_bound`).
    pub(crate) fn make(&mut self, bound: usize) -> Savepoint {
        if self.serial == 0 {
            self.serial = SERIALS.fetch_add(1, Ordering::Relaxed);
        }
        self.undo.bound = bound;
        self.next_id += 1;
        self.marks.push((self.next_id, self.undo.len()));
        Savepoint {
            serial: self.serial,
            id: self.next_id,
        }
    }

    fn position(&self, sp: &Savepoint) -> Result<usize> {
        if sp.serial != self.serial {
            return Err(Error::SavepointInvalid);
        }
        self.marks
            .iter()
            .position(|&(id, _)| id == sp.id)
            .ok_or(Error::SavepointInvalid)
    }

    /// Forgets `sp` and every savepoint made after it, keeping their changes. The undo
    /// records go once no savepoint is left.
    pub(crate) fn release(&mut self, sp: &Savepoint) -> Result<()> {
        let at = self.position(sp)?;
        self.marks.truncate(at);
        if self.marks.is_empty() {
            self.undo.clear();
        }
        Ok(())
    }

    /// Forgets the savepoints made after `sp` (it stays) and returns where its records
    /// start (the caller takes the records after it, newest first: `UndoLog::pop`) and the
    /// live marks: recording stays off (`active`) until they are put back (`resume`), so
    /// that applying the records records nothing.
    pub(crate) fn unwind(&mut self, sp: &Savepoint) -> Result<(usize, Vec<Mark>)> {
        let at = self.position(sp)?;
        self.marks.truncate(at + 1);
        let mark = self.marks[at].1;
        Ok((mark, std::mem::take(&mut self.marks)))
    }

    pub(crate) fn resume(&mut self, marks: Vec<Mark>) {
        self.marks = marks;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records() -> Vec<Undo> {
        let t: Arc<str> = "t".into();
        vec![
            Undo::Key {
                table: t.clone(),
                key: b"k1".to_vec(),
                old: Some(vec![7; 300]),
            },
            Undo::Key {
                table: t,
                key: b"k2".to_vec(),
                old: None,
            },
            Undo::Created("fresh".into()),
            Undo::Deleted {
                table: "gone".into(),
                props: b"props".to_vec(),
            },
            Undo::Props {
                table: "t".into(),
                old: Vec::new(),
            },
        ]
    }

    fn encoded(rs: &[Undo]) -> Vec<u8> {
        let mut b = Vec::new();
        for r in rs {
            r.encode(&mut b);
        }
        b
    }

    #[test]
    fn records_read_back_as_written_and_damage_does_not_parse() {
        let b = encoded(&records());
        let back = Undo::decode_all(&b).unwrap();
        assert_eq!(encoded(&back), b);
        assert!(Undo::decode_all(&b[..b.len() - 1]).is_none());
        let mut bad = b.clone();
        bad[0] = 9;
        assert!(Undo::decode_all(&bad).is_none());
    }

    #[test]
    fn spilled_records_come_back_newest_first_and_damage_is_an_error() {
        let mut log = UndoLog {
            bound: 1,
            ..UndoLog::default()
        };
        for round in 0..3 {
            for r in records() {
                log.push(r);
            }
            log.make_room().unwrap();
            assert_eq!(log.spills, round + 1);
        }
        log.push(Undo::Created("last".into()));
        assert_eq!(log.len(), 16);
        let mut popped = Vec::new();
        while let Some(u) = log.pop().unwrap() {
            popped.push(u);
        }
        let mut want = vec![Undo::Created("last".into())];
        for _ in 0..3 {
            want.extend(records().into_iter().rev());
        }
        assert_eq!(encoded(&popped), encoded(&want));
        assert!(log.is_empty());

        for r in records() {
            log.push(r);
        }
        log.make_room().unwrap();
        let spill = log.spill.as_ref().unwrap();
        // The next spill wrote over the chunks read back, from the file's start.
        assert_eq!(spill.chunks[0].offset, 0);
        spill.file.write_all_at(b"\xff", 3).unwrap();
        assert!(matches!(log.pop(), Err(Error::Io { op: "read", .. })));
    }
}
