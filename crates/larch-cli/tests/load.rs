//! `larch load`: sections, all-or-nothing per section, plaintext, no-overwrite.

mod common;
use common::*;

fn dump(db: &str) -> String {
    String::from_utf8(larch_ok(&["dump", db], b"")).unwrap()
}

#[test]
fn a_malformed_section_commits_nothing_and_names_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db.larch");
    let db = db.to_str().unwrap();
    let input =
        "VERSION=3\nformat=bytevalue\ndatabase=good\ntype=btree\nHEADER=END\n 01\n 02\nDATA=END\n\
VERSION=3\nformat=bytevalue\ndatabase=bad\ntype=btree\nHEADER=END\n 01\n 02\n 03\n 0x\nDATA=END\n";
    let r = larch(&["load", db], input.as_bytes());
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains(":17:"), "{}", r.stderr);
    assert!(r.stderr.contains("\"bad\""), "{}", r.stderr);
    let out = dump(db);
    assert!(out.contains("database=good\n"));
    assert!(!out.contains("database=bad\n"), "{out}");

    // Truncated input (no DATA=END) and a key without a value are malformed too.
    for bad in [
        "VERSION=3\ndatabase=t\nHEADER=END\n 01\n 02\n",
        "VERSION=3\ndatabase=t\nHEADER=END\n 01\nDATA=END\n",
        "VERSION=3\ndatabase=t\nHEADER=END\n01\n 02\nDATA=END\n",
        "VERSION=2\ndatabase=t\nHEADER=END\nDATA=END\n",
        "VERSION=3\ndatabase=t\nduplicates=1\nHEADER=END\nDATA=END\n",
    ] {
        let r = larch(&["load", db], bad.as_bytes());
        assert_eq!(r.code, 3, "{bad:?}: {}", r.stderr);
        assert!(r.stderr.contains(":"), "{}", r.stderr);
        assert!(!dump(db).contains("database=t\n"), "{bad:?} committed");
    }
}

#[test]
fn table_flag_overrides_and_existing_data_is_kept_or_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db.larch");
    let db = db.to_str().unwrap();
    let first = "VERSION=3\ndatabase=a\nHEADER=END\n 6b\n 31\n 6c\n 31\nDATA=END\n";
    larch_ok(&["load", db, "--table", "x"], first.as_bytes());
    let second = "VERSION=3\ndatabase=a\nHEADER=END\n 6b\n 32\n 6d\n 32\nDATA=END\n";
    larch_ok(
        &["load", db, "-s", "x", "--no-overwrite"],
        second.as_bytes(),
    );
    let out = dump(db);
    assert!(out.contains(" 6b\n 31\n 6c\n 31\n 6d\n 32\n"), "{out}");
    assert!(!out.contains("database=a\n"));
    larch_ok(&["load", db, "-s", "x"], second.as_bytes());
    assert!(dump(db).contains(" 6b\n 32\n"));
}

#[test]
fn plaintext_pairs_load_and_need_a_table() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db.larch");
    let db = db.to_str().unwrap();
    let input = "key one\nvalue\\00one\nk\\\\2\n\n";
    assert_eq!(larch(&["load", db, "-T"], input.as_bytes()).code, 2);
    larch_ok(&["load", db, "-T", "-s", "p"], input.as_bytes());
    let out = dump(db);
    assert!(
        out.contains(" 6b5c32\n \n 6b6579206f6e65\n 76616c7565006f6e65\n"),
        "{out}"
    );
    let r = larch(&["load", db, "-T", "-s", "q"], b"odd\n");
    assert_eq!(r.code, 3);
    assert!(!dump(db).contains("database=q"));
}

#[test]
fn load_from_file_and_page_size_from_header() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("in.dump");
    std::fs::write(
        &f,
        "VERSION=3\nformat=print\ndatabase=t\ntype=btree\nmapsize=1048576\ndb_pagesize=8192\nHEADER=END\n a\n b\nDATA=END\n",
    )
    .unwrap();
    let db = dir.path().join("db.larch");
    let db = db.to_str().unwrap();
    let r = larch(&["load", db, "--file", f.to_str().unwrap()], b"");
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.is_empty(),
        "known header lines are not warned about: {}",
        r.stderr
    );
    assert!(dump(db).contains("db_pagesize=8192\n"));
}
