//! `larch load` into a database on a real, small, full file system (an ext4 image on a loop
//! device, made by the test; it needs root and loop devices, and says so and skips otherwise):
//! exit status 6 with a "disk full" message, and the database stays at its previous commit,
//! check-clean with its earlier data byte for byte. Once space is freed, the same load works.

mod common;
use common::*;
use larchdb::testing::{is_root, LoopFs};
use std::path::Path;

/// A bytevalue dump of one table `big` of `n` 20 000-byte values.
fn big_dump(path: &Path, n: u32) {
    let tables = vec![(
        "big".to_string(),
        (0..n)
            .map(|i| (i.to_be_bytes().to_vec(), vec![i as u8; 20_000]))
            .collect(),
    )];
    std::fs::write(path, hand_dump(&tables)).unwrap();
}

#[test]
fn load_into_a_full_file_system_exits_6_and_keeps_the_previous_commit() {
    if !is_root() {
        eprintln!("SKIPPED: not root, so no loop file system to fill (see tests/disk_full.rs)");
        return;
    }
    let Some(fs) = LoopFs::new(16) else {
        eprintln!("SKIPPED: could not make and mount an ext4 loop file system");
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let db = fs.dir.join("db.larch");
    let d = db.to_str().unwrap();
    // Earlier data, then ballast so that a few MiB remain.
    let small = work.path().join("small.dump");
    std::fs::write(&small, hand_dump(&awkward_tables())).unwrap();
    larch_ok(&["load", d, "--file", small.to_str().unwrap()], b"");
    let before = larch_ok(&["dump", d], b"");
    let ballast = fs.dir.join("ballast");
    std::fs::write(&ballast, vec![1u8; 9 << 20]).unwrap();

    // About 10 MB of values: more than is left.
    let big = work.path().join("big.dump");
    big_dump(&big, 500);
    let r = larch(&["load", d, "--file", big.to_str().unwrap()], b"");
    assert_eq!(r.code, 6, "expected the disk-full status: {}", r.stderr);
    assert!(r.stderr.contains("disk full"), "{}", r.stderr);
    assert!(r.stderr.contains("nothing of the section"), "{}", r.stderr);
    eprintln!(
        "larch load on a full disk: exit {}: {}",
        r.code,
        r.stderr.trim()
    );

    // The previous commit, intact.
    let c = larch(&["check", d], b"");
    assert_eq!(c.code, 0, "check after the failed load: {}", c.stdout_str());
    assert!(
        larch_ok(&["dump", d], b"") == before,
        "earlier data changed"
    );
    assert_ne!(larch(&["dump", d, "--table", "big"], b"").code, 0);
    // The read-only commands work on the full disk even without a lock file (creating one may
    // fail for lack of space: they fall back to a shared lock on the database).
    std::fs::remove_file(larchdb::storage::lock_path(&db)).unwrap();
    let c = larch(&["check", d], b"");
    assert_eq!(c.code, 0, "check without a lock file: {}", c.stderr);

    // Space freed outside the database: the same load now succeeds.
    std::fs::remove_file(&ballast).unwrap();
    larch_ok(&["load", d, "--file", big.to_str().unwrap()], b"");
    assert_eq!(larch(&["check", d], b"").code, 0);
    // The dump names the map size LMDB would need; the input had none.
    let after = without_env_lines(&larch_ok(&["dump", d, "--table", "big"], b""));
    let expected = std::fs::read_to_string(&big).unwrap();
    let expected = expected.replace("type=btree\n", "type=btree\ndb_pagesize=4096\n");
    assert!(
        after == expected.as_bytes(),
        "big table differs after the reload"
    );
}
