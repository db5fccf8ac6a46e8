//! Opening a log: where its records end (torn record, zeros, a record of an older cycle), and
//! the tail closed in place so that appends resume at the end.

use super::*;

/// How a writer's open reads its log back and closes its tail (`Log::open_into`).
pub(crate) struct Reopen {
    /// The oldest position still needed: the last durable checkpoint's (at most the position
    /// read from).
    pub(crate) keep_from: u64,
    /// The commit the records are replayed onto: a mark of a newer commit ends the log
    /// (`KIND_MARK`).
    pub(crate) tree_txn: u64,
    /// The machine may have restarted since the log was last written (a power loss may have
    /// kept some of its unsynced writes and not others), so the slots past its end may hold
    /// records written after it (`close_tail`).
    pub(crate) restarted: bool,
    /// What reading back must reach.
    pub(crate) expect: Expect,
    /// Give up what cannot be reached instead of failing (`Options::recover`): reading back
    /// ends at the first bad record even where later ones vouch for it, and the slots past
    /// the end are cleared (`Shortfall`).
    pub(crate) recover: bool,
    /// The log end at which the last writer gave the file to this one after a durable
    /// checkpoint, with nothing appended past it (`LockTable::handed_at`): a log read back to
    /// exactly there has nothing past its end to clear.
    pub(crate) handed_at: Option<u64>,
}

impl Log {
    /// Opens the log on `storage` and reads back every record from position `from` (the last
    /// checkpoint's) to the end of the log. Appending continues after the last record; the
    /// records from `keep_from` (the last durable checkpoint's position, at most `from`) are
    /// kept until `release_to` lets them go. Reopened as after a power loss
    /// (`Reopen::restarted`), onto a tree older than any mark.
    #[cfg(test)]
    pub(crate) fn open(
        storage: Arc<dyn Storage>,
        from: u64,
        keep_from: u64,
    ) -> Result<(Log, Vec<Record>)> {
        let mut records = Vec::new();
        let reopen = Reopen {
            keep_from,
            tree_txn: 0,
            restarted: true,
            expect: Expect::default(),
            recover: false,
            handed_at: None,
        };
        let (log, _) = Log::open_into(storage, from, reopen, &mut records)?;
        Ok((log, records))
    }

    /// `open`, handing each record to `into` as it is read (`ReadBack`) instead of returning
    /// them all: a replay that applies them as they come reads a log of any size in two
    /// segments' memory.
    pub(crate) fn open_into(
        storage: Arc<dyn Storage>,
        from: u64,
        reopen: Reopen,
        into: &mut dyn ReadBack,
    ) -> Result<(Log, Option<Shortfall>)> {
        if reopen.keep_from > from {
            return Err(corrupted(
                reopen.keep_from,
                format!("the durable checkpoint's position is after the newest one's, {from}"),
            ));
        }
        Log::open_inner(storage, from, reopen, into)
    }

    /// Reads the log back from `from` as its writer, and closes its tail for appending. A log
    /// that ends short of what it was known to hold (`shortfall`) fails the open with
    /// `Error::WouldLoseData` before anything is written, unless `reopen.recover` gives that
    /// up: then what lies past the end is cleared, and returned.
    pub(super) fn open_inner(
        storage: Arc<dyn Storage>,
        from: u64,
        reopen: Reopen,
        into: &mut dyn ReadBack,
    ) -> Result<(Log, Option<Shortfall>)> {
        let mut log = Log::read_beside(
            storage,
            from,
            true,
            Some(reopen.tree_txn),
            reopen.recover,
            reopen.handed_at,
            into,
        )?;
        into.done()?;
        let short = log.shortfall(from, reopen.tree_txn, reopen.expect, reopen.restarted);
        if let Some(short) = &short {
            if !reopen.recover {
                return Err(short.refusal());
            }
            log.clear_beyond()?;
        }
        log.keep_from = reopen.keep_from;
        let handed = short.is_none() && reopen.handed_at == Some(log.end);
        log.close_tail(reopen.restarted, handed)?;
        Ok((log, short))
    }

    /// The log in `storage` read back from `from` (`Log::at`, `read_back`) on a thread of its
    /// own, the records handed to `into` on this one as they come, in batches: reading,
    /// checking and parsing records (a quarter of a 10M-record crashed open) overlap
    /// replaying them. The reader runs at most `HANDOVER_DEPTH` batches ahead; what it read
    /// when `into` fails is dropped, and its own error comes after every record before the
    /// damage was handed over, as on one thread. A thread that cannot be started leaves the
    /// reading to this one.
    pub(super) fn read_beside(
        storage: Arc<dyn Storage>,
        from: u64,
        mapped: bool,
        marks_after: Option<u64>,
        recovering: bool,
        handed_at: Option<u64>,
        into: &mut dyn ReadBack,
    ) -> Result<Log> {
        let run_check = into.run_check();
        let read = |storage: Arc<dyn Storage>, into: &mut dyn ReadBack| -> Result<Log> {
            let mut log = Log::at(storage, from, mapped)?;
            log.run_check = run_check.clone();
            log.marks_after = marks_after;
            log.recovering = recovering;
            log.handed_at = handed_at;
            let read = log.read_back(from, into);
            log.drop_read_buffers();
            read.map(|()| log)
        };
        std::thread::scope(|s| {
            let (to, handed) = std::sync::mpsc::sync_channel(HANDOVER_DEPTH);
            let reading = storage.clone();
            let spawned = std::thread::Builder::new()
                .name("larch-log-read".into())
                .spawn_scoped(s, move || {
                    let mut hand = Handover {
                        to,
                        batch: Vec::with_capacity(HANDOVER_BATCH),
                    };
                    let log = read(reading, &mut hand)?;
                    hand.send()?;
                    Ok(log)
                });
            let Ok(reader) = spawned else {
                return read(storage, into);
            };
            let consumed = handed.iter().try_for_each(|h| match h {
                Handed::Expect(bytes) => {
                    into.expect(bytes);
                    Ok(())
                }
                Handed::Records(batch) => batch.into_iter().try_for_each(|r| into.record(r)),
            });
            // A reader waiting to hand more over is told they are not wanted.
            drop(handed);
            let read = reader
                .join()
                .unwrap_or_else(|_| Err(Error::internal("the log's reader panicked")));
            consumed?;
            read
        })
    }

    /// The log in `storage`, its header checked, positioned at `from`, nothing read yet;
    /// mapped if `mapped` (a writer's).
    pub(super) fn at(storage: Arc<dyn Storage>, from: u64, mapped: bool) -> Result<Log> {
        let mut h = [0u8; FILE_CRC_AT + 4];
        storage.read_at(&mut h, 0).map_err(|e| read_error(e, 0))?;
        if h[FILE_MAGIC_AT..FILE_MAGIC_AT + 8] != FILE_MAGIC {
            return Err(corrupted(0, "no log file header"));
        }
        if get_u32(&h, FILE_CRC_AT) != crc32c(&h[..FILE_CRC_AT]) {
            return Err(corrupted(0, "log file header checksum mismatch"));
        }
        let version = get_u32(&h, FILE_VERSION_AT);
        if !(FILE_VERSION_NO_JUMPS..=FILE_VERSION).contains(&version) {
            return Err(Error::UnsupportedVersion {
                found: version,
                supported: FILE_VERSION,
            });
        }
        let segment_bytes = get_u64(&h, FILE_SEGMENT_BYTES_AT);
        let segments = get_u64(&h, FILE_SEGMENTS_AT);
        let expected = segments
            .checked_mul(segment_bytes)
            .and_then(|b| b.checked_add(FILE_HEADER_BYTES));
        // The file grows as the log reaches it (`Extent`): any length from the header to the
        // geometry's full length.
        let len = storage.len()?;
        let total = match expected {
            Some(total)
                if segment_bytes >= SEGMENT_BYTES_MIN
                    && segment_bytes.is_multiple_of(RECORD_ALIGN as u64)
                    && segments >= 2
                    && (FILE_HEADER_BYTES..=total).contains(&len) =>
            {
                total
            }
            _ => return Err(corrupted(0, "log geometry does not match the file")),
        };
        if !from.is_multiple_of(RECORD_ALIGN as u64) {
            return Err(corrupted(
                from,
                "checkpoint position is not a record boundary",
            ));
        }
        let sink = Sink {
            map: if mapped {
                LogMap::of(&*storage, total)
            } else {
                None
            },
            extent: Extent::new(total, len, segment_bytes),
            storage,
            segment_bytes,
            segments,
        };
        Ok(Log::with_sink(sink, from, version))
    }

    /// After reading back: if the log ended inside a segment, zeroes the rest of that segment
    /// where the file holds it and syncs, so that no record of the lost tail, intact but never
    /// vouched for, can ever be read back as part of the log, and appending resumes at the
    /// end, in the same segment. The tail is closed in place: a reopen moves the log to no
    /// other slot and claims no space from the file system (a pad to the segment's end grew
    /// the file by a segment a restart, and on a nearly full disk took the space that freeing
    /// some had given back).
    ///
    /// If the machine may have `restarted`, the records of the lost tail may also lie in the
    /// segments after this one: a power loss keeps any subset of the unsynced writes, and
    /// their segment headers name the same positions the log is about to reach again. Read
    /// back after the records appended from now on, they would be commits that the power loss
    /// took away coming back after later ones. So every slot after the end that holds no
    /// record still needed (`reusable`) is zeroed too (`zero_past_end`). After a process
    /// crash nothing was written past the end.
    ///
    /// Syncs in any case: the records read back may be in the page cache only (a process
    /// crash), and the next record appended says the log was synced up to them.
    ///
    /// Where the zeros cannot be written (a full disk where the file's blocks were not all
    /// written yet), the tail is left to the first append (`tail_open`), which pads it as
    /// at any segment's end and fails as a full disk until the file can grow, so that a
    /// database on a full disk still opens and reads.
    ///
    /// A log `handed` over by a writer that went on in another process, read back to the
    /// very end it left (`Reopen::handed_at`), has nothing to clear: that writer appended
    /// nothing past it, and what it found there at its own open it cleared then.
    pub(super) fn close_tail(&mut self, restarted: bool, handed: bool) -> Result<()> {
        if restarted {
            self.zero_past_end()?;
        }
        let seg = self.sink.segment_bytes;
        let rest = seg - self.end % seg;
        // Handed over in the same boot: nothing past the end to clear.
        let clear = restarted || !handed;
        if rest != seg && clear {
            let from = self.offset(self.end);
            let to = (from + rest).min(self.sink.storage.len()?);
            if to > from {
                // Zeros written, not a range zeroed in place (`zero_range`): every block below
                // the file's written length stays written, so that the records stored there
                // through the map later never need the file system to convert a block
                // (`Extent`).
                match crate::storage::write_zeros(&*self.sink.storage, from, to - from)
                    .map_err(Error::from_io)
                {
                    Ok(()) => {}
                    Err(Error::DiskFull) => self.tail_open = true,
                    Err(e) => return Err(e),
                }
            }
        }
        self.sink.storage.sync()?;
        self.synced = self.written;
        Ok(())
    }

    /// Zeroes the slots after the end, in ring order, up to the first one holding records
    /// still needed (`reusable`), where the file reaches them; the end's own slot too when
    /// the end is its first position (a segment whose header was lost may still hold
    /// records).
    pub(super) fn zero_past_end(&self) -> Result<()> {
        let seg = self.sink.segment_bytes;
        let len = self.sink.storage.len()?;
        let first = if self.end.is_multiple_of(seg) { 0 } else { 1 };
        for j in first..self.sink.segments {
            let at = (self.end / seg + j) * seg;
            if !self.reusable(at) {
                break;
            }
            let offset = self.offset(at);
            let n = len.saturating_sub(offset).min(seg);
            if n > 0 {
                self.sink.storage.zero_range(offset, n)?;
            }
        }
        Ok(())
    }

    /// Where the log goes on after the pad record `pad`: the next segment, or the first
    /// position of the next cycle if the pad names a jump there (any other is damage: the pad
    /// passed its checksum, so the writer wrote it).
    pub(super) fn after_pad(&self, pad: &Record) -> Result<u64> {
        let next = self.next_segment(pad.position);
        if pad.txn == 0 {
            return Ok(next);
        }
        let cycle = self.sink.segments * self.sink.segment_bytes;
        let to = (pad.position / cycle + 1) * cycle;
        if !self.jumps_allowed || pad.txn != to || to == next {
            return Err(corrupted(
                pad.position,
                format!("pad record jumps to {}, not to the next cycle", pad.txn),
            ));
        }
        Ok(to)
    }
}
