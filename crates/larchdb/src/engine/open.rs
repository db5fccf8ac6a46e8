//! Opening: the database file and its lock file, the meta slot to start from, and the free set
//! that commit records, checked as it is loaded. Nothing is replayed: the chosen meta slot is
//! a complete committed state (docs/design/durability.md).

use super::catalog::TableStates;
use super::readers::{newest_protected, ReadState};
use super::{Shared, WriterState};
use crate::error::{Error, Result};
use crate::options::Options;
use crate::pager::{choose_meta, create, Access, Carry, Chosen, FreeSet, Meta, Snapshot, WriteMap};
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
            Ok(mut lock) => {
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
        Error::Io(e) => {
            e.kind() == std::io::ErrorKind::PermissionDenied
                || e.kind() == std::io::ErrorKind::ReadOnlyFilesystem
                || e.raw_os_error() == Some(libc::EROFS)
        }
        _ => false,
    }
}

impl Shared {
    /// The state of a handle on `storage`, starting from its newest trustworthy commit (a new
    /// database is created first if the storage is empty and `options` allow).
    pub(crate) fn open(
        storage: Arc<dyn Storage>,
        options: Options,
        lock: Option<LockTable>,
    ) -> Result<Shared> {
        options.validate()?;
        let boot_id = storage.boot_id();
        if storage.len()? == 0 {
            // An empty file becomes a database only when creating one was asked for.
            if options.read_only || !options.create {
                return Err(Error::NotADatabase);
            }
            create(&*storage, options.page_bytes, boot_id)?;
        }
        let file_bytes = storage.len()?;
        let Chosen { meta, slot } = choose_start(&*storage, file_bytes, boot_id, &options, &lock)?;
        let access = Arc::new(Access::for_pages(
            &storage,
            meta.page_count * meta.page_bytes as u64,
            None,
            options.readahead,
        )?);
        let snap = Snapshot::new(meta, access, options.verify_checksums);
        let loaded = snap.load_free_set();
        if let Some(lock) = lock.as_ref().filter(|_| options.read_only) {
            lock.set_reader(0);
        }
        let free = loaded?;
        let (durable_slot, last_durable_txn) = if meta.durable {
            (slot, meta.txn)
        } else {
            (1 - slot, meta.last_durable_txn)
        };
        let free = usable_free_set(free, &meta, last_durable_txn, &options, &lock)?;
        let writer = WriterState {
            carry: Some(Carry::new(
                free,
                WriteMap::new(
                    storage.clone(),
                    meta.page_bytes as usize,
                    file_bytes,
                    !options.read_only,
                    options.readahead,
                ),
            )),
            durable_slot,
            last_durable_txn,
            poisoned: false,
            tables: TableStates::default(),
            scratch: Default::default(),
        };
        Ok(Shared {
            page_bytes: meta.page_bytes,
            current_txn: AtomicU64::new(meta.txn),
            read: Mutex::new(ReadState::new(snap)),
            writer: Mutex::new(writer),
            storage,
            options,
            boot_id,
            lock,
        })
    }
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
        Some(lock) => Ok(Chosen {
            meta: newest_protected(storage, boot_id, lock, true, 0)?,
            slot: 0,
        }),
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
