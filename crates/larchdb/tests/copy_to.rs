//! `Database::copy_to`: a hot copy of one snapshot into a new, compacted file.

mod common;

use larchdb::{Database, Error, Options, TableDefinition};

fn fill(db: &Database, n: u32) {
    let mut w = db.begin_write().unwrap();
    w.ensure_table("a").unwrap();
    w.ensure_table("b").unwrap();
    w.set_table_properties("b", b"props of b").unwrap();
    let mut a = w.table("a").unwrap();
    for i in 0..n {
        a.put(&i.to_be_bytes(), &[(i % 251) as u8; 40]).unwrap();
    }
    w.table("b").unwrap().put(b"only", b"one").unwrap();
    w.commit().unwrap();
}

#[test]
fn the_copy_holds_the_snapshot_it_began_on_while_the_writer_goes_on() {
    for log in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path().join("src"), Options::default().log(log)).unwrap();
        fill(&db, 120_000);
        const TYPED: TableDefinition<u64, &str> = TableDefinition::new("typed");
        let mut w = db.begin_write().unwrap();
        w.open_table(TYPED).unwrap().put(1, "one").unwrap();
        w.commit().unwrap();
        // With the log, some commits are still only in the overlay and the log.
        for i in 0..100u32 {
            db.put(&i.to_be_bytes(), b"default").unwrap();
        }
        let before = common::contents(&db);
        let txn = db.begin_read().unwrap().id();

        // Commits made while the copy runs (from its progress callback) are not in it.
        let mut reports = Vec::new();
        let copied = db
            .copy_to_with_progress(dir.path().join("copy"), |n| {
                reports.push(n);
                db.put(format!("during {n}").as_bytes(), b"x").unwrap();
            })
            .unwrap();
        assert_eq!(copied.txn, txn);
        assert_eq!(copied.tables, 4);
        assert_eq!(copied.entries, 120_000 + 1 + 1 + 100);
        assert_eq!(reports, vec![50_000, 100_000, 120_102], "log {log}");
        assert_eq!(
            copied.bytes,
            std::fs::metadata(dir.path().join("copy")).unwrap().len()
        );

        let copy = Database::open(dir.path().join("copy"), Options::default()).unwrap();
        assert_eq!(common::contents(&copy), before, "log {log}");
        assert!(copy.verify().unwrap().is_clean());
        // Dense: leaves full, and at most the few pages the batches' commits freed.
        let stats = copy.stats().unwrap();
        assert!(stats.free_pages + stats.pending_pages <= 4, "{stats:?}");
        // The typed table keeps its type record.
        let r = copy.begin_read().unwrap();
        assert_eq!(r.open_table(TYPED).unwrap().get(1).unwrap(), Some("one"));
        drop(r);
        drop(copy);
        // Nothing else left beside it: no temporary file, no lock file of the temporary.
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.contains(".larch-copy-"))
            .collect();
        names.sort();
        assert!(names.is_empty(), "{names:?}");
        // The source saw the commits made during the copy.
        assert_eq!(db.get(b"during 50000").unwrap(), Some(b"x".to_vec()));
    }
}

#[test]
fn an_existing_or_unreachable_destination_is_refused_and_nothing_is_left() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("src"), Options::default()).unwrap();
    fill(&db, 10);
    std::fs::write(dir.path().join("taken"), b"mine").unwrap();
    match db.copy_to(dir.path().join("taken")) {
        Err(Error::Io { op, path, source }) => {
            assert_eq!(op, "create");
            assert_eq!(path, Some(dir.path().join("taken")));
            assert_eq!(source.kind(), std::io::ErrorKind::AlreadyExists);
        }
        other => panic!("expected an Io error, got {other:?}"),
    }
    assert_eq!(std::fs::read(dir.path().join("taken")).unwrap(), b"mine");

    let missing = dir.path().join("no-such-dir").join("copy");
    assert!(matches!(db.copy_to(&missing), Err(Error::Io { .. })));
    let mut left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    // The source, its lock file and its log, and the file that was there.
    assert_eq!(left, ["src", "src-lock", "src-log", "taken"]);
}
