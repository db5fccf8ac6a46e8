//! `larch copy`: a consistent snapshot into a new file.

mod common;
use common::*;

#[test]
fn copy_and_compact_copy_hold_the_same_data() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src.larch");
    build_db(&src, &awkward_tables());
    // Churn so that the source has free pages a compact copy does not keep.
    {
        let db = larchdb::Database::open(&src, larchdb::Options::default()).unwrap();
        let mut w = db.begin_write().unwrap();
        w.create_table("scratch").unwrap();
        {
            let mut t = w.table("scratch").unwrap();
            for i in 0u32..2000 {
                t.put(&i.to_be_bytes(), &[7u8; 100]).unwrap();
            }
        }
        w.commit().unwrap();
        let mut w = db.begin_write().unwrap();
        w.delete_table("scratch").unwrap();
        w.commit().unwrap();
    }
    let s = src.to_str().unwrap();
    let expected = larch_ok(&["dump", s], b"");
    for (name, extra) in [("plain.larch", None), ("compact.larch", Some("--compact"))] {
        let dst = dir.path().join(name);
        let d = dst.to_str().unwrap();
        let mut args = vec!["copy", s, d];
        args.extend(extra);
        larch_ok(&args, b"");
        assert!(larch_ok(&["dump", d], b"") == expected, "{name} differs");
        assert_eq!(larch(&["check", d], b"").code, 0);
        assert!(std::fs::metadata(&dst).unwrap().len() <= std::fs::metadata(&src).unwrap().len());
        // No temporary file is left behind, and an existing destination is refused.
        let r = larch(&args, b"");
        assert_eq!(r.code, 7, "{}", r.stderr);
        assert!(r.stderr.contains("already exists"));
    }
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp"))
        .collect();
    assert!(leftovers.is_empty());
}

#[test]
fn copy_to_standard_output_writes_a_database_and_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src.larch");
    build_db(&src, &awkward_tables());
    let s = src.to_str().unwrap();
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let r = run_program_env(
        env!("CARGO_BIN_EXE_larch"),
        &["copy", s, "-"],
        &[("TMPDIR", tmp.to_str().unwrap())],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let out = dir.path().join("from-stdout.larch");
    std::fs::write(&out, &r.stdout).unwrap();
    let o = out.to_str().unwrap();
    assert!(larch_ok(&["dump", o], b"") == larch_ok(&["dump", s], b""));
    assert_eq!(larch(&["check", o], b"").code, 0);
    // The copy built in TMPDIR, and its lock file, are gone.
    assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 0);
}
