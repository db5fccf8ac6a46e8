//! Interop with the real Debian lmdb-utils 0.9.24 (installed by scripts/setup.sh).
//!
//! `mapsize=` and `maxreaders=` are LMDB environment settings with no meaning for a Larch file:
//! `larch load` keeps them with each table (table properties) and `larch dump` writes them
//! back, so `mdb_dump | larch load; larch dump` reproduces mdb_dump's output byte for byte. A
//! table Larch built itself has none, so its dump is compared with mdb_dump's output without
//! those two lines.

mod common;
use common::*;
use std::path::Path;

fn mdb_load(input: &[u8], env: &Path) {
    std::fs::create_dir_all(env).unwrap();
    let r = run_program("mdb_load", &[env.to_str().unwrap()], input);
    assert_eq!(r.code, 0, "mdb_load failed: {}", r.stderr);
    assert!(!r.stderr.contains("error"), "mdb_load: {}", r.stderr);
}

fn mdb_dump(env: &Path, print: bool) -> Vec<u8> {
    let mut args = vec!["-a"];
    if print {
        args.push("-p");
    }
    args.push(env.to_str().unwrap());
    let r = run_program("mdb_dump", &args, b"");
    assert_eq!(r.code, 0, "mdb_dump failed: {}", r.stderr);
    r.stdout
}

/// Byte equality, reporting the first differing line (dumps are too long to print whole).
fn assert_same(a: &[u8], b: &[u8]) {
    if a == b {
        return;
    }
    let (ta, tb) = (text(a), text(b));
    for (i, (la, lb)) in ta.lines().zip(tb.lines()).enumerate() {
        let cut = |s: &str| s.chars().take(200).collect::<String>();
        assert_eq!(cut(la), cut(lb), "first difference at line {}", i + 1);
    }
    panic!(
        "dumps differ in length: {} and {} lines",
        ta.lines().count(),
        tb.lines().count()
    );
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `larch dump | mdb_load`, then mdb_dump equals larch's dump.
fn larch_to_lmdb(tables: &Tables, print: bool) {
    require_lmdb_utils();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("src.larch");
    build_db(&db, tables);
    let db = db.to_str().unwrap();
    let mut args = vec!["dump", db, "--all"];
    if print {
        args.push("--print");
    }
    let ours = larch_ok(&args, b"");
    assert!(
        text(&ours).contains("\nmapsize=1048576\n"),
        "{}",
        text(&ours)
    );
    let env = dir.path().join("env");
    mdb_load(&ours, &env);
    let theirs = without_env_lines(&mdb_dump(&env, print));
    assert_same(&theirs, &without_env_lines(&ours));
}

/// `mdb_dump | larch load`, then larch dump equals mdb_dump's output, environment lines and
/// all; and that dump, loaded back into LMDB, dumps the same again.
fn lmdb_to_larch(tables: &Tables, print: bool) {
    require_lmdb_utils();
    let dir = tempfile::tempdir().unwrap();
    let env = dir.path().join("env");
    mdb_load(hand_dump(tables).as_bytes(), &env);
    let theirs = mdb_dump(&env, print);
    let db = dir.path().join("dst.larch");
    let db = db.to_str().unwrap();
    larch_ok(&["load", db], &theirs);
    let mut args = vec!["dump", db, "--all"];
    if print {
        args.push("--print");
    }
    let ours = larch_ok(&args, b"");
    assert_same(&ours, &theirs);
    let env2 = dir.path().join("env2");
    mdb_load(&ours, &env2);
    assert_same(&mdb_dump(&env2, print), &theirs);
    // A copy keeps them too.
    let copy = dir.path().join("copy.larch");
    let copy = copy.to_str().unwrap();
    larch_ok(&["copy", db, copy], b"");
    args[1] = copy;
    assert_same(&larch_ok(&args, b""), &theirs);
}

#[test]
fn larch_bytevalue_dump_loads_into_lmdb() {
    larch_to_lmdb(&awkward_tables(), false);
}

#[test]
fn larch_print_dump_loads_into_lmdb() {
    // mdb_dump -p cannot reproduce backslashes faithfully, so compare on data without them...
    larch_to_lmdb(&printable_safe_tables(), true);
    // ...and check that mdb_load reads our doubled backslashes right, through bytevalue.
    require_lmdb_utils();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("src.larch");
    build_db(&db, &awkward_tables());
    let db = db.to_str().unwrap();
    let env = dir.path().join("env");
    mdb_load(&larch_ok(&["dump", db, "--print"], b""), &env);
    let theirs = without_env_lines(&mdb_dump(&env, false));
    assert_same(&theirs, &without_env_lines(&larch_ok(&["dump", db], b"")));
}

#[test]
fn lmdb_bytevalue_dump_reloads_byte_for_byte() {
    lmdb_to_larch(&awkward_tables(), false);
}

#[test]
fn lmdb_print_dump_reloads_byte_for_byte() {
    lmdb_to_larch(&printable_safe_tables(), true);
}

#[test]
fn mdb_dump_print_backslash_quirk_is_detected_not_misread() {
    require_lmdb_utils();
    let tables = vec![(
        "paths".to_string(),
        vec![
            (b"a\\b".to_vec(), b"C:\\dir".to_vec()),
            (b"plain".to_vec(), b"x\\".to_vec()),
        ],
    )];
    let dir = tempfile::tempdir().unwrap();
    let env = dir.path().join("env");
    mdb_load(hand_dump(&tables).as_bytes(), &env);
    let theirs = mdb_dump(&env, true);
    // The quirk: mdb_dump 0.9.24 writes a backslash as itself, not as `\\`.
    assert!(text(&theirs).contains("\n a\\b\n"), "{}", text(&theirs));

    // Larch writes it as \5c; apart from that, the dumps agree (this table has no other
    // escapes).
    let db = dir.path().join("l.larch");
    build_db(&db, &tables);
    let db = db.to_str().unwrap();
    let ours = larch_ok(&["dump", db, "--print"], b"");
    let fixed = text(&without_env_lines(&theirs)).replace('\\', "\\5c");
    assert_eq!(text(&without_env_lines(&ours)), fixed);

    // Loading mdb_dump's quirky output fails naming the line; nothing is committed.
    let fresh = dir.path().join("fresh.larch");
    let fresh = fresh.to_str().unwrap();
    let r = larch(&["load", fresh], &theirs);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains(":9:"), "{}", r.stderr);
    assert!(r.stderr.contains("bytevalue"), "{}", r.stderr);
    let r = larch(&["dump", fresh, "--table", "paths"], b"");
    assert_ne!(r.code, 0, "the failed section must not be committed");
}

#[test]
fn mdb_load_0924_misreads_a_doubled_backslash_after_an_escape() {
    // Why larch dump --print writes a backslash as \5c rather than \\ (db_dump's way):
    // mdb_load 0.9.24 decodes the second `\\` of "a\\b\\c" to a stale byte.
    require_lmdb_utils();
    let dir = tempfile::tempdir().unwrap();
    let env = dir.path().join("env");
    let input = "VERSION=3\nformat=print\ndatabase=x\ntype=btree\nHEADER=END\n \
                 k1\n a\\\\b\\\\c\n k2\n a\\5cb\\5cc\nDATA=END\n";
    mdb_load(input.as_bytes(), &env);
    let r = run_program("mdb_dump", &["-s", "x", env.to_str().unwrap()], b"");
    let out = text(&r.stdout);
    assert!(out.contains(" 6b31\n 615c626263\n"), "quirk gone? {out}");
    assert!(out.contains(" 6b32\n 615c625c63\n"), "{out}");
}

#[test]
fn lmdb_main_database_dump_loads_into_the_default_table_and_back() {
    require_lmdb_utils();
    let dir = tempfile::tempdir().unwrap();
    let env = dir.path().join("env");
    let main = "VERSION=3\nformat=bytevalue\ntype=btree\nHEADER=END\n 6b\n 76\nDATA=END\n";
    mdb_load(main.as_bytes(), &env);
    let r = run_program("mdb_dump", &[env.to_str().unwrap()], b"");
    assert_eq!(r.code, 0);
    assert!(
        text(&r.stdout).contains("\nmapsize="),
        "{}",
        text(&r.stdout)
    );
    // No --table: the unnamed database is the default table, dumped back without a
    // database= line, byte for byte.
    let db = dir.path().join("m.larch");
    let db = db.to_str().unwrap();
    larch_ok(&["load", db], &r.stdout);
    assert_same(&larch_ok(&["dump", db], b""), &r.stdout);
    let got = larchdb::Database::open(db, larchdb::Options::default().read_only(true))
        .unwrap()
        .get(b"k")
        .unwrap();
    assert_eq!(got, Some(b"v".to_vec()));
    // And back into LMDB's main database.
    let env2 = dir.path().join("env2");
    mdb_load(&larch_ok(&["dump", db], b""), &env2);
    let again = run_program("mdb_dump", &[env2.to_str().unwrap()], b"");
    assert_same(&again.stdout, &r.stdout);
}

/// The README's `larch dump | mdb_load` on a database larger than LMDB's default 1 MiB map:
/// the dump's mapsize= makes room (without it, MDB_MAP_FULL).
#[test]
fn a_dump_larger_than_lmdbs_default_map_loads_into_lmdb() {
    require_lmdb_utils();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("big.larch");
    let mut items = Vec::new();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..30_000u32 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let value = vec![(i % 251) as u8; 60 + (x % 120) as usize];
        items.push((x.to_be_bytes().to_vec(), value));
    }
    items.push((b"huge".to_vec(), vec![7u8; 300_000]));
    build_db(
        &db,
        &vec![
            ("big".to_string(), items.clone()),
            ("small".to_string(), items[..10].to_vec()),
        ],
    );
    let ours = larch_ok(&["dump", db.to_str().unwrap()], b"");
    let mapsize: u64 = text(&ours)
        .lines()
        .find_map(|l| l.strip_prefix("mapsize="))
        .unwrap()
        .parse()
        .unwrap();
    assert!(mapsize > 1 << 20, "{mapsize}");
    let env = dir.path().join("env");
    mdb_load(&ours, &env);
    assert_same(
        &without_env_lines(&mdb_dump(&env, false)),
        &without_env_lines(&ours),
    );
}

/// The keywords mdb_load 0.9.24 warns about ("unrecognized keyword ignored: KEY"), once each.
fn unrecognized_keywords(stderr: &str) -> std::collections::BTreeSet<String> {
    stderr
        .lines()
        .filter_map(|l| l.split_once("unrecognized keyword ignored: "))
        .map(|(_, k)| k.trim().to_string())
        .collect()
}

/// `larch dump | mdb_load` draws no "unrecognized keyword" warning that mdb_dump's own output
/// does not draw too: larch's header has mdb_dump's lines only. The one warning left is
/// `db_pagesize`, which mdb_dump 0.9.24 writes and mdb_load 0.9.24 does not know; larch
/// writes it as mdb_dump does, so that a dump from LMDB comes back byte for byte. Header lines
/// kept from a loaded dump that LMDB does not know (from a db_dump, or unknown ones) are left
/// out of the dump, and written with `--bdb`.
#[test]
fn mdb_load_warns_about_no_line_of_a_larch_dump_but_those_of_mdb_dumps_own() {
    require_lmdb_utils();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("src.larch");
    let db = db.to_str().unwrap();
    // A table Larch made, the default table, and a table loaded from a dump whose header has
    // lines of BerkeleyDB's (db_lorder), an unknown one, and LMDB's maxreaders.
    build_db(
        Path::new(db),
        &vec![("made".to_string(), vec![(b"k".to_vec(), b"v".to_vec())])],
    );
    let loaded = "VERSION=3\nformat=bytevalue\ndatabase=kept\ntype=btree\ndb_lorder=1234\n\
                  maxreaders=126\nfoo=bar\ndb_pagesize=4096\nHEADER=END\n 61\n 62\nDATA=END\n\
                  VERSION=3\nformat=bytevalue\ntype=btree\nHEADER=END\n 6d\n 6e\nDATA=END\n";
    larch_ok(&["load", db], loaded.as_bytes());
    for print in [false, true] {
        let mut args = vec!["dump", db, "--all"];
        if print {
            args.push("--print");
        }
        let ours = larch_ok(&args, b"");
        // Only keywords mdb_dump writes.
        for line in text(&ours).lines() {
            if let Some((key, _)) = line.split_once('=') {
                assert!(
                    [
                        "VERSION",
                        "format",
                        "database",
                        "type",
                        "mapsize",
                        "maxreaders",
                        "mapaddr",
                        "db_pagesize",
                        "HEADER",
                        "DATA"
                    ]
                    .contains(&key),
                    "{key} is not one of mdb_dump's keywords:\n{}",
                    text(&ours)
                );
            }
        }
        assert!(
            text(&ours).contains("\nmaxreaders=126\n"),
            "{}",
            text(&ours)
        );
        let env = dir.path().join(format!("env-{print}"));
        std::fs::create_dir_all(&env).unwrap();
        let r = run_program("mdb_load", &[env.to_str().unwrap()], &ours);
        assert_eq!(r.code, 0, "mdb_load failed: {}", r.stderr);
        let from_larch = unrecognized_keywords(&r.stderr);
        // The same data dumped by mdb_dump, loaded again: what mdb_load says about its own
        // tool's output.
        let theirs = mdb_dump(&env, print);
        let env2 = dir.path().join(format!("env2-{print}"));
        std::fs::create_dir_all(&env2).unwrap();
        let r2 = run_program("mdb_load", &[env2.to_str().unwrap()], &theirs);
        assert_eq!(r2.code, 0, "mdb_load failed: {}", r2.stderr);
        let from_mdb_dump = unrecognized_keywords(&r2.stderr);
        assert_eq!(from_larch, from_mdb_dump, "{}\n{}", r.stderr, r2.stderr);
        assert_eq!(
            from_larch.into_iter().collect::<Vec<_>>(),
            ["db_pagesize"],
            "{}",
            r.stderr
        );
        // Nothing else on stderr but those warnings.
        assert!(
            r.stderr
                .lines()
                .all(|l| l.contains("unrecognized keyword ignored: db_pagesize")),
            "mdb_load: {}",
            r.stderr
        );
    }
    // The lines LMDB does not know are still kept, for db_load.
    let bdb = text(&larch_ok(&["dump", db, "--table", "kept", "--bdb"], b""));
    assert!(bdb.contains("\ndb_lorder=1234\nfoo=bar\n"), "{bdb}");
    assert!(!bdb.contains("maxreaders"), "{bdb}");
}
