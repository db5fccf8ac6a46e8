//! The log's unit tests.

use super::*;
use crate::storage::{CrashMode, FaultKind, FaultStorage};
use rand::{Rng, SeedableRng};

const SEG: u64 = SEGMENT_BYTES_MIN;

fn body(i: u64, len: usize) -> Vec<u8> {
    (0..len).map(|j| (i as usize * 31 + j) as u8).collect()
}

fn storage() -> (FaultStorage, Arc<dyn Storage>) {
    let s = FaultStorage::new();
    let a: Arc<dyn Storage> = Arc::new(s.clone());
    (s, a)
}

fn reopen(contents: Vec<u8>, from: u64) -> Result<(Log, Vec<Record>)> {
    let s = FaultStorage::new();
    s.set_contents(contents);
    Log::open(Arc::new(s), from, from)
}

/// Reopens a copy of `s` from `from` and checks that it reads back the records of `all`
/// from there on.
fn assert_reads_back(s: &FaultStorage, all: &[Record], from: u64, round: usize) {
    let (_, back) = reopen(s.contents(), from).unwrap();
    let expected: Vec<Record> = all.iter().filter(|r| r.position >= from).cloned().collect();
    assert_eq!(back, expected, "round {round}, from {from}");
}

/// Appends `n` commit records of random sizes; returns them as they must read back.
fn append_some(log: &mut Log, rng: &mut impl Rng, txn: &mut u64, n: usize) -> Vec<Record> {
    let mut out = Vec::new();
    for _ in 0..n {
        *txn += 1;
        let len = if rng.gen_bool(0.1) {
            rng.gen_range(2000..20_000)
        } else {
            rng.gen_range(0..300)
        };
        let b = body(*txn, len);
        let before = log.end();
        let end = log.append(KIND_COMMIT, *txn, &b).expect("room");
        let size = aligned((RECORD_HEADER_BYTES + len) as u64);
        out.push(Record {
            position: end - size,
            kind: KIND_COMMIT,
            txn: *txn,
            body: b.into(),
        });
        assert!(end - size >= before);
    }
    out
}

/// Records come back in order from any checkpoint position, across segment boundaries and
/// wrap-arounds of the file, and appending goes on after a reopen.
#[test]
fn records_come_back_in_order_across_segments_and_wraps() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    let (s, a) = storage();
    let mut log = Log::create(a, SEG, 3, 0).unwrap();
    let mut txn = 0;
    let mut all: Vec<Record> = Vec::new();
    let mut checkpoint = 0u64;
    for round in 0..60 {
        all.extend(append_some(&mut log, &mut rng, &mut txn, 25));
        log.sync().unwrap();
        assert_reads_back(&s, &all, checkpoint, round);
        // A checkpoint covers everything but the last few records.
        checkpoint = all[all.len().saturating_sub(5)].position;
        log.release_to(checkpoint);
    }
    assert!(
        log.end() > 4 * 3 * SEG,
        "the log wrapped around several times"
    );
    // Reopened, the log appends after its end and reads back the old and the new.
    let (mut log, back) = reopen(s.contents(), checkpoint).unwrap();
    assert_eq!(back.len(), 5);
    let more = append_some(&mut log, &mut rng, &mut txn, 3);
    log.sync().unwrap();
    assert!(more[0].position > back.last().unwrap().position);
}

/// Reading back hands each record over as it is read: a consumer that lets go of them
/// gets every record, in order, from two segment buffers reused (`read_spare`), where one
/// that keeps them all takes a buffer per segment; the bytes announced first cover the
/// records, by less than a segment more.
#[test]
fn records_handed_over_as_read_reuse_the_segment_buffers() {
    struct Each {
        seen: Vec<Record>,
        expected: u64,
    }
    impl ReadBack for Each {
        fn expect(&mut self, bytes: u64) {
            self.expected = bytes;
        }
        fn record(&mut self, rec: Record) -> Result<()> {
            // A copy: the segment buffer is let go.
            self.seen.push(Record {
                body: rec.body.to_vec().into(),
                ..rec
            });
            Ok(())
        }
    }
    let mut rng = rand::rngs::StdRng::seed_from_u64(9);
    let (s, a) = storage();
    let mut log = Log::create(a, SEG, 32, 0).unwrap();
    let mut txn = 0;
    let all = append_some(&mut log, &mut rng, &mut txn, 600);
    log.sync().unwrap();
    let segments = log.end().div_ceil(SEG) as usize;
    assert!(segments >= 8, "{segments} segments");
    let from = all[10].position;
    let read = |into: &mut dyn ReadBack| {
        let c = FaultStorage::new();
        c.set_contents(s.contents());
        let mut log = Log::at(Arc::new(c), from, false).unwrap();
        log.read_back(from, into).unwrap();
        (log.read_fresh.get(), log.end())
    };
    let mut each = Each {
        seen: Vec::new(),
        expected: 0,
    };
    let (fresh, end) = read(&mut each);
    assert_eq!(each.seen, all[10..]);
    assert!(fresh <= READ_SPARE_BUFFERS + 1, "{fresh} buffers");
    assert!(
        each.expected >= end - from && each.expected < end - from + SEG,
        "{} expected, {} read",
        each.expected,
        end - from
    );
    let mut kept = Vec::new();
    let (fresh, _) = read(&mut kept);
    assert_eq!(kept, all[10..]);
    assert!(
        fresh >= segments - 1,
        "{fresh} buffers for {segments} segments"
    );
}

/// Reading back runs on a thread of its own (`Log::read_beside`): a consumer that fails
/// stops it, its own error is the one returned, and an open whose consumer fails, while
/// records come or once all are read (`ReadBack::done`), closes no tail: nothing is
/// written to the log.
#[test]
fn a_consumer_that_fails_stops_the_reading_and_the_open_writes_nothing() {
    struct FailAt {
        seen: usize,
        at: Option<usize>,
    }
    impl ReadBack for FailAt {
        fn record(&mut self, _rec: Record) -> Result<()> {
            if Some(self.seen) == self.at {
                return Err(Error::internal("consumer failed"));
            }
            self.seen += 1;
            Ok(())
        }
        fn done(&mut self) -> Result<()> {
            match self.at {
                None => Err(Error::internal("consumer failed at the end")),
                Some(_) => Ok(()),
            }
        }
    }
    let (s, a) = storage();
    let mut log = Log::create(a, SEG, 64, 0).unwrap();
    // More records than the reader may run ahead by, over several segments, the last
    // one partly written (an open closes it).
    let mut all = Vec::new();
    for txn in 1..=(3 * HANDOVER_BATCH * HANDOVER_DEPTH) as u64 {
        let b = body(txn, txn as usize % 90);
        let end = log.append(KIND_COMMIT, txn, &b).unwrap();
        all.push(Record {
            position: end - aligned((RECORD_HEADER_BYTES + b.len()) as u64),
            kind: KIND_COMMIT,
            txn,
            body: b.into(),
        });
    }
    assert!(log.end() > 8 * SEG, "{} bytes", log.end());
    log.sync().unwrap();
    assert!(
        !log.end().is_multiple_of(SEG),
        "the tail is inside a segment"
    );
    let contents = s.contents();
    let open = |at: Option<usize>| {
        let c = FaultStorage::new();
        c.set_contents(contents.clone());
        let mut fail = FailAt { seen: 0, at };
        let reopen = Reopen {
            keep_from: 0,
            tree_txn: 0,
            restarted: true,
            expect: Expect::default(),
            recover: false,
            handed_at: None,
        };
        let opened = Log::open_into(Arc::new(c.clone()), 0, reopen, &mut fail).map(|_| ());
        (opened, fail.seen, c.contents() == contents)
    };
    for at in [0, 1, HANDOVER_BATCH, all.len() / 2, all.len() - 1] {
        let (opened, seen, unchanged) = open(Some(at));
        match opened {
            Err(Error::Internal(m)) if m.contains("consumer failed") => {}
            other => panic!("failing at record {at}: {other:?}"),
        }
        assert_eq!(seen, at);
        assert!(
            unchanged,
            "failing at record {at}, the open wrote to the log"
        );
    }
    let (opened, seen, unchanged) = open(None);
    assert!(
        matches!(&opened, Err(Error::Internal(m)) if m.contains("at the end")),
        "{opened:?}"
    );
    assert_eq!(seen, all.len());
    assert!(unchanged, "failing at the end, the open wrote to the log");
    // The same open with a consumer that takes everything closes the tail.
    let c = FaultStorage::new();
    c.set_contents(contents.clone());
    let (log, back) = Log::open(Arc::new(c.clone()), 0, 0).unwrap();
    assert_eq!(back, all);
    // Closed in place: the records stay as they were, and the rest of their segment is
    // zeros.
    let end = log.offset(log.end()) as usize;
    let after = c.contents();
    assert_eq!(after[..end], contents[..end]);
    assert!(after[end..end + 4096].iter().all(|&b| b == 0));
}

/// A follower reads exactly the records between two published ends, across segments and
/// wraps, reading the file as it grows; a record that is no longer there (the room reused
/// by a later cycle) or damaged is an error, never skipped or read as another.
#[test]
fn a_follower_reads_the_records_between_published_ends() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    let (s, a) = storage();
    let mut log = Log::create(a.clone(), SEG, 4, 0).unwrap();
    let mut follower = Log::follower(a.clone()).unwrap();
    let (mut txn, mut from) = (0, 0);
    for round in 0..40 {
        let n = rng.gen_range(1..20);
        let batch = append_some(&mut log, &mut rng, &mut txn, n);
        log.write().unwrap();
        let to = log.end();
        let got = follower.follow(from, to).unwrap();
        assert_eq!(got, batch, "round {round}");
        from = to;
        log.release_to(batch[0].position);
    }
    assert!(log.end() > 4 * SEG, "the log wrapped around");
    assert!(follower.follow(from, from).unwrap().is_empty());
    // An end past what was written: the records are not there.
    assert!(matches!(
        follower.follow(from, from + 4096),
        Err(Error::CorruptedLog { .. })
    ));
    // A flipped byte in the last batch's first record.
    let batch = append_some(&mut log, &mut rng, &mut txn, 3);
    log.write().unwrap();
    let at = file_offset(SEG, 4, batch[0].position) as usize + RECORD_HEADER_BYTES;
    let mut c = s.contents();
    c[at] ^= 1;
    s.set_contents(c);
    let mut fresh = Log::follower(a).unwrap();
    assert!(matches!(
        fresh.follow(from, log.end()),
        Err(Error::CorruptedLog { .. })
    ));
}

/// A log whose ring is smaller than its geometry (`plan`) starts again at its first slot
/// when that is free, naming the jump in the pad that ends the segment: the file stays
/// at the ring's size (and shrinks back after the ring was larger), records read back in
/// order across jumps, the kept bytes leave out the positions jumped over, and damage
/// that records after a jump vouch for is corruption.
#[test]
fn the_log_jumps_back_to_its_first_slot_and_the_file_follows_the_ring() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let (s, a) = storage();
    let segments = 8;
    let cycle = segments * SEG;
    let mut log = Log::create(a, SEG, segments, 0).unwrap();
    log.plan(0, SEG / 2, false, 0);
    assert_eq!((log.ring, log.checkpoint_bytes), (3, SEG / 2));
    let slots_in_file =
        |s: &FaultStorage| (s.contents().len() as u64 - FILE_HEADER_BYTES).div_ceil(SEG);
    let mut txn = 0;
    let mut all: Vec<Record> = Vec::new();
    let mut checkpoint = 0u64;
    let mut largest = 0;
    for round in 0..120 {
        // Rounds 40-59: the database is large, and the ring is the whole geometry.
        let file_bytes = if (40..60).contains(&round) {
            u64::MAX / 64
        } else {
            0
        };
        log.plan(file_bytes, SEG / 2, false, 0);
        all.extend(append_some(&mut log, &mut rng, &mut txn, 10));
        log.sync().unwrap();
        assert_reads_back(&s, &all, checkpoint, round);
        assert!(log.kept_bytes() <= log.end() - checkpoint);
        assert!(log.kept_bytes() < segments * SEG, "round {round}");
        checkpoint = all[all.len().saturating_sub(3)].position;
        log.release_to(checkpoint);
        largest = largest.max(slots_in_file(&s));
        if round == 39 {
            assert!(
                largest <= 4,
                "a ring of 3 slots used {largest} slots of the file"
            );
        }
    }
    assert!(
        log.end() > 4 * cycle,
        "the log jumped several times: {}",
        log.end()
    );
    assert!(largest > 4, "the large ring used more slots: {largest}");
    assert!(
        slots_in_file(&s) <= 4,
        "the file shrank back: {}",
        slots_in_file(&s)
    );

    // A damaged record before a jump, with a record after the jump that says it was
    // synced: corruption, not the end of the log.
    let jumped = all
        .windows(2)
        .rposition(|w| w[1].position / cycle > w[0].position / cycle)
        .expect("a jump between two records");
    let before = &all[jumped];
    assert!(
        before.position % cycle < (segments - 1) * SEG,
        "the last cycle change is a jump, not the log going round all its slots"
    );
    let mut bad = s.contents();
    bad[log.offset(before.position + 9) as usize] ^= 1;
    let from = all[jumped.saturating_sub(2)].position;
    match reopen(bad, from) {
        Err(Error::CorruptedLog { position, .. }) => assert_eq!(position, before.position),
        other => panic!("damage before a jump: {:?}", other.map(|(_, b)| b.len())),
    }
}

/// `left_bytes`, which paces the writer, is what can be appended before the log is full:
/// filling the log with 1 KB records after each estimate appends that much, less at most
/// a record and a segment header per segment, through rings that grow and shrink and
/// checkpoints released at random points (the ring's room less the bytes kept, the first
/// estimate, is wrong both ways here: this test fails on it).
#[test]
fn left_bytes_is_what_can_be_appended_before_the_log_is_full() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    let (_s, a) = storage();
    let segments = 8;
    let mut log = Log::create(a, SEG, segments, 0).unwrap();
    let b = body(1, 1000);
    let size = aligned((RECORD_HEADER_BYTES + b.len()) as u64);
    let slack = segments * (size + SEGMENT_HEADER_BYTES as u64 + RECORD_HEADER_BYTES as u64);
    let mut txn = 0;
    let mut positions = Vec::new();
    for round in 0..60 {
        let file_bytes = if rng.gen_bool(0.3) { u64::MAX / 64 } else { 0 };
        log.plan(file_bytes, SEG / 2, false, 0);
        let left = log.left_bytes();
        let capped = left >= log.room_bytes();
        let mut appended = 0;
        loop {
            txn += 1;
            match log.append(KIND_COMMIT, txn, &b) {
                Ok(end) => {
                    appended += size;
                    positions.push(end);
                    // The cached figure is the walked one, or, where the walk stopped at
                    // the ring's room, never less than what the ring leaves.
                    let (cached, walked) = (log.left_bytes(), log.walk_left(SEG));
                    assert!(
                        cached == walked
                            || (walked >= log.room_bytes()
                                && cached + log.kept_bytes() >= log.room_bytes()),
                        "round {round}: {cached} cached, {walked} walked"
                    );
                }
                Err(NoRoom::Full) => break,
                Err(e) => panic!("round {round}: {e:?}"),
            }
            if capped && appended > left {
                break;
            }
        }
        assert!(
            appended + slack >= left,
            "round {round}: {left} said left, {appended} appended"
        );
        if !capped {
            assert!(
                appended <= left + size,
                "round {round}: {left} said left, {appended} appended"
            );
        }
        log.write().unwrap();
        // A checkpoint covers a random share of what is kept.
        assert_eq!(log.left_bytes(), log.walk_left(SEG));
        let keep = positions.len() - rng.gen_range(1..=positions.len().min(200));
        log.release_to(positions[keep]);
        assert_eq!(log.left_bytes(), log.walk_left(SEG));
        positions.drain(..keep);
    }
}

/// On a real file (with a map), the grower writes the file ahead of the records, so that
/// appends find their pages written; every record still reads back, the bytes ahead read
/// as the end of the log, and the file shrinks back when the log jumps.
#[test]
fn a_log_on_a_file_grows_ahead_of_its_records() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log");
    let file = crate::storage::FileStorage::open(&path, false, true).unwrap();
    let a: Arc<dyn Storage> = Arc::new(file);
    let segments = 40;
    let mut log = Log::create(a.clone(), SEG, segments, 0).unwrap();
    let owner = Arc::new(crate::engine::background::Background::default());
    log.set_background(owner, 0);
    assert!(log.sink.map.is_some(), "a file offers a map");
    log.plan(0, SEG, false, 0);
    let mut rng = rand::rngs::StdRng::seed_from_u64(3);
    let (mut txn, mut all) = (0, Vec::new());
    let mut ahead = false;
    for round in 0..60 {
        all.extend(append_some(&mut log, &mut rng, &mut txn, 10));
        log.write().unwrap();
        let need = log.offset(log.end());
        assert!(
            log.sink.extent.len() >= need,
            "round {round}: records past the extent"
        );
        // The grower runs on its own thread: give it a moment to get ahead.
        for _ in 0..200 {
            if log.sink.extent.len()
                >= need + log.sink.extent.chunk.min(log.sink.extent.total - need)
            {
                ahead = true;
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        // Bytes are written before the length that claims them is published.
        let extent = log.sink.extent.len();
        assert!(
            a.len().unwrap() >= extent,
            "round {round}: file shorter than its extent"
        );
    }
    assert!(ahead, "the grower wrote the file ahead of the records");
    assert!(log.grower.is_some());
    log.sync().unwrap();
    let back = Log::read_records(a.clone(), 0).unwrap();
    assert_eq!(
        back.0, all,
        "every record reads back; the zeros ahead are the end"
    );
    // Everything is checkpointed: the log restarts and the file is cut to its header,
    // whatever the grower was asked for before.
    log.release_to(log.end());
    assert!(log.restart().is_some());
    log.cut();
    drop(log);
    assert_eq!(
        a.len().unwrap(),
        FILE_HEADER_BYTES,
        "the grower did not grow it again"
    );
}

/// The `Storage` methods a test wrapper around a `FaultStorage` (`self.inner`) does not
/// change: sync, length and boot id go to the inner storage.
macro_rules! storage_rest_to_inner {
    () => {
        fn sync(&self) -> std::io::Result<()> {
            self.inner.sync()
        }
        fn len(&self) -> std::io::Result<u64> {
            self.inner.len()
        }
        fn set_len(&self, len: u64) -> std::io::Result<()> {
            self.inner.set_len(len)
        }
        fn boot_id(&self) -> Option<[u8; 16]> {
            self.inner.boot_id()
        }
    };
}

/// A storage that cuts its file to `cut_to` just before the first read at or past
/// `cut_to`, as a writer in another process cuts the log after a jump while a read-only
/// handle reads it back.
struct CutWhileReading {
    inner: FaultStorage,
    cut_to: u64,
    cut: std::sync::atomic::AtomicBool,
}

impl Storage for CutWhileReading {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        if offset >= self.cut_to && !self.cut.swap(true, std::sync::atomic::Ordering::SeqCst) {
            self.inner.set_len(self.cut_to)?;
        }
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        self.inner.write_at(buf, offset)
    }
    storage_rest_to_inner!();
}

/// A read-only handle reading the log back while the file is cut under it reads what was
/// cut as the end of the log, not as damage (mutation-checked: without `read_segment`'s
/// second look at the file's length it is `CorruptedLog`), as it reads a file that was
/// that short when it opened it.
#[test]
fn a_log_cut_while_it_is_read_back_ends_where_it_was_cut() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(13);
    let (s, a) = storage();
    let mut log = Log::create(a, SEG, 4, 0).unwrap();
    let mut txn = 0;
    let mut all = Vec::new();
    while log.end() < 2 * SEG + SEG / 2 {
        all.extend(append_some(&mut log, &mut rng, &mut txn, 10));
    }
    log.sync().unwrap();
    drop(log);
    let cut_to = FILE_HEADER_BYTES + SEG;
    let inner = FaultStorage::new();
    inner.set_contents(s.contents());
    let cutting = CutWhileReading {
        inner,
        cut_to,
        cut: Default::default(),
    };
    let back = Log::read_records(Arc::new(cutting), 0).unwrap();
    let first: Vec<Record> = all.iter().filter(|r| r.position < SEG).cloned().collect();
    assert!(!first.is_empty() && first.len() < all.len());
    assert_eq!(back.0, first, "the records before the cut, then the end");
    // Cut before the handle measured it, the file is short of nothing it expects.
    let mut short = s.contents();
    short.truncate(cut_to as usize);
    assert_eq!(reopen(short, 0).unwrap().1, first);
}

/// A log of the version before jumps never jumps (an older build would read a jump as
/// the end of the log), and still reads back.
#[test]
fn a_version_1_log_goes_round_all_its_slots() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(12);
    let (s, a) = storage();
    let segments = 6;
    drop(Log::create(a, SEG, segments, 0).unwrap());
    let mut header = s.contents();
    put_u32(&mut header, FILE_VERSION_AT, FILE_VERSION_NO_JUMPS);
    let crc = crc32c(&header[..FILE_CRC_AT]);
    put_u32(&mut header, FILE_CRC_AT, crc);
    s.set_contents(header);
    let (mut log, back) = Log::open(Arc::new(s.clone()), 0, 0).unwrap();
    assert!(back.is_empty() && !log.jumps_allowed);
    log.plan(0, SEG / 2, false, 0);
    let mut txn = 0;
    let mut all = Vec::new();
    for _ in 0..40 {
        all.extend(append_some(&mut log, &mut rng, &mut txn, 10));
        log.sync().unwrap();
        let checkpoint = all[all.len() - 3].position;
        log.release_to(checkpoint);
    }
    assert!(log.end() > segments * SEG, "went round");
    assert!(log.jumps.is_empty());
    assert!(all.windows(2).all(|w| w[1].position - w[0].position < SEG));
    assert_eq!(
        s.contents().len() as u64,
        FILE_HEADER_BYTES + segments * SEG
    );
}

/// The file grows with the log, a chunk at a time, instead of being written whole when
/// the log is created; whatever length it has past the last record, from the header on,
/// reads back the same records; a full disk while growing fails the write.
#[test]
fn the_file_grows_as_the_log_reaches_it() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let (s, a) = storage();
    let mut log = Log::create(a, SEG, 8, 0).unwrap();
    let total = FILE_HEADER_BYTES + 8 * SEG;
    assert_eq!(s.contents().len() as u64, FILE_HEADER_BYTES);
    assert_eq!(s.durable_contents().len() as u64, FILE_HEADER_BYTES);
    let (_, back) = reopen(s.contents(), 0).unwrap();
    assert!(back.is_empty(), "a new log reads back empty");
    let mut txn = 0;
    let mut all = Vec::new();
    let mut lens = Vec::new();
    while log.end() < 5 * SEG {
        all.extend(append_some(&mut log, &mut rng, &mut txn, 3));
        log.sync().unwrap();
        let len = s.contents().len() as u64;
        let end = FILE_HEADER_BYTES + log.end();
        assert!(
            len >= end && len < end + SEG,
            "file {len} bytes for a log ending at byte {end}"
        );
        assert_eq!(len % SEG, 0, "grown a chunk at a time");
        lens.push(len);
    }
    assert!(lens.windows(2).all(|w| w[0] <= w[1]) && lens[0] < lens[lens.len() - 1]);
    assert!(*lens.last().unwrap() < total);
    // Cut anywhere past the last record: the same records.
    let full = s.contents();
    let records_end = (FILE_HEADER_BYTES + log.end()) as usize;
    for cut in (records_end..=full.len()).step_by(4096).chain([full.len()]) {
        let (_, back) = reopen(full[..cut].to_vec(), 0).unwrap();
        assert_eq!(back, all, "cut at {cut}");
    }
    // Reopened, appending grows the file on from where it was.
    let s2 = FaultStorage::new();
    s2.set_contents(full);
    let (mut log, _) = Log::open(Arc::new(s2.clone()), 0, 0).unwrap();
    let grown_from = s2.contents().len() as u64;
    while log.end() < 7 * SEG {
        all.extend(append_some(&mut log, &mut rng, &mut txn, 3));
    }
    log.sync().unwrap();
    let len = s2.contents().len() as u64;
    assert!(
        len > grown_from && len.is_multiple_of(SEG) && len < total,
        "{len}"
    );
    let (_, back) = reopen(s2.durable_contents(), 0).unwrap();
    assert_eq!(back, all, "after growing on from a reopen");
    // A full disk while growing: the append that needs the room is refused with nothing
    // appended, and the log goes on once there is room.
    let (s, a) = storage();
    let mut log = Log::create(a, SEG, 8, 0).unwrap();
    s.set_space_limit(Some(FILE_HEADER_BYTES + 2 * SEG));
    let mut kept = Vec::new();
    let refused = loop {
        txn += 1;
        let end = log.end();
        match log.append(KIND_COMMIT, txn, &body(txn, 500)) {
            Ok(_) => kept.push(txn),
            Err(NoRoom::Grow(e)) => {
                assert_eq!(log.end(), end, "nothing appended");
                break e;
            }
            Err(e) => panic!("{e:?}"),
        }
    };
    assert!(matches!(refused, Error::DiskFull), "{refused:?}");
    log.sync().unwrap();
    s.set_space_limit(None);
    log.append(KIND_COMMIT, txn, &body(txn, 500)).unwrap();
    kept.push(txn);
    log.sync().unwrap();
    let (_, back) = reopen(s.durable_contents(), 0).unwrap();
    assert_eq!(back.iter().map(|r| r.txn).collect::<Vec<_>>(), kept);
}

/// A log read back to an end inside a segment, on a disk with no room for the rest of
/// that segment: it opens claiming no space (a database on a full disk still opens and
/// reads), appends go on at the end within the file's length, one that needs the file to
/// grow is refused as a full disk with nothing appended and nothing kept of the space it
/// tried, and once there is room the log goes on where it was, in the same segment.
#[test]
fn a_tail_on_a_full_disk_opens_in_place_and_goes_on_once_there_is_room() {
    const BIG: u64 = 4 << 20;
    let (s, a) = storage();
    let mut log = Log::create(a, BIG, 4, 0).unwrap();
    let mut txn = 0;
    let mut all = Vec::new();
    while log.end() < BIG / 3 {
        txn += 1;
        let body = body(txn, 3000);
        let position = log.end();
        log.append(KIND_COMMIT, txn, &body).unwrap();
        all.push(txn);
        assert!(position < BIG);
    }
    log.sync().unwrap();
    let contents = s.durable_contents();
    assert!(
        (contents.len() as u64) < FILE_HEADER_BYTES + BIG,
        "the segment is not all there"
    );
    let full = FaultStorage::new();
    full.set_contents(contents.clone());
    full.set_space_limit(Some(contents.len() as u64));
    let (mut log, back) = Log::open(Arc::new(full.clone()), 0, 0).unwrap();
    assert_eq!(back.iter().map(|r| r.txn).collect::<Vec<_>>(), all);
    assert_eq!(
        full.len().unwrap(),
        contents.len() as u64,
        "the open claimed no space"
    );
    let reopened_at = log.end();
    assert!(
        !reopened_at.is_multiple_of(BIG),
        "the tail stays inside the segment"
    );
    let refused_at = loop {
        txn += 1;
        let end = log.end();
        match log.append(KIND_COMMIT, txn, &body(txn, 3000)) {
            Ok(_) => all.push(txn),
            Err(NoRoom::Grow(Error::DiskFull)) => break end,
            Err(other) => panic!("expected a full disk, got {other:?}"),
        }
    };
    assert_eq!(log.end(), refused_at, "nothing appended");
    assert_eq!(
        full.len().unwrap(),
        contents.len() as u64,
        "nothing kept of the space tried"
    );
    full.set_space_limit(None);
    log.append(KIND_COMMIT, txn, &body(txn, 3000)).unwrap();
    all.push(txn);
    log.sync().unwrap();
    let (_, back) = reopen(full.durable_contents(), 0).unwrap();
    assert_eq!(back.iter().map(|r| r.txn).collect::<Vec<_>>(), all);
    let first_after = back.iter().find(|r| r.position >= reopened_at).unwrap();
    assert_eq!(
        first_after.position, reopened_at,
        "the first record after the reopen goes where the log ended"
    );
}

#[test]
fn a_full_log_and_a_record_larger_than_a_segment_are_refused() {
    let (_, a) = storage();
    let mut log = Log::create(a, SEG, 2, 0).unwrap();
    assert!(matches!(
        log.append(KIND_COMMIT, 1, &vec![0u8; SEG as usize]),
        Err(NoRoom::TooLarge)
    ));
    let mut txn = 0;
    let mut refused = false;
    for _ in 0..1000 {
        txn += 1;
        match log.append(KIND_COMMIT, txn, &[7u8; 1000]) {
            Ok(_) => {}
            Err(NoRoom::Full) => {
                refused = true;
                break;
            }
            Err(e) => panic!("{e:?}"),
        }
    }
    assert!(refused, "two segments hold fewer than 1000 records of 1 KB");
    assert!(log.end() <= 2 * SEG);
    // Once a checkpoint covers the first segment, its slot is reused.
    log.release_to(SEG);
    assert!(log.append(KIND_COMMIT, txn, &[7u8; 1000]).is_ok());
}

/// A crash while unsynced records were being written, torn at every 512-byte boundary:
/// the log reads back the synced records and the complete unsynced ones before the tear,
/// never an error, and a reopened log appends after them.
#[test]
fn a_torn_tail_is_the_end_of_the_log_at_every_sector() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(2);
    let (s, a) = storage();
    let mut log = Log::create(a, SEG, 8, 0).unwrap();
    let mut txn = 0;
    // Start near the end of a segment, so the tail crosses into the next one.
    let mut synced = append_some(&mut log, &mut rng, &mut txn, 50);
    while log.end() % SEG < SEG - 3000 {
        synced.extend(append_some(&mut log, &mut rng, &mut txn, 1));
    }
    log.sync().unwrap();
    let before = s.contents();
    let tail_from = log.end();
    let tail = append_some(&mut log, &mut rng, &mut txn, 12);
    log.write().unwrap();
    let after = s.contents();
    let (lo, hi) = (log.offset(tail_from), log.offset(log.end()));
    let mut cut = lo - lo % 512;
    let mut cases = 0;
    while cut <= hi.max(lo) + 512 {
        let mut torn = before.clone();
        // The unsynced bytes reached the disk up to `cut` (in file order; the tail may
        // wrap into a lower slot, which then stays as it was).
        for off in lo..cut.min(after.len() as u64) {
            torn[off as usize] = after[off as usize];
        }
        let (_, back) = reopen(torn, 0).unwrap_or_else(|e| panic!("cut {cut}: {e}"));
        let complete = tail
            .iter()
            .take_while(|r| {
                let end = r.position + aligned((RECORD_HEADER_BYTES + r.body.len()) as u64);
                let (a, b) = (log.offset(r.position), log.offset(end - 1));
                a >= lo && b < cut
            })
            .count();
        let expected: Vec<Record> = synced.iter().chain(&tail[..complete]).cloned().collect();
        assert_eq!(back, expected, "cut at {cut}");
        cases += 1;
        cut += 512;
    }
    assert!(cases > 8);
}

/// Unsynced writes that reach the disk in any order, any subset, the last one torn
/// (`CrashMode::KeepRandom`): the synced records always come back, then a prefix of the
/// unsynced ones, never an error.
#[test]
fn a_power_loss_keeps_the_synced_records_whatever_reached_the_disk() {
    for seed in 0..40u64 {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let (s, a) = storage();
        let mut log = Log::create(a, SEG, 8, 0).unwrap();
        let mut txn = 0;
        let mut synced: Vec<Record> = Vec::new();
        let mut unsynced: Vec<Record> = Vec::new();
        let rounds = rng.gen_range(1..6);
        for _ in 0..rounds {
            let n = rng.gen_range(1..30);
            unsynced.extend(append_some(&mut log, &mut rng, &mut txn, n));
            if rng.gen_bool(0.7) {
                log.sync().unwrap();
                synced.append(&mut unsynced);
            } else {
                log.write().unwrap();
            }
        }
        let crashed = s.crash(CrashMode::KeepRandom { seed });
        let (mut log, back) = Log::open(Arc::new(crashed.clone()), 0, 0)
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert!(
            back.len() >= synced.len(),
            "seed {seed}: synced records lost"
        );
        assert_eq!(&back[..synced.len()], &synced[..], "seed {seed}");
        assert_eq!(
            &back[synced.len()..],
            &unsynced[..back.len() - synced.len()]
        );
        // Appending after the recovered end: what reads back is the recovered log and the
        // new records, never a record of the lost tail that happened to reach the disk.
        // The commits go on from the last one recovered, as an open numbers them.
        txn = back.last().map_or(0, |r| r.txn);
        let more = append_some(&mut log, &mut rng, &mut txn, 4);
        log.sync().unwrap();
        let (_, again) = Log::open(Arc::new(crashed), 0, 0).unwrap();
        let expected: Vec<Record> = back.iter().chain(&more).cloned().collect();
        assert_eq!(again, expected, "seed {seed}: after appending");
    }
}

/// A crash kept two unsynced records but not the one before them. The recovered log ends
/// before the missing one; a record appended after recovery, even one that lands exactly
/// where the missing one was, never brings the two back.
#[test]
fn records_of_a_lost_tail_are_never_read_back_after_new_appends() {
    let (s, a) = storage();
    let mut log = Log::create(a, SEG, 4, 0).unwrap();
    for txn in 1..=3 {
        log.append(KIND_COMMIT, txn, &[txn as u8; 100]).unwrap();
    }
    log.sync().unwrap();
    let synced = s.contents();
    let b1 = log.end();
    for txn in 4..=6 {
        log.append(KIND_COMMIT, txn, &[txn as u8; 100]).unwrap();
    }
    log.write().unwrap();
    let all = s.contents();
    // B2 and B3 reached the disk, B1 did not.
    let size = aligned((RECORD_HEADER_BYTES + 100) as u64);
    let mut crashed = synced.clone();
    let (from, to) = (
        log.offset(b1 + size) as usize,
        log.offset(b1 + 3 * size) as usize,
    );
    crashed[from..to].copy_from_slice(&all[from..to]);
    let c = FaultStorage::new();
    c.set_contents(crashed);
    let (mut log, back) = Log::open(Arc::new(c.clone()), 0, 0).unwrap();
    assert_eq!(back.iter().map(|r| r.txn).collect::<Vec<_>>(), [1, 2, 3]);
    log.append(KIND_COMMIT, 4, &[9u8; 100]).unwrap();
    log.sync().unwrap();
    let (_, again) = Log::open(Arc::new(c), 0, 0).unwrap();
    let txns: Vec<(u64, u8)> = again.iter().map(|r| (r.txn, r.body[0])).collect();
    assert_eq!(txns, [(1, 1), (2, 2), (3, 3), (4, 9)]);
}

/// A lost tail that runs into the next segment, whose later pages reached the disk (a
/// power loss keeps any subset of the unsynced writes): the segment's header names the
/// position the log reaches again after the reopen, so its stale records, intact, would
/// read back after the pad that closes the tail, and after the records appended from
/// there. They never do: neither at the next open, nor after new appends (of the same
/// size, so that the new records end where stale ones begin). The same when the tail is
/// a segment's first position, its header lost and the rest of the segment kept.
#[test]
fn stale_records_after_a_lost_tail_are_never_read_back() {
    for header_lost in [false, true] {
        let (s, a) = storage();
        let mut log = Log::create(a, SEG, 4, 0).unwrap();
        let mut txn = 0;
        let mut append = |log: &mut Log| {
            txn += 1;
            (
                txn,
                log.append(KIND_COMMIT, txn, &[txn as u8; 100]).unwrap(),
            )
        };
        // Synced halfway through the first segment, then written into the second.
        let mut synced_txn = 0;
        while log.end() < SEG / 2 {
            synced_txn = append(&mut log).0;
        }
        log.sync().unwrap();
        let synced = s.contents();
        let mut in_first = synced_txn;
        while log.end() < SEG + SEG / 2 {
            let (t, end) = append(&mut log);
            if end <= SEG {
                in_first = t;
            }
        }
        log.write().unwrap();
        let all = s.contents();
        // What the power loss kept of the unsynced writes: the second segment, and with
        // `header_lost` the whole first segment but not the second's first page.
        let mut crashed = synced;
        crashed.resize(all.len(), 0);
        let mut keep = |from: u64, to: u64| {
            let (from, to) = (from as usize, (to as usize).min(all.len()));
            crashed[from..to].copy_from_slice(&all[from..to]);
        };
        let (first, second) = (log.offset(0), log.offset(SEG));
        let n = if header_lost {
            keep(first, first + SEG);
            keep(second + 4096, second + SEG);
            in_first
        } else {
            keep(second, second + SEG);
            synced_txn
        };
        let c = FaultStorage::new();
        c.set_contents(crashed);
        let open = |c: &FaultStorage| {
            let (log, back) = Log::open(Arc::new(c.clone()), 0, 0).unwrap();
            (log, back.iter().map(|r| r.txn).collect::<Vec<_>>())
        };
        let what = format!("header lost: {header_lost}");
        let (_, back) = open(&c);
        assert_eq!(back, (1..=n).collect::<Vec<_>>(), "{what}");
        // Opened again before anything is appended, then after 40 appends (past the
        // second segment's first page).
        let (mut log, again) = open(&c);
        assert_eq!(again, (1..=n).collect::<Vec<_>>(), "{what}");
        for t in n + 1..=n + 40 {
            log.append(KIND_COMMIT, t, &[0xEE; 100]).unwrap();
        }
        log.sync().unwrap();
        let (_, again) = open(&c);
        assert_eq!(again, (1..=n + 40).collect::<Vec<_>>(), "{what}");
    }
}

/// A mark (`KIND_MARK`) ends the log for a tree older than its commit, wherever the
/// records after it were synced to (no damage is called for: a sync that covered them
/// promised none of them), and the tail closed there takes the next appends; a tree at or
/// after the mark reads it (handed over, for the replay to skip) and the records after it.
/// Only beside a damaged meta slot, which may have held the mark's commit made durable, is
/// the open refused (and a recovering one gives the records after the mark up).
#[test]
fn a_mark_ends_the_log_for_an_older_tree_only() {
    let (s, a) = storage();
    let mut log = Log::create(a, SEG, 4, 0).unwrap();
    for txn in 1..=10 {
        log.append(KIND_COMMIT, txn, &body(txn, 100)).unwrap();
    }
    log.append(KIND_MARK, 11, &[]).unwrap();
    for txn in 12..=700 {
        log.append(KIND_COMMIT, txn, &body(txn, 100)).unwrap();
        if txn == 20 {
            // Synced past the mark: the records after vouch for it.
            log.sync().unwrap();
        }
    }
    log.write().unwrap();
    assert!(
        log.end() > SEG,
        "the records after the mark reach the next segment"
    );
    let contents = s.contents();
    let open = |tree_txn: u64| {
        let c = FaultStorage::new();
        c.set_contents(contents.clone());
        let mut back = Vec::new();
        let reopen = Reopen {
            keep_from: 0,
            tree_txn,
            restarted: true,
            expect: Expect::default(),
            recover: false,
            handed_at: None,
        };
        let (log, short) = Log::open_into(Arc::new(c.clone()), 0, reopen, &mut back).unwrap();
        assert!(short.is_none());
        (c, log, back)
    };
    // Beside a damaged meta slot, a tree older than the mark is refused, and a recovering
    // open gives up what follows the mark.
    let c = FaultStorage::new();
    c.set_contents(contents.clone());
    let doubtful = Expect {
        doubtful: true,
        ..Expect::default()
    };
    let reopen = |recover| Reopen {
        keep_from: 0,
        tree_txn: 5,
        restarted: true,
        expect: doubtful,
        recover,
        handed_at: None,
    };
    let refused = Log::open_into(Arc::new(c.clone()), 0, reopen(false), &mut Vec::new());
    assert!(matches!(refused, Err(Error::WouldLoseData { .. })));
    assert!(c.contents() == contents, "a refused open writes nothing");
    let short = Log::open_into(Arc::new(c), 0, reopen(true), &mut Vec::new())
        .unwrap()
        .1;
    assert_eq!(short.expect("given up").beyond.txns, Some((12, 700)));
    // A tree older than the mark: the log ends at it.
    let (c, mut log, back) = open(5);
    assert_eq!(
        back.iter().map(|r| r.txn).collect::<Vec<_>>(),
        (1..=10).collect::<Vec<_>>()
    );
    // The tail closed in place: appending goes on at the mark's position, in its segment.
    assert!(log.end() < SEG);
    log.append(KIND_COMMIT, 11, &body(11, 50)).unwrap();
    log.sync().unwrap();
    let (_, again) = Log::open(Arc::new(c), 0, 0).unwrap();
    assert_eq!(
        again.iter().map(|r| r.txn).collect::<Vec<_>>(),
        (1..=11).collect::<Vec<_>>()
    );
    // The mark's own tree, or a newer one: the records after the mark are read.
    for tree_txn in [11, 12] {
        let (_, _, back) = open(tree_txn);
        let kinds: Vec<(u64, u8)> = back.iter().map(|r| (r.txn, r.kind)).collect();
        assert_eq!(kinds.len(), 700, "tree {tree_txn}");
        assert_eq!(kinds[10], (11, KIND_MARK), "tree {tree_txn}");
        assert!(back[10].body.is_empty());
    }
}

/// A bit flipped in a synced record that a later record vouches for is `CorruptedLog` at
/// that record, never a shorter log; in the last group synced, with nothing after it, it
/// reads as the end of the log (the one case the format cannot tell apart).
#[test]
fn a_bit_flip_in_a_synced_record_is_corruption() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(3);
    let (s, a) = storage();
    let mut log = Log::create(a, SEG, 3, 0).unwrap();
    let mut txn = 0;
    let early = append_some(&mut log, &mut rng, &mut txn, 40);
    log.sync().unwrap();
    let last = append_some(&mut log, &mut rng, &mut txn, 1);
    log.sync().unwrap();
    let good = s.contents();
    for r in &early {
        let size = aligned((RECORD_HEADER_BYTES + r.body.len()) as u64);
        for _ in 0..3 {
            let at = log.offset(r.position + rng.gen_range(0..size));
            let bit = rng.gen_range(0..8);
            let mut bad = good.clone();
            bad[at as usize] ^= 1 << bit;
            match reopen(bad, 0) {
                Err(Error::CorruptedLog { position, .. }) => {
                    assert_eq!(position, r.position)
                }
                Ok((_, back))
                    if at
                        >= log.offset(r.position)
                            + RECORD_HEADER_BYTES as u64
                            + r.body.len() as u64 =>
                {
                    // The flip hit the record's padding, which nothing covers.
                    assert_eq!(back.len(), 41);
                }
                other => panic!("flip at {at}: {:?}", other.map(|(_, b)| b.len())),
            }
        }
    }
    let r = &last[0];
    let mut bad = good.clone();
    bad[log.offset(r.position + 20) as usize] ^= 4;
    let (_, back) = reopen(bad, 0).unwrap();
    assert_eq!(back, early, "the last synced group reads as the end");
}

#[test]
fn io_errors_on_write_and_sync_are_reported() {
    for (kind, nth) in [
        (FaultKind::Eio, 1),
        (FaultKind::Enospc, 1),
        (FaultKind::Eio, 2),
    ] {
        let (s, a) = storage();
        let mut log = Log::create(a, SEG, 2, 0).unwrap();
        log.append(KIND_COMMIT, 1, b"one").unwrap();
        s.fail_after(nth, kind, false);
        let e = log.sync().unwrap_err();
        match kind {
            FaultKind::Eio => assert!(matches!(e, Error::Io { .. }), "{e}"),
            FaultKind::Enospc => assert!(matches!(e, Error::DiskFull), "{e}"),
        }
        assert_eq!(
            log.synced(),
            0,
            "nothing is claimed durable after a failure"
        );
    }
}

/// Eight threads commit durably at once: every commit returns only once its record is
/// synced, fewer syncs than commits are made, and every record reads back in order.
#[test]
fn committers_share_syncs_and_none_returns_before_its_record_is_durable() {
    const THREADS: u64 = 8;
    const EACH: u64 = 150;
    let (s, a) = storage();
    let log = Log::create(a, SEG, 64, 0).unwrap();
    // A sync that takes time, as a device's does: committers arrive while it runs (an
    // in-memory sync is so quick that on a loaded 2-core machine the threads sometimes
    // never overlapped, and every commit synced alone: 1200 syncs for 1200 commits).
    s.set_sync_delay(Some(std::time::Duration::from_micros(300)));
    let group = Arc::new(GroupLog::new(log));
    let writer = Arc::new(std::sync::Mutex::new(0u64));
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let (group, writer, s) = (group.clone(), writer.clone(), s.clone());
            std::thread::spawn(move || {
                for i in 0..EACH {
                    // The writer's lock covers the append only, as in a commit.
                    let (txn, end) = {
                        let mut last = writer.lock().unwrap();
                        *last += 1;
                        let body = [t as u8, i as u8].repeat(20);
                        (*last, group.append(KIND_COMMIT, *last, &body).unwrap())
                    };
                    group.sync_to(end).unwrap();
                    // Durable: a power loss now keeps it.
                    let (_, back) = reopen_durable(&s);
                    assert!(
                        back.iter().any(|r| r.txn == txn),
                        "commit {txn} not durable"
                    );
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let commits = THREADS * EACH;
    let syncs = group.syncs();
    assert!(syncs < commits, "{syncs} syncs for {commits} commits");
    let (_, back) = reopen(s.contents(), 0).unwrap();
    let txns: Vec<u64> = back.iter().map(|r| r.txn).collect();
    assert_eq!(txns, (1..=commits).collect::<Vec<_>>());
}

/// A storage whose writes before file offset `below` wait while `held` is set (after
/// saying so in `waiting`), as a group commit leader's write stalls on a busy device.
struct HeldWrites {
    inner: FaultStorage,
    below: std::sync::atomic::AtomicU64,
    held: std::sync::atomic::AtomicBool,
    waiting: std::sync::atomic::AtomicBool,
}

impl Storage for HeldWrites {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        use std::sync::atomic::Ordering::SeqCst;
        while offset < self.below.load(SeqCst) && self.held.load(SeqCst) {
            self.waiting.store(true, SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        self.inner.write_at(buf, offset)
    }
    storage_rest_to_inner!();
}

/// A sync's leader takes the records appended so far and writes them without the lock;
/// a `write` meanwhile (a commit that is not `Immediate`, about to publish its end to
/// readers in other processes and return) waits until they are in the file, and writes
/// its own record after them. Mutation-checked: without the wait in `GroupLog::write`,
/// `write` returned with the first record not in the file (`follow_log`'s reader beside
/// a `Bounded` flusher met it as "published record is not there").
#[test]
fn a_write_returns_only_once_a_leaders_records_before_it_are_in_the_file() {
    use std::sync::atomic::Ordering::SeqCst;
    let s = FaultStorage::new();
    let held = Arc::new(HeldWrites {
        inner: s.clone(),
        below: 0.into(),
        held: true.into(),
        waiting: false.into(),
    });
    let log = Log::create(held.clone(), SEG, 4, 0).unwrap();
    let group = Arc::new(GroupLog::new(log));
    let first = group.append(KIND_COMMIT, 1, &[1; 100]).unwrap();
    // Writes of the bytes before the second record wait.
    held.below.store(file_offset(SEG, 4, first), SeqCst);
    let leader = {
        let group = group.clone();
        std::thread::spawn(move || group.sync_to(first).unwrap())
    };
    while !held.waiting.load(SeqCst) {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    // The leader holds record 1, unwritten. Record 2 is appended and written.
    let second = group.append(KIND_COMMIT, 2, &[2; 100]).unwrap();
    let writer = {
        let group = group.clone();
        std::thread::spawn(move || group.write().unwrap())
    };
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert!(
        !writer.is_finished(),
        "write returned before the leader's records were in the file"
    );
    held.held.store(false, SeqCst);
    writer.join().unwrap();
    // What the file holds now, as a reader in another process (or a reopen after a
    // process crash) sees it: both records.
    let (_, back) = reopen(s.contents(), 0).unwrap();
    assert_eq!(back.iter().map(|r| r.txn).collect::<Vec<_>>(), [1, 2]);
    assert!(back[1].position < second);
    leader.join().unwrap();
}

/// What a power loss would keep of `s` now: its synced contents.
fn reopen_durable(s: &FaultStorage) -> (Log, Vec<Record>) {
    reopen(s.durable_contents(), 0).unwrap()
}

#[test]
fn a_failed_group_sync_fails_the_waiters_and_every_later_commit() {
    let (s, a) = storage();
    let group = GroupLog::new(Log::create(a, SEG, 4, 0).unwrap());
    let end = group.append(KIND_COMMIT, 1, b"one").unwrap();
    s.fail_after(2, FaultKind::Eio, false);
    assert!(matches!(group.sync_to(end), Err(Error::Io { .. })));
    let end = group.append(KIND_COMMIT, 2, b"two").unwrap();
    assert!(matches!(group.sync_to(end), Err(Error::Poisoned)));
}

#[test]
fn a_damaged_or_foreign_log_file_is_refused() {
    let (s, a) = storage();
    Log::create(a, SEG, 2, 0).unwrap();
    let good = s.contents();
    let mut bad = good.clone();
    bad[20] ^= 1;
    assert!(matches!(reopen(bad, 0), Err(Error::CorruptedLog { .. })));
    let mut short = good.clone();
    short.truncate(FILE_HEADER_BYTES as usize - 8);
    assert!(matches!(reopen(short, 0), Err(Error::CorruptedLog { .. })));
    let mut long = good.clone();
    long.resize((FILE_HEADER_BYTES + 2 * SEG + 4096) as usize, 0);
    assert!(matches!(reopen(long, 0), Err(Error::CorruptedLog { .. })));
    assert!(matches!(
        reopen(vec![0u8; 8192], 0),
        Err(Error::CorruptedLog { .. })
    ));
    let (_, a) = storage();
    assert!(matches!(
        Log::create(a, 1000, 2, 0),
        Err(Error::InvalidOptions(_))
    ));
}

/// A room of its own (`Options::log_room_bytes`) is the ring's least room, sliced or not,
/// within the geometry; the checkpoints keep their size.
#[test]
fn a_room_of_its_own_is_the_rings_least() {
    let (_, a) = storage();
    let mut log = Log::create(a, SEG, 32, 0).unwrap();
    let file_bytes = 96 * SEG;
    log.set_room_min(20 * SEG);
    log.plan(file_bytes, SEG / 2, true, 0);
    assert_eq!(log.checkpoint_bytes, 3 * SEG);
    assert_eq!(log.ring, 20 + 1);
    // A third of the file is more where checkpoints merge the whole overlay.
    log.plan(file_bytes, SEG / 2, false, 0);
    assert_eq!(log.ring, 32);
    // Past the geometry: every slot.
    log.set_room_min(64 * SEG);
    log.plan(file_bytes, SEG / 2, true, 0);
    assert_eq!(log.ring, 32);
    // None: the ring the checkpoints call for.
    log.set_room_min(0);
    log.plan(file_bytes, SEG / 2, true, 0);
    assert_eq!(log.ring, 4 * 3 + 1);
}

/// The runs' interval (`commit::runs_due`) is a 32nd of the file, at least an eighth of the
/// smallest checkpoint and at most a checkpoint: a small database's runs call for durable
/// checkpoints sooner than its log does, a large one's as often.
#[test]
fn the_runs_interval_follows_the_file_within_a_checkpoint() {
    let (_, a) = storage();
    let mut log = Log::create(a, SEG, 128, 0).unwrap();
    let least = 8 * SEG;
    // A small file: the least, an eighth of the smallest checkpoint.
    log.plan(16 * SEG, least, true, 0);
    assert_eq!(log.checkpoint_bytes, least);
    assert_eq!(log.runs_interval_bytes, SEG);
    // Between: a 32nd of the file, below the checkpoint.
    log.plan(96 * SEG, least, true, 0);
    assert_eq!(log.runs_interval_bytes, 3 * SEG);
    assert_eq!(log.checkpoint_bytes, least);
    // A file of 32 checkpoints and more: the checkpoint's bytes, as the log's.
    log.plan(512 * SEG, least, false, 0);
    assert_eq!(log.checkpoint_bytes, 16 * SEG);
    assert_eq!(log.runs_interval_bytes, log.checkpoint_bytes);
}

/// With the overlays cut in slices, every checkpoint is durable: the ring has room for two
/// checkpoints and twice what the overlays hold (`overlay_bytes`), not a third of the data
/// file; whole checkpoints keep the third.
#[test]
fn a_sliced_database_keeps_a_ring_of_a_few_checkpoints() {
    let (_, a) = storage();
    let mut log = Log::create(a, SEG, 32, 0).unwrap();
    let file_bytes = 96 * SEG;
    log.plan(file_bytes, SEG / 2, false, 0);
    // A third of the file (32 segments' worth, capped by the geometry), and one slot spare.
    assert_eq!(log.ring, 32);
    log.plan(file_bytes, SEG / 2, true, 0);
    // A checkpoint every 96/32 = 3 segments, the overlays merged from as many: room for 2 of
    // them and twice the overlays, and one slot spare.
    assert_eq!(log.checkpoint_bytes, 3 * SEG);
    assert_eq!(log.ring, 4 * 3 + 1);
    // A small file: checkpoints of half a segment, the overlays merged from two of them (a
    // segment): room for one segment and two, and one slot spare.
    log.plan(0, SEG / 2, true, 0);
    assert_eq!(log.ring, 4);
    log.plan(0, SEG / 2, false, 0);
    assert_eq!(log.ring, 3);
}

/// A packed commit (`KIND_PACKED`) reads back as the commit it packs; a body that does not
/// compress is not packed; a packed record whose block does not unpack to the length it
/// states is damage the writer wrote (`CorruptedLog`), not the log's end; and a log of the
/// version before packed commits reads one as no record.
#[test]
fn a_packed_commit_reads_back_as_the_commit_it_packs() {
    let (s, a) = storage();
    let mut log = Log::create(a, SEG, 4, 0).unwrap();
    assert!(log.packed_allowed);
    let mut packed = Vec::new();
    // Too small to pack, and bytes that do not compress: plain commits.
    assert!(!pack(&body(1, 100), &mut packed));
    let mut rng = rand::rngs::StdRng::seed_from_u64(14);
    let noise: Vec<u8> = (0..4000).map(|_| rng.gen()).collect();
    assert!(!pack(&noise, &mut packed));
    let mut expected = Vec::new();
    for txn in 1..=20u64 {
        let b = body(txn, 1000 + txn as usize * 100);
        assert!(pack(&b, &mut packed), "txn {txn}");
        assert!(
            packed.len() < b.len() / 2,
            "txn {txn}: {} bytes",
            packed.len()
        );
        let end = log.append(KIND_PACKED, txn, &packed).expect("room");
        let size = aligned((RECORD_HEADER_BYTES + packed.len()) as u64);
        expected.push(Record {
            position: end - size,
            kind: KIND_COMMIT,
            txn,
            body: b.into(),
        });
    }
    log.sync().unwrap();
    let (_, back) = reopen(s.contents(), 0).unwrap();
    assert_eq!(back, expected);

    // A block that states more bytes than it unpacks to, its checksum made to match.
    let last = expected.last().unwrap().position;
    let mut damaged = s.contents();
    let at = log.offset(last) as usize;
    let len = get_u32(&damaged[at..], REC_LEN_AT) as usize;
    let body_at = at + RECORD_HEADER_BYTES;
    let stated = get_u32(&damaged[body_at..], 0);
    put_u32(&mut damaged[body_at..], 0, stated + 1);
    let crc = record_crc(
        last,
        &damaged[at..at + RECORD_HEADER_BYTES],
        &damaged[body_at..body_at + len],
    );
    put_u32(&mut damaged[at..], REC_CRC_AT, crc);
    match reopen(damaged, 0) {
        Err(Error::CorruptedLog { position, reason }) => {
            assert_eq!(position, last);
            assert!(reason.contains("packed commit"), "{reason}");
        }
        Err(e) => panic!("a damaged packed commit: {e}"),
        Ok((_, back)) => panic!("a damaged packed commit read back {} records", back.len()),
    }

    // The version before packed commits: the first packed record ends the log.
    let mut old = s.contents();
    put_u32(&mut old, FILE_VERSION_AT, FILE_VERSION_NO_PACKED);
    let crc = crc32c(&old[..FILE_CRC_AT]);
    put_u32(&mut old, FILE_CRC_AT, crc);
    let (log3, back) = reopen(old, 0).unwrap();
    assert!(back.is_empty() && !log3.packed_allowed);
}
