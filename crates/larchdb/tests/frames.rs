//! Frames (docs/design/buffer-pool.md): a writing handle's pages in memory of its own while
//! the file fits in `Options::frames_bytes`, and the file's mapping beyond. The contents are
//! the same whichever way a handle reads them, across reopens that switch between the two, a
//! file that outgrows its frames with a reader holding them, and another handle that maps the
//! file.

mod common;

use larchdb::{Database, Durability, Options};
use std::collections::BTreeMap;

use common::collect;

/// Frames for the tests' files, which all fit.
const FRAMES: u64 = 256 << 20;

fn frames() -> Options {
    Options::default().frames_bytes(FRAMES)
}

fn key(i: u64) -> Vec<u8> {
    format!("{:016x}", i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).into_bytes()
}

fn value(i: u64, round: u64, len: usize) -> Vec<u8> {
    let mut v = format!("{i}-{round}-").into_bytes();
    v.resize(len, (i ^ round) as u8);
    v
}

fn check(db: &Database, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    let r = db.begin_read().unwrap();
    let t = r.table("t").unwrap();
    assert_eq!(t.len().unwrap(), model.len() as u64);
    let got = collect(t.iter());
    let want: Vec<(Vec<u8>, Vec<u8>)> = model.clone().into_iter().collect();
    assert!(got == want, "contents differ from the model");
    for (k, v) in model.iter().step_by(97) {
        assert_eq!(t.get(k).unwrap(), Some(&v[..]));
    }
}

/// Rounds of puts, overwrites and deletes, through the log and with page commits, each round
/// reopened with frames or with the mapping in turn; the contents are checked against a model
/// after every round and after every reopen, and verified.
#[test]
fn frames_and_the_mapping_hold_the_same_contents() {
    for log in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let mut model = BTreeMap::new();
        for round in 0..6u64 {
            let bytes = if round % 2 == 0 { FRAMES } else { 0 };
            let options = Options::default()
                .log(log)
                .durability(Durability::None)
                .frames_bytes(bytes);
            let db = Database::open(&path, options).unwrap();
            for batch in 0..20u64 {
                let mut w = db.begin_write().unwrap();
                {
                    w.ensure_table("t").unwrap();
                    let mut t = w.table("t").unwrap();
                    for j in 0..200u64 {
                        let i = (round * 7 + batch * 131 + j * 17) % 3000;
                        if (i + round) % 5 == 0 {
                            t.delete(&key(i)).unwrap();
                            model.remove(&key(i));
                        } else {
                            let v = value(i, round, 20 + (i as usize * 13) % 1500);
                            t.put(&key(i), &v).unwrap();
                            model.insert(key(i), v);
                        }
                    }
                }
                w.commit().unwrap();
                if batch % 7 == 6 {
                    db.checkpoint().unwrap();
                }
            }
            check(&db, &model);
            db.verify().unwrap();
            let stats = db.stats().unwrap();
            if bytes == 0 {
                assert_eq!((stats.frames_bytes, stats.frames_huge_bytes), (0, 0));
            } else {
                // The round's pages were written in frames, and the check read others there.
                assert!(stats.frames_bytes > 0 && stats.frames_bytes <= bytes);
                assert!(stats.frames_huge_bytes <= bytes.next_multiple_of(2 << 20));
                assert_eq!(stats.frames_huge_bytes % (2 << 20), 0);
            }
            drop(db);
            let db = Database::open(&path, frames()).unwrap();
            check(&db, &model);
        }
    }
}

/// Scans of records that leave a few to a leaf, in frames: a scan that crosses into such a
/// leaf reads the next leaf's header to ask for its first cells (`Cursor::prefetch_next_cells`).
/// Every scan, forward and backward, whole and from a seek for a few records, returns exactly
/// the model's records, on the handle that wrote them and reopened.
#[test]
fn scans_across_leaves_of_few_records_in_frames() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let mut model = BTreeMap::new();
    {
        let db = Database::open(&path, frames()).unwrap();
        for batch in 0..10u64 {
            let mut w = db.begin_write().unwrap();
            {
                w.ensure_table("t").unwrap();
                let mut t = w.table("t").unwrap();
                for j in 0..200u64 {
                    let i = batch * 200 + j;
                    let v = value(i, 0, 700 + (i as usize * 37) % 600);
                    t.put(&key(i), &v).unwrap();
                    model.insert(key(i), v);
                }
            }
            w.commit().unwrap();
        }
        db.checkpoint().unwrap();
        check_scans(&db, &model);
    }
    let db = Database::open(&path, frames()).unwrap();
    check_scans(&db, &model);
    assert!(db.stats().unwrap().frames_bytes > 0);
}

fn check_scans(db: &Database, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    let r = db.begin_read().unwrap();
    let t = r.table("t").unwrap();
    let want: Vec<(Vec<u8>, Vec<u8>)> = model.clone().into_iter().collect();
    assert!(
        collect(t.iter()) == want,
        "a forward scan differs from the model"
    );
    let mut back = want.clone();
    back.reverse();
    assert!(
        collect(t.iter_rev()) == back,
        "a backward scan differs from the model"
    );
    let keys: Vec<&Vec<u8>> = model.keys().collect();
    for (at, k) in keys.iter().enumerate().step_by(37) {
        for n in [1, 4, 13] {
            let got = first(t.range(&k[..]..), n);
            let end = (at + n).min(want.len());
            assert!(got[..] == want[at..end], "a scan from a seek differs");
            let got = first(t.range_rev(..=&k[..]), n);
            let from = (at + 1).saturating_sub(n);
            let mut w = want[from..=at].to_vec();
            w.reverse();
            assert!(got == w, "a backward scan from a seek differs");
        }
    }
}

/// The first `n` entries of a scan, which stops there.
fn first(scan: larchdb::Range<'_>, n: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    scan.take(n)
        .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect::<Result<_, _>>()
        .unwrap()
}

/// A file that outgrows its frames (4 MiB here) is mapped from the next write transaction on:
/// a reader that began while the pages were in frames keeps reading its snapshot through
/// them, the newer snapshots read the mapping, and nothing is lost either way, nor after a
/// reopen.
#[test]
fn a_file_that_outgrows_its_frames_is_mapped_and_its_old_readers_keep_theirs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let options = Options::default().frames_bytes(4 << 20);
    let db = Database::open(&path, options).unwrap();
    let mut model = BTreeMap::new();
    let put_range = |db: &Database, model: &mut BTreeMap<Vec<u8>, Vec<u8>>, from: u64, to: u64| {
        let mut w = db.begin_write().unwrap();
        {
            w.ensure_table("t").unwrap();
            let mut t = w.table("t").unwrap();
            for i in from..to {
                // Some values in overflow runs of several pages, which may cross the frames'
                // end as the file outgrows them.
                let len = if i % 50 == 7 { 13_000 } else { 1000 };
                let v = value(i, 0, len);
                t.put(&key(i), &v).unwrap();
                model.insert(key(i), v);
            }
        }
        w.commit().unwrap();
        db.checkpoint().unwrap();
    };
    put_range(&db, &mut model, 0, 1000);
    let early = model.clone();
    let reader = db.begin_read().unwrap();
    // Past 4 MiB of pages, in steps, with the early reader open throughout.
    for step in 1..12u64 {
        put_range(&db, &mut model, step * 1000, (step + 1) * 1000);
        let r = reader.table("t").unwrap();
        assert_eq!(r.len().unwrap(), early.len() as u64);
        for (k, v) in early.iter().step_by(37) {
            assert_eq!(
                r.get(k).unwrap(),
                Some(&v[..]),
                "the early reader's snapshot"
            );
        }
    }
    assert!(
        db.stats().unwrap().file_bytes > 8 << 20,
        "the file outgrew the frames"
    );
    let got = collect(reader.table("t").unwrap().iter());
    assert!(got == early.clone().into_iter().collect::<Vec<_>>());
    drop(reader);
    check(&db, &model);
    db.verify().unwrap();
    drop(db);
    let db = Database::open(&path, Options::default().frames_bytes(4 << 20)).unwrap();
    check(&db, &model);
    db.verify().unwrap();
}

/// One transaction that grows the file past its frames (4 MiB) maps the file from there on,
/// the pages it wrote in frames copied into the mapping, rather than keep every further page
/// in memory of its own until its commit: it reads its own writes on both sides of the
/// frames' end, an early reader keeps its snapshot, the commit is whole, also after a reopen,
/// and an aborted transaction after it leaves nothing.
#[test]
fn a_transaction_that_outgrows_its_frames_goes_on_in_the_mapping() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    // A small budget: the transaction turns from its batch to pages early (at 1 MiB).
    let options = || {
        Options::default()
            .frames_bytes(4 << 20)
            .memory_budget(4 << 20)
    };
    let db = Database::open(&path, options()).unwrap();
    let mut model = BTreeMap::new();
    let mut w = db.begin_write().unwrap();
    w.ensure_table("t").unwrap();
    w.commit().unwrap();
    for i in 0..300u64 {
        let mut w = db.begin_write().unwrap();
        w.table("t")
            .unwrap()
            .put(&key(i), &value(i, 0, 900))
            .unwrap();
        w.commit().unwrap();
        model.insert(key(i), value(i, 0, 900));
    }
    db.checkpoint().unwrap();
    let early = model.clone();
    let reader = db.begin_read().unwrap();
    let big = |round: u64| {
        let mut w = db.begin_write().unwrap();
        let mut t = w.table("t").unwrap();
        let mut written = BTreeMap::new();
        for i in 0..12_000u64 {
            let len = if i % 50 == 7 { 13_000 } else { 1000 };
            let v = value(i, round, len);
            t.put(&key(i), &v).unwrap();
            written.insert(key(i), v);
            if i % 1000 == 999 {
                // Its own writes, from both sides of the frames' end.
                for j in (0..=i).step_by(331) {
                    assert_eq!(t.get(&key(j)).unwrap(), Some(&written[&key(j)][..]));
                }
            }
        }
        (w, written)
    };
    let (w, written) = big(1);
    w.commit().unwrap();
    model.extend(written);
    assert!(
        db.stats().unwrap().file_bytes > 8 << 20,
        "the transaction grew the file past the frames"
    );
    check(&db, &model);
    // Aborted, through the mapping from its start.
    let (w, _) = big(2);
    drop(w);
    let r = reader.table("t").unwrap();
    assert_eq!(r.len().unwrap(), early.len() as u64);
    assert!(collect(r.iter()) == early.clone().into_iter().collect::<Vec<_>>());
    drop(reader);
    check(&db, &model);
    db.verify().unwrap();
    drop(db);
    let db = Database::open(&path, options()).unwrap();
    check(&db, &model);
    db.verify().unwrap();
}

/// Readers on other threads read while the writer commits and checkpoints into its frames,
/// and the keeper moves the frames' chunks into huge pages as the file grows past several of
/// them: each read transaction sees one commit whole (every key of a round holds that round's
/// value), never a frame being loaded, written or moved.
#[test]
fn readers_beside_the_writer_see_whole_commits_in_frames() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Database::open(&path, frames().durability(Durability::None)).unwrap();
    const KEYS: u64 = 12_000;
    let write_round = |round: u64| {
        let mut w = db.begin_write().unwrap();
        {
            w.ensure_table("t").unwrap();
            let mut t = w.table("t").unwrap();
            for i in 0..KEYS {
                t.put(&key(i), &value(i, round, 300)).unwrap();
            }
        }
        w.commit().unwrap();
    };
    write_round(0);
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    let r = db.begin_read().unwrap();
                    let t = r.table("t").unwrap();
                    let first = t.get(&key(0)).unwrap().unwrap().to_vec();
                    let round: u64 = std::str::from_utf8(&first)
                        .unwrap()
                        .split('-')
                        .nth(1)
                        .unwrap()
                        .parse()
                        .unwrap();
                    for i in (0..KEYS).step_by(7) {
                        assert_eq!(t.get(&key(i)).unwrap(), Some(&value(i, round, 300)[..]));
                    }
                }
            });
        }
        for round in 1..30 {
            write_round(round);
            if round % 5 == 0 {
                db.checkpoint().unwrap();
            }
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    db.verify().unwrap();
}

/// A second handle on the same file, read-only and so mapping it, reads what the writer
/// wrote in its frames once the writer made it durable.
#[test]
fn a_read_only_handle_reads_what_the_frames_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Database::open(&path, frames().log(false)).unwrap();
    let mut model = BTreeMap::new();
    for round in 0..3u64 {
        let mut w = db.begin_write().unwrap();
        {
            w.ensure_table("t").unwrap();
            let mut t = w.table("t").unwrap();
            for i in 0..3000u64 {
                let v = value(i, round, 200);
                t.put(&key(i), &v).unwrap();
                model.insert(key(i), v);
            }
        }
        w.commit().unwrap();
        let ro = Database::open(&path, Options::default().read_only(true)).unwrap();
        check(&ro, &model);
    }
}

/// A process killed after commits, durable ones and others (page commits, and a log's
/// checkpoints), loses none of them: the pages the frames write behind (a durable commit's, a
/// checkpoint's) reach the file before the sync and the meta page that follow them. On the
/// fault storage, writes behind land only at a drain, reading the frames then, and a crash
/// drops those not drained: a sync or a meta field that did not wait for them, or a frame
/// changed before them, is a lost or damaged commit here.
#[test]
fn a_process_crash_keeps_every_commit_written_behind() {
    use larchdb::storage::{CrashMode, FaultStorage};
    for log in [false, true] {
        for stop in [1u64, 4, 9, 16] {
            let (data, log_disk) = (FaultStorage::new().allocating(), FaultStorage::new());
            let options = || {
                Options::default()
                    .log(log)
                    .durability(Durability::None)
                    .frames_bytes(FRAMES)
            };
            let open = |data: &FaultStorage, log_disk: &FaultStorage| {
                open_faulty(data, log_disk, options())
            };
            let db = open(&data, &log_disk);
            let mut model = BTreeMap::new();
            for batch in 0..stop {
                let mut w = db.begin_write().unwrap();
                {
                    w.ensure_table("t").unwrap();
                    let mut t = w.table("t").unwrap();
                    for j in 0..600u64 {
                        let i = (batch * 389 + j * 23) % 5000;
                        if (i + batch) % 7 == 0 {
                            t.delete(&key(i)).unwrap();
                            model.remove(&key(i));
                        } else {
                            let v = value(i, batch, 20 + (i as usize * 13) % 1500);
                            t.put(&key(i), &v).unwrap();
                            model.insert(key(i), v);
                        }
                    }
                }
                let durability = if batch % 2 == 0 {
                    Durability::Immediate
                } else {
                    Durability::None
                };
                w.commit_with(durability).unwrap();
                if log && batch % 3 == 2 {
                    db.checkpoint().unwrap();
                }
            }
            let (data, log_disk) = (
                data.crash(CrashMode::ProcessOnly),
                log_disk.crash(CrashMode::ProcessOnly),
            );
            drop(db);
            let db = open(&data, &log_disk);
            check(&db, &model);
            db.verify().unwrap();
        }
    }
}

/// A checkpoint that settles on a thread of its own writes its merge's leaves behind as it
/// fills them, spill after spill without waiting for the device. A sequential load's right
/// edge is merged a chunk at a time, each chunk's last leaf filled again by the next: that
/// leaf's write may still be in flight, and the merge waits for it before it writes the leaf
/// again (the fault storage fails the drain of a write whose bytes changed meanwhile, and
/// drops what was not drained at a crash).
#[test]
fn a_merge_fills_a_leaf_again_only_once_its_write_behind_landed() {
    use larchdb::storage::{CrashMode, FaultStorage};
    let (data, log_disk) = (FaultStorage::new().allocating(), FaultStorage::new());
    let options = || {
        Options::default()
            .durability(Durability::None)
            .frames_bytes(FRAMES)
            .checkpoint_slices(4)
    };
    let open =
        |data: &FaultStorage, log_disk: &FaultStorage| open_faulty(data, log_disk, options());
    let db = open(&data, &log_disk);
    let mut model = BTreeMap::new();
    // 4 MB at the right edge, in logged commits: four of the merge's chunks (1 MiB) for the
    // last leaf's key range.
    for batch in 0..200u64 {
        let mut w = db.begin_write().unwrap();
        {
            w.ensure_table("t").unwrap();
            let mut t = w.table("t").unwrap();
            for j in 0..20u64 {
                let i = batch * 20 + j;
                let (k, v) = (format!("{i:016}").into_bytes(), value(i, batch, 1000));
                t.put(&k, &v).unwrap();
                model.insert(k, v);
            }
        }
        w.commit().unwrap();
    }
    db.checkpoint().unwrap();
    check(&db, &model);
    db.verify().unwrap();
    let (data, log_disk) = (
        data.crash(CrashMode::ProcessOnly),
        log_disk.crash(CrashMode::ProcessOnly),
    );
    drop(db);
    let db = open(&data, &log_disk);
    check(&db, &model);
    db.verify().unwrap();
}

/// A database on fault storages: the data file's, and the log's where `options` write it.
fn open_faulty(
    data: &larchdb::storage::FaultStorage,
    log_disk: &larchdb::storage::FaultStorage,
    options: Options,
) -> Database {
    use std::sync::Arc;
    if options.log {
        Database::open_storage_with_log(Arc::new(data.clone()), Arc::new(log_disk.clone()), options)
    } else {
        Database::open_storage(Arc::new(data.clone()), options)
    }
    .unwrap()
}
