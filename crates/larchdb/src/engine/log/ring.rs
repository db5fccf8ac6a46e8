//! The log as a ring of segments: positions and their file offsets, how much the log keeps
//! and how much room is left, the checkpoint and file sizes it plans for, and the release of
//! what a durable checkpoint made unneeded.

use super::*;

/// A checkpoint comes after the log has grown by at least this share of the data file
/// (`Log::plan`).
pub(super) const CHECKPOINT_FILE_FRACTION: u64 = 32;

/// The runs of large values a durable checkpoint comes after are this share of the data file
/// (`Log::plan`), within `RUNS_INTERVAL_PER_CHECKPOINT`'s share of the smallest checkpoint
/// and a checkpoint's log bytes.
pub(super) const RUNS_INTERVAL_FILE_FRACTION: u64 = 32;

/// The runs' bytes a durable checkpoint comes after are at least the smallest checkpoint's
/// log bytes over this (`Log::plan`): at the default, 1 MiB, in a database of a few
/// megabytes one durable checkpoint every 256 values of 4,000 bytes.
pub(super) const RUNS_INTERVAL_PER_CHECKPOINT: u64 = 8;

/// The ring has room for at least this share of the data file (`Log::plan`).
pub(super) const RING_FILE_FRACTION: u64 = 3;

/// The ring has room for at least this many checkpoints (`Log::plan`).
pub(super) const RING_CHECKPOINTS: u64 = 4;

/// Checkpoints' bytes of the log's room kept in reserve for the running checkpoint and its
/// sync, with checkpoints on a thread of their own (`commit::log_short`): the ring of sliced
/// overlays has room for them beside the round (`Log::plan`).
pub(crate) const RESERVE_CHECKPOINTS: u64 = 2;

/// The records the log keeps for the slices (the round: since the oldest slice's last merge)
/// are about this many times what the overlays hold, each slice gathering from empty to full
/// between two of its merges (`Log::plan`).
const ROUND_PER_OVERLAYS: u64 = 2;

/// With the overlays cut in slices, they are merged (the fullest slice, a checkpoint) once
/// they hold a checkpoint's bytes, and at least this many of the smallest checkpoints
/// (`Options::checkpoint_bytes`): `overlay_bytes`.
pub(super) const OVERLAY_FLOOR_CHECKPOINTS: u64 = 2;

/// The active overlays' bytes from which, cut in slices, they are merged one slice at a time
/// (`Txn::checkpoint_due`): a checkpoint's bytes (`checkpoint`: a 32nd of the data file in a
/// large one), and at least `OVERLAY_FLOOR_CHECKPOINTS` of the smallest (`checkpoint_min`).
///
/// Why the floor: each slice gathers from empty to full between two of its merges, so the
/// overlays hold about half the round of records the ring keeps, and a checkpoint of a slice
/// brings each of its leaves the records of a round. In a database at the smallest
/// checkpoints (a data file under 256 MB with the defaults), overlays merged from one
/// checkpoint left seed 001's writer beside 2 and 4 readers paced for the log's room a tenth
/// of its time, and bringing half as many records to each leaf it rewrote; from two, it ran
/// 1.2x, 1.3x and 1.45x faster beside 1, 2 and 4 readers, for 16 MiB more of log and 8 MB
/// more of memory (docs/design/performance.md, "The checkpoint's size beside readers"). In
/// a larger file the round already grows with the file, and twice as much cost the process
/// about a tenth of the tree's size in memory (seed 001 at 10M: 1.26x LMDB's process against
/// 1.19x).
pub(crate) fn overlay_bytes(checkpoint: u64, checkpoint_min: u64) -> u64 {
    checkpoint.max(checkpoint_min.saturating_mul(OVERLAY_FLOOR_CHECKPOINTS))
}

impl Log {
    /// Position of the next byte to append: the end of the log.
    pub(crate) fn end(&self) -> u64 {
        self.end
    }

    /// Bytes appended since the oldest position still needed (`release_to`).
    pub(super) fn kept_bytes(&self) -> u64 {
        self.distance(self.keep_from, self.end)
    }

    /// Bytes the log can keep going round its ring: all but one of its slots (the segment
    /// being appended to may start anywhere in its slot).
    pub(super) fn room_bytes(&self) -> u64 {
        (self.ring - 1) * self.sink.segment_bytes
    }

    /// Log bytes from position `a` to position `b` (`a <= b`), less the positions jumped
    /// over. Only jumps after the oldest position still needed are known (`release_to`), so
    /// from an older `a` the count can only be too high.
    pub(super) fn distance(&self, a: u64, b: u64) -> u64 {
        let skipped: u64 = self
            .jumps
            .iter()
            .filter(|&&(from, to)| a <= from && to <= b)
            .map(|&(from, to)| to - from)
            .sum();
        b.saturating_sub(a).saturating_sub(skipped)
    }

    /// Sets the least room `plan` gives the ring (`Options::log_room_bytes`), from the next
    /// `plan` on.
    pub(crate) fn set_room_min(&mut self, bytes: u64) {
        self.room_min = bytes;
    }

    /// Sizes the ring and the checkpoints for a data file of `file_bytes`, with checkpoints
    /// of at least `checkpoint_bytes_min` (docs/design/write-path.md, "The log follows the
    /// tree"): a checkpoint every `file_bytes / CHECKPOINT_FILE_FRACTION` bytes of log, so
    /// that a checkpoint brings as many records to each leaf whatever the tree's size, and
    /// room for `RING_FILE_FRACTION`'s share of the file (and for `RING_CHECKPOINTS`
    /// checkpoints), so that durable checkpoints, each a sync of everything the checkpoints
    /// before it dirtied, come as rarely per record in a large tree as in a small one, while
    /// the file of a small database's log stays small. Both are bounded by the geometry.
    ///
    /// With the overlays cut in slices (`sliced`, docs/design/footprint.md), every checkpoint
    /// is made durable (unless `room_min` is set, below), so a larger ring makes them no
    /// rarer: the ring has room only for the round the slices keep while they wait for their
    /// turn (twice what the overlays hold, `overlay_bytes`) and the reserve
    /// `commit::durable_checkpoint_due` keeps (`RESERVE_CHECKPOINTS`), not a third of the
    /// file: four checkpoints in a large file, six at the smallest checkpoints.
    ///
    /// `overlays`: the overlays' bytes from which the memory budget paces the writer, while the
    /// budget is raised for writes alone beyond memory (`admission::budget::ring_overlay_bytes`;
    /// 0 otherwise): the ring keeps their round where it is more than a checkpoint's.
    ///
    /// The room is at least `room_min` (`Options::log_room_bytes`): then a slice's checkpoint
    /// is made durable only when the room runs short (`checkpoint::start`).
    ///
    /// Large values' runs call for a durable checkpoint of their own every
    /// `file_bytes / RUNS_INTERVAL_FILE_FRACTION` bytes (`commit::runs_due`), at least
    /// `checkpoint_bytes_min / RUNS_INTERVAL_PER_CHECKPOINT` and at most a checkpoint's log
    /// bytes: what the file holds beyond its records is some of these intervals (the
    /// reservations, and the runs freed that wait for the durable horizon), so they follow
    /// the file's size, not the smallest checkpoint's (docs/design/large-values.md).
    pub(crate) fn plan(
        &mut self,
        file_bytes: u64,
        checkpoint_bytes_min: u64,
        sliced: bool,
        overlays: u64,
    ) {
        self.left_at.set(None);
        let all_room = (self.sink.segments - 1) * self.sink.segment_bytes;
        let checkpoint = (file_bytes / CHECKPOINT_FILE_FRACTION)
            .max(checkpoint_bytes_min)
            .min((all_room / RING_CHECKPOINTS).max(checkpoint_bytes_min));
        let room = if sliced {
            let overlays = overlay_bytes(checkpoint, checkpoint_bytes_min).max(overlays);
            let round = ROUND_PER_OVERLAYS * overlays;
            (RESERVE_CHECKPOINTS * checkpoint).saturating_add(round)
        } else {
            (file_bytes / RING_FILE_FRACTION).max(RING_CHECKPOINTS * checkpoint)
        };
        let room = room.max(self.room_min);
        self.checkpoint_bytes = checkpoint;
        self.runs_interval_bytes = (file_bytes / RUNS_INTERVAL_FILE_FRACTION)
            .max(checkpoint_bytes_min / RUNS_INTERVAL_PER_CHECKPOINT)
            .min(checkpoint);
        self.ring = (room.div_ceil(self.sink.segment_bytes) + 1).clamp(2, self.sink.segments);
    }

    /// Whether the segment starting at `at` may be written: its slot's previous segment holds
    /// only positions older than `keep_from`.
    pub(super) fn reusable(&self, at: u64) -> bool {
        let cycle = self.sink.segments * self.sink.segment_bytes;
        at < cycle || at - cycle + self.sink.segment_bytes <= self.keep_from
    }

    /// Bytes that can be appended before the log is full (`NoRoom::Full`), as `append` would
    /// place them: the rest of the segment at the end, then each segment after it whose slot
    /// is reusable, jumping to the next cycle's first slot past the ring as `append` does.
    /// Less than `room_bytes() - kept_bytes()` while the ring has just grown and the slots
    /// after the end still hold the records of the cycle before. Headers and pads are not
    /// counted: an estimate, high by at most a record header per segment.
    pub(super) fn left_bytes(&self) -> u64 {
        let seg = self.sink.segment_bytes;
        if let Some((end, left)) = self.left_at.get() {
            if end / seg == self.end / seg && end <= self.end {
                return left.saturating_sub(self.end - end);
            }
        }
        let left = self.walk_left(seg);
        self.left_at.set(Some((self.end, left)));
        left
    }

    /// `left_bytes`, walked.
    pub(super) fn walk_left(&self, seg: u64) -> u64 {
        let cycle = self.sink.segments * seg;
        let mut at = self.end;
        let mut left = 0;
        if !at.is_multiple_of(seg) {
            left += seg - at % seg;
            at += seg - at % seg;
        }
        // Room past the ring's is not needed: pacing looks no further.
        let enough = self.room_bytes();
        for _ in 0..self.sink.segments {
            if left >= enough {
                break;
            }
            if self.jumps_allowed && (at % cycle) / seg >= self.ring {
                let to = (at / cycle + 1) * cycle;
                if self.reusable(to) {
                    at = to;
                }
            }
            if !self.reusable(at) {
                break;
            }
            left += seg;
            at += seg;
        }
        left
    }

    /// Records before `position` are no longer needed (a checkpoint covers them): their
    /// segments may be reused.
    pub(crate) fn release_to(&mut self, position: u64) {
        self.left_at.set(None);
        debug_assert!(position <= self.end);
        self.keep_from = self.keep_from.max(position.min(self.end));
        let keep_from = self.keep_from;
        self.jumps.retain(|&(_, to)| to > keep_from);
    }

    /// When no record is kept (every one is in a durable checkpoint: `release_to` reached the
    /// end) and nothing is buffered, moves the end to the next cycle's first position, as a
    /// jump would: the next record goes in the first slot, and the file needs nothing past
    /// its header (`cut`). Returns the new end, or `None` (changing nothing) when records are
    /// kept, when the log is already at a cycle's first position with its file cut, or for a
    /// log whose version does not allow jumps (an older build would read the jump as the end
    /// of the log: it is left as it is).
    pub(crate) fn restart(&mut self) -> Option<u64> {
        self.left_at.set(None);
        if !self.idle() || self.is_cut() || !self.jumps_allowed || self.failed {
            return None;
        }
        let cycle = self.sink.segments * self.sink.segment_bytes;
        let to = (self.end / cycle + 1) * cycle;
        self.end = to;
        self.written = to;
        self.synced = self.synced.max(to);
        self.keep_from = to;
        self.tail_open = false;
        self.jumps.clear();
        Some(to)
    }

    /// The file offset of `position`.
    pub(super) fn offset(&self, position: u64) -> u64 {
        self.sink.offset(position)
    }

    /// The next segment's first position after `position`.
    pub(super) fn next_segment(&self, position: u64) -> u64 {
        (position / self.sink.segment_bytes + 1) * self.sink.segment_bytes
    }
}
