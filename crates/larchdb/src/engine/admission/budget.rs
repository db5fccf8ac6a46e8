//! The memory budget: how much anonymous memory the engine may hold for the writes the tree
//! does not have yet (the active and the frozen overlay), and what admission does about it.
//!
//! The budget is `Options::memory_budget`, or, by default, a quarter of the memory this
//! process may use beyond 64 MiB, and at least an eighth of it (that memory: the lowest
//! memory limit of its cgroup and the cgroups above it, v2 `memory.max`, v1
//! `memory.limit_in_bytes`, and the machine's memory, `MemTotal`). The rest
//! is left to the kernel's page cache, which holds the tree's and the log's pages and gives
//! back the clean ones under pressure. Admission (`make_room`) keeps the overlays inside it:
//!
//! - a checkpoint is due once the active overlay holds a quarter of the budget, as it is once
//!   the log has grown by a checkpoint's bytes (`memory_due`);
//! - from half of it, the overlays' growth is paced: the writer is slowed to the rate at which
//!   the memory left before three quarters lasts as long as a checkpoint takes (`memory`,
//!   `Pacer::delay`);
//! - with the active and the frozen overlay together at three quarters of it, the writer waits for
//!   the running checkpoint to be put in place, or starts one and waits (`over_budget`).
//!
//! What readers of older snapshots hold of the overlays no longer published (merged by a
//! checkpoint, kept by a reader until it ends or renews: `Shared::pinned_bytes`) beyond a
//! quarter of the budget comes out of it, down to an eighth (`within_pins`): the thresholds
//! above are of what is left.
//!
//! What a dropped overlay leaves for the next (`overlay::Spare`) keeps at most an eighth of the
//! budget, and the pager's pool of page buffers another eighth (`Carry::with_pool_bytes`), so
//! the overlays and what is kept between them stay within the budget.
//!
//! **Writes alone beyond memory.** Beyond memory each leaf a checkpoint's merge reaches is read
//! from the device and written back whatever the records it brings, and the records it brings
//! are what the overlays hold over the tree's leaves: the budget sets the device's reads and
//! writes for each record. The quarter leaves the rest to the page cache, for readers. Where no
//! reader reads while merges read their leaves from the device (eight checkpoints in a row
//! whose merge read from the device, `Disk::merge_waited`, with no read transaction of the
//! handle open beside them), the page cache serves the merges alone, which read each leaf once
//! a round, and the default budget is raised to half the memory beyond the reserve
//! (`alone_budget`, `after_merge`); the log's ring grows to keep the round of what the overlays
//! then hold (`ring_overlay_bytes`), within the log's geometry. Once readers read again, each
//! checkpoint gives back half of what it retired, so that the writer is slowed while the
//! overlays shrink, never stopped by a budget fallen under what they hold. A budget set by
//! `Options::memory_budget` is not raised. Measured (docs/design/performance.md, "Writes alone
//! beyond memory"): tupl's updates in a 384 MiB cgroup 1.3x faster (medians), each record
//! costing the device about a quarter less.

use super::pace::Memory;
use crate::engine::Shared;
use std::sync::atomic::Ordering;

/// The default budget: a quarter of the memory the process may use beyond `DEFAULT_RESERVE`,
/// and at least an eighth of it (`default_budget`). The rest is the page cache the tree
/// needs, and the engine's memory outside the overlays.
///
/// Beyond memory the budget is what sets the records each leaf gets at a checkpoint (a
/// writer faster than its checkpoints fills the overlays up to the budget's pacing), and so
/// the leaves written for each record. Measured (docs/design/performance.md, "A larger budget
/// beyond memory, and the writer paced by it"): tupl's random 8-byte keys in a 384 MiB cgroup,
/// updated at 50-66K a second with an eighth (48 MiB) and 74-93K with 80 MiB; 5 GiB of 4 KB
/// values in a 1 GiB cgroup (seed 000), written beside 4 readers, the writer 5.3-6.2K a
/// second with an eighth and 6.4-7.2K with 240 MiB, the readers the same. Under a small limit
/// the engine's other memory is most of it: in a 48 MiB cgroup (1 KB values, larch-bench's
/// `memory_limit` test) the process held 25 MB of anonymous memory with a 6 MiB budget, and
/// was killed with 12 MiB; there the eighth is what it gets.
const DEFAULT_SHARE: u64 = 4;
/// The share of the memory beyond `DEFAULT_RESERVE` the default budget takes while a writer
/// works alone beyond memory (`after_merge`): half.
const ALONE_SHARE: u64 = 2;
/// The memory the default budget leaves out before taking its share (`DEFAULT_SHARE`).
const DEFAULT_RESERVE: u64 = 64 << 20;
/// The least share of the memory the default budget takes (an eighth).
const DEFAULT_SHARE_MIN: u64 = 8;

/// The default budget for a process that may use `memory` bytes: a quarter of what is left
/// beyond `DEFAULT_RESERVE`, and at least an eighth of it (the two meet at 128 MiB).
fn default_budget(memory: u64) -> u64 {
    (memory.saturating_sub(DEFAULT_RESERVE) / DEFAULT_SHARE).max(memory / DEFAULT_SHARE_MIN)
}

/// The smallest budget, whatever the machine says: below it, checkpoints would come every few
/// commits. Small, so that an eighth of a small memory limit is what the overlays get: with 16
/// MiB, a process in a 48 MiB cgroup (1 KB values, larch-bench's `memory_limit` test) held
/// 42 MB of anonymous memory and was killed; with the eighth (6 MiB), 19-25 MB, and it
/// completed. Limits from 32 MiB up are not affected.
pub(crate) const MEMORY_BUDGET_MIN: u64 = 4 << 20;

/// The budget a handle opened with `option` (`Options::memory_budget`; 0: from the machine)
/// keeps its overlays in.
pub(crate) fn resolve(option: u64) -> u64 {
    let bytes = if option != 0 {
        option
    } else {
        process_memory().map_or(u64::MAX, default_budget)
    };
    bytes.max(MEMORY_BUDGET_MIN)
}

/// The budget for writes alone beyond memory (`after_merge`) of a handle opened with `option`
/// (`Options::memory_budget`) whose budget is `budget`: half the memory the process may use
/// beyond `DEFAULT_RESERVE` where the budget is the default; the budget itself where the
/// option set one (a user's bound is kept) or the memory is unknown.
pub(crate) fn resolve_alone(option: u64, budget: u64) -> u64 {
    if option != 0 {
        return budget;
    }
    process_memory().map_or(budget, |m| {
        (m.saturating_sub(DEFAULT_RESERVE) / ALONE_SHARE).max(budget)
    })
}

/// The bytes a logged transaction's batch holds at most before it turns to writing pages
/// (`table::TableAccess::bound`), for a handle whose budget is `budget` and whose log's share
/// of a transaction is `log_share` (`Options::log_batch_bytes_max`): a quarter of the budget,
/// a checkpoint's worth of the overlays (`memory_due`), and at least the log's share (a batch
/// within it would commit through the log). Below it the batch is kept and merged, sorted,
/// at the commit; past it each record is put into the pages one by one, and the copies of
/// cold pages the transaction holds are written out beyond their bound
/// (`WritePages::spill_cold`). The batch is memory the engine holds beside the application's
/// own copy of the same records: at half the memory the process may use, transactions of
/// 20,000 records of 1 KB in a 64 MiB cgroup (larch-bench's `memory_limit` test: its
/// records and the batch, 20 MB each) had the process killed in 3 of 8 runs.
pub(crate) fn resolve_batch(budget: u64, log_share: usize) -> usize {
    usize::try_from(budget / 4)
        .unwrap_or(usize::MAX)
        .max(log_share)
}

/// Whether the active overlay has reached its share of the budget: a checkpoint is due.
pub(crate) fn memory_due(shared: &Shared) -> bool {
    let (active, _) = shared.upper_bytes();
    active >= now(shared) / 4
}

/// The budget admission holds the overlays in now: the handle's (`Shared::memory_budget`), or
/// more while the tree is beyond memory and nothing else uses the page cache ("Writes alone
/// beyond memory" in the module's text), less what readers of older snapshots hold
/// (`within_pins`).
pub(crate) fn now(shared: &Shared) -> u64 {
    within_pins(before_pins(shared), shared.pinned_bytes())
}

/// The budget before what readers hold is taken from it (`now`).
fn before_pins(shared: &Shared) -> u64 {
    shared.budget_now.load(Ordering::Relaxed)
}

/// What readers may hold of the overlays no longer published before the budget shrinks: a
/// quarter of it, a checkpoint's worth (`memory_due`). The overlay a checkpoint merged stays
/// until every reader of the snapshot before has moved on (microseconds in memory,
/// milliseconds for a read from the device).
const PINNED_FREE_SHARE: u64 = 4;

/// The share of the budget the overlays keep however much readers hold: an eighth, so that
/// the writer goes on, slowed to checkpoints of a thirty-second of the budget, instead of
/// waiting for readers to let go (one may be its own thread's).
const PINNED_FLOOR_SHARE: u64 = 8;

/// `budget` less what readers of older snapshots hold beyond `PINNED_FREE_SHARE` of it
/// (`pinned`: `Shared::pinned_bytes`), and at least `PINNED_FLOOR_SHARE` of it. Each reader
/// holds the overlays of the snapshot it started from: a reader held across checkpoints
/// keeps them out of the spare, and without this, staggered readers held for long (a scan
/// of the whole table beside a writer, say, started again as each ends) held the budget's
/// worth each. With it, what they hold comes out of the overlays' share: the writer's
/// checkpoints come sooner and the overlays new readers start from are smaller. The
/// published overlays stay under three quarters of what is left, so the overlays together
/// stay within about 1.22 times the budget (39/32, where readers hold 9/8 of it and the
/// floor is reached), and beyond that grow only by what each further reader held across a
/// checkpoint started from: at most three quarters of the floor (3/32 of the budget).
fn within_pins(budget: u64, pinned: u64) -> u64 {
    let beyond = pinned.saturating_sub(budget / PINNED_FREE_SHARE);
    budget
        .saturating_sub(beyond)
        .max(budget / PINNED_FLOOR_SHARE)
}

/// After a checkpoint's merge: `alone`, whether its merge read its leaves from the device with
/// no read transaction of the handle open beside it; `retired`, the bytes of the overlay it
/// merged. Alone, `ALONE_STREAK` checkpoints in a row, the budget is the one for writes alone
/// beyond memory (`Shared::alone_budget`); otherwise it comes back to the handle's by half of what each
/// checkpoint retires, so that the writer is slowed to about half the rate the checkpoints
/// drain at while the overlays shrink, not stopped.
pub(crate) fn after_merge(shared: &Shared, alone: bool, retired: u64) {
    let streak = if alone {
        shared.alone_streak.fetch_add(1, Ordering::Relaxed) + 1
    } else {
        shared.alone_streak.store(0, Ordering::Relaxed);
        0
    };
    let next = next_budget(
        before_pins(shared),
        shared.memory_budget,
        shared.alone_budget,
        streak >= ALONE_STREAK,
        retired,
    );
    shared.budget_now.store(next, Ordering::Relaxed);
}

/// The checkpoints in a row that must find the writes alone beyond memory before the budget
/// is raised (`after_merge`): a writer's first checkpoints may run before its readers open
/// their first transactions, and a budget raised then is given back only by halves.
const ALONE_STREAK: u32 = 8;

/// `after_merge`'s budget after a checkpoint, from the budget `now`, the handle's `base` and
/// the one for writes alone beyond memory (`alone_budget`).
fn next_budget(now: u64, base: u64, alone_budget: u64, alone: bool, retired: u64) -> u64 {
    if alone {
        alone_budget
    } else {
        now.saturating_sub(retired / 2).max(base)
    }
}

/// The overlays' bytes whose round the log's ring keeps (`Log::plan`) while the budget is
/// above the handle's: the level from which their growth is paced, half of it (0 otherwise:
/// the ring is the checkpoints').
pub(crate) fn ring_overlay_bytes(shared: &Shared) -> u64 {
    let now = before_pins(shared);
    if now > shared.memory_budget {
        now / 2
    } else {
        0
    }
}

/// Whether the overlays hold half the budget or more: the writer is paced by the memory left
/// (`memory`), and the next checkpoint runs at the application's priority even beside readers
/// (`share::checkpoint_nice`), and the writer pays no share of its CPU.
pub(crate) fn pressed(shared: &Shared) -> bool {
    let m = memory(shared);
    m.held >= m.start
}

/// Whether the overlays hold so much of the budget that the writer must wait for a checkpoint.
pub(crate) fn over_budget(shared: &Shared) -> bool {
    let m = memory(shared);
    m.held >= m.stop
}

/// What the active and frozen overlays hold, the level from which their growth is paced
/// (`pressed`: half the budget) and the level at which the writer stops for a checkpoint
/// (`over_budget`: three quarters). The pacing holds the growth above half to the rate at
/// which the room left before the stop lasts a checkpoint (`Pacer::delay`), so that a writer
/// faster than its checkpoints is slowed before it reaches the stop. Below half nothing is
/// paced: paced from empty, the writer slept a little at every burst (tupl's 6M keys within
/// memory, 0.3 s in each phase and its P99.9 from 0.1 to 0.6-1.0 ms) for no stop to avoid.
pub(crate) fn memory(shared: &Shared) -> Memory {
    let (active, frozen) = shared.upper_bytes();
    let budget = now(shared);
    Memory {
        held: active.saturating_add(frozen),
        start: budget / 2,
        stop: budget / 4 * 3,
    }
}

/// `Options::readahead` as the pager applies it to each mapping, by its length: forced, or
/// by the memory this process may use.
pub(crate) fn readahead(options: &crate::Options) -> crate::pager::Readahead {
    let memory = match options.readahead {
        Some(_) => None,
        None => process_memory(),
    };
    crate::pager::Readahead::new(options.readahead, memory)
}

/// The share of the memory the process may use beyond `DEFAULT_RESERVE` that frames cover at
/// most (`frames_bytes`): half. Frames are anonymous memory the kernel cannot take back under
/// pressure, where the file's mapping is page cache it can; the rest is left to the overlays'
/// budget (a quarter, `DEFAULT_SHARE`), the log's pages, the page cache's copy of the pages
/// the frames write, and the application. In a 48 MiB cgroup the engine's memory outside the
/// overlays was most of it (`DEFAULT_SHARE`'s note): there frames are off.
const FRAMES_SHARE: u64 = 2;

/// The bytes of the data file a writing handle keeps in frames at most
/// (`Options::frames_bytes`, within `FRAMES_SHARE` of the memory the process may use beyond
/// `DEFAULT_RESERVE`): `None` where frames are off, or where that share is nothing. A file
/// larger than that is read through its mapping, as a file that outgrew the frames is.
pub(crate) fn frames_bytes(options: &crate::Options) -> Option<u64> {
    if options.frames_bytes == 0 || options.read_only {
        return None;
    }
    Some(frames_within(options.frames_bytes, process_memory())).filter(|&b| b > 0)
}

/// `asked` bytes of frames, within `FRAMES_SHARE` of `memory` beyond `DEFAULT_RESERVE` where
/// the memory is known; the default (`FRAMES_AUTO`) is that share, and none where the memory
/// is not known (a share of nothing known is no bound).
fn frames_within(asked: u64, memory: Option<u64>) -> u64 {
    match memory {
        Some(m) => asked.min(m.saturating_sub(DEFAULT_RESERVE) / FRAMES_SHARE),
        None if asked == crate::FRAMES_AUTO => 0,
        None => asked,
    }
}

/// The memory this process may use: the lowest of the machine's memory and the memory limits
/// of its cgroups (`None` where none of them can be read). Read once per process, at the first
/// open that needs it: a handle opened later keeps the first reading.
pub(crate) fn process_memory() -> Option<u64> {
    static MEMORY: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    *MEMORY.get_or_init(|| [mem_total(), cgroup_limit()].into_iter().flatten().min())
}

/// `MemTotal` of `/proc/meminfo`, in bytes.
fn mem_total() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    parse_mem_total(&text)
}

fn parse_mem_total(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: u64 = line.split_ascii_whitespace().nth(1)?.parse().ok()?;
    kb.checked_mul(1024)
}

/// The lowest memory limit of this process's cgroup and those above it, v2 or v1.
fn cgroup_limit() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mut lowest: Option<u64> = None;
    for (root, file, path) in cgroup_paths(&text) {
        // The mount's root, then each folder down to the cgroup's own.
        let mut dir = std::path::PathBuf::from(root);
        let below = path.split('/').filter(|p| !p.is_empty());
        for part in std::iter::once("").chain(below) {
            dir.push(part);
            if let Some(l) = read_limit(&dir.join(file)) {
                lowest = Some(lowest.map_or(l, |x| x.min(l)));
            }
        }
    }
    lowest
}

/// For each memory hierarchy of `/proc/self/cgroup`'s text: the mount it is read under, the
/// file that holds a group's limit, and the process's group within it.
fn cgroup_paths(text: &str) -> Vec<(&'static str, &'static str, &str)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if controllers.is_empty() {
            out.push(("/sys/fs/cgroup", "memory.max", path));
        } else if controllers.split(',').any(|c| c == "memory") {
            out.push(("/sys/fs/cgroup/memory", "memory.limit_in_bytes", path));
        }
    }
    out
}

/// A limit file's value: bytes, or `None` for "max", an unlimited v1 value (a huge number),
/// or a file that cannot be read.
fn read_limit(file: &std::path::Path) -> Option<u64> {
    parse_limit(&std::fs::read_to_string(file).ok()?)
}

fn parse_limit(text: &str) -> Option<u64> {
    let v: u64 = text.trim().parse().ok()?;
    // v1 writes "no limit" as the largest page-aligned i64.
    (v < 1 << 60).then_some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo_and_limits_are_parsed() {
        let meminfo = "MemTotal:       24576000 kB\nMemFree:         1000 kB\n";
        assert_eq!(parse_mem_total(meminfo), Some(24_576_000 * 1024));
        assert_eq!(parse_mem_total("MemFree: 1 kB\n"), None);
        assert_eq!(parse_limit("1073741824\n"), Some(1 << 30));
        assert_eq!(parse_limit("max\n"), None);
        assert_eq!(parse_limit("9223372036854771712\n"), None);
    }

    #[test]
    fn cgroup_lines_name_the_memory_hierarchies() {
        let v2 = "0::/user.slice/app.scope\n";
        assert_eq!(
            cgroup_paths(v2),
            vec![("/sys/fs/cgroup", "memory.max", "/user.slice/app.scope")]
        );
        let v1 = "12:cpu,cpuacct:/a\n4:memory:/process_api/x/larch\n1:name=systemd:/b\n";
        assert_eq!(
            cgroup_paths(v1),
            vec![(
                "/sys/fs/cgroup/memory",
                "memory.limit_in_bytes",
                "/process_api/x/larch"
            )]
        );
    }

    #[test]
    fn frames_cover_at_most_half_the_memory() {
        const MIB: u64 = 1 << 20;
        assert_eq!(frames_within(6 << 30, Some(1 << 30)), 480 * MIB);
        assert_eq!(frames_within(256 * MIB, Some(1 << 30)), 256 * MIB);
        assert_eq!(frames_within(6 << 30, None), 6 << 30);
        // By default, the share; none where the memory is not known.
        assert_eq!(frames_within(crate::FRAMES_AUTO, Some(1 << 30)), 480 * MIB);
        assert_eq!(frames_within(crate::FRAMES_AUTO, None), 0);
        // In a small cgroup, none.
        assert_eq!(frames_within(6 << 30, Some(48 * MIB)), 0);
        let off = crate::Options::default().frames_bytes(0);
        assert_eq!(frames_bytes(&off), None);
        let on = crate::Options::default();
        let within = frames_within(crate::FRAMES_AUTO, process_memory());
        assert_eq!(frames_bytes(&on), Some(within).filter(|&b| b > 0));
        assert_eq!(frames_bytes(&on.clone().read_only(true)), None);
    }

    #[test]
    fn the_budget_is_an_option_or_a_share_of_the_machine() {
        assert_eq!(resolve(64 << 20), 64 << 20);
        assert_eq!(resolve(1), MEMORY_BUDGET_MIN);
        let machine = resolve(0);
        assert!(machine >= MEMORY_BUDGET_MIN);
        if let Some(m) = process_memory() {
            assert_eq!(machine, default_budget(m).max(MEMORY_BUDGET_MIN));
        }
    }

    #[test]
    fn writes_alone_beyond_memory_take_half_and_give_it_back_by_halves() {
        const MIB: u64 = 1 << 20;
        // A budget the user set is kept whatever the writes do.
        assert_eq!(resolve_alone(64 * MIB, 64 * MIB), 64 * MIB);
        // The default: half the memory beyond the reserve, never less than the budget.
        if let Some(m) = process_memory() {
            let base = resolve(0);
            assert_eq!(
                resolve_alone(0, base),
                (m.saturating_sub(DEFAULT_RESERVE) / ALONE_SHARE).max(base)
            );
        }
        let (base, alone) = (80 * MIB, 160 * MIB);
        assert_eq!(next_budget(base, base, alone, true, 3 * MIB), alone);
        // Readers read again: back by half of what each checkpoint retires.
        assert_eq!(
            next_budget(alone, base, alone, false, 4 * MIB),
            alone - 2 * MIB
        );
        assert_eq!(next_budget(base + MIB, base, alone, false, 4 * MIB), base);
        assert_eq!(next_budget(base, base, alone, false, 0), base);
    }

    #[test]
    fn what_readers_hold_beyond_a_quarter_comes_out_of_the_budget_down_to_an_eighth() {
        const MIB: u64 = 1 << 20;
        let budget = 64 * MIB;
        // Nothing held, or up to a checkpoint's worth (a quarter): the whole budget.
        assert_eq!(within_pins(budget, 0), budget);
        assert_eq!(within_pins(budget, 16 * MIB), budget);
        // Beyond it, byte for byte.
        assert_eq!(within_pins(budget, 16 * MIB + 1), budget - 1);
        assert_eq!(within_pins(budget, 40 * MIB), 40 * MIB);
        // Never below an eighth, however much is held.
        assert_eq!(within_pins(budget, 72 * MIB), 8 * MIB);
        assert_eq!(within_pins(budget, u64::MAX), 8 * MIB);
    }

    #[test]
    fn the_default_is_a_quarter_beyond_the_reserve_and_at_least_an_eighth() {
        const MIB: u64 = 1 << 20;
        // Small limits: an eighth (the engine's other memory is most of them).
        assert_eq!(default_budget(48 * MIB), 6 * MIB);
        assert_eq!(default_budget(128 * MIB), 16 * MIB);
        // Larger ones: a quarter of what is beyond the reserve.
        assert_eq!(default_budget(384 * MIB), 80 * MIB);
        assert_eq!(default_budget(1024 * MIB), 240 * MIB);
        assert_eq!(default_budget(24 << 30), (24 << 30) / 4 - 16 * MIB);
        assert_eq!(default_budget(0), 0);
        // Never less for more memory.
        let mut last = 0;
        for m in (0..4096).map(|i| i * 4 * MIB) {
            let b = default_budget(m);
            assert!(b >= last && b >= m / 8 && b <= m / 4, "{m}: {b}");
            last = b;
        }
    }
}
