//! The memory map's readahead advice (`MADV_RANDOM` shows as the `rr` flag of the mapping in
//! /proc/self/smaps): by default on for a file that fits in half the memory the process may
//! use, as every test's does; `Options::readahead` forces it on or off.

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

/// A database whose file is mapped (frames off: a file in frames is not read through a
/// mapping, so its advice does not apply).
fn load(path: &Path, readahead: Option<bool>) -> Database {
    let mut options = Options::default().frames_bytes(0);
    options.readahead = readahead;
    let db = Database::open(path, options).unwrap();
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

/// Whether every mapping of `file` is advised random (and there is one).
fn random(file: &Path) -> bool {
    let flags = map_flags(file);
    assert!(!flags.is_empty(), "the database file is mapped");
    let random = flags.iter().filter(|f| f.iter().any(|x| x == "rr")).count();
    assert!(
        random == 0 || random == flags.len(),
        "mappings advised alike: {flags:?}"
    );
    random > 0
}

#[test]
fn maps_read_ahead_when_the_file_fits_in_memory_or_as_forced() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("default.larch");
    let db = load(&path, None);
    // A small file fits in half of any machine's memory this test runs on (wherever the
    // memory can be read: elsewhere the default is not to read ahead).
    let readable = std::fs::read_to_string("/proc/meminfo").is_ok();
    assert_eq!(
        random(&path),
        !readable,
        "a small file reads ahead by default"
    );
    drop(db);

    let path = dir.path().join("random.larch");
    let db = load(&path, Some(false));
    assert!(
        random(&path),
        "readahead(false): every mapping advised random"
    );
    drop(db);

    let path = dir.path().join("ahead.larch");
    let db = load(&path, Some(true));
    assert!(!random(&path), "readahead(true): no mapping advised random");
    drop(db);
}
