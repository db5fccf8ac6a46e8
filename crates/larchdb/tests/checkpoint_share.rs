//! Write admission's share (`engine/admission/share.rs`, `Share`; docs/design/write-path.md,
//! "Sharing the CPU with readers"). A test binary of its own: it keeps every core busy while it
//! runs, which would slow the tests beside it in one binary (cargo runs the binaries one
//! at a time, a binary's tests in parallel), among them `pacing.rs`'s, whose writer must
//! outrun its checkpoints. Linux only: the cores' contention is read from `/proc/loadavg`.
#![cfg(target_os = "linux")]

mod common;

use common::{key5 as key, value_1k as value};
use larchdb::storage::FaultStorage;
use larchdb::{Durability, Options};
use std::collections::BTreeMap;

/// Write admission's share (`admission::share::Share`): a writer whose checkpoints run beside a
/// read transaction of its handle begun on another thread, while busy threads keep more
/// threads runnable than there are cores, sleeps for their CPU time
/// (`CommitStats::share_micros`); with no reader open, or only one the writer's own thread
/// began (its sleep would give that reader nothing), it never does. Every commit is kept in
/// each.
#[test]
fn a_writer_beside_readers_on_busy_cores_pays_for_its_checkpoints() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let stop = Arc::new(AtomicBool::new(false));
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let busy: Vec<_> = (0..=cores)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        })
        .collect();
    #[derive(Clone, Copy, PartialEq)]
    enum Reader {
        None,
        OwnThread,
        OtherThread,
    }
    let run = |reader: Reader| {
        let (data, log) = (FaultStorage::new(), FaultStorage::new());
        let options = Options::default()
            .log(true)
            .log_segment_bytes(4 << 20)
            .log_segments(8)
            .checkpoint_bytes(1 << 20)
            .durability(Durability::None);
        let db = common::open_with_log(&data, &log, options).unwrap();
        common::create_table(&db, "t");
        let held = match reader {
            Reader::None => None,
            Reader::OwnThread => Some(db.begin_read().unwrap()),
            Reader::OtherThread => Some(std::thread::scope(|s| {
                s.spawn(|| db.begin_read().unwrap()).join().unwrap()
            })),
        };
        let before = db.stats().unwrap().commits;
        // 4,000 keys of 1 KB (a tree of some 4 MB), written over 6 times, one a commit:
        // each checkpoint rewrites hundreds of leaves.
        let mut model = BTreeMap::new();
        for i in 0..24_000u32 {
            let (k, v) = (key(i.wrapping_mul(2_654_435_761) % 4_000), value(i));
            let mut w = db.begin_write().unwrap();
            w.table("t").unwrap().put(&k, &v).unwrap();
            w.commit().unwrap();
            model.insert(k, v);
        }
        let after = db.stats().unwrap().commits;
        drop(held);
        let r = db.begin_read().unwrap();
        let t = r.table("t").unwrap();
        assert_eq!(t.len().unwrap(), model.len() as u64);
        for (k, v) in &model {
            assert_eq!(t.get(k).unwrap(), Some(&v[..]), "{k:?}");
        }
        // Enough checkpoints for the share to be seen (24 MB of log at a checkpoint a MiB; the
        // busy threads slow them, and a slow checkpoint merges more at once).
        assert!(after.checkpoints >= before.checkpoints + 5, "{after:?}");
        after.share_micros - before.share_micros
    };
    let shared = run(Reader::OtherThread);
    let own = run(Reader::OwnThread);
    let alone = run(Reader::None);
    stop.store(true, Ordering::Relaxed);
    for t in busy {
        t.join().unwrap();
    }
    assert!(
        shared > 0,
        "checkpoints beside a reader with {} busy threads on {cores} cores, and the writer \
         never paid for them",
        cores + 1
    );
    assert_eq!(own, 0, "only the writer's own reader open");
    assert_eq!(alone, 0, "no reader open");
}
