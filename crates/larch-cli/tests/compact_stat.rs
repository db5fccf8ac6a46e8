//! `larch compact` and the reader and free-space listings of `larch stat`.

mod common;
use common::*;
use larchdb::{Database, Options};

/// A database whose last commit deleted most of what the one before put, left as it is at
/// close: pages only (`log(false)`), so that the deletions have freed their pages; through
/// the log (`log`) they wait in the log for a checkpoint.
fn churned_with(dir: &std::path::Path, log: bool) -> std::path::PathBuf {
    let path = dir.join("db.larch");
    let options = Options::default().compact_on_close(false).log(log);
    let db = Database::open(&path, options).unwrap();
    let mut w = db.begin_write().unwrap();
    w.create_table("t").unwrap();
    let mut t = w.table("t").unwrap();
    for i in 0u32..30_000 {
        t.put(&i.to_be_bytes(), &[9u8; 100]).unwrap();
    }
    w.commit().unwrap();
    let mut w = db.begin_write().unwrap();
    w.table("t")
        .unwrap()
        .delete_range(&1000u32.to_be_bytes()[..]..)
        .unwrap();
    w.commit().unwrap();
    path
}

fn churned(dir: &std::path::Path) -> std::path::PathBuf {
    churned_with(dir, false)
}

#[test]
fn compact_gives_space_back_and_keeps_the_data() {
    let dir = tempfile::tempdir().unwrap();
    let path = churned(dir.path());
    let p = path.to_str().unwrap();
    let before_dump = larch_ok(&["dump", p], b"");
    let before = std::fs::metadata(&path).unwrap().len();
    let out = String::from_utf8(larch_ok(&["compact", p], b"")).unwrap();
    let after = std::fs::metadata(&path).unwrap().len();
    assert!(after * 4 < before, "{before} -> {after}");
    assert_eq!(out, format!("data file: {before} -> {after} bytes\n"));
    assert!(larch_ok(&["dump", p], b"") == before_dump);
    assert_eq!(larch(&["check", p], b"").code, 0);

    // A writer in another process holds the database, idle: the compaction takes its turn,
    // and the writer takes the database back for its next write transaction.
    let db = Database::open(&path, Options::default()).unwrap();
    let r = larch(&["compact", p], b"");
    assert_eq!(r.code, 0, "{}", r.stderr);
    db.put(b"after", b"1").unwrap();
    assert_eq!(db.get(b"after").unwrap().as_deref(), Some(&b"1"[..]));
    drop(db);
    assert_eq!(larch(&["check", p], b"").code, 0);
    // Missing, and not a database.
    assert_eq!(
        larch(&["compact", dir.path().join("nope").to_str().unwrap()], b"").code,
        4
    );
    let junk = dir.path().join("junk");
    std::fs::write(&junk, vec![1u8; 8192]).unwrap();
    assert_eq!(larch(&["compact", junk.to_str().unwrap()], b"").code, 4);
    assert_eq!(std::fs::read(&junk).unwrap(), vec![1u8; 8192]);
    assert_eq!(larch(&["compact"], b"").code, 2);

    // Through the log: the commits are checkpointed into the pages, and the log file is cut
    // to its header.
    let dir = tempfile::tempdir().unwrap();
    let path = churned_with(dir.path(), true);
    let p = path.to_str().unwrap();
    let log_path = larchdb::storage::log_path(&path);
    let before_dump = larch_ok(&["dump", p], b"");
    let log_before = std::fs::metadata(&log_path).unwrap().len();
    let out = String::from_utf8(larch_ok(&["compact", p], b"")).unwrap();
    let log_after = std::fs::metadata(&log_path).unwrap().len();
    assert!(log_after < log_before, "{log_before} -> {log_after}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(lines[0].starts_with("data file: "), "{out}");
    assert!(
        lines[1].ends_with(&format!(" -> {log_after} bytes")),
        "{out}"
    );
    assert!(larch_ok(&["dump", p], b"") == before_dump);
    assert_eq!(larch(&["check", p], b"").code, 0);
}

#[test]
fn stat_lists_readers_of_other_processes_and_free_space() {
    let dir = tempfile::tempdir().unwrap();
    let path = churned(dir.path());
    let p = path.to_str().unwrap();
    let quiet = String::from_utf8(larch_ok(&["stat", p, "-r", "-f"], b"")).unwrap();
    // Written without the log: no log file.
    assert!(!larchdb::storage::log_path(&path).exists());
    assert!(quiet.contains("  Log file size: none\n"), "{quiet}");
    // With the log: its file's length.
    let logged_dir = tempfile::tempdir().unwrap();
    let logged = churned_with(logged_dir.path(), true);
    let log_bytes = std::fs::metadata(larchdb::storage::log_path(&logged))
        .unwrap()
        .len();
    let out = String::from_utf8(larch_ok(&["stat", logged.to_str().unwrap()], b"")).unwrap();
    assert!(
        out.contains(&format!("  Log file size: {log_bytes} bytes\n")),
        "{out}"
    );
    assert!(quiet.contains("Reader Table Status\n"), "{quiet}");
    assert!(quiet.contains("(no active readers)"), "{quiet}");
    assert!(quiet.contains("Freelist Status\n"), "{quiet}");
    assert!(quiet.contains("Oldest reader: none"), "{quiet}");
    let pages = |label: &str| -> u64 {
        quiet
            .lines()
            .find_map(|l| l.trim().strip_prefix(label))
            .and_then(|l| l.split(' ').next())
            .unwrap()
            .parse()
            .unwrap()
    };
    let (free, pending) = (pages("Free pages: "), pages("Pending pages: "));
    assert!(
        free + pending > 100,
        "the deletions left free pages: {quiet}"
    );
    assert!(quiet.contains(&format!(
        "  Pending pages: {pending} ({} bytes",
        pending * 4096
    )));

    // A read-only handle in this process, holding a snapshot: listed with this pid.
    let reader = Database::open(&path, Options::default().read_only(true)).unwrap();
    let snap = reader.begin_read().unwrap();
    let held = String::from_utf8(larch_ok(&["stat", p, "--readers", "--freelist"], b"")).unwrap();
    let row = format!("{:>7} {:>7} {:>8}  other", std::process::id(), snap.id(), 1);
    assert!(held.contains(&row), "{row:?} in {held}");
    assert!(
        held.contains(&format!(
            // On the newest commit: none of the pending pages are its.
            "Oldest reader: commit {} (0 commits behind, up to 0 pages pinned)",
            snap.id()
        )),
        "{held}"
    );
    drop(snap);
    drop(reader);
}
