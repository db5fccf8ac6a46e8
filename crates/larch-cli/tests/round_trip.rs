//! dump -> load -> dump is byte-identical in both formats, on awkward data.

mod common;
use common::*;

fn round_trip(print: bool) {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.larch");
    let b = dir.path().join("b.larch");
    build_db(&a, &awkward_tables());
    let a_str = a.to_str().unwrap();
    let b_str = b.to_str().unwrap();
    let mut args = vec!["dump", a_str, "--all"];
    if print {
        args.push("--print");
    }
    let first = larch_ok(&args, b"");
    larch_ok(&["load", b_str], &first);
    args[1] = b_str;
    let second = larch_ok(&args, b"");
    assert!(first == second, "second dump differs from the first");

    // The loaded database holds exactly the data.
    let db = larchdb::Database::open(&b, larchdb::Options::default().read_only(true)).unwrap();
    let r = db.begin_read().unwrap();
    for (name, items) in awkward_tables() {
        let t = r.table(&name).unwrap();
        let got: Vec<(Vec<u8>, Vec<u8>)> = t
            .iter()
            .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())))
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(got, items, "table {name}");
    }
}

#[test]
fn bytevalue_round_trip_is_byte_identical() {
    round_trip(false);
}

#[test]
fn print_round_trip_is_byte_identical() {
    round_trip(true);
}

#[test]
fn dump_format_is_exact() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.larch");
    let tables = vec![(
        "t".to_string(),
        vec![
            (b"".to_vec(), b"".to_vec()),
            (b"a\\b".to_vec(), vec![0x00, 0xff, b' ', b'~', 0x7f]),
        ],
    )];
    build_db(&a, &tables);
    let a = a.to_str().unwrap();
    let bytevalue = larch_ok(&["dump", a], b"");
    assert_eq!(
        String::from_utf8(bytevalue).unwrap(),
        "VERSION=3\nformat=bytevalue\ndatabase=t\ntype=btree\nmapsize=1048576\ndb_pagesize=4096\nHEADER=END\n \n \n 615c62\n 00ff207e7f\nDATA=END\n"
    );
    let print = larch_ok(&["dump", a, "-p", "-s", "t"], b"");
    assert_eq!(
        String::from_utf8(print).unwrap(),
        "VERSION=3\nformat=print\ndatabase=t\ntype=btree\nmapsize=1048576\ndb_pagesize=4096\nHEADER=END\n \n \n a\\5cb\n \\00\\ff ~\\7f\nDATA=END\n"
    );
}

#[test]
fn table_selects_one_section_and_missing_table_fails() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.larch");
    build_db(&a, &awkward_tables());
    let a = a.to_str().unwrap();
    let out = String::from_utf8(larch_ok(&["dump", a, "--table", "beta"], b"")).unwrap();
    assert_eq!(out.matches("VERSION=3").count(), 1);
    assert!(out.contains("database=beta\n"));
    let r = larch(&["dump", a, "--table", "nope"], b"");
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("nope"), "{}", r.stderr);
    let r = larch(&["dump", a, "--table", "beta", "--all"], b"");
    assert_eq!(r.code, 2);
}
