//! Clear messages and distinct exit statuses for the usual failures, and --help everywhere.

mod common;
use common::*;

#[test]
fn missing_path_not_a_database_and_directory() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.larch");
    for cmd in ["stat", "check", "dump"] {
        let r = larch(&[cmd, missing.to_str().unwrap()], b"");
        assert_eq!(r.code, 4, "{cmd}: {}", r.stderr);
        assert!(r.stderr.contains("no such file"), "{}", r.stderr);
    }
    assert!(
        !missing.exists(),
        "a read-only command must not create the file"
    );

    let junk = dir.path().join("junk");
    std::fs::write(&junk, vec![0x5a; 16384]).unwrap();
    let r = larch(&["stat", junk.to_str().unwrap()], b"");
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(r.stderr.contains("not a Larch database"), "{}", r.stderr);

    let r = larch(&["check", dir.path().to_str().unwrap()], b"");
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(r.stderr.contains("directory"), "{}", r.stderr);
}

#[test]
fn commands_run_beside_a_writer_in_another_process() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.larch");
    build_db(&path, &awkward_tables());
    // A read-write handle in this process holds the database. The read-only commands
    // register in the lock file's reader table and run beside it; a writing one (load) waits
    // for its turn: the idle holder hands the database over, and takes it back for its next
    // write transaction, which sees the load.
    let writer = larchdb::Database::open(&path, larchdb::Options::default()).unwrap();
    writer.put(b"before", b"1").unwrap();
    let p = path.to_str().unwrap();
    for args in [vec!["stat", p], vec!["dump", p], vec!["check", p]] {
        let r = larch(&args, b"");
        assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
    }
    let r = larch(&["load", p, "--table", "t", "--plaintext"], b"k\nv\n");
    assert_eq!(r.code, 0, "{}", r.stderr);
    let mut w = writer.begin_write().unwrap();
    assert_eq!(w.table("t").unwrap().get(b"k").unwrap(), Some(&b"v"[..]));
    w.commit().unwrap();
}

#[test]
fn usage_errors_exit_2() {
    assert_eq!(larch(&[], b"").code, 2);
    assert_eq!(larch(&["frobnicate"], b"").code, 2);
    assert_eq!(larch(&["stat"], b"").code, 2);
    assert_eq!(larch(&["stat", "a", "b"], b"").code, 2);
    assert_eq!(larch(&["dump", "a", "--bogus"], b"").code, 2);
    assert_eq!(larch(&["copy", "a"], b"").code, 2);
}

#[test]
fn every_command_has_help_with_an_example() {
    for cmd in ["stat", "check", "dump", "load", "copy"] {
        let r = larch(&[cmd, "--help"], b"");
        assert_eq!(r.code, 0, "{cmd}");
        let out = r.stdout_str();
        assert!(out.starts_with(&format!("Usage: larch {cmd}")), "{out}");
        assert!(out.contains("Example:\n  "), "{cmd}: {out}");
        let example = out.split("Example:\n").nth(1).unwrap();
        assert!(example.contains(&format!("larch {cmd} ")), "{cmd}: {out}");
    }
    let r = larch(&["--help"], b"");
    assert_eq!(r.code, 0);
    assert!(r.stdout_str().contains("Exit status"));
}

#[test]
fn stat_reports_figures_and_tables() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.larch");
    build_db(&path, &awkward_tables());
    let entries: usize = awkward_tables().iter().map(|(_, t)| t.len()).sum();
    let out = String::from_utf8(larch_ok(&["stat", path.to_str().unwrap(), "--all"], b"")).unwrap();
    assert!(out.contains("  Page size: 4096\n"), "{out}");
    assert!(out.contains(&format!("  Entries: {entries}\n")), "{out}");
    assert!(out.contains("  Tables: 3\n"), "{out}");
    assert!(out.contains("Status of table beta\n"), "{out}");
    assert!(out.contains("  Entries: 301\n"), "{out}");
    let short = String::from_utf8(larch_ok(&["stat", path.to_str().unwrap()], b"")).unwrap();
    assert!(!short.contains("Status of table"));
}

#[test]
fn check_is_clean_then_lists_problems_of_a_damaged_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.larch");
    build_db(&path, &awkward_tables());
    let p = path.to_str().unwrap();
    let r = larch(&["check", p], b"");
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout_str().starts_with("ok: "));

    // Damage one page after the meta pages at a time until check reports it (some pages,
    // such as the freelist, make the open itself fail, which is exit 7 instead).
    let original = std::fs::read(&path).unwrap();
    let page_count = original.len() / 4096;
    let damaged = dir.path().join("damaged.larch");
    let mut found = false;
    for page in 2..page_count {
        let mut bytes = original.clone();
        bytes[page * 4096 + 100] ^= 0xff;
        std::fs::write(&damaged, &bytes).unwrap();
        let r = larch(&["check", damaged.to_str().unwrap()], b"");
        if r.code == 1 {
            let out = r.stdout_str();
            assert!(!out.is_empty());
            for line in out.lines() {
                assert!(line.starts_with("page "), "{line}");
            }
            found = true;
            break;
        }
        assert!(
            r.code == 0 || r.code == 7,
            "page {page}: {} {}",
            r.code,
            r.stderr
        );
    }
    assert!(found, "no damaged page was reported by check");
}

#[test]
fn the_python_packages_directory_is_its_database() {
    // `larch.open(dir)` (the Python package) writes dir/data.larch: stat, check, dump,
    // compact and load take the directory as LMDB's tools take an environment's.
    let dir = tempfile::tempdir().unwrap();
    let env = dir.path().join("env");
    std::fs::create_dir(&env).unwrap();
    build_db(&env.join("data.larch"), &awkward_tables());
    let p = env.to_str().unwrap();
    let by_file = larch_ok(
        &["dump", env.join("data.larch").to_str().unwrap(), "--all"],
        b"",
    );
    assert_eq!(larch_ok(&["dump", p, "--all"], b""), by_file);
    let out = String::from_utf8(larch_ok(&["stat", p], b"")).unwrap();
    assert!(out.contains("  Tables: 3\n"), "{out}");
    larch_ok(&["check", p], b"");
    larch_ok(&["compact", p], b"");
    // load writes into a directory's data.larch, making it if missing.
    let fresh = dir.path().join("fresh");
    std::fs::create_dir(&fresh).unwrap();
    larch_ok(&["load", fresh.to_str().unwrap()], &by_file);
    assert_eq!(
        larch_ok(
            &["dump", fresh.join("data.larch").to_str().unwrap(), "--all"],
            b""
        ),
        by_file
    );
    // A directory without one is still refused, saying what it looked for.
    let r = larch(&["stat", dir.path().to_str().unwrap()], b"");
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(r.stderr.contains("without data.larch"), "{}", r.stderr);
}

#[test]
fn short_flags_combine_as_getopt_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.larch");
    build_db(&path, &awkward_tables());
    let p = path.to_str().unwrap();
    // `-rf` is `-r -f` (the example in `larch stat --help`, as mdb_stat -rf).
    assert_eq!(
        larch_ok(&["stat", p, "-rf"], b""),
        larch_ok(&["stat", p, "-r", "-f"], b"")
    );
    let r = larch(&["stat", p, "-rz"], b"");
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("unknown option -z"), "{}", r.stderr);
}
