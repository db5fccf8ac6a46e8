//! A full disk on a real file system: a small ext4 image on a loop device, made by the test
//! (it needs root; without root the fault-injecting backend covers the same paths, see
//! tests/faults.rs). Filling it must give `Error::DiskFull`, never a SIGBUS from the writable
//! mapping; earlier commits stay intact, and writes resume once space is freed.

use larchdb::testing::{is_root, LoopFs};
use larchdb::{Database, Durability, Error, Options};

fn count(db: &Database) -> u64 {
    db.begin_read()
        .unwrap()
        .table("t")
        .map(|t| t.len().unwrap())
        .unwrap_or(0)
}

fn fill_until_full(db: &Database, first: u32) -> (u32, Error) {
    let mut i = first;
    loop {
        let mut w = db.begin_write().unwrap();
        w.ensure_table("t").unwrap();
        let r = (|| {
            let mut t = w.table("t")?;
            for j in 0..16u32 {
                t.put(&(i * 16 + j).to_be_bytes(), &vec![i as u8; 20_000])?;
            }
            Ok::<(), Error>(())
        })();
        let r = r.and_then(|_| w.commit_with(Durability::Immediate));
        match r {
            Ok(()) => i += 1,
            Err(e) => return (i, e),
        }
        assert!(i < 100_000, "the file system never filled up");
    }
}

#[test]
fn a_full_file_system_is_disk_full_and_loses_nothing() {
    if !is_root() {
        eprintln!("disk_full: not root, so no loop device; tests/faults.rs covers ENOSPC");
        return;
    }
    let Some(fs) = LoopFs::new(24) else {
        // Root, but no loop devices (some containers): the fault backend covers ENOSPC.
        eprintln!("disk_full: SKIPPED: could not make and mount an ext4 loop file system");
        return;
    };
    // Ballast that the "administrator" deletes later to free space.
    let ballast = fs.dir.join("ballast");
    std::fs::write(&ballast, vec![0u8; 6 << 20]).unwrap();
    let path = fs.dir.join("db.larch");
    let db = Database::open(&path, Options::default()).unwrap();

    let (commits, err) = fill_until_full(&db, 0);
    assert!(
        matches!(err, Error::DiskFull),
        "expected DiskFull, got {err}"
    );
    assert!(commits > 10, "only {commits} commits fit");
    eprintln!("disk_full: {commits} commits before the disk filled");
    let acknowledged = count(&db);
    assert_eq!(acknowledged, commits as u64 * 16);
    db.verify().unwrap();

    // Space is freed outside the database: writes resume on the same handle.
    std::fs::remove_file(&ballast).unwrap();
    let (more, err) = fill_until_full(&db, commits);
    assert!(
        more > commits,
        "no commit succeeded after space was freed: {err}"
    );
    assert!(
        matches!(err, Error::DiskFull),
        "expected DiskFull again, got {err}"
    );
    let total = count(&db);
    eprintln!("disk_full: {more} commits in all after freeing space");
    assert_eq!(total, more as u64 * 16);
    drop(db);

    // Everything acknowledged is there after reopening, and the file is sound. The disk is
    // still full: the log's open closes its tail in place, claiming no space.
    let db = Database::open(&path, Options::default()).unwrap();
    assert_eq!(count(&db), total);
    db.verify().unwrap();
    check_values(&db, more);
    // Writes after the reopen fail as a full disk too, and lose nothing.
    let (last, err) = fill_until_full(&db, more);
    assert!(
        matches!(err, Error::DiskFull),
        "expected DiskFull after the reopen, got {err}"
    );
    assert_eq!(count(&db), last as u64 * 16);
    db.verify().unwrap();
}

fn check_values(db: &Database, commits: u32) {
    let r = db.begin_read().unwrap();
    let t = r.table("t").unwrap();
    for i in 0..commits {
        let v = t.get(&(i * 16).to_be_bytes()).unwrap().unwrap();
        assert_eq!(v, vec![i as u8; 20_000].as_slice());
    }
}

/// Reopened after a full disk and after space is freed, the database writes again: the open
/// claims no space it does not need (it closes the log's tail in place instead of padding it
/// to the end of its segment, which took the space just freed and failed every later commit
/// as a full disk).
#[test]
fn space_freed_while_closed_brings_writes_back_after_the_reopen() {
    if !is_root() {
        eprintln!("disk_full: not root, so no loop device; tests/faults.rs covers ENOSPC");
        return;
    }
    let Some(fs) = LoopFs::new(64) else {
        eprintln!("disk_full: SKIPPED: could not make and mount an ext4 loop file system");
        return;
    };
    let filler = fs.dir.join("filler");
    std::fs::write(&filler, vec![0u8; 16 << 20]).unwrap();
    let path = fs.dir.join("db.larch");
    let db = Database::open(&path, Options::default()).unwrap();
    // Filled with one-put commits until one fails, anywhere in its transaction.
    let mut acked = 0u64;
    let err = loop {
        let r = (|| {
            let mut w = db.begin_write()?;
            w.ensure_table("t")?;
            w.table("t")?
                .put(&(acked as u32).to_be_bytes(), &[9u8; 4000])?;
            w.commit_with(Durability::Immediate)
        })();
        match r {
            Ok(()) => acked += 1,
            Err(e) => break e,
        }
        assert!(acked < 1_000_000, "the file system never filled up");
    };
    assert!(
        matches!(err, Error::DiskFull),
        "expected DiskFull, got {err}"
    );
    drop(db);
    std::fs::remove_file(&filler).unwrap();
    let db = Database::open(&path, Options::default()).unwrap();
    assert_eq!(count(&db), acked);
    for i in 0..30u32 {
        let mut w = db.begin_write().unwrap();
        w.ensure_table("t").unwrap();
        w.table("t")
            .unwrap()
            .put(&(1_000_000 + i).to_be_bytes(), &[7u8; 1000])
            .unwrap();
        w.commit_with(Durability::Immediate)
            .unwrap_or_else(|e| panic!("commit {i} after space was freed: {e}"));
    }
    assert_eq!(count(&db), acked + 30);
    db.verify().unwrap();
}
