//! One-put commits through the `libmdbx` crate, configured as larch-bench configures libmdbx
//! (WRITEMAP, UTTERLY_NOSYNC, a file that grows by 64 MiB), keys in order with MDBX_APPEND.

use libmdbx::{Database, DatabaseOptions, Mode, ReadWriteOptions, SyncMode, WriteFlags, WriteMap};
use std::time::Instant;
fn main() {
    let n: u64 = std::env::args().nth(1).map(|s| s.parse().unwrap()).unwrap_or(200_000);
    let dir = std::path::Path::new("/tmp/mdbx-crate-probe");
    let _ = std::fs::remove_dir_all(dir);
    let db = Database::<WriteMap>::open_with_options(dir, DatabaseOptions {
        mode: Mode::ReadWrite(ReadWriteOptions { sync_mode: SyncMode::UtterlyNoSync, max_size: Some(1 << 40), growth_step: Some(64 << 20), ..Default::default() }),
        ..Default::default()
    }).unwrap();
    let v = [7u8; 100];
    let t = Instant::now();
    for i in 0..n {
        let k = format!("{:016}", i);
        let txn = db.begin_rw_txn().unwrap();
        let table = txn.open_table(None).unwrap();
        txn.put(&table, k.as_bytes(), &v, WriteFlags::APPEND).unwrap();
        txn.commit().unwrap();
    }
    let el = t.elapsed();
    println!("libmdbx crate, one-put commits in key order: {:.3} us/commit ({} commits)", el.as_secs_f64() * 1e6 / n as f64, n);
}
