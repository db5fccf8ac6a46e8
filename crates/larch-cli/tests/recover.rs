//! `larch check` on a damaged database exits 1 naming the damage, never "ok" on a state that
//! dropped acknowledged commits; `larch recover` opens the newest intact state, says what it
//! gave up and where it kept the copies, after which `check` is clean.

mod common;
use common::*;
use larchdb::storage::log_path;
use larchdb::testing::{copy_database, cut_file};
use larchdb::{Database, Options};
use std::path::{Path, PathBuf};

/// A database of `n` one-put commits whose process was killed: its files as the handle left
/// them, copied to `dir`; the handle is never closed.
fn killed(dir: &Path, n: u32) -> PathBuf {
    let path = dir.join("live.larch");
    let db = Database::open(&path, Options::default().idle_checkpoint_millis(0)).unwrap();
    for i in 0..n {
        db.put(format!("k{i:05}").as_bytes(), b"value").unwrap();
    }
    let copy = copy_database(&path, &dir.join("killed"));
    // Never closed; kept reachable (not leaked) until the process ends.
    static KILLED: std::sync::Mutex<Vec<Database>> = std::sync::Mutex::new(Vec::new());
    KILLED.lock().unwrap_or_else(|e| e.into_inner()).push(db);
    copy
}

/// `check` exits 1 and says to recover; `recover` exits 0 and reports; `check` is then clean.
fn check_recover_check(path: &Path, check_code: i32) {
    let p = path.to_str().unwrap();
    let r = larch(&["check", p], b"");
    assert_eq!(r.code, check_code, "check: {}", r.stderr);
    if check_code == 1 {
        assert!(r.stderr.contains("damaged"), "{}", r.stderr);
        assert!(r.stderr.contains("larch recover"), "{}", r.stderr);
    }
    let out = String::from_utf8(larch_ok(&["recover", p], b"")).unwrap();
    assert!(out.contains("opened at commit"), "{out}");
    assert!(out.contains("gave up"), "{out}");
    let kept = out
        .lines()
        .find_map(|l| l.strip_prefix("copies kept in "))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(Path::new(kept).join("meta-pages").exists(), "{out}");
    let r = larch(&["check", p], b"");
    assert_eq!(r.code, 0, "check after recover: {}", r.stderr);
}

#[test]
fn recover_on_a_sound_database_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.larch");
    Database::open(&path, Options::default())
        .unwrap()
        .put(b"k", b"v")
        .unwrap();
    let out = String::from_utf8(larch_ok(&["recover", path.to_str().unwrap()], b"")).unwrap();
    assert!(out.contains("nothing changed"), "{out}");
    let entries: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(
        entries.len(),
        3,
        "the database, its log and lock file, no copies"
    );
}

#[test]
fn a_data_file_cut_short_is_damage_until_recovered() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.larch");
    let db = Database::open(&path, Options::default().log(false)).unwrap();
    for c in 0..4u32 {
        let mut w = db.begin_write().unwrap();
        let mut t = w.default_table().unwrap();
        for i in 0..5000u32 {
            t.put(&(c * 5000 + i).to_be_bytes(), &[7u8; 100]).unwrap();
        }
        w.commit().unwrap();
    }
    drop(db);
    let len = std::fs::metadata(&path).unwrap().len();
    let cut = len - (len / 20) / 4096 * 4096;
    cut_file(&path, cut);
    check_recover_check(&path, 1);
}

#[test]
fn a_damaged_newest_meta_page_beside_a_log_is_damage_until_recovered() {
    let dir = tempfile::tempdir().unwrap();
    let path = killed(dir.path(), 300);
    // Which slot is the newest: the one whose damage `check` reports.
    let slot = (0..2u64)
        .find(|&slot| {
            let scratch = dir.path().join(format!("probe-{slot}"));
            let copy = copy_database(&path, &scratch);
            let mut bytes = std::fs::read(&copy).unwrap();
            bytes[slot as usize * 4096 + 100] ^= 4;
            std::fs::write(&copy, bytes).unwrap();
            larch(&["check", copy.to_str().unwrap()], b"").code == 1
        })
        .expect("a flip in the newest slot is reported");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[slot as usize * 4096 + 100] ^= 4;
    std::fs::write(&path, bytes).unwrap();
    check_recover_check(&path, 1);
}

#[test]
fn a_log_cut_short_is_damage_until_recovered() {
    let dir = tempfile::tempdir().unwrap();
    let path = killed(dir.path(), 300);
    let log = log_path(&path);
    let bytes = std::fs::read(&log).unwrap();
    let records_end = bytes.iter().rposition(|&b| b != 0).unwrap() as u64 + 1;
    cut_file(&log, records_end - 2000);
    check_recover_check(&path, 1);
}

#[test]
fn a_missing_data_file_beside_its_log_is_recovered_to_a_new_database() {
    let dir = tempfile::tempdir().unwrap();
    let path = killed(dir.path(), 300);
    std::fs::remove_file(&path).unwrap();
    // `check` finds no database (status 4); `recover` starts one, the log kept aside.
    check_recover_check(&path, 4);
}

/// A path with no folder of its own (run from the database's folder): the copies' folder is
/// made and synced beside it.
#[test]
fn recover_takes_a_path_relative_to_the_working_folder() {
    let dir = tempfile::tempdir().unwrap();
    let path = killed(dir.path(), 50);
    std::fs::remove_file(&path).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_larch"))
        .args(["recover", "db.larch"])
        .current_dir(path.parent().unwrap())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("copies kept in db.larch-recovered-"),
        "{stdout}"
    );
}
