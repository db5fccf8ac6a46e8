//! How a snapshot's pages reach memory. Three implementations behind one call, so the B-tree
//! does not know which is in use:
//! - `Mapped`: a shared read-only mmap of the file; a page is a slice of the map (zero copy,
//!   no syscall per read, as in LMDB). Checksums are not verified per access unless asked.
//!   Read-only handles use it.
//! - `Shared`: the same, through the writable mapping the writer also writes its dirty pages
//!   into (LMDB's MDB_WRITEMAP): one mapping per file generation instead of two, so each page
//!   is mapped (and counted in the process size) once, and a page the writer wrote is read
//!   without a second page fault. Writable handles use it.
//! - `Frames`: the pages in anonymous memory of the engine's own (frames.rs), loaded from the
//!   file on a reader's first access and written by the writer in place: a writable handle's,
//!   by default, while its file fits in the frames' share of memory (`Options::frames_bytes`).
//! - `Buffered`: pages are read with `read_at` into buffers owned by the snapshot, verified
//!   once when loaded. Used for storages that cannot be mapped (the fault-injecting backend).

use super::frames::{Frames, Moved, READY};
use super::page::checksum_ok;
use super::MAP_BYTES_MIN;
use crate::cpu::contended;
use crate::error::{Error, Result};
use crate::storage::Storage;
use std::collections::HashMap;
use std::io;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// How long `Access::map_in_behind` waits for the snapshots on the mapping it replaces to end
/// before it gives up: readers renew their snapshot per operation or per scan, and a scan of
/// a file that fits in memory takes well under this.
const MAP_IN_WAIT_MAX: std::time::Duration = std::time::Duration::from_secs(5);

/// How often `Access::map_in_behind` looks whether the replaced mapping is gone.
const MAP_IN_POLL: std::time::Duration = std::time::Duration::from_millis(2);

/// How often the frames' keeper (`Access::keep_frames`) looks whether the file has grown past
/// the chunks it has seen to. It reads the file in and moves chunks only once the file has
/// not grown for that long: a load's writer fills fresh frames, and the keeper's copies of
/// chunks beside it (fresh memory too, zeroed and copied into, and most of them written again
/// meanwhile) made a 200K-record load of 1 KB records a third slower
/// (docs/design/performance.md, "Frames moved into huge pages"). Only the chunks just past
/// the file's end are put in huge pages while it grows (`KEEP_AHEAD`).
const KEEP_POLL: std::time::Duration = std::time::Duration::from_millis(100);

/// How often the keeper looks while the file grows, to put the chunks past its end in huge
/// pages before the writer reaches them (`Access::keep_frames`).
const KEEP_AHEAD_POLL: std::time::Duration = std::time::Duration::from_millis(10);

/// The chunks of frames past the file's end the keeper puts in huge pages ahead of the writer
/// (`Frames::prepare_huge_page`), once the file has grown: it grows by 4 MiB at a time. Held
/// past the file's end, they add to the process's size (up to 4 MiB while the file grows).
const KEEP_AHEAD: u64 = 2;

/// How long the file stays as it is before the keeper gives back the chunks it put in huge
/// pages ahead of the writer that the file has not reached (`Frames::give_back`): not at
/// every pause between writes, which would zero them again at the next.
const KEEP_AHEAD_GIVE_BACK: Duration = Duration::from_secs(1);

/// While more threads can run than the process has cores (`cpu::contended`, the keeper
/// among them), the keeper rests this many times a move's time after each move: at most a
/// quarter of a core goes to moves while the cores are taken. A move is mostly the kernel
/// zeroing the new huge page (on this VM eight times the copy's time), taken from whoever
/// else would run, and the huge pages pay it back to readers only over seconds: two readers
/// right after a 200K-record load of 1 KB values read 1.34-1.41M a second over the first
/// second with the rest against 1.04-1.15M without (docs/design/performance.md, "Idle work
/// gives way to busy readers"). Not a lower priority: see `keep_frames`.
const KEEP_REST_PER_MOVE: u32 = 3;

/// While the cores are contended, the keeper rests this many times the time it took to put
/// a chunk past the file's end in a huge page: at most a ninth of a core, most of it the
/// kernel zeroing the page. Two writers of 1 KB records on two cores lost a tenth of their
/// rate with the keeper resting three times (`KEEP_REST_PER_MOVE`), and none at eight
/// (docs/design/performance.md, "The frames in huge pages ahead of the writer").
const KEEP_REST_PER_AHEAD: u32 = 8;

/// The most chunks of frames the keeper moves into huge pages of their own, as a share of
/// the mappings a process may have (`vm.max_map_count`, 65,530 by default): each moved chunk
/// is a mapping of its own, and the rest of the engine and the application need theirs.
const KEEP_MOVED_SHARE: u64 = 4;

/// The shortest run of pages `Access::forget_runs` drops from the resident set.
const FORGET_RUN_PAGES_MIN: u64 = 16;

/// Pages and runs a buffered access has loaded, keyed by (first page, page count).
type PageCache = Mutex<HashMap<(u64, u64), Box<[u8]>>>;

pub(crate) enum Access {
    Mapped(memmap2::Mmap),
    Shared(memmap2::MmapRaw),
    Frames(Frames),
    Buffered {
        storage: Arc<dyn Storage>,
        /// Pages and runs loaded so far, keyed by (first page, page count). Entries are never
        /// removed or modified while the `Access` lives.
        cache: PageCache,
    },
}

/// The pages of a mapping, for the lookups on the hot path: a bounds check and an address, no
/// dispatch on the kind of `Access`. Made by `Access::view` and held beside the `Arc<Access>`
/// it came from (a `Snapshot`, a `WriteMap`), which keeps the mapping alive as long as the view;
/// neither `Clone` nor `Copy`, so it cannot be taken away from its holder.
pub(crate) struct MapView {
    ptr: NonNull<u8>,
    /// Whole pages covered, at most the mapping's length.
    pages: u64,
    page_bytes: usize,
    /// Frames only: their state bytes (`pages` of them at least); a page is in the view only
    /// once `READY`, and the caller takes the slow path (`Access::bytes`) for the others.
    state: Option<NonNull<AtomicU8>>,
}

// SAFETY: the view only reads the mapping (shared bytes, like `&[u8]`), and the mapping lives
// as long as the `Arc<Access>` held beside the view. Moving or sharing it across threads is as
// safe as sharing `&[u8]` into the mapping.
unsafe impl Send for MapView {}
unsafe impl Sync for MapView {}

impl MapView {
    /// Page `id`, if the view covers it. The caller checks what the page says (`check_header`).
    #[inline(always)]
    pub(crate) fn page(&self, id: u64) -> Option<&[u8]> {
        if id >= self.pages {
            return None;
        }
        if let Some(state) = self.state {
            // SAFETY: `id < pages`, and frames have a state byte for each page they cover,
            // which live as long as the frames (held beside the view).
            if unsafe { state.add(id as usize).as_ref() }.load(Ordering::Acquire) != READY {
                return None;
            }
        }
        // SAFETY: `id < pages` and `pages * page_bytes` is within the mapping (`Access::view`),
        // which lives as long as `self` (see the type's comment). Pages read through a view
        // are never written while the slice lives: snapshots read committed pages only, and the
        // writer reads its own dirty pages through its `&self` (`WriteMap`), never while it
        // holds a mutable slice of them.
        Some(unsafe {
            std::slice::from_raw_parts(
                self.ptr.as_ptr().add(id as usize * self.page_bytes),
                self.page_bytes,
            )
        })
    }
}

/// Whether a mapping of the data file reads ahead around page faults (`Options::readahead`):
/// as the option forces, or by default while the mapping fits in `1 / READAHEAD_SHARE` of the
/// memory the process may use (`memory`: the lowest of its cgroups' limits and the machine's,
/// `admission::budget::process_memory`). A file that fits is read whole sooner or later, and
/// the kernel's readahead reads it in large requests: after a restart (caches dropped), YCSB's
/// scans over a 370 MB file ran at 0.4-2K a second through three 3-second runs in a row, each
/// leaf read with a fault of its own, against LMDB's 90-110K (LMDB reads ahead by default). A file larger than
/// memory is read at random, and readahead would turn each fault into megabytes of reads
/// (`MADV_RANDOM`, LMDB's `MDB_NORDAHEAD`). Decided for each mapping by its length, which
/// covers the file and doubles as the file grows: a file that outgrows the share is mapped
/// again, `MADV_RANDOM`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Readahead {
    forced: Option<bool>,
    memory: Option<u64>,
}

/// The share of the process's memory a mapping must fit in to read ahead by default.
const READAHEAD_SHARE: u64 = 2;

impl Readahead {
    pub(crate) fn new(forced: Option<bool>, memory: Option<u64>) -> Readahead {
        Readahead { forced, memory }
    }

    /// Whether a mapping of `len` bytes reads ahead.
    pub(crate) fn for_len(self, len: u64) -> bool {
        self.forced.unwrap_or_else(|| self.fits(len))
    }

    /// Whether a mapping of `len` bytes fits in the share of memory, whatever the option
    /// forces: what mapping a new mapping's pages in behind the writer asks, besides reading
    /// ahead (`WriteMap::ensure`).
    pub(crate) fn fits(self, len: u64) -> bool {
        self.memory.is_some_and(|m| len <= m / READAHEAD_SHARE)
    }
}

impl Access {
    /// A view of the first `pages_max` pages of a mapping (fewer if the mapping is shorter);
    /// `None` for a buffered access. The caller holds it beside `self` (see `MapView`).
    pub(crate) fn view(&self, page_bytes: usize, pages_max: u64) -> Option<MapView> {
        let (ptr, len, state) = match self {
            Access::Mapped(map) => (map.as_ptr(), map.len(), None),
            Access::Shared(map) => (map.as_ptr(), map.len(), None),
            Access::Frames(f) => (
                f.base().as_ptr() as *const u8,
                f.len() as usize,
                Some(f.state_ptr()),
            ),
            Access::Buffered { .. } => return None,
        };
        Some(MapView {
            ptr: NonNull::new(ptr as *mut u8)?,
            pages: pages_max.min((len / page_bytes) as u64),
            page_bytes,
            state,
        })
    }

    /// A page access for a snapshot whose pages end at `needed_bytes`: a mapping at least as
    /// large as `current`'s (doubling from `MAP_BYTES_MIN` until it covers them), or buffered
    /// reads where the storage cannot be mapped.
    pub(crate) fn for_pages(
        storage: &Arc<dyn Storage>,
        needed_bytes: u64,
        current: Option<&Arc<Access>>,
        readahead: Readahead,
    ) -> Result<Access> {
        let mut len = MAP_BYTES_MIN;
        if let Some(cur) = current.and_then(|c| c.mapped_bytes()) {
            len = len.max(cur);
        }
        while len < needed_bytes {
            len *= 2;
        }
        match storage.map(len) {
            Some(map) => {
                let access = Access::Mapped(map?);
                access.advise_readahead(readahead.for_len(len));
                Ok(access)
            }
            None => Ok(Access::buffered(storage.clone())),
        }
    }

    /// `held` if it covers pages ending at `needed_bytes`, else a larger access from
    /// `for_pages`: what a newly published snapshot reads through.
    /// Never frames: they hold what this handle's writer wrote, and a snapshot that comes
    /// here may be another process's commit (a follower), or one past the frames.
    pub(crate) fn covering(
        held: &Arc<Access>,
        storage: &Arc<dyn Storage>,
        needed_bytes: u64,
        readahead: Readahead,
    ) -> Result<Arc<Access>> {
        match held.mapped_bytes() {
            Some(mapped) if mapped >= needed_bytes && held.frames().is_none() => Ok(held.clone()),
            _ => Ok(Arc::new(Access::for_pages(
                storage,
                needed_bytes,
                Some(held),
                readahead,
            )?)),
        }
    }

    pub(crate) fn buffered(storage: Arc<dyn Storage>) -> Access {
        Access::Buffered {
            storage,
            cache: Mutex::new(HashMap::new()),
        }
    }

    pub(crate) fn is_mapped(&self) -> bool {
        !matches!(self, Access::Buffered { .. })
    }

    /// Whether a read of a page the memory does not hold waits in a page fault of the
    /// reader's (a mapping: the process's major faults count it), not in a read the engine
    /// makes (frames, buffered).
    pub(crate) fn reads_fault(&self) -> bool {
        matches!(self, Access::Mapped(_) | Access::Shared(_))
    }

    /// The frames, if this access is frames.
    pub(crate) fn frames(&self) -> Option<&Frames> {
        match self {
            Access::Frames(f) => Some(f),
            _ => None,
        }
    }

    /// Bytes covered by the mapping, if mapped.
    pub(crate) fn mapped_bytes(&self) -> Option<u64> {
        match self {
            Access::Mapped(map) => Some(map.len() as u64),
            Access::Shared(map) => Some(map.len() as u64),
            Access::Frames(f) => Some(f.len()),
            Access::Buffered { .. } => None,
        }
    }

    /// A pointer to bytes `[at, at + len)` of a shared mapping, for the writer to write
    /// through; `None` if out of range or not a shared mapping. The pointer is valid while
    /// `self` lives. Turning it into a slice is the writer's business (`WriteMap`), under the
    /// contract that no snapshot reads what it writes.
    pub(crate) fn writable(&self, at: usize, len: usize) -> Option<*mut u8> {
        match self {
            Access::Shared(map) if at.checked_add(len).is_some_and(|end| end <= map.len()) => {
                // SAFETY: `at` is within the mapping (checked above), so the offset pointer
                // stays inside the same allocation.
                Some(unsafe { map.as_mut_ptr().add(at) })
            }
            Access::Frames(f) => f.writable(at, len),
            _ => None,
        }
    }

    /// Tells the kernel whether to read ahead around page faults in the mapping
    /// (`MADV_NORMAL`) or to read only the page faulted on (`MADV_RANDOM`): `Readahead`
    /// decides. Only a hint.
    pub(crate) fn advise_readahead(&self, readahead: bool) {
        let advice = if readahead {
            memmap2::Advice::Normal
        } else {
            memmap2::Advice::Random
        };
        let _ = match self {
            Access::Mapped(map) => map.advise(advice),
            Access::Shared(map) => map.advise(advice),
            Access::Frames(_) | Access::Buffered { .. } => Ok(()),
        };
    }

    /// Asks the kernel to map `[at, at + len)` of a shared mapping for writing now, rather than
    /// one page fault at a time. Only a hint. (Populating under `MADV_NORMAL` instead of the
    /// map's `MADV_RANDOM`, for large folios, cut a 3M-record fillseq's system time by a third
    /// but more than doubled a 10M-record load's inside the suite's cgroup: not kept; see
    /// docs/design/performance.md.)
    pub(crate) fn populate_write(&self, at: usize, len: usize) {
        match self {
            Access::Shared(map) => {
                let _ = map.advise_range(memmap2::Advice::PopulateWrite, at, len);
            }
            Access::Frames(frames) => frames.populate(at, len),
            _ => {}
        }
    }

    /// Maps the first `len` bytes of the mapping in for reading (`MADV_POPULATE_READ`), on a
    /// thread of its own, so that no caller waits for it. For a new mapping of a file that
    /// fits in memory: its pages are in the page cache but in no page table of the new
    /// mapping, and the pages that checkpoints and large batches write with `pwrite` were
    /// never mapped in at all, so without it a reader's first pass over them takes a fault
    /// every few pages (a scan right after a 1 GB load: 7.7M records a second, 14-15M on the
    /// next pass). Pages past the file's end, should it be trimmed meanwhile, are refused, not
    /// faulted (`EFAULT`, no `SIGBUS`). Only a hint: a kernel without it, or a thread that
    /// cannot start, changes nothing but speed.
    ///
    /// `replaced`: the mapping this one replaces. The thread first waits until no snapshot
    /// holds it (`MAP_IN_WAIT_MAX` at most; past it, nothing is mapped in): the file's pages
    /// mapped in both at once count twice in the process's resident set, which is what the
    /// seeds report as its size (YCSB's 1M records: a peak of 4.29 GB mapped in at once,
    /// 2.76 GB after the wait, LMDB's 2.73 GB). Nor does the thread hold the new mapping while
    /// it waits: one that no snapshot uses any more by then is not mapped in.
    pub(crate) fn map_in_behind(self: &Arc<Access>, len: usize, replaced: Weak<Access>) {
        let len = self.within_map(0, len);
        if len == 0 || !self.is_mapped() || self.frames().is_some() {
            return;
        }
        let access = Arc::downgrade(self);
        let _ = std::thread::Builder::new()
            .name("larch-map-in".into())
            .spawn(move || {
                let waited = Instant::now();
                while replaced.strong_count() > 0 {
                    if waited.elapsed() >= MAP_IN_WAIT_MAX {
                        return;
                    }
                    std::thread::sleep(MAP_IN_POLL);
                }
                let Some(access) = access.upgrade() else {
                    return;
                };
                let _ = match &*access {
                    Access::Shared(map) => map.advise_range(memmap2::Advice::PopulateRead, 0, len),
                    Access::Mapped(map) => map.advise_range(memmap2::Advice::PopulateRead, 0, len),
                    Access::Frames(_) | Access::Buffered { .. } => Ok(()),
                };
            });
    }

    /// Starts the frames' keeper, a thread of its own: while the file does not grow, chunk by
    /// chunk of 2 MiB, in file order, it reads what the file held when the frames were made
    /// into the frames that are still empty (`Frames::warm`), all of it first, then puts each
    /// chunk in a huge page of its own (`Frames::move_to_huge_page`: the chunk's ready frames
    /// copied, its empty pages read from the file, such as a load's, which the writer left
    /// there), once the writer has left it alone since the last pass; a chunk the writer is
    /// writing is tried again on the next pass. While the file grows, it puts the chunks just
    /// past its end in huge pages before the writer reaches them, in place
    /// (`Frames::prepare_huge_page`, `KEEP_AHEAD`: nothing to copy, and no lock the writer
    /// waits for), and reads the file's pages there in once it stops, so that a load and the
    /// writes after it run on huge pages, and the moves are left to the chunks it could not
    /// keep ahead of; those the file did not grow into are given back once it has stopped for
    /// a while (`KEEP_AHEAD_GIVE_BACK`). Then it follows the file as it grows, and where the
    /// moves stop (no huge pages, or no mapping left for one), it reads the rest of
    /// the file into the frames instead. The page cache's copy of each chunk it read in or
    /// moved is let go (`Frames::warm`, `move_to_huge_page`: `Storage::drop_cached`), so that
    /// the file is held once. Each chunk is moved once, so it runs at the application's
    /// priority: at the lowest (nice 19) beside four readers and a writer it moved a quarter
    /// of a 130 MB file in 4 s, and a writer spins for the `moving` lock it holds while it
    /// puts a chunk in place, which at nice 19 beside busy threads it could hold for a
    /// scheduler's round. While the cores are contended it rests after each move instead
    /// (`KEEP_REST_PER_MOVE`). It holds the frames only for a step: it ends once they are
    /// dropped. Only a help to readers: a thread that cannot
    /// start, a read that fails or a kernel without transparent huge pages changes nothing but
    /// speed.
    pub(crate) fn keep_frames(self: &Arc<Access>) {
        if self.frames().is_none() {
            return;
        }
        let access = Arc::downgrade(self);
        let _ = std::thread::Builder::new()
            .name("larch-frames".into())
            .spawn(move || {
                let moved_max = std::fs::read_to_string("/proc/sys/vm/max_map_count")
                    .ok()
                    .and_then(|s| s.trim().parse::<u64>().ok())
                    .unwrap_or(65_530)
                    / KEEP_MOVED_SHARE;
                // Chunks warmed (all of those below), and whether each was moved.
                let (mut warmed, mut moved) = (0u64, Vec::<bool>::new());
                // Each chunk's count of writes at the last pass (`Frames::chunk_count`).
                let mut counts = Vec::<Option<u32>>::new();
                // The file as long as the frames were made (at an open, the keeper starts at
                // once; in a load, it waits for the file to stop growing).
                let mut seen = match access.upgrade() {
                    Some(a) => a.frames().map_or(0, |f| f.chunks_in_file()),
                    None => return,
                };
                let held = seen;
                let (mut moving, mut stage) = (true, None);
                // The end of the rest the last move earns while the cores are contended.
                let mut rest_until = Instant::now();
                // When the file last grew (none yet: at an open the keeper starts at once).
                let mut grew_at = None::<Instant>;
                // The chunks put in huge pages ahead of the writer whose pages in the file are
                // not read in yet, or that the file has not reached; then the end of the rest
                // the last one earns while the cores are contended, and the chunk up to which
                // that was tried (one the kernel had no huge page for is left to the moves).
                let mut ahead = Vec::<u64>::new();
                let (mut ahead_rest_until, mut tried_to) = (Instant::now(), 0u64);
                loop {
                    let Some(access) = access.upgrade() else {
                        return;
                    };
                    let Some(frames) = access.frames() else {
                        return;
                    };
                    let chunks = frames.chunks_in_file();
                    if chunks != seen {
                        // The file grew: the keeper puts the chunks it grows into next in huge
                        // pages ahead of the writer, and waits until it stops for the rest.
                        seen = chunks;
                        grew_at = Some(Instant::now());
                    }
                    let (mut pause, still) = (None, grew_at.map_or(Duration::MAX, |t| t.elapsed()));
                    let end = if still < KEEP_AHEAD_GIVE_BACK {
                        (chunks + KEEP_AHEAD).min(frames.chunks())
                    } else {
                        chunks
                    };
                    moved.resize(end.max(moved.len() as u64) as usize, false);
                    let mut c = tried_to.max(chunks);
                    while moving && c < end {
                        // While every core is taken, it rests after each chunk
                        // (`KEEP_REST_PER_AHEAD`).
                        let now = Instant::now();
                        if now < ahead_rest_until && contended() {
                            pause = Some(ahead_rest_until - now);
                            break;
                        }
                        match frames.prepare_huge_page(c) {
                            Ok(true) => {
                                ahead_rest_until =
                                    Instant::now() + now.elapsed() * KEEP_REST_PER_AHEAD;
                                moved[c as usize] = true;
                                ahead.push(c);
                                moving = frames.moved_chunks() < moved_max;
                            }
                            // No huge page free now: the chunk is moved later, as any other.
                            Ok(false) => {}
                            Err(_) => moving = false,
                        }
                        c += 1;
                    }
                    tried_to = tried_to.max(c);
                    if still < KEEP_POLL {
                        drop(access);
                        std::thread::sleep(pause.unwrap_or(KEEP_AHEAD_POLL));
                        continue;
                    }
                    let mut worked = false;
                    // The chunks put in huge pages ahead that the file now holds, read in (a
                    // load's pages, which the writer left on the file alone, are not in them
                    // yet); those it has not reached, given back once it has stopped growing
                    // for a while.
                    ahead.retain(|&c| {
                        if c < chunks {
                            let _ = frames.warm(c);
                            worked = true;
                            false
                        } else if still >= KEEP_AHEAD_GIVE_BACK && frames.give_back(c) {
                            moved[c as usize] = false;
                            tried_to = tried_to.min(c);
                            false
                        } else {
                            true
                        }
                    });
                    // The file read in first, for the readers; then the moves. Only what the
                    // file held when the frames were made: the pages written since went to
                    // their frames as they were written, or are read in a huge page at a time
                    // by the moves (a load's, which the writer left on the file alone), and
                    // the rest of the file's growth is space not written yet. Where the moves
                    // stopped, the whole file is read in.
                    let warm_to = if moving { chunks.min(held) } else { chunks };
                    while warmed < warm_to {
                        // A read that fails leaves the chunk's pages to the readers that need
                        // them, which meet the error (a file trimmed meanwhile: pages past its
                        // end are free).
                        let _ = frames.warm(warmed);
                        warmed += 1;
                        worked = true;
                    }
                    counts.resize(moved.len(), None);
                    for c in 0..chunks {
                        if !moving || moved[c as usize] {
                            continue;
                        }
                        // Only a chunk the writer left alone since the last pass: one it
                        // writes now (a load's merges reach most of the file) would most
                        // likely be written again during the copy, made for nothing beside
                        // the writer's threads.
                        let count = Some(frames.chunk_count(c));
                        if counts[c as usize] != count {
                            counts[c as usize] = count;
                            continue;
                        }
                        // While every core is taken, the keeper rests after each move
                        // (`KEEP_REST_PER_MOVE`).
                        let now = Instant::now();
                        if now < rest_until && contended() {
                            pause = Some(rest_until - now);
                            break;
                        }
                        match frames.move_to_huge_page(c, &mut stage) {
                            Ok(Moved::Yes) => {
                                let took = now.elapsed();
                                rest_until = Instant::now() + took * KEEP_REST_PER_MOVE;
                                moved[c as usize] = true;
                                moving = frames.moved_chunks() < moved_max;
                                worked = true;
                            }
                            // Busy: the next pass tries again.
                            Ok(Moved::Busy) => {}
                            Ok(Moved::Never) => moving = false,
                            // No transparent huge pages: never.
                            Err(e)
                                if e.raw_os_error() == Some(libc::EINVAL)
                                    || e.kind() == io::ErrorKind::Unsupported =>
                            {
                                moving = false
                            }
                            // No huge page free now: the next pass tries again.
                            Err(_) => break,
                        }
                    }
                    drop(access);
                    if let Some(p) = pause {
                        std::thread::sleep(p);
                    } else if !worked {
                        std::thread::sleep(KEEP_POLL);
                    }
                }
            });
    }

    /// How much of `[at, at + len)` lies within the mapping (0 for a buffered access): the
    /// length a hint over that range is cut to.
    fn within_map(&self, at: usize, len: usize) -> usize {
        let mapped = self.mapped_bytes().unwrap_or(0) as usize;
        len.min(mapped.saturating_sub(at))
    }

    /// Asks the kernel to start reading `[at, at + len)` of a mapping into the page cache
    /// now (`MADV_WILLNEED`: the reads are queued and the call returns), so that a later
    /// access finds the pages instead of waiting on the device for each in turn. Only a
    /// hint; ranges past the mapping are cut to it, and a buffered access ignores it.
    /// Returns the bytes the kernel was asked for (0 where nothing was).
    pub(crate) fn will_need(&self, at: usize, len: usize) -> usize {
        let len = self.within_map(at, len);
        if len == 0 {
            return 0;
        }
        let advised = match self {
            Access::Shared(map) => map.advise_range(memmap2::Advice::WillNeed, at, len),
            Access::Mapped(map) => map.advise_range(memmap2::Advice::WillNeed, at, len),
            Access::Frames(_) | Access::Buffered { .. } => return 0,
        };
        if advised.is_ok() {
            len
        } else {
            0
        }
    }

    /// Drops bytes `[at, at + len)` of a mapping from this process's resident set
    /// (`MADV_DONTNEED`): pages no reader of this process reads any more. The file's pages stay
    /// in the page cache, dirty ones included, and a later access maps them again with the
    /// same bytes. Only a hint; ranges past the mapping are cut to it.
    pub(crate) fn forget(&self, at: usize, len: usize) {
        let len = self.within_map(at, len);
        if len == 0 {
            return;
        }
        // SAFETY: both are shared mappings of a file: after MADV_DONTNEED an access faults the
        // file's page back in, whose bytes (in the page cache, written back if dirty) are the
        // ones the mapping showed, so a slice borrowed from it reads the same bytes
        // throughout. The range is within the mapping (cut above).
        let _ = match self {
            Access::Shared(map) => unsafe {
                map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, at, len)
            },
            Access::Mapped(map) => unsafe {
                map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, at, len)
            },
            // Frames hold the only copy this process reads of a page; they are given back
            // with the frames (a freed page's frame is taken again by the writer).
            Access::Frames(_) | Access::Buffered { .. } => Ok(()),
        };
    }

    /// Drops runs of pages (first page, pages) from the resident set (`forget`), those of at
    /// least `FORGET_RUN_PAGES_MIN` pages: a system call per run, so scattered single pages
    /// (a random batch's path copies, reused by the next commits anyway) stay mapped, while a
    /// rewritten tree's pages, which the merge wrote in long runs, go. (Dropping runs less
    /// than 16 pages apart as one span, the live pages between them included, took a random
    /// tree's peak RSS at YCSB's default scale from 4.6 to 4.1 GB, but workload A from about
    /// 300K to 194K operations a second: the span's pages, dropped on the publishing thread,
    /// stalled the writer, and readers faulted the live ones back.)
    pub(crate) fn forget_runs(&self, page_bytes: usize, runs: &[(u64, u64)]) {
        for &(start, pages) in runs {
            if pages >= FORGET_RUN_PAGES_MIN {
                self.forget(start as usize * page_bytes, pages as usize * page_bytes);
            }
        }
    }

    /// The bytes of `pages` pages from page `id`. Requires: the caller checked that the range
    /// lies within the snapshot's page count.
    #[inline]
    pub(crate) fn bytes(&self, id: u64, pages: u64, page_bytes: usize) -> Result<&[u8]> {
        let start = id as usize * page_bytes;
        let len = pages as usize * page_bytes;
        match self {
            Access::Mapped(map) => map
                .get(start..start + len)
                .ok_or_else(|| Error::corrupted(id, "page beyond the mapped file")),
            Access::Shared(map) => {
                if start.checked_add(len).is_none_or(|end| end > map.len()) {
                    return Err(Error::corrupted(id, "page beyond the mapped file"));
                }
                // SAFETY: in bounds of the mapping, which lives as long as `self`. The caller
                // reads a page of a snapshot: the writer writes only pages that no snapshot
                // can reach (copy-on-write into free space, docs/design/concurrency.md), so no
                // mutable reference to these bytes exists while this one lives.
                Ok(unsafe { std::slice::from_raw_parts(map.as_ptr().add(start), len) })
            }
            Access::Frames(f) => f.bytes(id, pages),
            Access::Buffered { storage, cache } => {
                let mut cache = cache.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(buf) = cache.get(&(id, pages)) {
                    let ptr = buf.as_ptr();
                    let n = buf.len();
                    // SAFETY: the boxed slice is owned by the cache, which never removes or
                    // mutates an entry while `self` lives; moving the Box inside the map does
                    // not move its heap allocation. So the bytes stay valid and unchanged for
                    // the lifetime of `&self`.
                    return Ok(unsafe { std::slice::from_raw_parts(ptr, n) });
                }
                let mut buf = vec![0u8; len].into_boxed_slice();
                storage.read_at(&mut buf, start as u64).map_err(|e| {
                    if e.kind() == io::ErrorKind::UnexpectedEof {
                        Error::corrupted(id, "page beyond the end of the file")
                    } else {
                        Error::from_io(e)
                    }
                })?;
                if !checksum_ok(&buf) {
                    return Err(Error::corrupted(id, "checksum mismatch"));
                }
                let ptr = buf.as_ptr();
                cache.insert((id, pages), buf);
                // SAFETY: as above: the allocation now belongs to the cache and lives, unchanged,
                // as long as `self`.
                Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
            }
        }
    }
}

#[cfg(test)]
mod readahead_tests {
    use super::*;

    #[test]
    fn readahead_follows_the_mappings_length_unless_forced() {
        const GIB: u64 = 1 << 30;
        let auto = Readahead::new(None, Some(4 * GIB));
        assert!(auto.for_len(2 * GIB), "half the memory: read ahead");
        assert!(!auto.for_len(2 * GIB + 1), "more: random");
        assert!(
            !Readahead::new(None, None).for_len(1),
            "memory unknown: random"
        );
        assert!(Readahead::new(Some(true), Some(GIB)).for_len(8 * GIB));
        assert!(!Readahead::new(Some(false), Some(8 * GIB)).for_len(1));
    }

    #[test]
    fn fitting_in_memory_ignores_the_forced_readahead() {
        const GIB: u64 = 1 << 30;
        // What a new mapping's map-in asks: a forced readahead over a file larger than the
        // share must not map the whole file in.
        assert!(!Readahead::new(Some(true), Some(GIB)).fits(8 * GIB));
        assert!(Readahead::new(Some(false), Some(8 * GIB)).fits(GIB));
        assert!(Readahead::new(None, Some(4 * GIB)).fits(2 * GIB));
        assert!(!Readahead::new(None, Some(4 * GIB)).fits(2 * GIB + 1));
        assert!(!Readahead::new(None, None).fits(1), "memory unknown: no");
    }
}
