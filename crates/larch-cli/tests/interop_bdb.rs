//! Interop with BerkeleyDB's db_dump and db_load (Debian db-util, BerkeleyDB 5.3; installed by
//! scripts/setup.sh). BerkeleyDB writes the same VERSION=3 format as mdb_dump, with the same
//! header lines as Larch (no mapsize/maxreaders), so whole dumps compare byte for byte; the
//! one difference is a backslash in print format (see `print_backslashes`).

mod common;
use common::*;
use std::path::Path;

fn db_load(input: &[u8], file: &Path) {
    let r = run_program("db_load", &[file.to_str().unwrap()], input);
    assert_eq!(r.code, 0, "db_load failed: {}", r.stderr);
    assert!(r.stderr.is_empty(), "db_load: {}", r.stderr);
}

fn db_dump(file: &Path, print: bool) -> Vec<u8> {
    let mut args = Vec::new();
    if print {
        args.push("-p");
    }
    args.push(file.to_str().unwrap());
    let r = run_program("db_dump", &args, b"");
    assert_eq!(r.code, 0, "db_dump failed: {}", r.stderr);
    r.stdout
}

/// db_dump -p writes a backslash byte as `\\`, larch as `\5c` (mdb_load 0.9.24 misreads a
/// second `\\` on a line; see cli.md). Every backslash in db_dump's print output starts an
/// escape and hex digits hold none, so a left-to-right replacement maps one form to the other.
fn print_backslashes(db_dump_output: &[u8]) -> Vec<u8> {
    String::from_utf8(db_dump_output.to_vec())
        .unwrap()
        .replace("\\\\", "\\5c")
        .into_bytes()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn assert_same(a: &[u8], b: &[u8]) {
    if a == b {
        return;
    }
    for (i, (la, lb)) in text(a).lines().zip(text(b).lines()).enumerate() {
        let cut = |s: &str| s.chars().take(200).collect::<String>();
        assert_eq!(cut(la), cut(lb), "first difference at line {}", i + 1);
    }
    panic!("dumps differ in length");
}

/// BDB dump -> larch load -> larch dump reproduces db_dump's output.
fn bdb_to_larch(print: bool) {
    require_bdb_utils();
    let dir = tempfile::tempdir().unwrap();
    let bdb = dir.path().join("src.db");
    db_load(hand_dump(&awkward_tables()).as_bytes(), &bdb);
    let theirs = db_dump(&bdb, print);
    let db = dir.path().join("dst.larch");
    let db = db.to_str().unwrap();
    larch_ok(&["load", db], &theirs);
    let mut args = vec!["dump", db, "--all", "--bdb"];
    if print {
        args.push("--print");
    }
    let ours = larch_ok(&args, b"");
    let expected = if print {
        print_backslashes(&theirs)
    } else {
        theirs
    };
    assert_same(&ours, &expected);
}

/// larch dump -> db_load -> db_dump reproduces larch's dump.
fn larch_to_bdb(print: bool) {
    require_bdb_utils();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("src.larch");
    build_db(&db, &awkward_tables());
    let db = db.to_str().unwrap();
    let mut args = vec!["dump", db, "--all", "--bdb"];
    if print {
        args.push("--print");
    }
    let ours = larch_ok(&args, b"");
    let bdb = dir.path().join("dst.db");
    db_load(&ours, &bdb);
    let theirs = db_dump(&bdb, print);
    let theirs = if print {
        print_backslashes(&theirs)
    } else {
        theirs
    };
    assert_same(&theirs, &ours);
}

#[test]
fn bdb_bytevalue_dump_reloads_byte_for_byte() {
    bdb_to_larch(false);
}

#[test]
fn bdb_print_dump_reloads_byte_for_byte_but_backslashes() {
    bdb_to_larch(true);
}

#[test]
fn larch_bytevalue_dump_loads_into_bdb() {
    larch_to_bdb(false);
}

#[test]
fn larch_print_dump_loads_into_bdb() {
    larch_to_bdb(true);
}

#[test]
fn db_dump_of_one_database_has_no_name_and_loads_into_the_default_table() {
    // Quirk: `db_dump -s NAME` leaves out the database= line, so the section cannot say which
    // table it is; larch load puts it in the default table (as LMDB's main database), and
    // dumps it back without the line, byte for byte; --table names another table.
    require_bdb_utils();
    let dir = tempfile::tempdir().unwrap();
    let bdb = dir.path().join("src.db");
    db_load(hand_dump(&awkward_tables()).as_bytes(), &bdb);
    let r = run_program("db_dump", &["-s", "alpha", bdb.to_str().unwrap()], b"");
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!text(&r.stdout).contains("database="), "quirk gone?");
    let db = dir.path().join("one.larch");
    let db = db.to_str().unwrap();
    larch_ok(&["load", db], &r.stdout);
    assert_same(&larch_ok(&["dump", db, "--bdb"], b""), &r.stdout);
    let named = dir.path().join("named.larch");
    let named = named.to_str().unwrap();
    larch_ok(&["load", named, "--table", "alpha"], &r.stdout);
    let ours = larch_ok(&["dump", named, "--table", "alpha", "--bdb"], b"");
    let expected =
        text(&r.stdout).replace("format=bytevalue\n", "format=bytevalue\ndatabase=alpha\n");
    assert_eq!(text(&ours), expected);
}
