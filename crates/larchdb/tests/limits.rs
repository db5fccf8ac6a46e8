//! Every limit: exact round trips up to it, a typed error one past it.

use larchdb::limits::{
    inline_cell_bytes_max, key_bytes_max, PAGE_BYTES_MAX, PAGE_BYTES_MIN, TABLE_NAME_BYTES_MAX,
    VALUE_BYTES_MAX,
};
use larchdb::{Database, Error, Options};

fn db(dir: &tempfile::TempDir, page_bytes: u32) -> Database {
    Database::open(
        dir.path().join(format!("db{page_bytes}")),
        Options::default().page_bytes(page_bytes),
    )
    .unwrap()
}

#[test]
fn key_lengths_at_every_page_size() {
    let dir = tempfile::tempdir().unwrap();
    for page_bytes in [4096u32, 8192, 16384, 32768, 65536] {
        let db = db(&dir, page_bytes);
        let max = key_bytes_max(page_bytes);
        assert!(max >= page_bytes as usize / 4 - 24);
        let mut w = db.begin_write().unwrap();
        w.create_table("t").unwrap();
        {
            let mut t = w.table("t").unwrap();
            // Many max-length keys force splits of pages full of the largest cells.
            for i in 0..40u8 {
                let mut k = vec![i; max];
                k[max - 1] = 0;
                t.put(&k, &[i; 3]).unwrap();
            }
            for len in [0usize, 1, max - 1, max] {
                t.put(&vec![0xeeu8; len], b"v").unwrap();
            }
            let err = t.put(&vec![1u8; max + 1], b"v").unwrap_err();
            assert!(
                matches!(err, Error::KeyTooLarge { len, max: m } if len == max + 1 && m == max),
                "{err}"
            );
            // A rejected put leaves the transaction usable.
            t.put(b"after", b"ok").unwrap();
        }
        w.commit().unwrap();
        let r = db.begin_read().unwrap();
        let t = r.table("t").unwrap();
        assert_eq!(
            t.get(b"").unwrap(),
            Some(&b"v"[..]),
            "empty key at {page_bytes}"
        );
        assert_eq!(t.get(&vec![0xeeu8; max]).unwrap(), Some(&b"v"[..]));
        assert_eq!(t.get(b"after").unwrap(), Some(&b"ok"[..]));
        assert_eq!(t.len().unwrap(), 40 + 4 + 1);
        db.verify().unwrap();
    }
}

#[test]
fn value_lengths_around_the_inline_and_page_thresholds() {
    let dir = tempfile::tempdir().unwrap();
    let db = db(&dir, 4096);
    let inline = inline_cell_bytes_max(4096);
    let key = b"k";
    let cell_overhead = 6 + key.len();
    let mut lens: Vec<usize> = vec![0, 1, 100];
    for l in [
        inline - cell_overhead,
        4096 - 32,
        4096,
        8192 - 32,
        8192,
        3 * 4096 + 1,
    ] {
        lens.extend([l - 1, l, l + 1]);
    }
    let mut w = db.begin_write().unwrap();
    w.create_table("t").unwrap();
    for (i, &len) in lens.iter().enumerate() {
        let v: Vec<u8> = (0..len).map(|j| (i + j) as u8).collect();
        w.table("t")
            .unwrap()
            .put(&(i as u32).to_be_bytes(), &v)
            .unwrap();
    }
    w.commit().unwrap();
    let r = db.begin_read().unwrap();
    for (i, &len) in lens.iter().enumerate() {
        let v: Vec<u8> = (0..len).map(|j| (i + j) as u8).collect();
        assert_eq!(
            r.table("t")
                .unwrap()
                .get(&(i as u32).to_be_bytes())
                .unwrap(),
            Some(v.as_slice()),
            "len {len}"
        );
    }
    db.verify().unwrap();
}

#[test]
fn largest_value_round_trips_and_one_more_byte_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = db(&dir, 65536);
    let mut big = vec![0u8; VALUE_BYTES_MAX + 1];
    let mut w = db.begin_write().unwrap();
    w.create_table("t").unwrap();
    let err = w.table("t").unwrap().put(b"big", &big).unwrap_err();
    assert!(
        matches!(err, Error::ValueTooLarge { len, max } if len == VALUE_BYTES_MAX + 1 && max == VALUE_BYTES_MAX)
    );
    big.truncate(VALUE_BYTES_MAX);
    big[0] = 1;
    big[VALUE_BYTES_MAX - 1] = 2;
    w.table("t").unwrap().put(b"big", &big).unwrap();
    w.commit().unwrap();
    drop(big);
    let r = db.begin_read().unwrap();
    let t = r.table("t").unwrap();
    let v = t.get(b"big").unwrap().unwrap();
    assert_eq!(v.len(), VALUE_BYTES_MAX);
    assert_eq!((v[0], v[1], v[VALUE_BYTES_MAX - 1]), (1, 0, 2));
}

#[test]
fn page_sizes_and_table_names() {
    let dir = tempfile::tempdir().unwrap();
    for bad in [
        0u32,
        512,
        2048,
        PAGE_BYTES_MIN + 1,
        6000,
        PAGE_BYTES_MAX * 2,
    ] {
        let err =
            Database::open(dir.path().join("x"), Options::default().page_bytes(bad)).unwrap_err();
        assert!(matches!(err, Error::InvalidOptions(_)), "{bad}: {err}");
    }
    let db = db(&dir, 4096);
    let mut w = db.begin_write().unwrap();
    assert!(matches!(
        w.create_table(""),
        Err(Error::InvalidTableName(_))
    ));
    let long = "n".repeat(TABLE_NAME_BYTES_MAX + 1);
    assert!(matches!(
        w.create_table(&long),
        Err(Error::InvalidTableName(_))
    ));
    w.create_table(&"n".repeat(TABLE_NAME_BYTES_MAX)).unwrap();
    w.commit().unwrap();
    assert_eq!(
        db.begin_read().unwrap().list_tables().unwrap(),
        vec!["n".repeat(TABLE_NAME_BYTES_MAX)]
    );
}

/// Inline cells reach half a leaf: leaves holding two or three of them, mixed with small
/// cells, must split into pages that fit wherever the new cell lands, and survive updates that
/// grow a small value to the largest inline size, deletes and merges.
#[test]
fn half_page_inline_values_split_grow_and_merge() {
    use rand::{Rng, SeedableRng};
    use std::collections::BTreeMap;
    for page_bytes in [4096u32, 16384] {
        let dir = tempfile::tempdir().unwrap();
        let db = db(&dir, page_bytes);
        let inline = inline_cell_bytes_max(page_bytes);
        let mut rng = rand::rngs::StdRng::seed_from_u64(page_bytes as u64);
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        for round in 0..30 {
            let mut w = db.begin_write().unwrap();
            w.ensure_table("t").unwrap();
            {
                let mut t = w.table("t").unwrap();
                for _ in 0..60 {
                    let key = format!("{:06}", rng.gen_range(0..400)).into_bytes();
                    if rng.gen_bool(0.2) {
                        t.delete(&key).unwrap();
                        model.remove(&key);
                        continue;
                    }
                    // Cells of exactly the inline maximum, just under and over it, and small.
                    let max_value = inline - 6 - key.len();
                    let len = match rng.gen_range(0..5) {
                        0 => max_value,
                        1 => max_value - rng.gen_range(1..200),
                        2 => max_value + 1,
                        3 => rng.gen_range(page_bytes as usize / 3..max_value),
                        _ => rng.gen_range(0..100),
                    };
                    let v: Vec<u8> = (0..len).map(|i| (i + round) as u8).collect();
                    t.put(&key, &v).unwrap();
                    model.insert(key, v);
                }
            }
            w.commit().unwrap();
            assert!(db.verify().unwrap().is_clean(), "round {round}");
        }
        let r = db.begin_read().unwrap();
        let t = r.table("t").unwrap();
        let found: BTreeMap<Vec<u8>, Vec<u8>> = t
            .iter()
            .map(|e| {
                let (k, v) = e.unwrap();
                (k.to_vec(), v.to_vec())
            })
            .collect();
        assert_eq!(found, model);
        let stats = db.stats().unwrap();
        assert!(stats.leaf_pages > 10, "{stats:?}");
    }
}
