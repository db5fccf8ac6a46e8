//! Every adapter answers as the others do: the same batches (puts, deletes, an appended
//! sequential fill, a batch that deletes only missing keys) leave the same contents, read back
//! by point reads and by the scans the workloads use (from the first key, from the last key
//! backwards, from a seek key forwards, with and without a limit), checked against a BTreeMap.
//! A benchmark's figures mean nothing if an adapter drops or misplaces writes. The engines
//! linked in (larch, redb, libmdbx, canopydb, fjall) always run; a dlopen'ed engine whose
//! library is missing is skipped and named.

use larch_bench::engines::{self, Op, OpenOptions, WriteOpts};
use std::collections::BTreeMap;

fn key(i: u64) -> Vec<u8> {
    format!("{i:016}").into_bytes()
}

fn value(i: u64, round: u64) -> Vec<u8> {
    let mut v = format!("value-{i}-{round}-").into_bytes();
    v.resize(40 + (i % 70) as usize, b'a' + (round % 26) as u8);
    v
}

/// Runs the batches on `name`'s adapter and checks it against a model; returns false when the
/// engine's library is not installed.
fn conforms(name: &str) -> bool {
    let spec = engines::find(name).unwrap();
    if let Err(why) = (spec.probe)() {
        eprintln!("{name}: skipped, unavailable ({why})");
        return false;
    }
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("adapters-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let options = OpenOptions {
        dir: dir.clone(),
        cache_bytes: 32 << 20, // the driver's default; WiredTiger's LSM refuses less
        sync: false,
        num: 3000,
        key_size: 16,
        value_size: 100,
        threads_max: 2,
        memory_limit: None,
        bloom_bits: 10,
        background_nice: 0,
        checkpoint_slices: 0,
        checkpoint_bytes: 0,
        log_room_bytes: 0,
        memory_budget: 0,
        frames_bytes: 0,
    };
    let opened = (spec.open)(&options).unwrap_or_else(|e| panic!("{name}: open: {e}"));
    let mut s = opened.engine.session().unwrap();
    let mut model = BTreeMap::new();
    let plain = WriteOpts::default();

    // A sequential fill in batches of 100, appended.
    for chunk in (0..2000u64).collect::<Vec<_>>().chunks(100) {
        let kvs: Vec<_> = chunk.iter().map(|&i| (key(i * 2), value(i, 0))).collect();
        let ops: Vec<_> = kvs.iter().map(|(k, v)| Op::Put(k, v)).collect();
        s.write(
            &ops,
            WriteOpts {
                append: true,
                ..plain
            },
        )
        .unwrap_or_else(|e| panic!("{name}: fill: {e}"));
        model.extend(kvs);
    }
    // One-op commits: overwrites, inserts between the filled keys, deletes of present and of
    // missing keys, in a scattered order.
    for j in 0..1500u64 {
        let i = (j * 7919) % 4000;
        let k = key(i);
        if j % 5 == 0 {
            s.write(&[Op::Delete(&k)], plain).unwrap();
            model.remove(&k);
        } else {
            let v = value(i, 1 + j % 3);
            s.write(&[Op::Put(&k, &v)], plain).unwrap();
            model.insert(k, v);
        }
    }
    // A batch of deletes of keys that are not there (a commit with nothing to change), and a
    // mixed batch that writes a key twice and deletes one it put.
    let missing: Vec<_> = (0..10).map(|i| key(1_000_000 + i)).collect();
    let ops: Vec<_> = missing.iter().map(|k| Op::Delete(k)).collect();
    s.write(&ops, plain).unwrap();
    let (a, b) = (key(5001), key(5002));
    let (v1, v2) = (value(5001, 7), value(5001, 8));
    s.write(
        &[
            Op::Put(&a, &v1),
            Op::Put(&b, &v1),
            Op::Put(&a, &v2),
            Op::Delete(&b),
        ],
        plain,
    )
    .unwrap();
    model.insert(a, v2);

    // Point reads: every key in the model, and keys that are not.
    let mut out = Vec::new();
    for (k, v) in &model {
        assert!(s.get(k, &mut out).unwrap(), "{name}: {k:?} missing");
        assert_eq!(&out, v, "{name}: value of {k:?}");
    }
    for i in [1u64, 3999, 4001, 5002, 999_999] {
        if !model.contains_key(&key(i)) {
            assert!(!s.get(&key(i), &mut out).unwrap(), "{name}: {i} found");
        }
    }

    // Scans.
    let mut seen = Vec::new();
    let mut collect = |start: Option<&[u8]>, reverse: bool, limit: u64| {
        seen.clear();
        let n = s
            .scan(start, reverse, limit, &mut |k, v| {
                seen.push((k.to_vec(), v.to_vec()))
            })
            .unwrap();
        assert_eq!(n as usize, seen.len(), "{name}: count returned");
        seen.clone()
    };
    let all: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(collect(None, false, u64::MAX), all, "{name}: forward scan");
    let rev: Vec<_> = all.iter().rev().cloned().collect();
    assert_eq!(collect(None, true, u64::MAX), rev, "{name}: reverse scan");
    assert_eq!(collect(None, false, 7), all[..7], "{name}: limited scan");
    assert_eq!(collect(None, true, 7), rev[..7], "{name}: limited reverse");
    assert!(collect(None, false, 0).is_empty(), "{name}: limit 0");
    for seek in [0u64, 1, 1234, 3998, 3999, 6000] {
        let from = key(seek);
        let expect: Vec<_> = model
            .range(from.clone()..)
            .take(11)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        assert_eq!(
            collect(Some(&from), false, 11),
            expect,
            "{name}: seek to {seek}"
        );
    }
    drop(s);
    drop(opened);
    let _ = std::fs::remove_dir_all(&dir);
    true
}

#[test]
fn every_adapter_keeps_what_it_is_given() {
    let mut ran = Vec::new();
    let mut skipped = Vec::new();
    for name in engines::names() {
        if conforms(name) {
            ran.push(name);
        } else {
            skipped.push(name);
        }
    }
    eprintln!("ran: {ran:?}; skipped: {skipped:?}");
    for linked_in in [
        "larch",
        "larch-pages",
        "larch-mapped",
        "redb",
        "libmdbx",
        "canopydb",
        "fjall",
    ] {
        assert!(ran.contains(&linked_in), "{linked_in} did not run");
    }
}
