//! Helpers shared by the integration tests (`mod common;` in each).

// The model harness's helpers live in `larchdb::testing`, which the fuzz targets share; the
// tests keep reaching them through `common::`.
#[allow(unused_imports)] // Not every test that has `mod common;` uses each of them.
pub use larchdb::testing::{assert_holds, collect, keys_in, small_log_options};

/// Opens a database whose data file is `data` and whose log is `log` (fault storages: the
/// test keeps its own handles on them to crash, fail or copy them).
#[allow(dead_code)] // Not every test that has `mod common;` opens a logged database.
pub fn open_with_log(
    data: &larchdb::storage::FaultStorage,
    log: &larchdb::storage::FaultStorage,
    options: larchdb::Options,
) -> larchdb::Result<larchdb::Database> {
    larchdb::Database::open_storage_with_log(
        std::sync::Arc::new(data.clone()),
        std::sync::Arc::new(log.clone()),
        options,
    )
}

/// Creates table `name` in a commit of its own; panics on an error.
#[allow(dead_code)] // Not every test that has `mod common;` creates tables this way.
pub fn create_table(db: &larchdb::Database, name: &str) {
    let mut w = db.begin_write().unwrap();
    w.create_table(name).unwrap();
    w.commit().unwrap();
}

/// Key `i` of the pacing tests: "key" and five digits.
#[allow(dead_code)] // Only the tests whose writer outruns its checkpoints use it.
pub fn key5(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// A 1000-byte value that differs with `i`: large records, so that the log fills fast (bytes
/// that do not compress, so that its records are not packed smaller: `noise`).
#[allow(dead_code)]
pub fn value_1k(i: u32) -> Vec<u8> {
    noise(u64::from(i), 1000)
}

/// `len` bytes that differ with `seed` and do not compress (splitmix64's output): values for
/// the tests that count on the log filling as fast as the values are large, since a commit
/// record whose bytes compress is appended packed (`KIND_PACKED`).
#[allow(dead_code)]
pub fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0xD134_2543_DE82_EF95);
    (0..len)
        .map(|_| {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            (z ^ (z >> 31)) as u8
        })
        .collect()
}

/// A table: its name, its properties and its entries.
#[allow(dead_code)] // Only the tests that compare whole databases use it.
pub type Table = (String, Vec<u8>, Vec<(Vec<u8>, Vec<u8>)>);

/// Every table of the newest commit, by name, with its properties and entries.
#[allow(dead_code)]
pub fn contents(db: &larchdb::Database) -> Vec<Table> {
    let r = db.begin_read().unwrap();
    r.list_tables()
        .unwrap()
        .into_iter()
        .map(|name| {
            let props = r.table_properties(&name).unwrap().to_vec();
            let entries = collect(r.table(&name).unwrap().iter());
            (name, props, entries)
        })
        .collect()
}

/// Abandons `db` as a crash does: its handle is never closed, so nothing a close does (a
/// checkpoint, a sync, a compaction) happens. The handle stays reachable from a static until
/// the process ends, instead of `mem::forget`, so that LeakSanitizer does not report what a
/// simulated crash leaves behind (and still reports real leaks).
#[allow(dead_code)] // Only the tests that simulate crashes in-process use it.
pub fn abandon(db: larchdb::Database) {
    static ABANDONED: std::sync::Mutex<Vec<larchdb::Database>> = std::sync::Mutex::new(Vec::new());
    ABANDONED.lock().unwrap_or_else(|e| e.into_inner()).push(db);
}

/// Holds one of `larchdb::testing`'s process-wide switches on while it lives
/// (`read_ahead_every_merge`, `pace_writeback_every_checkpoint`).
#[allow(dead_code)] // Not every test that has `mod common;` turns a switch on.
pub struct Switched(fn(bool));

#[allow(dead_code)]
impl Switched {
    /// Turns `switch` on until the guard is dropped.
    pub fn on(switch: fn(bool)) -> Switched {
        switch(true);
        Switched(switch)
    }
}

impl Drop for Switched {
    fn drop(&mut self) {
        (self.0)(false);
    }
}

/// Waits until no checkpoint has merged for 300 ms: a checkpoint by slices runs on its own
/// thread, and one that finished its meta page between two runs of a test would leave a
/// shorter log to replay. No commit comes after, so none starts.
#[allow(dead_code)] // Only the tests that crash a handle whose checkpoints run on a thread.
pub fn settle(db: &larchdb::Database) {
    let mut last = db.commit_stats().checkpoint_merge_micros;
    let mut quiet = 0;
    for _ in 0..200 {
        std::thread::sleep(std::time::Duration::from_millis(50));
        let now = db.commit_stats().checkpoint_merge_micros;
        quiet = if now == last { quiet + 1 } else { 0 };
        last = now;
        if quiet == 6 {
            return;
        }
    }
}
