//! Table properties: opaque bytes an application attaches to a table, kept in its catalog
//! entry across commits that change the table and across reopening; bounded in size.

use larchdb::limits::TABLE_PROPERTIES_BYTES_MAX;
use larchdb::{Database, Error, Options};

#[test]
fn properties_are_kept_until_changed_and_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.larch");
    let db = Database::open(&path, Options::default()).unwrap();
    let mut w = db.begin_write().unwrap();
    w.create_table("t").unwrap();
    w.create_table("u").unwrap();
    assert!(matches!(
        w.set_table_properties("missing", b"x"),
        Err(Error::TableNotFound(_))
    ));
    let too_big = vec![1u8; TABLE_PROPERTIES_BYTES_MAX + 1];
    assert!(matches!(
        w.set_table_properties("t", &too_big),
        Err(Error::ValueTooLarge { .. })
    ));
    w.set_table_properties("t", b"mapsize=1048576\nmaxreaders=126\n")
        .unwrap();
    w.commit().unwrap();
    let r = db.begin_read().unwrap();
    assert_eq!(
        r.table_properties("t").unwrap(),
        b"mapsize=1048576\nmaxreaders=126\n"
    );
    assert_eq!(r.table_properties("u").unwrap(), b"");
    drop(r);

    // Writes to the table rewrite its catalog entry: the properties stay.
    let mut w = db.begin_write().unwrap();
    {
        let mut t = w.table("t").unwrap();
        for i in 0u32..2000 {
            t.put(&i.to_be_bytes(), &[9; 50]).unwrap();
        }
    }
    let full = vec![7u8; TABLE_PROPERTIES_BYTES_MAX];
    w.set_table_properties("u", &full).unwrap();
    w.commit().unwrap();
    drop(db);

    let db = Database::open(&path, Options::default()).unwrap();
    let r = db.begin_read().unwrap();
    assert_eq!(
        r.table_properties("t").unwrap(),
        b"mapsize=1048576\nmaxreaders=126\n"
    );
    assert_eq!(r.table_properties("u").unwrap(), &full[..]);
    assert_eq!(r.table("t").unwrap().len().unwrap(), 2000);
    drop(r);
    assert!(db.verify_all().unwrap().is_clean());

    // Cleared by setting them empty; gone with the table.
    let mut w = db.begin_write().unwrap();
    w.set_table_properties("t", b"").unwrap();
    w.delete_table("u").unwrap();
    w.create_table("u").unwrap();
    w.commit().unwrap();
    let r = db.begin_read().unwrap();
    assert_eq!(r.table_properties("t").unwrap(), b"");
    assert_eq!(r.table_properties("u").unwrap(), b"");
}
