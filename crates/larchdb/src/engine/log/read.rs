//! Reading back: records from a position to the log's end, on a thread of its own, handed to
//! a consumer as they are read (`ReadBack`); and a follower's reads of what a writer in another
//! process appended.

use super::*;

/// Buffers of segments read before that reading back keeps for reuse (`Log::read_spare`):
/// the one the last records applied came from, and one more.
pub(super) const READ_SPARE_BUFFERS: usize = 2;

/// Where reading the log back puts the records it reads, in log order.
pub(crate) trait ReadBack {
    /// About how many bytes of log are to come (`Log::span_hint`), before the first record.
    fn expect(&mut self, _bytes: u64) {}
    /// The next record (a commit; pads are not handed over). An error stops the reading.
    fn record(&mut self, rec: Record) -> Result<()>;
    /// What the reader asks of each commit record before it is handed over
    /// (`Log::run_check`): `None`, nothing.
    fn run_check(&self) -> Option<RunCheck> {
        None
    }
    /// Every record has been handed over, and the log read back whole: whatever is held is
    /// to be dealt with now, before an open closes the log's tail (an error fails the open
    /// with nothing written).
    fn done(&mut self) -> Result<()> {
        Ok(())
    }
}

/// Whether the runs of the data file a commit record names hold what it says
/// (docs/design/large-values.md): a record whose runs do not is where reading back ends, as
/// a record that does not check out is. The log is synced only after the data file, so such
/// a record was never durable, unless a later one says the log was synced past it: then it
/// is damage (`read_back`).
pub(crate) type RunCheck = Arc<dyn Fn(&Record) -> bool + Send + Sync>;

/// Records the thread that reads the log back hands to the one that consumes them at a time
/// (`Log::read_beside`), and the batches it may be ahead by: a few thousand records, far
/// less than a segment's, so that the segment buffers are reused as when one thread does
/// both (`READ_SPARE_BUFFERS`).
pub(super) const HANDOVER_BATCH: usize = 1024;

pub(super) const HANDOVER_DEPTH: usize = 4;

/// What the reading thread sends the consuming one.
pub(super) enum Handed {
    Expect(u64),
    Records(Vec<Record>),
}

/// The reading thread's end of `Log::read_beside`: records batched and sent.
pub(super) struct Handover {
    pub(super) to: std::sync::mpsc::SyncSender<Handed>,
    pub(super) batch: Vec<Record>,
}

impl Handover {
    pub(super) fn send(&mut self) -> Result<()> {
        if self.batch.is_empty() {
            return Ok(());
        }
        let batch = std::mem::replace(&mut self.batch, Vec::with_capacity(HANDOVER_BATCH));
        // The consumer is gone only after it failed, and reports its own error.
        self.to
            .send(Handed::Records(batch))
            .map_err(|_| Error::internal("the log's records are no longer wanted"))
    }
}

impl ReadBack for Handover {
    fn expect(&mut self, bytes: u64) {
        let _ = self.to.send(Handed::Expect(bytes));
    }

    fn record(&mut self, rec: Record) -> Result<()> {
        self.batch.push(rec);
        if self.batch.len() == HANDOVER_BATCH {
            self.send()?;
        }
        Ok(())
    }
}

/// Every record, kept.
impl ReadBack for Vec<Record> {
    fn record(&mut self, rec: Record) -> Result<()> {
        self.push(rec);
        Ok(())
    }
}

impl Log {
    /// Reads back every record from position `from` like `open`, writing nothing (for a
    /// read-only handle); returns them and the position after the last.
    #[cfg(test)]
    pub(crate) fn read_records(storage: Arc<dyn Storage>, from: u64) -> Result<(Vec<Record>, u64)> {
        let mut records = Vec::new();
        let end = Log::read_records_into(storage, from, None, None, &mut records)?;
        Ok((records, end))
    }

    /// `read_records`, handing each record to `into` as it is read; a mark of a commit newer
    /// than `marks_after` ends the log, as at a writer's open (`Reopen::tree_txn`).
    ///
    /// With `expect` (a read-only handle alone with the database: no writer is appending),
    /// a log that ends short of it fails with `Error::WouldLoseData`, as a writer's open
    /// does (`Log::shortfall`).
    pub(crate) fn read_records_into(
        storage: Arc<dyn Storage>,
        from: u64,
        marks_after: Option<u64>,
        expect: Option<Expect>,
        into: &mut dyn ReadBack,
    ) -> Result<u64> {
        let log = Log::read_beside(storage, from, false, marks_after, false, None, into)?;
        into.done()?;
        if let Some(expect) = expect {
            let tree_txn = marks_after.unwrap_or(0);
            if let Some(short) = log.shortfall(from, tree_txn, expect, true) {
                return Err(short.refusal());
            }
        }
        Ok(log.end)
    }

    /// A reader of the log in `storage` for a read-only handle that follows a writer in
    /// another process (`Log::follow`); reads nothing yet.
    pub(crate) fn follower(storage: Arc<dyn Storage>) -> Result<Log> {
        Log::at(storage, 0, false)
    }

    /// For a reader that follows a writer in another process: the commit records from
    /// position `from` (where an earlier read ended, or a checkpoint's position) to `to`, a
    /// position the writer published after writing every record before it
    /// (`LockTable::publish_log`). Reads only those bytes (not whole segments, as reading
    /// back at open does), and takes nothing on trust: a record that is not there, or not
    /// whole, is `Error::CorruptedLog`. That happens when the writer reused the log's room
    /// because a newer checkpoint made it free, which the caller checks before it reports
    /// damage (every record's checksum covers its position, so a record of a later cycle in
    /// the same place never passes for the one expected).
    pub(crate) fn follow(&mut self, from: u64, to: u64) -> Result<Vec<Record>> {
        if !from.is_multiple_of(RECORD_ALIGN as u64) {
            return Err(corrupted(from, "position is not a record boundary"));
        }
        // The file has grown since the last look, most likely.
        let len = self.sink.storage.len()?.min(self.sink.extent.total);
        self.sink
            .extent
            .len
            .store(len, std::sync::atomic::Ordering::Release);
        self.read_limit = Some(to);
        let read = self.follow_inner(from, to);
        self.read_limit = None;
        self.drop_read_buffers();
        read
    }

    pub(super) fn follow_inner(&mut self, from: u64, to: u64) -> Result<Vec<Record>> {
        let mut records = Vec::new();
        let mut pos = from;
        while pos < to {
            if pos.is_multiple_of(self.sink.segment_bytes) {
                if !self.segment_valid(pos)? {
                    return Err(corrupted(pos, "published segment is not there"));
                }
                pos += SEGMENT_HEADER_BYTES as u64;
                continue;
            }
            match self.record_at(pos)? {
                Some((rec, ..)) if rec.kind == KIND_PAD => pos = self.after_pad(&rec)?,
                Some((rec, _, size)) => {
                    pos += size;
                    records.push(rec);
                }
                None if self.sink.segment_bytes - pos % self.sink.segment_bytes
                    < RECORD_HEADER_BYTES as u64 =>
                {
                    pos = self.next_segment(pos);
                }
                None => return Err(corrupted(pos, "published record is not there")),
            }
        }
        if pos != to {
            return Err(corrupted(
                pos,
                format!("records run past the published end {to}"),
            ));
        }
        Ok(records)
    }

    /// Reads the bytes of segment `seg` at file offset `at` into `buf`. The file may have
    /// become shorter since this handle measured it: a read-only handle reads while the
    /// writer, in another process, cuts the file after a jump (`Extent::shrink`), and the
    /// slots it cuts hold only positions no longer needed. What is gone reads as zeros, as
    /// bytes never written do: the end of the log. A read that fails short of the file's
    /// current end is damage, as before.
    pub(super) fn read_segment(&self, buf: &mut [u8], at: u64, seg: u64) -> Result<()> {
        match self.sink.storage.read_at(buf, at) {
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                let now = self.sink.storage.len()?;
                let there = now.saturating_sub(at).min(buf.len() as u64) as usize;
                if there == buf.len() {
                    return Err(read_error(e, seg));
                }
                buf.fill(0);
                if there == 0 {
                    return Ok(());
                }
                self.sink
                    .storage
                    .read_at(&mut buf[..there], at)
                    .map_err(|e| read_error(e, seg))
            }
            r => r.map_err(|e| read_error(e, seg)),
        }
    }

    /// A buffer of `len` bytes to read into: a spare one no record holds any more, whatever it
    /// holds, or a new one, zeroed (the flag).
    pub(super) fn read_buffer(&self, len: usize) -> (Vec<u8>, bool) {
        let mut spare = self.read_spare.borrow_mut();
        let free = spare.iter().position(|b| Arc::strong_count(b) == 1);
        match free.map(|i| Arc::try_unwrap(spare.remove(i))) {
            Some(Ok(mut buf)) => {
                buf.resize(len, 0);
                (buf, false)
            }
            _ => {
                #[cfg(test)]
                self.read_fresh.set(self.read_fresh.get() + 1);
                (vec![0u8; len], true)
            }
        }
    }

    /// Empties the read cache and its spares (reading is done).
    pub(super) fn drop_read_buffers(&mut self) {
        *self.read_cache.get_mut() = None;
        self.read_spare.get_mut().clear();
    }

    /// Reads `len` bytes at `position` (within one segment). Reading back goes through the
    /// segment holding `position`, read whole once (`read_cache`): the scan for later records
    /// that vouch for a bad one looks at every 8-byte boundary of a segment, one syscall each
    /// without it. Bytes past the end of the file (not reached yet) read as zeros: never
    /// written.
    pub(super) fn read(&self, position: u64, len: usize) -> Result<Bytes> {
        let seg = position - position % self.sink.segment_bytes;
        let seg_end = seg + self.sink.segment_bytes;
        let mut cache = self.read_cache.borrow_mut();
        let hit = cache
            .as_ref()
            .filter(|(start, b)| {
                *start <= position && position + len as u64 <= start + b.len() as u64
            })
            .cloned();
        let (start, buf) = match hit {
            Some(cached) => cached,
            None => {
                // Reading back: the whole segment. Following a writer: from `position` to the
                // published end (or what was asked, if more), within the segment.
                let (start, end) = match self.read_limit {
                    None => (seg, seg_end),
                    Some(limit) => (position, limit.max(position + len as u64).min(seg_end)),
                };
                let len = (end - start) as usize;
                let (mut buf, zeroed) = self.read_buffer(len);
                let at = self.offset(start);
                let n = self.sink.extent.len().saturating_sub(at).min(end - start) as usize;
                if !zeroed {
                    buf[n..].fill(0);
                }
                if n > 0 {
                    self.read_segment(&mut buf[..n], at, seg)?;
                }
                let buf = Arc::new(buf);
                if let Some((_, old)) = cache.replace((start, buf.clone())) {
                    let mut spare = self.read_spare.borrow_mut();
                    if spare.len() == READ_SPARE_BUFFERS {
                        spare.remove(0);
                    }
                    spare.push(old);
                }
                (start, buf)
            }
        };
        let at = position.saturating_sub(start) as usize;
        match buf.get(at..at + len) {
            Some(_) => Ok(Bytes {
                buf,
                start: at,
                len,
            }),
            None => Err(corrupted(position, "read past the end of a segment")),
        }
    }

    /// Whether the segment starting at `position` was entered in this cycle of its slot.
    pub(super) fn segment_valid(&self, position: u64) -> Result<bool> {
        Ok(segment_header_names(
            &self.read(position, SEGMENT_HEADER_BYTES)?,
            position,
        ))
    }

    /// The record at `position`, if a valid one starts there: (kind, txn, synced, body, size).
    pub(super) fn record_at(&self, position: u64) -> Result<Option<(Record, u64, u64)>> {
        let room = self.sink.segment_bytes - position % self.sink.segment_bytes;
        if room < RECORD_HEADER_BYTES as u64 {
            return Ok(None);
        }
        let h = self.read(position, RECORD_HEADER_BYTES)?;
        let len = get_u32(&h, REC_LEN_AT) as u64;
        let kind = h[REC_KIND_AT];
        let size = aligned(RECORD_HEADER_BYTES as u64 + len);
        // Cheap rejections first (zeros, garbage): the body is read only for a plausible header.
        let known = matches!(kind, KIND_COMMIT | KIND_PAD)
            || (kind == KIND_MARK && self.marks_allowed && len == 0)
            || (kind == KIND_PACKED && self.packed_allowed);
        if !known || h[REC_KIND_AT + 1..REC_TXN_AT].iter().any(|&b| b != 0) || size > room {
            return Ok(None);
        }
        let body = self.read(position + RECORD_HEADER_BYTES as u64, len as usize)?;
        if get_u32(&h, REC_CRC_AT) != record_crc(position, &h, &body) {
            return Ok(None);
        }
        let (kind, body) = match kind {
            KIND_PACKED => (KIND_COMMIT, unpack(&body, position)?),
            _ => (kind, body),
        };
        let record = Record {
            position,
            kind,
            txn: get_u64(&h, REC_TXN_AT),
            body,
        };
        Ok(Some((record, get_u64(&h, REC_SYNCED_AT), size)))
    }

    /// Reads every record from `from` to the end of the log, handing each to `into` in order,
    /// and leaves `end` after the last. The records are handed over before the end is known:
    /// a log whose end turns out to be damage (`beyond`) is an error after them.
    pub(super) fn read_back(&mut self, from: u64, into: &mut dyn ReadBack) -> Result<()> {
        if self.handed_at == Some(from) {
            // Handed over at `from` by a writer that appended nothing past it: there is
            // nothing to read, nor to look for past it (`Reopen::handed_at`).
            self.end_at(from);
            return Ok(());
        }
        into.expect(self.span_hint(from));
        let mut pos = from;
        loop {
            if pos.is_multiple_of(self.sink.segment_bytes) {
                if !self.segment_valid(pos)? {
                    break;
                }
                pos += SEGMENT_HEADER_BYTES as u64;
            }
            match self.record_at(pos)? {
                Some((rec, ..))
                    if rec.kind == KIND_MARK && self.marks_after.is_some_and(|t| rec.txn > t) =>
                {
                    // The log ends here for a tree older than the mark: no bad record, so
                    // nothing after it is asked to vouch for one. What follows is noted for
                    // what it says of released segments (`Log::shortfall`); records after a
                    // mark may have been synced with it, and are dropped by design.
                    self.past_end = self.beyond(pos)?.0;
                    self.ended_at_mark = true;
                    self.end_at(pos);
                    return Ok(());
                }
                Some((rec, _, size)) => {
                    if rec.kind == KIND_PAD {
                        let next = self.after_pad(&rec)?;
                        if rec.txn != 0 {
                            self.jumps.push((self.next_segment(rec.position), next));
                        }
                        pos = next;
                    } else {
                        if let Some(check) = &self.run_check {
                            if !check(&rec) {
                                // Its runs never reached the device: the log ends here
                                // (unless on the same boot as their write: `shortfall`).
                                self.ended_at_run = true;
                                break;
                            }
                        }
                        pos += size;
                        self.read_txn = self.read_txn.max(rec.txn);
                        into.record(rec)?;
                    }
                }
                // A remainder too small for a record: the writer went on to the next segment.
                None if self.sink.segment_bytes - pos % self.sink.segment_bytes
                    < RECORD_HEADER_BYTES as u64 =>
                {
                    pos = self.next_segment(pos);
                }
                None => break,
            }
        }
        // Where the last writer handed the file over, the end is the one it vouched for:
        // nothing past it was written since, so there is nothing to look for there.
        let (beyond, near) = match self.handed_at == Some(pos) {
            true => (Beyond::default(), 0),
            false => self.beyond(pos)?,
        };
        self.past_end = beyond;
        if near > pos && !self.recovering {
            return Err(corrupted(
                pos,
                format!("bad record, but a later record says the log was synced to {near}"),
            ));
        }
        // Appending resumes at the end; a new segment after a partial one starts cleanly.
        self.end_at(pos);
        Ok(())
    }

    /// Reading back ended at `pos`: appending resumes there, with everything before it
    /// written and synced as far as this log is concerned.
    fn end_at(&mut self, pos: u64) {
        self.end = pos;
        self.written = pos;
        self.synced = pos;
    }

    /// About how many bytes of log reading back from `from` will cover, for sizing what the
    /// records go into: up to the end of the last segment in the run of segments entered in
    /// this cycle from `from`'s (their headers alone are read). High by less than a segment
    /// (the last one's unwritten rest); low where the writer jumped to the next cycle.
    pub(super) fn span_hint(&self, from: u64) -> u64 {
        let seg = self.sink.segment_bytes;
        let first = from - from % seg;
        let mut at = first;
        let mut h = [0u8; SEGMENT_HEADER_BYTES];
        while at - first < self.sink.segments * seg {
            let valid = self.sink.storage.read_at(&mut h, self.offset(at)).is_ok()
                && segment_header_names(&h, at);
            if !valid {
                break;
            }
            at += seg;
        }
        at.saturating_sub(from)
    }
}

/// The body a packed commit's (`KIND_PACKED`) packs, read back as a `KIND_COMMIT` record's.
/// The record passed its checksum, so a body that does not unpack to exactly the length it
/// states was written so: `CorruptedLog`, never the log's end.
fn unpack(packed: &[u8], position: u64) -> Result<Bytes> {
    let bad = |reason: String| Error::CorruptedLog { position, reason };
    let (Some(len), Some(block)) = (packed.get(..PACKED_BLOCK_AT), packed.get(PACKED_BLOCK_AT..))
    else {
        return Err(bad("packed commit: no unpacked length".into()));
    };
    let len = get_u32(len, 0) as usize;
    // LZ4 expands a block at most 255 times: a stated length past that is damage, refused
    // before anything is allocated for it.
    if len > block.len().saturating_mul(255) {
        return Err(bad(format!(
            "packed commit: {len} bytes stated for a block of {}",
            block.len()
        )));
    }
    let mut body = vec![0u8; len];
    match lz4_flex::block::decompress_into(block, &mut body) {
        Ok(n) if n == len => Ok(Bytes::from(body)),
        Ok(n) => Err(bad(format!(
            "packed commit: {n} bytes unpacked, {len} stated"
        ))),
        Err(e) => Err(bad(format!("packed commit: {e}"))),
    }
}
