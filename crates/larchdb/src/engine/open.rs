//! Opening: the database file and its lock file, the meta slot to start from, and the free set
//! that commit records, checked as it is loaded. The chosen meta slot is a complete committed
//! state (docs/design/durability.md); if it says commits after it are in the log
//! (`Options::log`), the log's records from its position are replayed into the overlay.

use super::background::Background;
use super::catalog::TableStates;
use super::commit;
use super::log::{Expect, GroupLog, Log, LogSource, Reopen, Shortfall};
use super::published::Published;
use super::readers::{newest_protected, ReadState};
use super::recovery::{GivenUp, Recovery};
use super::replay::{no_log, Follower, Replay};
use super::upper::overlay::Spare;
use super::{Disk, Shared, WriterState};
use crate::error::{Error, Result};
use crate::options::Options;
use crate::pager::{
    choose_meta, create, newer_pages, Access, Carry, Chosen, Doubt, FreeSet, Meta, Snapshot,
    WriteMap,
};
use crate::storage::{FileLock, FileStorage, LockTable, Storage};
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

/// Opens the database file at `path` and, beside it, its lock file, as `options` ask: a
/// writing handle locks the database exclusively; a read-only handle claims a slot of the lock
/// file's reader table, or, where the lock file cannot be opened for writing (a read-only
/// directory), takes a shared lock on the database, which excludes writers.
pub(crate) fn open_file(
    path: &Path,
    options: &Options,
) -> Result<(Arc<dyn Storage>, Option<LockTable>)> {
    options.validate()?;
    let (storage, lock) = if options.read_only {
        // The database first, so that a missing one creates no lock file.
        let storage = FileStorage::open_with(path, true, false, FileLock::None)?;
        match LockTable::open(path) {
            Ok(lock) => {
                lock.claim_slot()?;
                (storage, Some(lock))
            }
            Err(e) if cannot_write(&e) => {
                drop(storage);
                (FileStorage::open(path, true, false)?, None)
            }
            Err(e) => return Err(e),
        }
    } else {
        let storage = FileStorage::open(path, false, options.create)?;
        (storage, Some(LockTable::open(path)?))
    };
    Ok((Arc::new(storage), lock))
}

/// Whether an error means the lock file cannot be created or written here (a read-only
/// directory or file system, a full disk), so a read-only handle falls back to the v1 shared
/// lock.
fn cannot_write(e: &Error) -> bool {
    match e {
        Error::DiskFull => true,
        Error::Io { source: e, .. } => {
            e.kind() == std::io::ErrorKind::PermissionDenied
                || e.kind() == std::io::ErrorKind::ReadOnlyFilesystem
                || e.raw_os_error() == Some(libc::EROFS)
        }
        _ => false,
    }
}

/// A file at least this large has its free set loaded beside the log's replay at open (a
/// thread's start costs more than a small file's free set takes to load).
const FREE_SET_BESIDE_BYTES: u64 = 64 << 20;

/// Whether the free set of a file of `bytes` is loaded beside the log's replay. The crate's
/// own tests load every free set beside it, and the integration tests' small files load
/// theirs inline, so that both ways run.
fn free_set_beside(bytes: u64) -> bool {
    cfg!(test) || bytes >= FREE_SET_BESIDE_BYTES
}

impl Shared {
    /// The state of a handle on `storage`, starting from its newest trustworthy commit (a new
    /// database is created first if the storage is empty and `options` allow). The steps:
    ///
    /// 1. An empty file becomes a new database, unless a log beside it holds commits
    ///    (`create_if_empty`).
    /// 2. The commit to start from: the newest intact meta slot (`choose_start`); a slot
    ///    passed over must be proved to lose nothing (`prove_passed_over`).
    /// 3. Where the log must be kept from (`keep_log_from`).
    /// 4. The log's records after the commit's position replayed into an overlay, the free
    ///    set loaded beside (`replay_beside_free_set`): after a crash, this is the recovery,
    ///    and nothing else is redone.
    /// 5. The writer's state (`writer_state`).
    /// 6. A read-only handle follows a writer's log; a writer publishes its log's end in the
    ///    lock file (`follow_at_open`, `publish_log_at_open`).
    ///
    /// Nothing is written before step 4 has proved that the open loses nothing it was told
    /// about (docs/design/durability.md, "Damage is never silent").
    pub(crate) fn open(
        storage: Arc<dyn Storage>,
        options: Options,
        lock: Option<LockTable>,
        log_source: LogSource,
    ) -> Result<Shared> {
        options.validate()?;
        let boot_id = storage.boot_id();
        let mut losses = Losses {
            recover: options.recover,
            given_up: Vec::new(),
            log_given_up: false,
        };
        create_if_empty(&*storage, &options, &log_source, &mut losses)?;
        let file_bytes = storage.len()?;
        let Chosen {
            mut meta,
            slot,
            doubt,
        } = choose_start(&*storage, file_bytes, boot_id, &options, &lock)?;
        // A handle that writes, or a read-only one alone with the database (no writer can be
        // writing a meta page it reads), must prove it loses nothing by passing over a meta
        // slot it could not use.
        let must_prove = !options.read_only || lock.as_ref().is_some_and(LockTable::alone);
        let expect = match doubt.filter(|_| must_prove) {
            Some(d) => prove_passed_over(&*storage, file_bytes, &meta, d, &mut losses)?,
            None => Expect::default(),
        };
        let expect = Expect {
            synced_to: lock
                .as_ref()
                .filter(|_| must_prove)
                .map_or(0, LockTable::log_synced),
            ..expect
        };
        let restarted = boot_id != Some(meta.boot_id);
        let (keep_from, data_synced) =
            keep_log_from(&*storage, &mut meta, slot, &options, restarted)?;
        // A writing handle reads through the frames it will write in, where it keeps them.
        let frames = WriteMap::frames_at_open(
            &storage,
            meta.page_bytes as usize,
            file_bytes,
            crate::engine::admission::budget::frames_bytes(&options),
        );
        let access = match frames.clone() {
            Some(frames) => frames,
            None => Arc::new(Access::for_pages(
                &storage,
                meta.page_count * meta.page_bytes as u64,
                None,
                crate::engine::admission::budget::readahead(&options),
            )?),
        };
        let tree = Published::new(Snapshot::new(meta, access, options.verify_checksums));
        let reopen = Reopen {
            keep_from,
            tree_txn: meta.txn,
            // The machine may have restarted since the newest commit was written (a power
            // loss), unless both carry the same boot id: the log's tail is then closed as
            // after one (`Log::close_tail`).
            restarted,
            expect,
            recover: options.recover,
            handed_at: lock
                .as_ref()
                .filter(|_| !options.read_only)
                .and_then(LockTable::handed_at),
        };
        let Replayed {
            mut log,
            mut current,
            free,
            replay_from,
            named_runs,
            later_runs,
        } = replay_beside_free_set(
            &storage,
            &tree,
            &log_source,
            reopen,
            &options,
            data_synced,
            &mut losses,
        )?;
        let background = Arc::new(Background::default());
        if let Some(log) = log.as_mut() {
            log.set_background(background.clone(), options.background_nice);
        }
        let (durable_slot, last_durable_txn) = if meta.durable {
            (slot, meta.txn)
        } else {
            (1 - slot, meta.last_durable_txn)
        };
        let free = usable_free_set(free, &meta, last_durable_txn, &options, &lock)?;
        let writer = writer_state(
            &storage,
            &options,
            (file_bytes, frames),
            free,
            (durable_slot, last_durable_txn),
            (meta, slot),
            log.as_ref(),
        );
        let mut follow = None;
        if options.read_only {
            let (followed, follower) = follow_at_open(
                &storage,
                &tree,
                log_source,
                &lock,
                must_prove.then_some(expect),
            )?;
            current = followed;
            follow = follower;
        } else if let Some(lock) = lock.as_ref() {
            publish_log_at_open(lock, log.as_ref(), &current, &meta, &losses)?;
        }
        // The pages the meta page names as reserved for large values: a writing handle frees
        // those no replayed record names (`RunSpace::at_open`).
        let reserved = match options.read_only {
            true => Vec::new(),
            false => tree.snap.reserved()?.all(),
        };
        let memory_budget = super::admission::budget::resolve(options.memory_budget);
        let alone_budget =
            super::admission::budget::resolve_alone(options.memory_budget, memory_budget);
        let batch_bytes_max =
            super::admission::budget::resolve_batch(memory_budget, options.log_batch_bytes_max());
        let named = super::commit::named_at_open(&named_runs, &later_runs);
        let recovery = (!losses.given_up.is_empty()).then(|| Recovery {
            opened_txn: current.txn(),
            given_up: losses.given_up,
            kept: None,
        });
        let data = storage.clone();
        let replay_from_open = replay_from;
        Ok(Shared {
            page_bytes: meta.page_bytes,
            current_txn: AtomicU64::new(current.txn()),
            current_tree_txn: AtomicU64::new(current.tree_txn()),
            current_shape: AtomicU64::new(super::readers::SHAPE_FIRST),
            read: Mutex::new(ReadState::new(current, follow)),
            writer: Mutex::new(writer),
            storage,
            options,
            boot_id,
            lock,
            closed: std::sync::atomic::AtomicBool::new(false),
            log_detached: std::sync::atomic::AtomicBool::new(false),
            log: log.map(|l| {
                let group = GroupLog::new(l);
                group.set_data(data.clone());
                Arc::new(group)
            }),
            named_run_pages: named.pages_kept(),
            runs_missed: AtomicU64::new(0),
            named_runs: Arc::new(Mutex::new(named)),
            runs: Mutex::new(super::commit::RunSpace::at_open(
                reserved,
                named_runs
                    .iter()
                    .map(|&(page, pages, _)| (page, pages))
                    .collect(),
                replay_from_open.is_some(),
            )),
            writers_waiting: Default::default(),
            checkpoint_awaited: Default::default(),
            share_sleeper: Default::default(),
            writing_thread: Default::default(),
            memory_budget,
            batch_bytes_max,
            upper: Default::default(),
            published_overlays: AtomicU64::new(0),
            alone_budget,
            budget_now: AtomicU64::new(memory_budget),
            alone_streak: Default::default(),
            background,
            flusher: Default::default(),
            idle: Default::default(),
            // The overlays stay within three quarters of the budget (`admission::budget`); the
            // spare memory between them and the pager's pool of page buffers (`writer_state`)
            // get an eighth each.
            spare: Arc::new(Spare::with_cap((memory_budget / 8) as usize)),
            counters: Default::default(),
            handle: Default::default(),
            retired: Default::default(),
            handing: Default::default(),
            recovery,
            replay_from: Mutex::new(replay_from),
        })
    }
}

impl Shared {
    /// The rest of an open's replay, where the log held more than the overlays' share of the
    /// memory budget (`replay_from`, set by `replay_beside_free_set`): each round merges the
    /// overlay replayed so far into the tree as a durable checkpoint naming the first record
    /// it does not hold (`checkpoint::replay_round`), then replays the log from there onto
    /// the new tree, up to the same share, and publishes it; the last round's overlay holds
    /// the records up to the log's end, as a whole replay's would. The whole log was read
    /// before anything was written (the open's proof); nothing is appended before the last
    /// round. A crash between rounds opens from the last round's checkpoint and replays from
    /// its position: every record is still in the log. Every path that makes a writing
    /// handle's state runs this before anything reads it (`Database::opened`, and the
    /// handover's `Handle::take` in owner.rs).
    pub(crate) fn finish_replay(self: &Arc<Shared>) -> Result<()> {
        let Some((mut at, mut first)) = self
            .replay_from
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        else {
            return Ok(());
        };
        let Some(log) = self.log.as_ref() else {
            return Err(Error::internal("an open's replay rounds with no log"));
        };
        let storage = log.storage();
        let cap = super::replay::cap(self.memory_budget);
        let mut guard = self.lock_writer();
        loop {
            super::checkpoint::replay_round(self, &mut guard, at, first)?;
            let base = self.writer_base();
            let mut replay = Replay::new(&base)
                .with_cap(cap)
                .with_data(self.storage.clone());
            let end =
                Log::read_records_into(storage.clone(), at, Some(base.txn()), None, &mut replay)?;
            let named = replay.named_runs();
            let mut named_runs = self.named_runs.lock().unwrap_or_else(|e| e.into_inner());
            for &(page, pages, txn) in &named {
                named_runs.insert(page, txn, pages);
            }
            drop(named_runs);
            // A run an earlier round's checkpoint freed and deferred (the tree's value, which
            // an older record kept for slices replaced) is the overlay's again.
            if let Some(carry) = guard.disk.as_mut().and_then(|d| d.carry.as_mut()) {
                let revived = carry
                    .free
                    .revive(named.iter().map(|&(page, _, txn)| (page, txn)));
                self.counters
                    .replay_runs_revived
                    .fetch_add(revived, std::sync::atomic::Ordering::Relaxed);
            }
            self.runs
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .open_named(
                    named
                        .iter()
                        .map(|&(page, pages, _)| (page, pages))
                        .collect(),
                );
            if end != log.end() {
                return Err(Error::internal(format!(
                    "an open's replay round read the log to {end}, and it ends at {}",
                    log.end()
                )));
            }
            let stopped = replay.stopped();
            let published = replay.finish()?;
            let before = {
                let mut rs = self.read_state();
                self.set_current(&mut rs, published)
            };
            drop((before, base));
            super::Counters::add(&self.counters.replay_rounds);
            match stopped {
                Some((next, txn)) if next > at => (at, first) = (next, txn),
                Some(_) => return Err(Error::internal("an open's replay round applied no record")),
                None => break,
            }
        }
        self.runs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .open_done();
        if let Some(lock) = self.lock.as_ref() {
            lock.publish_log(self.writer_base().txn(), log.end());
        }
        Ok(())
    }
}

/// Step 1: an empty file becomes a database only when creating one was asked for, and not
/// beside a log that holds commits (the database they were made on is gone).
fn create_if_empty(
    storage: &dyn Storage,
    options: &Options,
    log_source: &LogSource,
    losses: &mut Losses,
) -> Result<()> {
    if storage.len()? != 0 {
        return Ok(());
    }
    if options.read_only || !options.create {
        return Err(Error::NotADatabase);
    }
    if let Some(found) = orphan_log(log_source)? {
        losses.give_up(
            format!("the data file is empty or was missing, and its log holds {found}"),
            "creating a new database would give up every commit in the log".into(),
        )?;
        losses.log_given_up = true;
    }
    create(storage, options.page_bytes, storage.boot_id())
}

/// Step 2: what passing over meta slot `doubt` for commit `meta` must prove. Where `meta`
/// names the log, the log's replay proves it (`Expect::reach_txn`, `Expect::doubtful`,
/// returned); without a log, a newer slot cut short is a loss, and so is a damaged one
/// where the file's pages hold anything newer than `meta`.
fn prove_passed_over(
    storage: &dyn Storage,
    file_bytes: u64,
    meta: &Meta,
    doubt: Doubt,
    losses: &mut Losses,
) -> Result<Expect> {
    match doubt {
        d if meta.log => {
            return Ok(Expect {
                reach_txn: d.txn().unwrap_or(0),
                doubtful: d.txn().is_none(),
                ..Expect::default()
            })
        }
        d @ Doubt::Short { txn, .. } => losses.give_up(
            d.damage(),
            format!(
                "opening at commit {} would give up commit {txn} and any before it after \
                 commit {}",
                meta.txn, meta.txn
            ),
        )?,
        d @ Doubt::Damaged { .. } => {
            let (n, newest) = newer_pages(storage, meta.page_bytes, file_bytes, meta.txn)?;
            if n > 0 {
                losses.give_up(
                    d.damage(),
                    format!(
                        "the file holds {n} intact page(s) written by commits after commit \
                         {} (up to commit {newest}), which the damaged slot may have held: \
                         opening at commit {} would give up those commits",
                        meta.txn, meta.txn
                    ),
                )?;
            }
        }
    }
    Ok(Expect::default())
}

/// Step 3: where the log must be kept from: the newest commit's position, or, if that is a
/// checkpoint not yet synced (trusted because the machine did not restart), the last durable
/// checkpoint's, as the handle that wrote it kept it: a power loss returns to that one and
/// replays from there. The checkpoint is made durable later, when the log needs the room
/// (`commit::Settling`), instead of syncing here whatever the crashed process left in the
/// page cache (at 10M records, over a second of an open that replays in 0.1 s). Without a
/// usable durable slot, it is made durable now (and `meta` becomes durable). Returns the
/// position, and whether the data file was synced.
///
/// A durable newest commit's meta page is written again as it is and synced, unless the
/// machine `restarted` (`write_meta_again`): the page says it is durable before its sync,
/// and that sync may have failed (the handle stopped, fail-stop) with the page in the page
/// cache only, which the kernel may then never write. Trusted as it is, the log before its
/// position would be reused and the pages its commit freed written over, and a power loss
/// would return to the commit before it with neither: an open that refuses the log, or a
/// tree with pages of later commits. Written again, the page is dirty again, and the sync
/// puts it on the device or fails the open. After a restart the page was read from the
/// device. After a clean close the sync finds only that page to write.
fn keep_log_from(
    storage: &dyn Storage,
    meta: &mut Meta,
    slot: u64,
    options: &Options,
    restarted: bool,
) -> Result<(u64, bool)> {
    if options.read_only {
        return Ok((meta.log_position, false));
    }
    if meta.durable {
        if !restarted {
            write_meta_again(storage, meta.page_bytes, slot)?;
        }
        return Ok((meta.log_position, !restarted));
    }
    if !meta.log {
        return Ok((meta.log_position, false));
    }
    if let Some(position) = durable_log_position(storage, meta, slot) {
        return Ok((position, false));
    }
    storage.sync()?;
    *meta = commit::make_durable(storage, *meta, slot)?;
    Ok((meta.log_position, true))
}

/// Writes the meta page in `slot` again, byte for byte (its format kept: an open upgrades
/// nothing), and syncs the file: `keep_log_from`.
fn write_meta_again(storage: &dyn Storage, page_bytes: u32, slot: u64) -> Result<()> {
    let mut head = [0u8; crate::layout::meta::END];
    let at = slot * u64::from(page_bytes);
    storage.read_at(&mut head, at)?;
    storage.write_at(&head, at)?;
    storage.sync()?;
    Ok(())
}

/// Step 4: the log a handle opens with (`open_log`), its records replayed onto `tree`, and
/// the tree's free set. The free set is read from the tree's pages, which replaying the log
/// does not change: in a large file it is loaded on a thread of its own while the log is
/// replayed (cold, its chain of pages is read one page at a time: 90 ms of a 10M database's
/// crashed open).
///
/// A writing handle applies records only while the overlay holds at most the overlays' share
/// of the memory budget (`Replay::with_cap`); the position of the first record left is
/// returned, for the rounds that replay the rest (`Shared::finish_replay`). The log is read to
/// its end all the same: the proof that the open loses nothing comes before any write.
///
/// Where the data file was not synced already (`data_synced`, `keep_log_from`), a writing
/// handle's replay syncs it before the log's tail if a record names a run
/// (`Replay::syncing_runs`).
fn replay_beside_free_set(
    data: &Arc<dyn Storage>,
    tree: &Arc<Published>,
    log_source: &LogSource,
    reopen: Reopen,
    options: &Options,
    data_synced: bool,
    losses: &mut Losses,
) -> Result<Replayed> {
    let meta = tree.snap.meta;
    let file_bytes = meta.page_count * meta.page_bytes as u64;
    let (replayed, loaded) = std::thread::scope(|s| {
        let loader = free_set_beside(file_bytes)
            .then(|| {
                std::thread::Builder::new()
                    .name("larch-free-load".into())
                    .spawn_scoped(s, || tree.snap.load_free_set())
                    .ok()
            })
            .flatten();
        let replayed = (|| -> Result<_> {
            let mut replay = Replay::new(tree).with_data(data.clone());
            // Only a handle that writes the log has checkpoints to replay the rest in rounds.
            let writes_log =
                options.log && !options.read_only && !matches!(log_source, LogSource::None);
            if writes_log {
                let budget = super::admission::budget::resolve(options.memory_budget);
                replay = replay.with_cap(super::replay::cap(budget));
                if !data_synced {
                    replay = replay.syncing_runs();
                }
            }
            let log = open_log(log_source, &meta, reopen, options, losses, &mut replay)?;
            let stopped = replay.stopped();
            let named = (replay.named_runs(), replay.later_runs().to_vec());
            Ok((log, replay.finish()?, stopped, named))
        })();
        let loaded = loader.map(|h| {
            h.join().unwrap_or_else(|_| {
                Err(Error::Internal(
                    "the free set's loading thread panicked".into(),
                ))
            })
        });
        (replayed, loaded)
    });
    let (mut log, current, stopped, (named_runs, later_runs)) = replayed?;
    if let Some(log) = log.as_mut() {
        let sliced = super::checkpoint::sliced(options, file_bytes, meta.page_bytes);
        log.set_room_min(options.log_room_bytes);
        // The handle's own budget until a checkpoint finds its writes alone beyond memory.
        log.plan(file_bytes, options.checkpoint_bytes, sliced, 0);
    }
    // A small file's, or one whose loading thread could not be started: loaded here.
    let free = match loaded {
        Some(free) => free?,
        None => tree.snap.load_free_set()?,
    };
    if stopped.is_some() && log.is_none() {
        return Err(Error::internal(
            "an open's replay stopped part way with no log",
        ));
    }
    Ok(Replayed {
        log,
        current,
        free,
        replay_from: stopped,
        named_runs,
        later_runs,
    })
}

/// What step 4 gives the open (`replay_beside_free_set`).
struct Replayed {
    log: Option<Log>,
    current: Arc<Published>,
    free: FreeSet,
    /// The position and commit of the first record left for the rounds
    /// (`Shared::finish_replay`), if any.
    replay_from: Option<(u64, u64)>,
    /// The runs the records replayed name (`Replay::named_runs`).
    named_runs: Vec<(u64, u64, u64)>,
    /// The runs the records left for the rounds name (`Replay::later_runs`).
    later_runs: Vec<(u64, u64)>,
}

/// Step 5: the writer's state at open: the free set and the file's mapping, the durable
/// commit (`durable`: its slot and commit) and the newest (`newest`: its meta page and slot).
fn writer_state(
    storage: &Arc<dyn Storage>,
    options: &Options,
    (file_bytes, frames): (u64, Option<Arc<Access>>),
    free: FreeSet,
    durable: (u64, u64),
    newest: (Meta, u64),
    log: Option<&Log>,
) -> WriterState {
    let (meta, slot) = newest;
    let (durable_slot, last_durable_txn) = durable;
    let budget = super::admission::budget::resolve(options.memory_budget);
    let carry = Carry::new(
        free,
        WriteMap::new(
            storage.clone(),
            meta.page_bytes as usize,
            file_bytes,
            !options.read_only,
            crate::engine::admission::budget::readahead(options),
            crate::engine::admission::budget::frames_bytes(options),
            frames,
        ),
    )
    // The page buffers kept between transactions count against the memory budget: an eighth
    // of it (`Shared::open` gives the rest to the overlays and the spare memory).
    .with_pool_bytes(budget / 8, meta.page_bytes as usize)
    // A transaction's new pages in owned buffers: within the budget (under a 64 MiB limit,
    // 64 MiB of them had a large transaction killed).
    .with_owned_bytes(budget);
    WriterState {
        disk: Some(Disk {
            carry: Some(carry),
            durable_slot,
            last_durable_txn,
            settling: None,
            unsynced: (!meta.durable).then_some((meta, slot)),
            merge_waited: false,
            readers_waited: false,
        }),
        // A commit not synced, trusted after a process crash: the log between the durable
        // checkpoint's position and its own, which a power loss replays, may hold a mark
        // (`LogAt::Mark`). Not read to find out: the first commit that must be durable
        // makes this one durable first, as after a mark.
        marked: (!meta.durable && meta.log).then_some(meta.txn),
        poisoned: false,
        tables: TableStates::default(),
        scratch: Default::default(),
        batch: Default::default(),
        record: Vec::new(),
        packed: Vec::new(),
        run_buffer: Vec::new(),
        run_pages: Vec::new(),
        pack_skip: 0,
        pack_next: false,
        counts: Vec::new(),
        checkpoint_position: log.map_or(0, |l| l.end()),
        checkpoint: None,
        retry: None,
        tree_cuts: None,
        pending: None,
        pacer: Default::default(),
        savepoints: Default::default(),
    }
}

/// Step 6, read-only: the handle reads the log after the tree itself: up to the end a writer
/// published, if one is publishing, and then follows it if it can be beside one (registered
/// in the lock file). Alone with the database, its log must reach `expect`, as at a writer's
/// open (a read-only handle gives nothing up: it fails instead). Returns the snapshot to start
/// from, and the follower if it follows.
fn follow_at_open(
    data: &Arc<dyn Storage>,
    tree: &Arc<Published>,
    log_source: LogSource,
    lock: &Option<LockTable>,
    expect: Option<Expect>,
) -> Result<(Arc<Published>, Option<Follower>)> {
    let meta = tree.snap.meta;
    let mut f = Follower::new(log_source);
    f.data = Some(data.clone());
    let bound = lock.as_ref().and_then(LockTable::log_bound);
    f.expect = expect;
    let current = match f.catch_up(tree, meta.log_position, bound, true) {
        Ok(p) => p,
        // The writer reused the log's room after a newer checkpoint while this open read it:
        // start from the tree; the first read moves to the newer one.
        Err(Error::CorruptedLog { .. })
            if lock.as_ref().is_some_and(|l| l.published() > meta.txn) =>
        {
            f.applied = meta.log_position;
            tree.clone()
        }
        Err(e) => return Err(e),
    };
    let Some(lock) = lock.as_ref() else {
        return Ok((current, None));
    };
    // The slot protected the tree while the free set was checked and the log's tables and
    // deletions were looked up in it; readers register on their own.
    lock.set_reader(0);
    Ok((current, Some(f)))
}

/// Step 6, writer: read-only handles in other processes read the log up to its end, or none
/// of it from a writer that does not write it.
fn publish_log_at_open(
    lock: &LockTable,
    log: Option<&Log>,
    current: &Published,
    meta: &Meta,
    losses: &Losses,
) -> Result<()> {
    // What the last writer handed over is this one's now: it appends past that end.
    lock.set_handed_at(0);
    match log {
        Some(log) => {
            lock.publish_log(current.txn(), log.end());
            // Read back and synced to its end (`Log::close_tail`).
            lock.set_log_synced(log.end());
            // Lower than the last claim, for a new log or a tail given up: made durable
            // before any record is appended.
            if !meta.log || !losses.given_up.is_empty() {
                lock.sync_log_synced()?;
            }
        }
        None => {
            lock.publish_log(0, 0);
            lock.set_log_synced(0);
        }
    }
    Ok(())
}

/// The damage an open got past (`Options::recover`), or, without `recover`, the refusal.
struct Losses {
    recover: bool,
    given_up: Vec<GivenUp>,
    /// The whole log was given up already (its data file is gone): not reported again when
    /// a new log replaces it.
    log_given_up: bool,
}

impl Losses {
    /// Opening past `damage` gives up `lost`: noted if the open may give it up, else
    /// `Error::WouldLoseData`. Called before the open changes anything because of it.
    fn give_up(&mut self, damage: String, lost: String) -> Result<()> {
        if !self.recover {
            return Err(Error::WouldLoseData { damage, lost });
        }
        self.given_up.push(GivenUp { damage, lost });
        Ok(())
    }

    /// A log that ended short of what was known of it, given up (`Log::open_into` returns it
    /// only when the open may give it up).
    fn gave_up_log(&mut self, short: Shortfall) {
        self.given_up.push(GivenUp {
            damage: short.reasons.join("; "),
            lost: format!("opening at the log's end gave up {}", short.lost()),
        });
    }
}

/// What the log beside an empty or missing data file holds, if anything: the intact records
/// of its segments, or the log itself where its header is damaged (nothing can say what it
/// holds then).
fn orphan_log(source: &LogSource) -> Result<Option<String>> {
    let Some(storage) = source.open(true, false)? else {
        return Ok(None);
    };
    let len = storage.len()?;
    if len <= crate::layout::log::FILE_HEADER_BYTES {
        return Ok(None);
    }
    match Log::survey(storage, 0) {
        Ok(found) if found.records == 0 => Ok(None),
        Ok(found) => Ok(Some(found.describe())),
        Err(e) => Ok(Some(format!("{len} bytes that cannot be read ({e})"))),
    }
}

/// The log a handle opens with, its records replayed into `replay` as they are read: those
/// after the meta page's position if it says the log is in use, whatever `options.log` says.
/// A writing handle opened with `options.log` keeps the log for its commits; it starts a new
/// one if the meta page does not name one (any file there is stale). A read-only handle only
/// reads (and replays nothing here). A record that fails to replay stops the reading before
/// the tail is closed: a failed open writes nothing to the log.
fn open_log(
    source: &LogSource,
    meta: &Meta,
    reopen: Reopen,
    options: &Options,
    losses: &mut Losses,
    replay: &mut Replay<'_>,
) -> Result<Option<Log>> {
    // A storage opened without a log (`Database::open_storage`) writes pages, whatever
    // `options.log` says: there is nowhere to put a log.
    let writes_log = options.log && !options.read_only && !matches!(source, LogSource::None);
    if (!meta.log && !writes_log) || options.read_only {
        // A read-only handle reads the log itself (`replay::Follower`).
        return Ok(None);
    }
    let storage = source.open(false, writes_log)?;
    // Missing only when the handle does not write the log (a log it writes is created), so
    // the meta page names it.
    let Some(storage) = storage else {
        return Err(no_log(meta));
    };
    let log = if meta.log {
        let (log, short) = Log::open_into(storage, meta.log_position, reopen, replay)?;
        if let Some(short) = short {
            losses.gave_up_log(short);
        }
        log
    } else {
        // A new log (`writes_log`): whatever the file held belongs to no commit the
        // database has, unless it holds durable commits newer than the database's: a meta
        // page that named the log was lost.
        stale_log(&storage, meta, losses)?;
        storage.set_len(0)?;
        Log::create(storage, options.log_segment_bytes, options.log_segments, 0)?
    };
    Ok(writes_log.then_some(log))
}

/// Checks that the log file in `storage`, which the commit `meta` does not name, holds no
/// durable record of a commit newer than `meta`'s, before a new log replaces it: one is a
/// commit the database acknowledged and does not hold (a lost or damaged meta page named the
/// log). Records that were never synced may be there after a power loss took the meta page
/// that would have named them; nothing was promised of them.
fn stale_log(storage: &Arc<dyn Storage>, meta: &Meta, losses: &mut Losses) -> Result<()> {
    let len = storage.len()?;
    if len <= crate::layout::log::FILE_HEADER_BYTES || losses.log_given_up {
        return Ok(());
    }
    let found = match Log::survey(storage.clone(), meta.txn) {
        Ok(found) => found,
        Err(e) => {
            return losses.give_up(
                format!(
                    "the database's newest intact meta page (commit {}) names no log, and the \
                     log file beside it ({len} bytes) cannot be read ({e})",
                    meta.txn
                ),
                "starting a new log would give up whatever it holds".into(),
            )
        }
    };
    match found.first {
        Some(first) if first < found.vouched => losses.give_up(
            format!(
                "the database's newest intact meta page (commit {}) names no log, and the log \
                 beside it holds durable records of later commits",
                meta.txn
            ),
            format!(
                "starting a new log would give up {} (a meta page that named the log was lost)",
                found.describe()
            ),
        ),
        _ => Ok(()),
    }
}

/// The log position of the last durable checkpoint, when the newest commit `meta` (in `slot`)
/// is a checkpoint not yet synced: the other slot's meta page, if it is the durable commit
/// `meta` names, through the log, at or before `meta`'s position.
fn durable_log_position(storage: &dyn Storage, meta: &Meta, slot: u64) -> Option<u64> {
    let other = 1 - slot;
    let mut page = vec![0u8; meta.page_bytes as usize];
    storage
        .read_at(&mut page, other * meta.page_bytes as u64)
        .ok()?;
    let durable = Meta::decode(&page, other).ok()?;
    (durable.durable
        && durable.log
        && durable.txn == meta.last_durable_txn
        && durable.log_position <= meta.log_position)
        .then_some(durable.log_position)
}

/// The commit to open from. A read-only handle registered in the reader table chooses it
/// through the reader protocol (a writer in another process may be committing), so that the
/// free set checked next cannot be reused meanwhile; its slot is then unused.
fn choose_start(
    storage: &dyn Storage,
    file_bytes: u64,
    boot_id: Option<[u8; 16]>,
    options: &Options,
    lock: &Option<LockTable>,
) -> Result<Chosen> {
    let chosen = choose_meta(storage, file_bytes, boot_id)?;
    match lock.as_ref().filter(|_| options.read_only) {
        Some(lock) => {
            let meta = newest_protected(storage, boot_id, lock, true, 0)?;
            Ok(Chosen {
                // The slot passed over is in doubt only beside the commit it was passed over
                // for (alone with the database, the two are the same).
                doubt: chosen.doubt.filter(|_| meta.txn == chosen.meta.txn),
                meta,
                slot: 0,
            })
        }
        None => Ok(chosen),
    }
}

/// The free set a writing handle starts with: what the commit recorded, with every pending
/// page no reader and no durable snapshot needs released. Readers in other processes may hold
/// snapshots: the commit is published as the newest first, then their slots are read (in this
/// order; see concurrency.md). A read-only handle never writes: its free set was only checked.
fn usable_free_set(
    mut free: FreeSet,
    meta: &Meta,
    last_durable_txn: u64,
    options: &Options,
    lock: &Option<LockTable>,
) -> Result<FreeSet> {
    if options.read_only {
        return Ok(FreeSet::default());
    }
    let mut oldest = None;
    if let Some(lock) = lock.as_ref() {
        lock.publish(meta.txn);
        oldest = lock.oldest_reader().0;
    }
    free.release(oldest, last_durable_txn)?;
    Ok(free)
}
