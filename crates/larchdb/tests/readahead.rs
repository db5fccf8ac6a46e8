//! The memory map's readahead advice: off by default (`MADV_RANDOM`, which the kernel shows as
//! the `rr` flag of the mapping in /proc/self/smaps), on with `Options::readahead`.

use larchdb::{Database, Durability, Options};
use std::path::Path;

/// VmFlags of every mapping of `file` in this process.
fn map_flags(file: &Path) -> Vec<Vec<String>> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
    let name = file.to_str().unwrap();
    let mut out = Vec::new();
    let mut ours = false;
    for line in smaps.lines() {
        if let Some(flags) = line.strip_prefix("VmFlags:") {
            if ours {
                out.push(flags.split_whitespace().map(str::to_string).collect());
            }
        } else if line.contains('-') && line.split_whitespace().count() >= 5 {
            // A mapping's first line: address range, perms, offset, device, inode, path.
            ours = line.ends_with(name);
        }
    }
    out
}

fn load(path: &Path, readahead: bool) -> Database {
    let db = Database::open(path, Options::default().readahead(readahead)).unwrap();
    let mut w = db.begin_write().unwrap();
    w.ensure_table("t").unwrap();
    for i in 0..2000u32 {
        w.table("t")
            .unwrap()
            .put(&i.to_be_bytes(), &[7; 100])
            .unwrap();
    }
    w.commit_with(Durability::None).unwrap();
    let r = db.begin_read().unwrap();
    assert_eq!(r.table("t").unwrap().len().unwrap(), 2000);
    db
}

#[test]
fn maps_are_advised_random_unless_readahead_is_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("random.larch");
    let db = load(&path, false);
    let flags = map_flags(&path);
    assert!(!flags.is_empty(), "the database file is mapped");
    assert!(
        flags.iter().all(|f| f.iter().any(|x| x == "rr")),
        "every mapping advised random: {flags:?}"
    );
    drop(db);

    let path = dir.path().join("ahead.larch");
    let db = load(&path, true);
    let flags = map_flags(&path);
    assert!(!flags.is_empty());
    assert!(
        flags.iter().all(|f| !f.iter().any(|x| x == "rr")),
        "no mapping advised random: {flags:?}"
    );
    drop(db);
}
