//! The writer paced by the checkpoints (`engine/admission/`, docs/design/write-path.md, "the
//! writer paced by the checkpoints"): a writer far faster than its checkpoints (the data
//! file's syncs slowed to 20 ms each, 1 KB records through a ring of 448 KiB) is slowed
//! before its transactions start, or waits there for a checkpoint, and no commit finds the
//! log full: before pacing, such a commit merged the whole overlay into pages on the writer's
//! thread (seconds at 1M records of 1 KB, found by YCSB workload A). Every commit is kept,
//! through a reopen.

mod common;

use common::{key5 as key, value_1k as value};
use larchdb::storage::FaultStorage;
use larchdb::{Durability, Options};
use std::collections::BTreeMap;
use std::time::Duration;

#[test]
fn a_writer_faster_than_its_checkpoints_never_finds_the_log_full() {
    let (data, log) = (FaultStorage::new(), FaultStorage::new());
    data.set_sync_delay(Some(Duration::from_millis(20)));
    let options = Options::default()
        .log(true)
        .log_segment_bytes(64 << 10)
        .log_segments(8)
        .checkpoint_bytes(32 << 10)
        .durability(Durability::None);
    let db = common::open_with_log(&data, &log, options.clone()).unwrap();
    common::create_table(&db, "t");
    let before = db.stats().unwrap().commits;
    let mut model = BTreeMap::new();
    for i in 0..3000u32 {
        let (k, v) = (key(i % 500), value(i));
        let mut w = db.begin_write().unwrap();
        w.table("t").unwrap().put(&k, &v).unwrap();
        w.commit().unwrap();
        model.insert(k, v);
    }
    let after = db.stats().unwrap().commits;
    assert_eq!(
        after.page_commits, before.page_commits,
        "a commit found the log full and wrote pages: {after:?}"
    );
    assert!(after.checkpoints >= before.checkpoints + 10, "{after:?}");
    assert!(
        after.paced_micros > 0 || after.log_full_waits > 0,
        "3 MB of log through a 448 KiB ring, checkpoints synced for 40 ms each, and the \
         writer was never held back: {after:?}"
    );
    let holds = |db: &larchdb::Database| {
        let r = db.begin_read().unwrap();
        let t = r.table("t").unwrap();
        assert_eq!(t.len().unwrap(), model.len() as u64);
        for (k, v) in &model {
            assert_eq!(t.get(k).unwrap(), Some(&v[..]), "{k:?}");
        }
    };
    holds(&db);
    drop(db);
    let db = common::open_with_log(&data, &log, options).unwrap();
    holds(&db);
}
