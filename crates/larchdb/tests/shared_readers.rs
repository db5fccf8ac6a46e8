//! Readers in other processes, through the lock file's shared reader table: a read-only handle
//! in one process reads consistent snapshots while a writer in another process commits, a
//! snapshot it holds never changes however many commits pass (so a page reused under a
//! foreign reader would be caught), and a reader process killed with SIGKILL does not pin
//! pages. Real processes: the test binary re-executes itself as the child.
//!
//! `LARCH_SHARED_READERS_SECS=N` lengthens the watching (3 s by default).

mod common;

use larchdb::{Database, Durability, Options};
use rand::{Rng, SeedableRng};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const CHILD_ENV: &str = "LARCH_SHARED_CHILD_DB";
const ROLE_ENV: &str = "LARCH_SHARED_CHILD_ROLE";
const TABLE: &str = "accounts";
const ACCOUNTS: u32 = 400;
const BALANCE: u64 = 1000;
/// Bytes of padding after each balance: enough that the table spans dozens of leaves.
const PAD_BYTES: usize = 150;

fn secs() -> u64 {
    std::env::var("LARCH_SHARED_READERS_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3)
}

fn account_value(balance: u64, salt: u64) -> Vec<u8> {
    let mut v = balance.to_le_bytes().to_vec();
    v.extend(std::iter::repeat_n(salt as u8, PAD_BYTES));
    v
}

fn balance(v: &[u8]) -> u64 {
    u64::from_le_bytes(v[..8].try_into().unwrap())
}

fn create_accounts(path: &Path) {
    let db = Database::open(path, Options::default()).unwrap();
    let mut w = db.begin_write().unwrap();
    w.create_table(TABLE).unwrap();
    {
        let mut t = w.table(TABLE).unwrap();
        for a in 0..ACCOUNTS {
            t.put(&a.to_be_bytes(), &account_value(BALANCE, 0)).unwrap();
        }
    }
    w.commit().unwrap();
}

/// One commit of a few transfers; the sum of balances stays `ACCOUNTS * BALANCE`.
fn transfer(db: &Database, rng: &mut impl Rng, durability: Durability) {
    let mut w = db.begin_write().unwrap();
    let salt = w.id();
    {
        let mut t = w.table(TABLE).unwrap();
        for _ in 0..rng.gen_range(1..6) {
            let (a, b) = (rng.gen_range(0..ACCOUNTS), rng.gen_range(0..ACCOUNTS));
            if a == b {
                continue;
            }
            let ba = balance(t.get(&a.to_be_bytes()).unwrap().unwrap());
            let bb = balance(t.get(&b.to_be_bytes()).unwrap().unwrap());
            let amount = rng.gen_range(0..=ba);
            t.put(&a.to_be_bytes(), &account_value(ba - amount, salt))
                .unwrap();
            t.put(&b.to_be_bytes(), &account_value(bb + amount, salt))
                .unwrap();
        }
    }
    w.commit_with(durability).unwrap();
}

/// The children: a writer committing transfers until a stop file appears, or a reader that
/// opens read-only, holds a snapshot, says so and waits to be killed.
#[test]
fn child_entry() {
    let Ok(path) = std::env::var(CHILD_ENV) else {
        return;
    };
    let path = PathBuf::from(path);
    match std::env::var(ROLE_ENV).as_deref() {
        Ok(role @ ("writer" | "writer-log")) => {
            let stop = path.with_extension("stop");
            let options = Options::default().log(role == "writer-log");
            let db = Database::open(&path, options).expect("writer open");
            let mut rng = rand::rngs::StdRng::seed_from_u64(7);
            let deadline = Instant::now() + Duration::from_secs(120);
            let mut n = 0u64;
            while !stop.exists() && Instant::now() < deadline {
                // Mostly unsynced commits (fast, so many pass under the reader), a durable one
                // now and then.
                let d = if n.is_multiple_of(25) {
                    Durability::Immediate
                } else {
                    Durability::None
                };
                transfer(&db, &mut rng, d);
                n += 1;
            }
            db.verify().expect("writer: verify after the run");
            // A transaction whose transfers all had a == b commits nothing and takes no id.
            let last = db.begin_read().unwrap().id();
            println!("writer-commits {n} last {last}");
        }
        Ok("grow") => {
            // Values that take the file past the 1 GiB a reader maps at first.
            let db = Database::open(&path, Options::default()).unwrap();
            for i in 0..GROW_VALUES {
                let mut w = db.begin_write().unwrap();
                w.ensure_table("big").unwrap();
                w.table("big")
                    .unwrap()
                    .put(&[i as u8], &grow_value(i))
                    .unwrap();
                w.commit_with(Durability::None).unwrap();
            }
            db.sync().unwrap();
            println!("grown {}", db.begin_read().unwrap().id());
        }
        Ok("reader") => {
            let db = Database::open(&path, Options::default().read_only(true)).unwrap();
            let r = db.begin_read().unwrap();
            println!("holding {}", r.id());
            std::thread::sleep(Duration::from_secs(600));
        }
        other => panic!("unknown role {other:?}"),
    }
}

/// Values of `GROW_VALUE_BYTES` each, `GROW_VALUES` of them: 1.25 GiB in all.
const GROW_VALUES: u32 = 5;
const GROW_VALUE_BYTES: usize = 256 << 20;

fn grow_value(i: u32) -> Vec<u8> {
    let mut v = vec![i as u8; GROW_VALUE_BYTES];
    v[GROW_VALUE_BYTES - 1] = 0xee;
    v
}

fn spawn_child(path: &Path, role: &str) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_entry", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, path)
        .env(ROLE_ENV, role)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

/// Waits for a line of the child's stdout containing `word`; returns what follows it.
fn wait_for(child: &mut Child, word: &str) -> String {
    let stdout = child.stdout.as_mut().unwrap();
    for line in BufReader::new(stdout).lines() {
        let line = line.unwrap();
        if let Some(at) = line.find(word) {
            return line[at + word.len()..].trim().to_string();
        }
    }
    panic!("child ended without printing {word:?}");
}

fn all_values(r: &larchdb::ReadTxn) -> Vec<(Vec<u8>, Vec<u8>)> {
    common::collect(r.table(TABLE).unwrap().iter())
}

#[test]
fn foreign_reader_sees_consistent_snapshots_while_another_process_commits() {
    watch_a_foreign_writer("writer");
}

/// The same with a writer that commits through the log: the reader sees its commits as they
/// are published (`tests/follow_log.rs`), not only at checkpoints, so it sees as many
/// distinct snapshots.
#[test]
fn foreign_reader_follows_a_writer_through_the_log() {
    watch_a_foreign_writer("writer-log");
}

fn watch_a_foreign_writer(role: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bank.larch");
    create_accounts(&path);
    let ro = Database::open(&path, Options::default().read_only(true)).unwrap();
    // A snapshot held for the whole run, from before the writer starts: its values must never
    // change.
    let held = ro.begin_read().unwrap();
    let held_values = all_values(&held);
    let mut writer = spawn_child(&path, role);
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let total = ACCOUNTS as u64 * BALANCE;
    let mut snapshots = std::collections::BTreeSet::new();
    let mut rechecks = 0u64;
    let deadline = Instant::now() + Duration::from_secs(secs());
    let mut i = 0u64;
    while Instant::now() < deadline {
        let r = ro.begin_read().unwrap();
        snapshots.insert(r.id());
        let t = r.table(TABLE).unwrap();
        // By scan, and by point reads in random order.
        let mut sum = 0;
        for e in t.iter() {
            sum += balance(e.unwrap().1);
        }
        assert_eq!(sum, total, "scan of snapshot {}", r.id());
        let mut sum = 0;
        let start = rng.gen_range(0..ACCOUNTS);
        for a in 0..ACCOUNTS {
            let a = (a + start) % ACCOUNTS;
            sum += balance(t.get(&a.to_be_bytes()).unwrap().unwrap());
        }
        assert_eq!(sum, total, "point reads of snapshot {}", r.id());
        if i.is_multiple_of(20) {
            assert!(
                all_values(&held) == held_values,
                "held snapshot {} changed",
                held.id()
            );
            rechecks += 1;
        }
        i += 1;
    }
    std::fs::write(path.with_extension("stop"), b"").unwrap();
    let report = wait_for(&mut writer, "writer-commits ");
    let (commits, last) = report.split_once(" last ").unwrap();
    let (commits, last): (u64, u64) = (commits.parse().unwrap(), last.parse().unwrap());
    assert!(writer.wait().unwrap().success(), "writer failed");
    assert!(all_values(&held) == held_values, "held snapshot changed");
    let newest = ro.begin_read().unwrap().id();
    let watched = newest - held.id();
    eprintln!(
        "foreign reader ({role}): held snapshot {} across {watched} commits ({rechecks} full re-reads), \
         {} distinct snapshots checked in {i} reads, writer made {commits} commits",
        held.id(),
        snapshots.len()
    );
    assert!(
        watched >= 200,
        "too few commits under the held snapshot: {watched}"
    );
    assert!(
        snapshots.len() >= 20,
        "too few snapshots: {}",
        snapshots.len()
    );
    // The foreign handle sees the writer's last commit (or a later one: closing, the writer
    // compacts, with commits that change no record), and the file is sound.
    assert!(newest >= last, "newest {newest}, writer's last {last}");
    drop(held);
    assert!(ro.verify_all().unwrap().is_clean());
}

#[test]
fn killed_reader_process_does_not_pin_pages() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pin.larch");
    create_accounts(&path);
    // Pages only: every commit writes pages, so a pinned snapshot shows in the file's size
    // within a few hundred commits (through the log, only at checkpoints).
    let db = Database::open(
        &path,
        Options::default().durability(Durability::None).log(false),
    )
    .unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(3);
    let churn = |db: &Database, rng: &mut rand::rngs::StdRng, n: u32| {
        for _ in 0..n {
            transfer(db, rng, Durability::None);
        }
        db.sync().unwrap();
    };
    // Warm up: the file reaches its steady size under churn without readers.
    churn(&db, &mut rng, 300);
    let steady = std::fs::metadata(&path).unwrap().len();

    let mut reader = spawn_child(&path, "reader");
    let held: u64 = wait_for(&mut reader, "holding ").parse().unwrap();
    assert_eq!(db.stats().unwrap().other_readers, 1);
    churn(&db, &mut rng, 1500);
    let pinned = std::fs::metadata(&path).unwrap().len();
    assert!(
        pinned > steady,
        "a live foreign reader of snapshot {held} must pin pages: {pinned} <= {steady}"
    );
    let pending_alive = db.stats().unwrap().pending_pages;

    reader.kill().unwrap(); // SIGKILL: its slot is never cleared by the reader
    reader.wait().unwrap();
    churn(&db, &mut rng, 300);
    let after = std::fs::metadata(&path).unwrap().len();
    assert_eq!(
        db.stats().unwrap().other_readers,
        0,
        "dead slot still counted"
    );
    churn(&db, &mut rng, 1500);
    let later = std::fs::metadata(&path).unwrap().len();
    let pending_dead = db.stats().unwrap().pending_pages;
    eprintln!(
        "file bytes: steady {steady}, with a reader pinning snapshot {held} {pinned} \
         ({pending_alive} pending pages), after its SIGKILL {after} then {later} \
         ({pending_dead} pending pages)"
    );
    assert!(
        later <= after,
        "the file kept growing after the reader died: {after} -> {later}"
    );
    assert!(pending_dead < pending_alive);
    assert!(db.verify_all().unwrap().is_clean());
}

/// On a read-only file system the lock file cannot be created: a read-only handle falls back
/// to a shared lock on the database (which a writer would respect) and still reads. Needs
/// root for the loop mount; skipped, saying so, otherwise.
#[test]
fn read_only_file_system_falls_back_to_a_shared_lock() {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .map(|o| o.stdout.starts_with(b"0"))
        .unwrap_or(false);
    if !root {
        eprintln!("SKIPPED: not root, so no loop file system to mount read-only");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let image = tmp.path().join("fs.img");
    let mnt = tmp.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    std::fs::File::create(&image)
        .unwrap()
        .set_len(8 << 20)
        .unwrap();
    let run = |args: &[&str]| {
        Command::new(args[0])
            .args(&args[1..])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
    };
    let (img, dir) = (image.to_str().unwrap(), mnt.to_str().unwrap());
    if !run(&["mkfs.ext4", "-q", "-F", img]) || !run(&["mount", "-o", "loop", img, dir]) {
        eprintln!("SKIPPED: could not make and mount an ext4 loop file system");
        return;
    }
    struct Unmount(String);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).output();
        }
    }
    let _unmount = Unmount(dir.to_string());
    let path = mnt.join("db.larch");
    create_accounts(&path);
    std::fs::remove_file(larchdb::storage::lock_path(&path)).unwrap();
    assert!(
        run(&["mount", "-o", "remount,ro", dir]),
        "remount read-only"
    );
    let ro = Database::open(&path, Options::default().read_only(true)).unwrap();
    let r = ro.begin_read().unwrap();
    assert_eq!(r.table(TABLE).unwrap().len().unwrap(), ACCOUNTS as u64);
    assert!(!larchdb::storage::lock_path(&path).exists());
    assert_eq!(ro.stats().unwrap().other_readers, 0);
}

/// A writer process killed at a random moment (between a meta write and its publication
/// included) blocks nobody: a foreign reader's held snapshot stays intact, a new writer opens
/// at once, and the reader sees its commits.
#[test]
fn killed_writer_process_blocks_no_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kill.larch");
    create_accounts(&path);
    let ro = Database::open(&path, Options::default().read_only(true)).unwrap();
    let held = ro.begin_read().unwrap();
    let held_values = all_values(&held);
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    let total = ACCOUNTS as u64 * BALANCE;
    let points = 10;
    for point in 0..points {
        let mut writer = spawn_child(&path, "writer");
        std::thread::sleep(Duration::from_millis(rng.gen_range(20..200)));
        writer.kill().unwrap(); // SIGKILL, at any point of a commit
        writer.wait().unwrap();
        // The reader goes on, on the newest snapshot it can see.
        let r = ro.begin_read().unwrap();
        let sum: u64 = r
            .table(TABLE)
            .unwrap()
            .iter()
            .map(|e| balance(e.unwrap().1))
            .sum();
        assert_eq!(sum, total, "kill point {point}");
        let seen = r.id();
        drop(r);
        // A new writer opens at once (the killed one's flock is gone) and commits; the
        // reader sees that commit.
        let db = Database::open(&path, Options::default()).expect("writer after a kill");
        transfer(&db, &mut rng, Durability::Immediate);
        let mut w = db.begin_write().unwrap();
        w.table(TABLE)
            .unwrap()
            .put(b"marker", &account_value(0, point))
            .unwrap();
        w.commit().unwrap();
        let newest = db.begin_read().unwrap().id();
        drop(db);
        // The newest commit or a later one: closing, the writer compacts, with commits that
        // change no record.
        let r = ro.begin_read().unwrap();
        assert!(
            r.id() >= newest,
            "kill point {point}: reader saw {seen}, then {} before the newest {newest}",
            r.id()
        );
        assert_eq!(
            r.table(TABLE).unwrap().get(b"marker").unwrap(),
            Some(account_value(0, point).as_slice()),
            "kill point {point}: the new writer's last commit"
        );
        assert!(all_values(&held) == held_values, "held snapshot changed");
    }
    eprintln!(
        "killed writer: {points} kill points, held snapshot {} intact, newest {}",
        held.id(),
        ro.begin_read().unwrap().id()
    );
}

/// The file outgrows the mapping a foreign reader made when it opened (1 GiB): its next read
/// maps the file anew and reads the new values, while a snapshot it held from before keeps
/// reading through the old mapping.
#[test]
fn foreign_reader_remaps_when_the_file_outgrows_its_mapping() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("grow.larch");
    create_accounts(&path);
    let ro = Database::open(&path, Options::default().read_only(true)).unwrap();
    let held = ro.begin_read().unwrap();
    let held_values = all_values(&held);
    let mut writer = spawn_child(&path, "grow");
    let last: u64 = wait_for(&mut writer, "grown ").parse().unwrap();
    assert!(writer.wait().unwrap().success());
    let file_bytes = std::fs::metadata(&path).unwrap().len();
    assert!(
        file_bytes > 1 << 30,
        "the file did not outgrow 1 GiB: {file_bytes}"
    );

    // The writer's last commit, or a later one: its close ends with a commit that marks its
    // log as no longer needed.
    let r = ro.begin_read().unwrap();
    assert!(r.id() >= last, "{} before {last}", r.id());
    let big = r.table("big").unwrap();
    assert_eq!(big.len().unwrap(), GROW_VALUES as u64);
    for i in 0..GROW_VALUES {
        let v = big.get(&[i as u8]).unwrap().unwrap();
        assert_eq!(v.len(), GROW_VALUE_BYTES);
        assert_eq!((v[0], v[GROW_VALUE_BYTES / 2]), (i as u8, i as u8));
        assert_eq!(v[GROW_VALUE_BYTES - 1], 0xee);
    }
    assert!(all_values(&held) == held_values, "held snapshot changed");
    eprintln!("remap: file {file_bytes} bytes, foreign reader read snapshot {last} beyond 1 GiB");
}
