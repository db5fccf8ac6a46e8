//! The model harness that the model-based tests (tests/model.rs) and the fuzz targets
//! (fuzz/fuzz_targets/ops_model.rs) share, with the `test-support` feature: a database as a
//! [`Model`] of tables, each a `BTreeMap`; writes applied to a transaction and to the model at
//! once, each checked as it goes; a [`Harness`] that crashes the process or the power under the
//! database (on [`FaultStorage`]) and knows which commits may survive; and the comparisons of a
//! database, a table or a range scan with the model.
//!
//! Each test keeps its own operations and how it draws them (proptest there, `arbitrary`
//! here): only what they do to a database and to the model is shared. Everything here panics
//! on a difference, with the table's name in the message.
//!
//! Also [`LoopFs`], a small real file system on a loop device, for the disk-full tests of the
//! engine and of the command-line tool, and [`copy_database`] and [`cut_file`], for the tests
//! that damage a database's files.

use crate::storage::{CrashMode, FaultStorage};
use crate::{Database, Error, Options, Range, ReadTable, WriteTxn};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

/// A table's entries, in key order.
pub type TableModel = BTreeMap<Vec<u8>, Vec<u8>>;

/// A database's tables, by name.
pub type Model = BTreeMap<String, TableModel>;

/// Every entry of a range, copied out, in its order; panics on a read error.
pub fn collect(it: Range<'_>) -> Vec<(Vec<u8>, Vec<u8>)> {
    it.map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect::<Result<_, _>>()
        .unwrap()
}

/// The keys of `model` within `lo..hi`, as a range delete should find them: none for bounds no
/// key can satisfy (`BTreeMap::range` panics on those; the engine deletes nothing).
pub fn keys_in(model: &TableModel, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> Vec<Vec<u8>> {
    let empty = match (lo, hi) {
        (Bound::Included(a), Bound::Included(b)) => a > b,
        (Bound::Unbounded, _) | (_, Bound::Unbounded) => false,
        (Bound::Included(a) | Bound::Excluded(a), Bound::Included(b) | Bound::Excluded(b)) => {
            a >= b
        }
    };
    if empty {
        return Vec::new();
    }
    model
        .range::<[u8], _>((lo, hi))
        .map(|(k, _)| k.clone())
        .collect()
}

/// Has every checkpoint's merge in this process read its leaves ahead (`on`), as merges do
/// once the tree is beyond memory, or only those after a merge that read from the device (the
/// engine's own rule): so that tests run the read-ahead's path on trees in memory. Each `true`
/// holds the switch on until a `false` of its own (tests in one process run at once).
pub fn read_ahead_every_merge(on: bool) {
    switch(&crate::engine::checkpoint::READ_AHEAD_ALWAYS, on);
}

/// Has every checkpoint in this process start its pages' writeback a few at a time (`on`), as
/// checkpoints do beside readers that wait on the device, or only those (the engine's own
/// rule): so that tests run the paced writeback's path without a device. Counted as
/// `read_ahead_every_merge` is.
pub fn pace_writeback_every_checkpoint(on: bool) {
    switch(&crate::engine::checkpoint::PACE_WRITEBACK_ALWAYS, on);
}

/// Has every change a live savepoint records in this process write the undo records held
/// to their file first (`on`), instead of only past their bound in memory: so that tests of
/// small transactions run the file's path (savepoints.md). Counted as
/// `read_ahead_every_merge` is.
pub fn spill_undo_records_always(on: bool) {
    switch(&crate::engine::savepoint::SPILL_ALWAYS, on);
}

/// One more holder of a testing switch (`on`), or one fewer.
fn switch(holders: &std::sync::atomic::AtomicUsize, on: bool) {
    use std::sync::atomic::Ordering::Relaxed;
    if on {
        holders.fetch_add(1, Relaxed);
    } else {
        let _ = holders.fetch_update(Relaxed, Relaxed, |n| n.checked_sub(1));
    }
}

/// Options for a logged database with a small log (six 1 MiB segments, a checkpoint every
/// MiB), so that checkpoints come often and the log wraps around with room for several of
/// them; no compaction at close, so that a drop stands for a process crash and the next open
/// replays the log.
pub fn small_log_options() -> Options {
    Options::default()
        .log(true)
        .log_segment_bytes(1 << 20)
        .log_segments(6)
        .checkpoint_bytes(1 << 20)
        .compact_on_close(false)
}

/// Asserts that table `t` holds exactly `expected`: its entry count, a forward scan of keys
/// and values, and a reverse scan of keys. `what` names the table in the messages.
pub fn assert_holds(t: &ReadTable<'_>, expected: &TableModel, what: &str) {
    assert_eq!(t.len().unwrap(), expected.len() as u64, "{what}: count");
    let got = collect(t.iter());
    let want: Vec<(Vec<u8>, Vec<u8>)> = expected
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert!(
        got == want,
        "{what}: scan differs ({} vs {} entries)",
        got.len(),
        want.len()
    );
    let rev: Vec<Vec<u8>> = t.iter_rev().map(|e| e.unwrap().0.to_vec()).collect();
    assert!(
        rev.iter().rev().eq(expected.keys()),
        "{what}: reverse scan differs"
    );
}

/// Whether the newest commit of `db` holds exactly `expected`: its tables, their counts and
/// their entries.
pub fn holds(db: &Database, expected: &Model) -> bool {
    let r = db.begin_read().unwrap();
    let want: Vec<String> = expected.keys().cloned().collect();
    if r.list_tables().unwrap() != want {
        return false;
    }
    expected.iter().all(|(name, map)| {
        let t = r.table(name).unwrap();
        let got = collect(t.iter());
        t.len().unwrap() == map.len() as u64 && got.iter().map(|(k, v)| (k, v)).eq(map.iter())
    })
}

/// Asserts that `db` verifies clean and that its newest commit holds exactly `expected`: the
/// list of tables, and each table as [`assert_holds`] checks it.
pub fn check(db: &Database, expected: &Model) {
    let report = db.verify_all().unwrap();
    assert!(report.is_clean(), "verify: {:?}", report.problems);
    let r = db.begin_read().unwrap();
    let want: Vec<String> = expected.keys().cloned().collect();
    assert_eq!(r.list_tables().unwrap(), want);
    for (name, map) in expected {
        let t = r.table(name).unwrap();
        assert_holds(&t, map, name);
    }
}

/// Asserts that a range scan of table `name` in the newest commit of `db`, between keys `a`
/// and `b` (the smaller included, the larger excluded), ascending or descending, gives the
/// model's entries; that the table's count is the model's; and that a table the model does not
/// have is not found.
pub fn check_range(db: &Database, model: &Model, name: &str, a: &[u8], b: &[u8], reverse: bool) {
    let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
    let r = db.begin_read().unwrap();
    let Some(m) = model.get(name) else {
        assert!(
            matches!(r.table(name), Err(Error::TableNotFound(_))),
            "{name}: found, but the model has no such table"
        );
        return;
    };
    let t = r.table(name).unwrap();
    assert_eq!(t.len().unwrap(), m.len() as u64, "count of {name}");
    let it = if reverse {
        t.range_rev(lo..hi)
    } else {
        t.range(lo..hi)
    };
    let got = collect(it);
    let mut want: Vec<(Vec<u8>, Vec<u8>)> = m
        .range::<[u8], _>((Bound::Included(lo), Bound::Excluded(hi)))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if reverse {
        want.reverse();
    }
    assert!(got == want, "scan of {name} differs");
}

/// Creates table `name` in the transaction if it is missing, and in `pending`; returns the
/// model's table.
pub fn ensure_table<'m>(
    w: &mut WriteTxn<'_>,
    pending: &'m mut Model,
    name: &str,
) -> &'m mut TableModel {
    w.ensure_table(name).unwrap();
    pending.entry(name.to_string()).or_default()
}

/// Puts `k` -> `v` in table `name` (created if missing) of the transaction and of `pending`.
/// `put` must say whether the key was there (`set`, used when `blind`, does not say); the
/// value must read back, and the table's count must be the model's.
pub fn put(w: &mut WriteTxn<'_>, pending: &mut Model, name: &str, k: &[u8], v: &[u8], blind: bool) {
    let m = ensure_table(w, pending, name);
    let was = m.insert(k.to_vec(), v.to_vec()).is_some();
    let mut t = w.table(name).unwrap();
    if blind {
        t.set(k, v).unwrap();
    } else {
        assert_eq!(
            t.put(k, v).unwrap(),
            was,
            "put in {name}: whether the key was there"
        );
    }
    assert_eq!(t.get(k).unwrap(), Some(v), "put in {name}: read back");
    assert_eq!(
        t.len().unwrap(),
        m.len() as u64,
        "count of {name} in the writer"
    );
}

/// Deletes `k` from table `name` of the transaction and of `pending`: the delete must say
/// whether the key was there, and a table the model does not have must not be found.
pub fn delete(w: &mut WriteTxn<'_>, pending: &mut Model, name: &str, k: &[u8]) {
    let present = pending.get_mut(name).is_some_and(|m| m.remove(k).is_some());
    match w.table(name) {
        Ok(mut t) => assert_eq!(t.delete(k).unwrap(), present, "delete in {name}"),
        Err(Error::TableNotFound(_)) => assert!(!present, "{name} not found"),
        Err(e) => panic!("{e}"),
    }
}

/// Deletes table `name` from the transaction and from `pending`; the delete must say whether
/// it was there.
pub fn drop_table(w: &mut WriteTxn<'_>, pending: &mut Model, name: &str) {
    assert_eq!(
        w.delete_table(name).unwrap(),
        pending.remove(name).is_some(),
        "delete_table {name}"
    );
}

/// A crash under the database.
#[derive(Debug, Clone, Copy)]
pub enum Crash {
    /// The process dies (kill -9): nothing written is lost.
    Process,
    /// The power fails: unsynced writes are lost, or with `keep_some`, a random subset of them
    /// (chosen by `seed`) reaches the disk, the last one torn.
    PowerLoss {
        /// Seed of the subset kept.
        seed: u64,
        /// Whether some unsynced writes survive.
        keep_some: bool,
    },
}

impl Crash {
    /// The crash of the fault storage.
    pub fn mode(self) -> CrashMode {
        match self {
            Crash::Process => CrashMode::ProcessOnly,
            Crash::PowerLoss {
                seed,
                keep_some: true,
            } => CrashMode::KeepRandom { seed },
            Crash::PowerLoss { .. } => CrashMode::DropUnsynced,
        }
    }
}

/// A database on fault storage (with a write-ahead log on its own fault storage, or without),
/// and the commits the model expects of it: the newest, and the newest durable one.
///
/// A test runs write transactions on [`Harness::db`] against a copy of [`Harness::latest`],
/// reports each commit to [`Harness::committed`] and each checkpoint to
/// [`Harness::made_durable`], and crashes the database with [`Harness::crash`], which checks
/// what the reopened database holds.
pub struct Harness {
    data: FaultStorage,
    log: Option<FaultStorage>,
    /// The open database (none only inside `crash`).
    db: Option<Database>,
    /// The tables of the newest commit.
    latest: Model,
    /// The tables of the newest durable commit.
    durable: Model,
    /// With a log, commits may also become durable on their own (a checkpoint, a commit that
    /// writes pages): after a power loss the database holds `durable` or one of the states
    /// committed after it, listed here in order.
    since_durable: Vec<Model>,
    /// The options a database with a log is opened with.
    log_options: Options,
}

impl Harness {
    /// An empty database with the default (smallest) 4 KiB pages, committing through a log
    /// when `log`, with [`small_log_options`] so that checkpoints come often. No compaction at
    /// close either way: a drop of the handle stands for a process crash, which leaves the
    /// commits that were not durable as they were (a compaction would make them durable).
    pub fn new(log: bool) -> Harness {
        Harness::with(log, small_log_options())
    }

    /// An empty database committing through a log, opened with `options` (which should not
    /// compact at close either: see `new`).
    pub fn with_log_options(options: Options) -> Harness {
        Harness::with(true, options)
    }

    /// A harness committing through the log with `options`, on a data file that allocates
    /// (`FaultStorage::allocating`), with the tree's pages in frames (`Options::frames_bytes`,
    /// 64 MiB: the tests' files fit).
    pub fn in_frames(options: Options) -> Harness {
        Harness::with_data(
            FaultStorage::new().allocating(),
            true,
            options.frames_bytes(64 << 20),
        )
    }

    fn with(log: bool, log_options: Options) -> Harness {
        Harness::with_data(FaultStorage::new(), log, log_options)
    }

    fn with_data(data: FaultStorage, log: bool, log_options: Options) -> Harness {
        let log = log.then(FaultStorage::new);
        let db = Some(Self::open(&data, log.as_ref(), &log_options));
        Harness {
            data,
            log,
            db,
            latest: Model::new(),
            durable: Model::new(),
            since_durable: Vec::new(),
            log_options,
        }
    }

    fn open(data: &FaultStorage, log: Option<&FaultStorage>, log_options: &Options) -> Database {
        let data = Arc::new(data.clone());
        match log {
            None => Database::open_storage(data, Options::default().compact_on_close(false))
                .expect("open"),
            // Most checkpoints are never synced (their pages are reused by the checkpoint
            // after next), every fifth or so is made durable; a reopen replays the log.
            Some(log) => {
                Database::open_storage_with_log(data, Arc::new(log.clone()), log_options.clone())
                    .expect("open")
            }
        }
    }

    /// Records a commit of `pending` (with [`crate::Durability::Immediate`] when `durable`).
    pub fn committed(&mut self, pending: Model, durable: bool) {
        self.latest = pending;
        if durable {
            self.durable = self.latest.clone();
            self.since_durable.clear();
        } else if self.log.is_some() {
            self.since_durable.push(self.latest.clone());
        }
    }

    /// Records that the newest commit is durable (a checkpoint or a compaction returned).
    pub fn made_durable(&mut self) {
        self.durable = self.latest.clone();
        self.since_durable.clear();
    }

    /// Crashes the database and reopens it. After a power loss the model expects the last
    /// durable commit exactly (without a log), or it or a later commit (with one). Then checks
    /// the database against the model.
    pub fn crash(&mut self, crash: Crash) {
        let mode = crash.mode();
        // The log's torn subset is drawn apart from the data file's.
        let log_mode = match mode {
            CrashMode::KeepRandom { seed } => CrashMode::KeepRandom {
                seed: seed.rotate_left(17) ^ 0x5eed,
            },
            m => m,
        };
        // The handle goes first (without compacting: see `new`).
        drop(self.db.take());
        self.data = self.data.crash(mode);
        self.log = self.log.as_ref().map(|l| l.crash(log_mode));
        self.db = Some(Self::open(&self.data, self.log.as_ref(), &self.log_options));
        if let Crash::PowerLoss { .. } = crash {
            let later = self
                .since_durable
                .iter()
                .rev()
                .find(|m| holds(self.db(), m));
            self.latest = later.cloned().unwrap_or_else(|| self.durable.clone());
            self.made_durable();
        }
        self.check();
    }

    /// The open database.
    pub fn db(&self) -> &Database {
        self.db.as_ref().expect("open")
    }

    /// The tables the newest commit holds, as the model has them.
    pub fn latest(&self) -> &Model {
        &self.latest
    }

    /// [`check`] of the newest commit.
    pub fn check(&self) {
        check(self.db(), &self.latest);
    }

    /// [`check_range`] on the newest commit.
    pub fn check_range(&self, name: &str, a: &[u8], b: &[u8], reverse: bool) {
        check_range(self.db(), &self.latest, name, a, b, reverse);
    }
}

/// A small ext4 file system on a loop device, mounted under a fresh temporary folder: a real
/// disk that fills up, for the disk-full tests. Unmounted, and its folder removed, on drop.
/// It needs root, `mkfs.ext4` and loop devices: [`LoopFs::new`] returns None without them (the
/// tests say so and skip).
pub struct LoopFs {
    /// The mount point: where the test puts its files.
    pub dir: std::path::PathBuf,
    root: std::path::PathBuf,
    mounted: bool,
}

impl LoopFs {
    /// A `mib` MiB file system, or None when this process cannot make and mount one.
    pub fn new(mib: u64) -> Option<LoopFs> {
        use std::process::Command;
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        if !is_root() {
            return None;
        }
        let root = std::env::temp_dir().join(format!(
            "larch-loopfs-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&root);
        let mut fs = LoopFs {
            dir: root.join("mnt"),
            root,
            mounted: false,
        };
        std::fs::create_dir_all(&fs.dir).ok()?;
        let image = fs.root.join("fs.img");
        std::fs::File::create(&image)
            .ok()?
            .set_len(mib << 20)
            .ok()?;
        let ok = |cmd: &mut Command| cmd.output().map(|o| o.status.success()).unwrap_or(false);
        if !ok(Command::new("mkfs.ext4").args(["-q", "-F"]).arg(&image)) {
            return None;
        }
        fs.mounted = ok(Command::new("mount")
            .args(["-o", "loop"])
            .arg(&image)
            .arg(&fs.dir));
        fs.mounted.then_some(fs)
    }
}

impl Drop for LoopFs {
    fn drop(&mut self) {
        if self.mounted {
            let _ = std::process::Command::new("umount").arg(&self.dir).output();
        }
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// Whether this process runs as root (`id -u` is 0).
pub fn is_root() -> bool {
    std::process::Command::new("id")
        .arg("-u")
        .output()
        .map(|o| o.stdout.starts_with(b"0\n"))
        .unwrap_or(false)
}

/// Copies the database at `path` (its data file, log and lock file, where they exist) to
/// `dir/db.larch`, creating `dir`; returns the copy's path. Taken while a handle on `path` is
/// still open and never closed, the copy is what a process killed with kill -9 leaves.
pub fn copy_database(path: &std::path::Path, dir: &std::path::Path) -> std::path::PathBuf {
    use crate::storage::{lock_path, log_path};
    std::fs::create_dir_all(dir).unwrap();
    let dst = dir.join("db.larch");
    for (from, into) in [
        (path.to_path_buf(), dst.clone()),
        (log_path(path), log_path(&dst)),
        (lock_path(path), lock_path(&dst)),
    ] {
        if from.exists() {
            std::fs::copy(&from, &into).unwrap();
        }
    }
    dst
}

/// Cuts the file at `path` to `len` bytes.
pub fn cut_file(path: &std::path::Path, len: u64) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(len)
        .unwrap();
}
