//! Readers see exactly one committed snapshot each, never block the writer, and keep their
//! snapshot (and its pages) for as long as they live.

use larchdb::{Database, Durability, Error, Options};
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const ACCOUNTS: u32 = 200;
const START_BALANCE: u64 = 1_000;

fn acct(i: u32) -> [u8; 4] {
    i.to_be_bytes()
}

fn balance(v: &[u8]) -> u64 {
    u64::from_le_bytes(v[..8].try_into().unwrap())
}

/// A balance value: 8 bytes of balance, padded to vary the page layout.
fn encode(b: u64, pad: usize) -> Vec<u8> {
    let mut v = b.to_le_bytes().to_vec();
    v.resize(8 + pad, 0xab);
    v
}

#[test]
fn readers_see_consistent_snapshots_while_the_writer_commits() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(
        Database::open(
            dir.path().join("db"),
            Options::default().durability(Durability::None),
        )
        .unwrap(),
    );
    {
        let mut w = db.begin_write().unwrap();
        w.create_table("acct").unwrap();
        let mut t = w.table("acct").unwrap();
        for i in 0..ACCOUNTS {
            t.put(&acct(i), &encode(START_BALANCE, 0)).unwrap();
        }

        w.commit().unwrap();
    }
    let total = ACCOUNTS as u64 * START_BALANCE;
    let stop = Arc::new(AtomicBool::new(false));
    let commits = Arc::new(AtomicU64::new(0));

    // A long-lived reader: its snapshot must not change while thousands of commits happen.
    let frozen = db.begin_read().unwrap();
    let frozen_values: Vec<Vec<u8>> = (0..ACCOUNTS)
        .map(|i| {
            frozen
                .table("acct")
                .unwrap()
                .get(&acct(i))
                .unwrap()
                .unwrap()
                .to_vec()
        })
        .collect();

    let mut readers = Vec::new();
    for seed in 0..3u64 {
        let db = db.clone();
        let stop = stop.clone();
        readers.push(std::thread::spawn(move || {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let mut checks = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let r = db.begin_read().unwrap();
                let t = r.table("acct").unwrap();
                // Sum by scan, then by point reads in random order: both see the same snapshot.
                let scanned: u64 = t.iter().map(|e| balance(e.unwrap().1)).sum();
                assert_eq!(scanned, total, "torn snapshot seen by a scan");
                let mut ids: Vec<u32> = (0..ACCOUNTS).collect();
                for i in (1..ids.len()).rev() {
                    ids.swap(i, rng.gen_range(0..=i));
                }
                let pointed: u64 = ids
                    .iter()
                    .map(|&i| balance(t.get(&acct(i)).unwrap().unwrap()))
                    .sum();
                assert_eq!(pointed, total, "torn snapshot seen by point reads");
                checks += 1;
            }
            checks
        }));
    }

    let writer = {
        let db = db.clone();
        let stop = stop.clone();
        let commits = commits.clone();
        std::thread::spawn(move || {
            let mut rng = rand::rngs::StdRng::seed_from_u64(99);
            let deadline = Instant::now() + Duration::from_secs(3);
            while Instant::now() < deadline {
                let mut w = db.begin_write().unwrap();
                let mut t = w.table("acct").unwrap();
                for _ in 0..rng.gen_range(1..10) {
                    let (a, b) = (rng.gen_range(0..ACCOUNTS), rng.gen_range(0..ACCOUNTS));
                    let ba = balance(t.get(&acct(a)).unwrap().unwrap());
                    let amount = rng.gen_range(0..=ba);
                    t.put(&acct(a), &encode(ba - amount, rng.gen_range(0..300)))
                        .unwrap();
                    let bb = balance(t.get(&acct(b)).unwrap().unwrap());
                    t.put(&acct(b), &encode(bb + amount, rng.gen_range(0..300)))
                        .unwrap();
                }

                w.commit().unwrap();
                commits.fetch_add(1, Ordering::Relaxed);
            }
            stop.store(true, Ordering::Relaxed);
        })
    };

    // The frozen reader is Send + Sync: check it from another thread while the writer runs.
    let frozen = Arc::new(frozen);
    let checker = {
        let frozen = frozen.clone();
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut rounds = 0;
            while !stop.load(Ordering::Relaxed) || rounds == 0 {
                let t = frozen.table("acct").unwrap();
                for (i, v) in frozen_values.iter().enumerate() {
                    assert_eq!(
                        t.get(&acct(i as u32)).unwrap().unwrap(),
                        v.as_slice(),
                        "long-lived snapshot changed"
                    );
                }
                rounds += 1;
            }
        })
    };

    writer.join().unwrap();
    checker.join().unwrap();
    let checks: u64 = readers.into_iter().map(|h| h.join().unwrap()).sum();
    let commits = commits.load(Ordering::Relaxed);
    assert!(commits > 100, "writer made only {commits} commits");
    eprintln!("{commits} commits while the long-lived reader was checked");
    assert!(checks > 10, "readers made only {checks} checks");
    drop(frozen);
    db.verify().unwrap();
}

#[test]
fn one_writer_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("db"), Options::default()).unwrap();
    let w = db.begin_write().unwrap();
    assert!(matches!(db.try_begin_write(), Err(Error::WriteBusy)));
    // A reader is not blocked by the writer.
    let r = db.begin_read().unwrap();
    assert!(r.list_tables().unwrap().is_empty());
    drop(w);
    assert!(db.try_begin_write().is_ok());

    // A blocked begin_write proceeds once the first writer finishes.
    let db = Arc::new(db);
    let w = db.begin_write().unwrap();
    let db2 = db.clone();
    let waiter = std::thread::spawn(move || {
        let mut w = db2.begin_write().unwrap();
        w.table("t").unwrap().put(b"second", b"2").unwrap();
        w.commit().unwrap();
    });
    std::thread::sleep(Duration::from_millis(50));
    let mut w = w;
    w.create_table("t").unwrap();
    w.table("t").unwrap().put(b"first", b"1").unwrap();
    w.commit().unwrap();
    waiter.join().unwrap();
    let r = db.begin_read().unwrap();
    assert_eq!(r.table("t").unwrap().len().unwrap(), 2);
}

#[test]
fn second_writer_is_locked_out_but_read_only_handles_are_not() {
    // One writing handle per file; read-only handles register in the lock file's reader table
    // and run beside it (tests/shared_readers.rs covers other processes).
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Database::open(&path, Options::default()).unwrap();
    assert!(matches!(
        Database::open(&path, Options::default()),
        Err(Error::DatabaseLocked)
    ));
    let ro = Database::open(&path, Options::default().read_only(true)).unwrap();
    assert!(matches!(ro.begin_write(), Err(Error::ReadOnly)));
    let mut w = db.begin_write().unwrap();
    w.create_table("t").unwrap();
    w.table("t").unwrap().put(b"k", b"1").unwrap();
    w.commit().unwrap();
    let r = ro.begin_read().unwrap();
    assert_eq!(r.table("t").unwrap().get(b"k").unwrap(), Some(&b"1"[..]));
    drop(db);
    let ro2 = Database::open(&path, Options::default().read_only(true)).unwrap();
    let db = Database::open(&path, Options::default()).unwrap();
    assert!(matches!(
        Database::open(&path, Options::default()),
        Err(Error::DatabaseLocked)
    ));
    drop((r, ro, ro2, db));
    Database::open(&path, Options::default()).unwrap();
}

#[test]
fn renew_moves_a_reader_to_the_newest_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("db"), Options::default()).unwrap();
    let mut w = db.begin_write().unwrap();
    w.create_table("t").unwrap();
    w.table("t").unwrap().put(b"k", b"1").unwrap();
    w.commit().unwrap();
    let mut r = db.begin_read().unwrap();
    let first = r.id();
    r.renew();
    assert_eq!(r.id(), first, "nothing committed: same snapshot");
    let mut w = db.begin_write().unwrap();
    w.table("t").unwrap().put(b"k", b"2").unwrap();
    w.commit().unwrap();
    assert_eq!(r.table("t").unwrap().get(b"k").unwrap(), Some(&b"1"[..]));
    r.renew();
    assert!(r.id() > first);
    assert_eq!(r.table("t").unwrap().get(b"k").unwrap(), Some(&b"2"[..]));
    // The old snapshot is no longer registered: its pages are reusable.
    assert_eq!(db.stats().unwrap().readers, 1);
}

/// A table's entries in order.
type Contents = Vec<(Vec<u8>, Vec<u8>)>;

/// Commits made while the long-lived readers below stay open.
const LONG_READER_COMMITS: u32 = 2000;

/// A long-lived reader across thousands of commits never sees a changed value: every commit
/// overwrites, deletes and inserts (small values and overflow runs alike), so the pages the
/// reader's snapshot reaches are freed early and, without its registration, would be reused
/// at once; the reader's full contents are compared every 100 commits. A second reader opened
/// half-way holds its own snapshot the same way.
#[test]
fn a_long_lived_reader_sees_one_snapshot_across_thousands_of_commits() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(
        dir.path().join("db"),
        Options::default().durability(Durability::None),
    )
    .unwrap();
    let value = |i: u32, commit: u32| -> Vec<u8> {
        let len = if i.is_multiple_of(17) {
            5000
        } else {
            20 + (i + commit) as usize % 200
        };
        vec![(i ^ commit) as u8; len]
    };
    {
        let mut w = db.begin_write().unwrap();
        w.create_table("t").unwrap();
        let mut t = w.table("t").unwrap();
        for i in 0..1000u32 {
            t.put(&i.to_be_bytes(), &value(i, 0)).unwrap();
        }
        w.commit().unwrap();
    }
    let contents = |r: &larchdb::ReadTxn| -> Contents {
        let t = r.table("t").unwrap();
        t.iter()
            .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
            .collect()
    };
    let first = db.begin_read().unwrap();
    let first_contents = contents(&first);
    assert_eq!(first_contents.len(), 1000);
    let mut second: Option<(larchdb::ReadTxn, Contents)> = None;
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let mut comparisons = 0u32;
    for commit in 1..=LONG_READER_COMMITS {
        let mut w = db.begin_write().unwrap();
        {
            let mut t = w.table("t").unwrap();
            // The first operation is a put, so every commit changes something.
            for op in 0..rng.gen_range(1..12) {
                let i = rng.gen_range(0..1200u32);
                if op > 0 && rng.gen_bool(0.2) {
                    t.delete(&i.to_be_bytes()).unwrap();
                } else {
                    t.put(&i.to_be_bytes(), &value(i, commit)).unwrap();
                }
            }
        }
        w.commit().unwrap();
        if commit == LONG_READER_COMMITS / 2 {
            let r = db.begin_read().unwrap();
            let c = contents(&r);
            assert_ne!(c, first_contents, "the writer changed nothing");
            second = Some((r, c));
        }
        if commit % 100 == 0 {
            assert_eq!(contents(&first), first_contents, "after commit {commit}");
            if let Some((r, c)) = &second {
                assert_eq!(&contents(r), c, "second reader, after commit {commit}");
            }
            comparisons += 1;
        }
    }
    assert_eq!(
        first.id() + u64::from(LONG_READER_COMMITS),
        db.begin_read().unwrap().id()
    );
    assert_eq!(comparisons, LONG_READER_COMMITS / 100);
    // While the readers live, nothing freed after their snapshots is reused (as in LMDB, the
    // oldest reader holds back reuse), so the file grows; once they are gone, that space is
    // reused and the file stops growing. The commits went through the log: the first
    // checkpoint after them writes the tree they changed beside the one before, which a power
    // loss until that checkpoint is durable still needs (when one started among the commits
    // below, the file grew from 154 to 317 pages there, one run in about fifteen); the second
    // lets those pages be reused, and the commits below are written into them.
    drop((first, second));
    db.checkpoint().unwrap();
    db.checkpoint().unwrap();
    let pages_before = db.stats().unwrap().page_count;
    for commit in 0..100u32 {
        let mut w = db.begin_write().unwrap();
        w.table("t")
            .unwrap()
            .put(&commit.to_be_bytes(), &value(commit, 1))
            .unwrap();
        w.commit().unwrap();
    }
    db.checkpoint().unwrap();
    let stats = db.stats().unwrap();
    assert!(
        stats.page_count <= pages_before,
        "{} -> {} pages",
        pages_before,
        stats.page_count
    );
    eprintln!(
        "{LONG_READER_COMMITS} commits under two long-lived readers, {comparisons} full \
         comparisons each; {pages_before} pages in the file"
    );
    db.verify().unwrap();
}
