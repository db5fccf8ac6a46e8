//! Appending: a record encoded into the ring at the log's end, padding to the next segment,
//! and the writes and syncs that make appended records durable.

use super::*;

/// Appended bytes taken from the log to be written: positions `[position, end)`, less the
/// positions jumped over: at each `(offset, to)` of `jumps`, the bytes from `offset` on go at
/// position `to`.
pub(crate) struct Flush {
    pub(super) position: u64,
    pub(super) bytes: Vec<u8>,
    pub(super) end: u64,
    pub(super) jumps: Vec<(usize, u64)>,
}

/// The least body a commit's record is packed from (`pack`): below it the bytes saved do not
/// pay for the compressor's table, and one-put commits of small records stay as they were.
pub(crate) const PACK_BYTES_MIN: usize = 256;

/// Packs a commit's record body (`Batch::encode`) into `out` as a `KIND_PACKED` record's body:
/// its length, then the body compressed as one LZ4 block. Returns whether the packed body is
/// worth appending: an eighth smaller at least, from a body of `PACK_BYTES_MIN` or more
/// (values that do not compress stay a `KIND_COMMIT` record).
///
/// Why: the log's room is counted in bytes, and what a round of the ring holds sets how many
/// records each leaf takes at a checkpoint; a packed record leaves the ring room for more of
/// them (docs/design/write-path.md, "Packed commits").
pub(crate) fn pack(body: &[u8], out: &mut Vec<u8>) -> bool {
    if body.len() < PACK_BYTES_MIN || body.len() > u32::MAX as usize {
        return false;
    }
    out.clear();
    out.resize(
        PACKED_BLOCK_AT + lz4_flex::block::get_maximum_output_size(body.len()),
        0,
    );
    out[..PACKED_BLOCK_AT].copy_from_slice(&(body.len() as u32).to_le_bytes());
    match lz4_flex::block::compress_into(body, &mut out[PACKED_BLOCK_AT..]) {
        Ok(n) if PACKED_BLOCK_AT + n <= body.len() - body.len() / 8 => {
            out.truncate(PACKED_BLOCK_AT + n);
            true
        }
        _ => false,
    }
}

impl Log {
    /// Creates a log of `segments` segments of `segment_bytes` on an empty `storage`: its file
    /// header, written and synced, and its name synced; the file grows as records reach it
    /// (`Extent`). The first record goes at position `start`, a multiple of `segment_bytes`.
    pub(crate) fn create(
        storage: Arc<dyn Storage>,
        segment_bytes: u64,
        segments: u64,
        start: u64,
    ) -> Result<Log> {
        if segment_bytes < SEGMENT_BYTES_MIN
            || !segment_bytes.is_multiple_of(RECORD_ALIGN as u64)
            || segments < 2
            || !start.is_multiple_of(segment_bytes)
        {
            return Err(Error::InvalidOptions(format!(
                "log of {segments} segments of {segment_bytes} bytes from {start}: at least 2 \
                 segments of at least {SEGMENT_BYTES_MIN} bytes, starting at a segment"
            )));
        }
        let total = segments
            .checked_mul(segment_bytes)
            .and_then(|b| b.checked_add(FILE_HEADER_BYTES))
            .ok_or_else(|| Error::InvalidOptions("log too large".into()))?;
        let mut h = [0u8; FILE_HEADER_BYTES as usize];
        h[FILE_MAGIC_AT..FILE_MAGIC_AT + 8].copy_from_slice(&FILE_MAGIC);
        put_u32(&mut h, FILE_VERSION_AT, FILE_VERSION);
        put_u64(&mut h, FILE_SEGMENT_BYTES_AT, segment_bytes);
        put_u64(&mut h, FILE_SEGMENTS_AT, segments);
        let crc = crc32c(&h[..FILE_CRC_AT]);
        put_u32(&mut h, FILE_CRC_AT, crc);
        storage.write_at(&h, 0)?;
        storage.sync()?;
        // The file may be new: its name, too, must survive a power loss.
        storage.sync_name()?;
        let sink = Sink {
            map: LogMap::of(&*storage, total),
            extent: Extent::new(total, FILE_HEADER_BYTES, segment_bytes),
            storage,
            segment_bytes,
            segments,
        };
        Ok(Log::with_sink(sink, start, FILE_VERSION))
    }

    /// Position up to which the log is durable.
    #[cfg(test)]
    pub(crate) fn synced(&self) -> u64 {
        self.synced
    }

    /// Appends a record of `kind` for commit `txn`; returns the log's end after it. Buffers
    /// only: `write` and `sync` make it reach the storage.
    pub(crate) fn append(
        &mut self,
        kind: u8,
        txn: u64,
        body: &[u8],
    ) -> std::result::Result<u64, NoRoom> {
        let size = aligned((RECORD_HEADER_BYTES + body.len()) as u64);
        // A log that may jump keeps room for a pad record at the end of every segment, where
        // a jump is named.
        let reserve = if self.jumps_allowed {
            RECORD_HEADER_BYTES as u64
        } else {
            0
        };
        let room_max = self.sink.segment_bytes - SEGMENT_HEADER_BYTES as u64 - reserve;
        if size > room_max || body.len() > u32::MAX as usize {
            return Err(NoRoom::TooLarge);
        }
        // Where the record goes: here, or at the start of the next segment.
        let mut at = self.end;
        let rest = self.sink.segment_bytes - at % self.sink.segment_bytes;
        let skip = !at.is_multiple_of(self.sink.segment_bytes)
            && (size + reserve > rest || self.tail_open);
        if skip {
            at += rest;
        }
        // Past the ring, the log starts again at the first slot, if it is free: the pad that
        // ends this segment names the jump (so a segment that ends without room for a pad
        // goes on to the next slot, and the jump waits for the next segment's end).
        let cycle = self.sink.segments * self.sink.segment_bytes;
        let jump = (skip && rest >= RECORD_HEADER_BYTES as u64 && self.jumps_allowed)
            .then(|| (at / cycle + 1) * cycle)
            .filter(|&to| (at % cycle) / self.sink.segment_bytes >= self.ring && self.reusable(to));
        let boundary = at;
        if let Some(to) = jump {
            at = to;
        }
        let new_segment = at.is_multiple_of(self.sink.segment_bytes);
        if new_segment && !self.reusable(at) {
            return Err(NoRoom::Full);
        }
        // The file must hold the record (and the pad before it) before it is appended
        // (`Extent::cover`), so that a full disk fails this commit alone instead of a later
        // write of records already committed.
        let header = if new_segment {
            SEGMENT_HEADER_BYTES as u64
        } else {
            0
        };
        let pad_end = skip.then(|| self.offset(self.end) + rest);
        let record_end = self.offset(at) + header + size;
        for end in pad_end.into_iter().chain([record_end]) {
            if let Err(e) =
                self.sink
                    .extent
                    .cover(&*self.sink.storage, self.sink.map.as_deref(), end)
            {
                return Err(NoRoom::Grow(e));
            }
        }
        self.grow_ahead(record_end);
        if skip {
            self.pad(rest, jump.unwrap_or(0));
            self.tail_open = false;
        }
        if let Some(to) = jump {
            // The slots after this one hold only positions older than the first slot's, which
            // are no longer needed: the file gives them back.
            self.shrink(self.offset(boundary - 1) + 1);
            self.jumps.push((boundary, to));
            self.jump_flush.push((self.buf.len(), to));
            self.end = to;
        }
        if new_segment {
            self.buf.extend_from_slice(&segment_header(at));
            self.end = at + SEGMENT_HEADER_BYTES as u64;
            self.populate_segment(at);
        }
        let position = self.end;
        let start = self.buf.len();
        self.buf.resize(start + RECORD_HEADER_BYTES, 0);
        self.buf.extend_from_slice(body);
        self.buf.resize(start + size as usize, 0);
        let rec = &mut self.buf[start..];
        put_u32(rec, REC_LEN_AT, body.len() as u32);
        rec[REC_KIND_AT] = kind;
        put_u64(rec, REC_TXN_AT, txn);
        put_u64(rec, REC_SYNCED_AT, self.synced);
        let crc = record_crc(position, rec, body);
        put_u32(rec, REC_CRC_AT, crc);
        self.end = position + size;
        self.appended_end = self.end;
        self.appended += size;
        Ok(self.end)
    }

    /// Asks the grower for the file to reach two chunks past `end` once less than one chunk
    /// is left past it (so each chunk is asked for once), starting it if need be.
    pub(super) fn grow_ahead(&mut self, end: u64) {
        let chunk = self.sink.extent.chunk;
        if self.sink.map.is_none() || self.sink.extent.len() >= end.saturating_add(chunk) {
            return;
        }
        // Two chunks past `end`, rounded up to a chunk's end: the same for every record in
        // a chunk, so that a grower still writing the last chunk asked for is not asked
        // again (a lock and a wake) at every append.
        let want = end
            .saturating_add(2 * chunk)
            .div_ceil(chunk)
            .saturating_mul(chunk)
            .min(self.sink.extent.total);
        if want <= self.grow_asked || want <= self.sink.extent.len() {
            return;
        }
        if let Some(g) = self.grower() {
            g.ask(want);
            self.grow_asked = want;
        }
    }

    /// Asks the grower to make the segment starting at `at` present in the map, when the file
    /// already holds it (a slot the log goes round to again: its pages left the mapping when
    /// the log moved past it, `LogMap::enter`), so that the stores into it do not fault a page
    /// at a time on the writer's thread. Measured on YCSB A (1 KB records, one client): with
    /// the log's segments dropped from the mapping and the stores faulting, 10-16% fewer
    /// operations than with them kept; made present by the grower, 3-4% fewer. Only a hint.
    pub(super) fn populate_segment(&mut self, at: u64) {
        let from = self.offset(at);
        let to = from + self.sink.segment_bytes;
        if self.sink.map.is_none() || self.sink.extent.len() < to {
            return;
        }
        if let Some(g) = self.grower() {
            g.populate(from, to);
        }
    }

    /// The grower, started first if it is not running (`None` when it cannot start: no
    /// background owner, or the handle is closing).
    fn grower(&mut self) -> Option<&Grower> {
        if self.grower.is_none() {
            if let Some(background) = self.background.as_deref() {
                let sink = self.sink.clone();
                self.grower = Grower::start(sink, background, self.grower_nice);
            }
        }
        self.grower.as_ref()
    }

    /// Starts the thread that grows the file through `background` (the handle's background
    /// owner), `nice` steps below the application's threads (`Options::background_nice`).
    pub(crate) fn set_background(&mut self, background: Arc<dyn Spawn>, nice: u8) {
        self.background = Some(background);
        self.grower_nice = nice;
    }

    /// Stops the thread that grows the file (the handle is closing: `Background::stop`).
    pub(super) fn stop_grower(&mut self) {
        self.grower = None;
    }

    /// Stops growing the file before it is cut to `len`.
    pub(super) fn shrink(&mut self, len: u64) {
        if let Some(g) = &self.grower {
            g.forget();
        }
        self.grow_asked = 0;
        self.sink.extent.shrink(&*self.sink.storage, len);
    }

    /// Fills the `rest` bytes left in the current segment: a pad record where one fits, zeros
    /// otherwise (reading back skips a remainder too small for a record header). The pad
    /// record's txn field is the position the log goes on at, if it jumps (0: the next
    /// segment).
    pub(super) fn pad(&mut self, rest: u64, jump: u64) {
        let position = self.end;
        let start = self.buf.len();
        self.buf.resize(start + rest as usize, 0);
        if rest >= RECORD_HEADER_BYTES as u64 {
            let body_len = rest as usize - RECORD_HEADER_BYTES;
            let rec = &mut self.buf[start..];
            put_u32(rec, REC_LEN_AT, body_len as u32);
            rec[REC_KIND_AT] = KIND_PAD;
            put_u64(rec, REC_TXN_AT, jump);
            put_u64(rec, REC_SYNCED_AT, self.synced);
            let crc = record_crc(
                position,
                &rec[..RECORD_HEADER_BYTES],
                &rec[RECORD_HEADER_BYTES..],
            );
            put_u32(rec, REC_CRC_AT, crc);
        }
        self.end = position + rest;
        self.appended_end = self.end;
    }

    /// Every record is in a durable checkpoint (`release_to` reached the end) and every
    /// appended byte was handed to the storage.
    pub(super) fn idle(&self) -> bool {
        self.keep_from >= self.end && self.written == self.end && self.buf.is_empty()
    }

    /// The end is a cycle's first position and the file is cut to its header (`restart`, then
    /// `cut`).
    pub(super) fn is_cut(&self) -> bool {
        let cycle = self.sink.segments * self.sink.segment_bytes;
        self.end.is_multiple_of(cycle) && self.sink.extent.len() <= FILE_HEADER_BYTES
    }

    /// Gives back every byte of the file after its header. Requires: the log was `restart`ed
    /// and a durable commit names its new end as the position to replay from (before that, a
    /// power loss returns to a commit that may still need the records; cutting the file early
    /// would read as the end of the log, losing nothing only because `restart` requires every
    /// record to be in a durable checkpoint).
    pub(crate) fn cut(&mut self) {
        let cycle = self.sink.segments * self.sink.segment_bytes;
        if self.end.is_multiple_of(cycle) && self.written == self.end && !self.failed {
            self.shrink(FILE_HEADER_BYTES);
        }
    }

    /// Takes the appended bytes not yet handed out, for writing.
    pub(super) fn take(&mut self) -> Flush {
        let f = Flush {
            position: self.written,
            bytes: std::mem::take(&mut self.buf),
            end: self.end,
            jumps: std::mem::take(&mut self.jump_flush),
        };
        self.written = self.end;
        f
    }

    /// Hands every appended byte to the storage (not synced).
    pub(crate) fn write(&mut self) -> Result<()> {
        if self.failed {
            return Err(Error::Poisoned);
        }
        let mut f = self.take();
        let r = self.sink.write(&f, true);
        self.failed = r.is_err();
        // Keep the buffer's allocation for the next appends.
        f.bytes.clear();
        self.buf = f.bytes;
        r
    }

    /// Makes every appended record durable: `write`, then one sync of the storage.
    #[cfg(test)]
    pub(crate) fn sync(&mut self) -> Result<()> {
        self.write()?;
        if self.synced < self.written {
            if let Err(e) = self.sink.storage.sync() {
                self.failed = true;
                return Err(Error::from_io(e));
            }
            self.synced = self.written;
        }
        Ok(())
    }
}
