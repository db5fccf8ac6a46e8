//! What an open may lose: records past the end that say the log was synced further, the lock
//! file's watermark, segments of a later cycle, and the commit a meta page needs reached
//! (docs/design/durability.md, "Damage is never silent").

use super::*;

/// What an open knows the log held, from outside it: reading back must reach it, or the log
/// lost records (`Log::shortfall`).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Expect {
    /// A log position that the lock file says the log was synced past when it was last
    /// written (`LockTable::log_synced`; 0 if it says nothing).
    pub(crate) synced_to: u64,
    /// A commit the records must reach: a newer meta slot that the open could not use names
    /// it (0: none).
    pub(crate) reach_txn: u64,
    /// The open passed over a meta slot it could not use, whose commit it does not know (a
    /// damaged one): a log that ends at a mark cannot prove that slot did not hold the mark's
    /// commit, made durable.
    pub(crate) doubtful: bool,
}

/// What a log read back to its end did not reach, found before the open changes anything
/// (`Log::shortfall`): why the end cannot be the last acknowledged commit, and what lies past
/// it.
#[derive(Debug)]
pub(crate) struct Shortfall {
    /// Where reading back ended, and the last commit it read.
    pub(crate) end: u64,
    pub(crate) last_txn: u64,
    /// Why more was acknowledged than was read.
    pub(crate) reasons: Vec<String>,
    /// The records found past the end (none may be left: a cut file).
    pub(crate) beyond: Beyond,
}

impl Shortfall {
    /// The error an open that may not give this up fails with.
    pub(crate) fn refusal(&self) -> Error {
        Error::WouldLoseData {
            damage: self.reasons.join("; "),
            lost: format!("opening at the log's end would give up {}", self.lost()),
        }
    }

    /// What opening at the end gives up, in words.
    pub(crate) fn lost(&self) -> String {
        let found = match self.beyond.txns {
            Some(_) => format!("; {} lie past it", self.beyond.describe()),
            None => String::new(),
        };
        format!(
            "every commit after commit {} (the log's end at position {}){found}",
            self.last_txn, self.end
        )
    }
}

/// The records of a log file that lie past a position (`Log::beyond`), and what the file's
/// segments say about the log's history there.
#[derive(Debug, Default, Clone)]
pub(crate) struct Beyond {
    /// Intact records found, their bytes, and the lowest and highest commit among them.
    pub(crate) records: u64,
    pub(crate) bytes: u64,
    pub(crate) txns: Option<(u64, u64)>,
    /// The lowest position among them.
    pub(crate) first: Option<u64>,
    /// The highest position one of them says the log was synced to when it was appended.
    pub(crate) vouched: u64,
    /// The highest position a segment in the file says was released by a durable
    /// checkpoint: a slot is written again only once its previous cycle is older than the
    /// last durable checkpoint's position, so a segment at `base` in a later cycle means a
    /// durable checkpoint at or past `base - cycle` (`Log::reusable`, `Log::restart`).
    pub(crate) released: u64,
}

impl Beyond {
    /// Notes `rec`, of `size` bytes, which says the log was synced to `synced`.
    pub(super) fn note(&mut self, rec: &Record, synced: u64, size: u64) {
        self.vouched = self.vouched.max(synced);
        if rec.kind != KIND_PAD {
            self.count(rec, size);
        }
    }

    /// Counts `rec` among the records found.
    pub(super) fn count(&mut self, rec: &Record, size: u64) {
        self.records += 1;
        self.bytes += size;
        self.first = Some(self.first.map_or(rec.position, |f| f.min(rec.position)));
        self.txns = Some(match self.txns {
            Some((lo, hi)) => (lo.min(rec.txn), hi.max(rec.txn)),
            None => (rec.txn, rec.txn),
        });
    }

    /// The records found, in words.
    pub(crate) fn describe(&self) -> String {
        match self.txns {
            Some((lo, hi)) => format!(
                "{} record(s) of commits {lo} to {hi}, {} bytes",
                self.records, self.bytes
            ),
            None => "no intact record".into(),
        }
    }
}

impl Log {
    /// What lies past `end`, where reading back stopped: every intact record after it in its
    /// own segment (looked for at every record boundary, since the record at `end` is bad and
    /// its length cannot be trusted) and in every slot of the file whose segment starts past
    /// `end`'s; and, from every slot's segment header, how far the log was released
    /// (`Beyond::released`). Also returns the highest position a record says was synced among
    /// those of this cycle (`end`'s segment and the slots after it before the ring comes
    /// round): past `end`, the bad record at `end` was durable, and is damage, not a torn
    /// tail. A log that ended cleanly costs a segment header's read per slot.
    pub(super) fn beyond(&self, end: u64) -> Result<(Beyond, u64)> {
        let seg = self.sink.segment_bytes;
        let cycle = self.sink.segments * seg;
        let first = end - end % seg;
        let mut b = Beyond::default();
        let mut near = 0;
        let mut pos = aligned(end + 1);
        // Where the file holds the segment: past it, zeros (never written).
        let held = (self.sink.extent.len().saturating_sub(self.offset(first))).min(seg);
        let bytes = self.read(first, held as usize)?;
        while pos < first + held {
            // Zeros hold no record: on to the first boundary whose header could hold a byte
            // that is not zero (the rest of a segment is mostly zeros, or the file's slack).
            let at = (pos - first) as usize;
            let Some(k) = bytes[at..].iter().position(|&x| x != 0) else {
                break;
            };
            let start = (at + k).saturating_sub(RECORD_HEADER_BYTES - 1) as u64;
            pos = pos.max(first + start / RECORD_ALIGN as u64 * RECORD_ALIGN as u64);
            match self.record_at(pos)? {
                Some((rec, synced, size)) => {
                    b.note(&rec, synced, size);
                    near = near.max(synced);
                    if rec.kind == KIND_PAD {
                        break;
                    }
                    pos += size;
                }
                None => pos += RECORD_ALIGN as u64,
            }
        }
        for base in self.segment_bases()? {
            if base >= cycle {
                b.released = b.released.max(base - cycle);
            }
            if base <= first {
                continue;
            }
            let mut pos = base + SEGMENT_HEADER_BYTES as u64;
            while let Some((rec, synced, size)) = self.record_at(pos)? {
                b.note(&rec, synced, size);
                if base < first + cycle {
                    near = near.max(synced);
                }
                if rec.kind == KIND_PAD {
                    break;
                }
                pos += size;
            }
        }
        Ok((b, near))
    }

    /// Why reading back to `self.end` from the checkpoint's position `from` stopped short of
    /// what the log was known to hold (`Reopen`), if it did: a record past the end says the
    /// log was synced past it, the lock file does, a segment says a durable checkpoint newer
    /// than `from` released the log's room, a newer meta page names a later commit, or the
    /// end is a record whose runs do not check out while the machine has not `restarted`
    /// since the log was written: a run is written before its record is appended, so on the
    /// same boot (the page cache kept both) a run that does not hold what its record says is
    /// damage, not a write that never reached the device.
    pub(super) fn shortfall(
        &self,
        from: u64,
        tree_txn: u64,
        expect: Expect,
        restarted: bool,
    ) -> Option<Shortfall> {
        let end = self.end;
        let last_txn = self.read_txn.max(tree_txn);
        let b = &self.past_end;
        let mut reasons = Vec::new();
        // Synced bytes past the end are lost bytes, unless the end is a mark: the records
        // after a mark were made on pages a power loss may take, and a sync that covered them
        // (a group commit's, gathering them) promised none of them; a commit that had to be
        // durable made the mark's pages durable first, and so the tree would not be older.
        let mark = self.ended_at_mark;
        if mark && expect.doubtful {
            reasons.push(format!(
                "the log ends at position {end} at a mark of a commit newer than the meta page \
                 opened from, and the other meta slot, which may have held that commit made \
                 durable, is damaged"
            ));
        }
        if b.vouched > end && !mark {
            reasons.push(format!(
                "the log's records end at position {end}, and a record past it says the log \
                 was synced to {}",
                b.vouched
            ));
        }
        if expect.synced_to > end && !mark {
            reasons.push(format!(
                "the log's records end at position {end}, and the lock file says the log was \
                 synced to {} (the log was cut short, or its last records are damaged)",
                expect.synced_to
            ));
        }
        if self.ended_at_run && !restarted {
            reasons.push(format!(
                "the record at position {end} names a run of the data file that does not hold \
                 what it says, and the machine has not restarted since it was written (the run \
                 is damaged)"
            ));
        }
        if b.released > from {
            reasons.push(format!(
                "the log's segments show a durable checkpoint at or past position {}, newer \
                 than the meta page opened from (position {from}): a newer meta page was lost",
                b.released
            ));
        }
        if expect.reach_txn > last_txn {
            reasons.push(format!(
                "a newer meta page names commit {}, and the log reaches only commit {last_txn}",
                expect.reach_txn
            ));
        }
        (!reasons.is_empty()).then(|| Shortfall {
            end,
            last_txn,
            reasons,
            beyond: b.clone(),
        })
    }

    /// Every intact record in the file's segments (each slot's segment read from its header
    /// to its first bad record), for a log that no commit names: those of commits after
    /// `after_txn` are counted, and every record's claim of how far the log was synced is
    /// noted. Records of commits newer than `after_txn` at a position the log was synced past
    /// were durable: commits the database acknowledged and does not hold (`engine::open`).
    /// Reads every segment the file holds.
    pub(crate) fn survey(storage: Arc<dyn Storage>, after_txn: u64) -> Result<Beyond> {
        let log = Log::at(storage, 0, false)?;
        let mut b = Beyond::default();
        for base in log.segment_bases()? {
            let mut pos = base + SEGMENT_HEADER_BYTES as u64;
            while let Some((rec, synced, size)) = log.record_at(pos)? {
                b.vouched = b.vouched.max(synced);
                if rec.kind == KIND_PAD {
                    break;
                }
                if rec.txn > after_txn {
                    b.count(&rec, size);
                }
                pos += size;
            }
        }
        Ok(b)
    }

    /// For an open that gives up what lies past the end (`Reopen::recover`): zeroes every
    /// slot whose segment starts past the end's, so that nothing there is read back later or
    /// vouches for what was given up (the rest of the end's own segment is closed by
    /// `close_tail`), and syncs.
    pub(super) fn clear_beyond(&self) -> Result<()> {
        let seg = self.sink.segment_bytes;
        let first = self.end - self.end % seg;
        let file_len = self.sink.storage.len()?;
        for base in self.segment_bases()? {
            if base > first {
                let at = self.offset(base);
                self.sink.storage.zero_range(at, seg.min(file_len - at))?;
            }
        }
        self.sink.storage.sync()?;
        Ok(())
    }

    /// The first position of each segment the file's slots hold, in slot order: every slot
    /// whose header is intact and names a position of that slot (a slot never written, or
    /// past the file's end, holds none).
    pub(super) fn segment_bases(&self) -> Result<Vec<u64>> {
        let seg = self.sink.segment_bytes;
        let file_len = self.sink.extent.len();
        let mut bases = Vec::new();
        let mut h = [0u8; SEGMENT_HEADER_BYTES];
        for slot in 0..self.sink.segments {
            let at = FILE_HEADER_BYTES + slot * seg;
            if at + SEGMENT_HEADER_BYTES as u64 > file_len
                || !read_header(&*self.sink.storage, &mut h, at)?
            {
                break;
            }
            let base = get_u64(&h, SEG_BASE_AT);
            if segment_header_names(&h, base) && base.is_multiple_of(seg) && self.offset(base) == at
            {
                bases.push(base);
            }
        }
        Ok(bases)
    }
}
