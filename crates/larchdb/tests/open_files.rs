//! What `Database::open` does with files that are not databases yet: an empty file becomes one
//! only when creating was asked for, and a refused open leaves no lock file behind.

use larchdb::{storage::lock_path, Database, Error, Options};

#[test]
fn an_empty_file_becomes_a_database_only_with_create() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty");
    std::fs::File::create(&path).unwrap();
    match Database::open(&path, Options::default().create(false)) {
        Err(Error::NotADatabase) => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        0,
        "nothing written"
    );
    assert!(!lock_path(&path).exists(), "no lock file left behind");
    match Database::open(&path, Options::default().read_only(true)) {
        Err(Error::NotADatabase) => {}
        other => panic!("{other:?}"),
    }
    assert!(!lock_path(&path).exists());
    // Asked to create, it does.
    let db = Database::open(&path, Options::default()).unwrap();
    let mut w = db.begin_write().unwrap();
    w.create_table("t").unwrap();
    w.commit().unwrap();
    drop(db);
    assert!(lock_path(&path).exists(), "a database keeps its lock file");
    Database::open(&path, Options::default().create(false)).unwrap();
}

#[test]
fn a_file_that_is_not_a_database_is_refused_and_left_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.txt");
    let text = b"not a database, only some text that is long enough to be read".repeat(200);
    std::fs::write(&path, &text).unwrap();
    for options in [Options::default(), Options::default().read_only(true)] {
        match Database::open(&path, options) {
            Err(Error::NotADatabase) => {}
            other => panic!("{other:?}"),
        }
        assert_eq!(std::fs::read(&path).unwrap(), text, "the file is untouched");
        assert!(!lock_path(&path).exists(), "no lock file left behind");
    }
    // A lock file that was there before the open stays.
    std::fs::write(lock_path(&path), b"").unwrap();
    assert!(matches!(
        Database::open(&path, Options::default()),
        Err(Error::NotADatabase)
    ));
    assert!(lock_path(&path).exists());
}
