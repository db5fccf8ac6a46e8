//! Files that are not sound Larch databases: only typed errors, never a panic.

use larchdb::storage::FaultStorage;
use larchdb::{Database, Error, Options};
use rand::{Rng, SeedableRng};
use std::sync::Arc;

/// A small database with every page type: branches, leaves, overflow runs, freelist pages.
fn sample() -> Vec<u8> {
    let s = FaultStorage::new();
    let db = Database::open_storage(Arc::new(s.clone()), Options::default()).unwrap();
    for round in 0..3u32 {
        let mut w = db.begin_write().unwrap();
        w.ensure_table("t").unwrap();
        w.ensure_table("u").unwrap();
        {
            let mut t = w.table("t").unwrap();
            for i in 0..300u32 {
                let len = if i % 50 == 0 { 9000 } else { 80 };
                t.put(&(i * 7 + round).to_be_bytes(), &vec![i as u8; len])
                    .unwrap();
            }
            for i in 0..100u32 {
                t.delete(&(i * 7 + round.saturating_sub(1)).to_be_bytes())
                    .unwrap();
            }
        }
        w.table("u").unwrap().put(b"x", b"y").unwrap();
        w.commit().unwrap();
    }
    drop(db);
    s.contents()
}

/// Opens, verifies and reads everything; returns whether all of it succeeded. Panics only
/// if the engine does.
fn exercise(bytes: Vec<u8>) -> Result<(), Error> {
    let s = FaultStorage::new();
    s.set_contents(bytes);
    let db = Database::open_storage(Arc::new(s), Options::default())?;
    let verified = db.verify();
    let r = db.begin_read()?;
    for name in r.list_tables()? {
        let t = r.table(&name)?;
        for e in t.iter() {
            e?;
        }
        for e in t.iter_rev() {
            e?;
        }
        t.get(&7u32.to_be_bytes())?;
    }
    verified.map(|_| ())
}

#[test]
fn every_page_with_a_flipped_bit_is_reported_by_page() {
    let good = sample();
    assert!(exercise(good.clone()).is_ok());
    let pages = good.len() / 4096;
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    let mut detected = 0;
    for page in 0..pages {
        let mut bad = good.clone();
        let bit = rng.gen_range(0..4096 * 8);
        bad[page * 4096 + bit / 8] ^= 1 << (bit % 8);
        match exercise(bad) {
            // A flip in a free page, or in one meta slot (the other one takes over), is
            // harmless and need not be detected.
            Ok(()) => {}
            Err(Error::Corrupted { page: p, reason }) => {
                // A page inside an overflow run (9000-byte values: 3 pages) is reported by the
                // run's first page, which carries the run's header and checksum.
                if page >= 2 {
                    let page = page as u64;
                    assert!(
                        p == page || (p < page && page - p < 3),
                        "flip in page {page} reported at {p}: {reason}"
                    );
                }
                detected += 1;
            }
            // A flip in the newest meta slot: the open cannot tell whether it held a newer
            // commit than the other slot, and says so.
            Err(Error::WouldLoseData { .. }) if page < 2 => detected += 1,
            Err(e) => panic!("page {page}: untyped failure {e}"),
        }
    }
    assert!(
        detected > pages / 2,
        "only {detected} of {pages} flips detected"
    );
}

/// The commit a file opens at (its newest), after `exercise` found it whole.
fn opened_txn(bytes: Vec<u8>) -> Result<u64, Error> {
    let s = FaultStorage::new();
    s.set_contents(bytes);
    let db = Database::open_storage(Arc::new(s), Options::default())?;
    let id = db.begin_read()?.id();
    Ok(id)
}

/// A file cut short anywhere, at a page boundary or not: a typed error, never the previous
/// commit opened in silence (the newest meta page says how long the file must be).
#[test]
fn truncation_at_every_page_boundary_gives_typed_errors() {
    let good = sample();
    let newest = opened_txn(good.clone()).unwrap();
    for cut in (0..good.len())
        .step_by(4096)
        .chain([100, 5000, good.len() - 1])
    {
        match exercise(good[..cut].to_vec()) {
            // An empty file (with no log beside it) is made a new database.
            Ok(()) if cut == 0 => {}
            Ok(()) => assert_eq!(
                opened_txn(good[..cut].to_vec()).unwrap(),
                newest,
                "cut at {cut}"
            ),
            Err(Error::Corrupted { .. } | Error::NotADatabase | Error::WouldLoseData { .. }) => {}
            Err(e) => panic!("cut at {cut}: {e}"),
        }
    }
}

#[test]
fn random_mutations_give_typed_errors() {
    let good = sample();
    let mut rng = rand::rngs::StdRng::seed_from_u64(2);
    for _ in 0..300 {
        let mut bad = good.clone();
        for _ in 0..rng.gen_range(1..20) {
            let at = rng.gen_range(0..bad.len());
            bad[at] = rng.gen();
        }
        match exercise(bad) {
            Ok(())
            | Err(Error::Corrupted { .. } | Error::NotADatabase | Error::WouldLoseData { .. }) => {}
            Err(e) => panic!("untyped failure {e}"),
        }
    }
}

#[test]
fn not_a_database() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk");
    std::fs::write(&junk, vec![0x5au8; 20000]).unwrap();
    assert!(matches!(
        Database::open(&junk, Options::default()),
        Err(Error::NotADatabase)
    ));
    let tiny = dir.path().join("tiny");
    std::fs::write(&tiny, b"hello").unwrap();
    assert!(matches!(
        Database::open(&tiny, Options::default()),
        Err(Error::NotADatabase)
    ));
    let empty = dir.path().join("empty");
    std::fs::write(&empty, b"").unwrap();
    assert!(matches!(
        Database::open(&empty, Options::default().read_only(true)),
        Err(Error::NotADatabase)
    ));
    // I/O errors name the operation and the file.
    match Database::open(dir.path(), Options::default()) {
        Err(Error::Io {
            op: "open",
            path: Some(p),
            source,
        }) => {
            assert_eq!(p, dir.path());
            assert_eq!(source.kind(), std::io::ErrorKind::IsADirectory);
        }
        other => panic!("{other:?}"),
    }
    let missing = dir.path().join("missing");
    match Database::open(&missing, Options::default().create(false)) {
        Err(e @ Error::Io { .. }) => {
            let Error::Io { op, path, source } = &e else {
                unreachable!()
            };
            assert_eq!((*op, path.as_deref()), ("open", Some(missing.as_path())));
            assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
            let shown = e.to_string();
            assert!(
                shown.contains("open") && shown.contains("missing"),
                "{shown}"
            );
            assert!(std::error::Error::source(&e).is_some());
        }
        other => panic!("{other:?}"),
    }
    assert!(!missing.exists());
    assert!(!larchdb::storage::lock_path(&missing).exists());
}

/// Writes `version` into a meta slot and reseals its checksum, as a later format would (its
/// fields end at byte 184; formats 3 and 4's at 152, format 2's at 144).
fn set_version(bytes: &mut [u8], slot: usize, version: u32) {
    let at = slot * 4096;
    bytes[at + 40..at + 44].copy_from_slice(&version.to_le_bytes());
    let end = match version {
        2 => 144,
        3 | 4 => 152,
        _ => 184,
    };
    let crc = crc32c::crc32c(&bytes[at + 4..at + end]);
    bytes[at..at + 4].copy_from_slice(&crc.to_le_bytes());
}

/// A file of format 2 (before the log position was added to the meta page) opens, reads and
/// takes commits; they are written in the current format.
#[test]
fn a_format_2_file_opens_and_is_upgraded_by_the_next_commit() {
    let mut bytes = sample();
    for slot in 0..2 {
        // Format 2 had no log: its log position bytes were never written.
        assert!(bytes[slot * 4096 + 144..slot * 4096 + 152]
            .iter()
            .all(|&b| b == 0));
        set_version(&mut bytes, slot, 2);
    }
    opens_and_is_upgraded(bytes, 2);
}

#[test]
fn future_format_version_is_refused() {
    let mut bytes = sample();
    for slot in 0..2 {
        set_version(&mut bytes, slot, 99);
    }
    match exercise(bytes.clone()) {
        Err(Error::UnsupportedVersion {
            found: 99,
            supported: 6,
        }) => {}
        other => panic!("{other:?}"),
    }
    // One slot of a newer format is enough: opening the other would roll the file back.
    let mut one = sample();
    set_version(&mut one, 1, 7);
    assert!(matches!(
        exercise(one),
        Err(Error::UnsupportedVersion { found: 7, .. })
    ));
}

/// A file of format 5 (the reserved pages as two extents in the meta page) with none reserved
/// opens, reads and takes commits, written in the current format.
#[test]
fn a_format_5_file_opens_and_is_upgraded_by_the_next_commit() {
    let mut bytes = sample();
    for slot in 0..2 {
        // A clean close names no reserved pages: zeros, as format 5's two extents.
        assert!(bytes[slot * 4096 + 152..slot * 4096 + 184]
            .iter()
            .all(|&b| b == 0));
        set_version(&mut bytes, slot, 5);
    }
    opens_and_is_upgraded(bytes, 5);
}

/// Opens `bytes`, a file whose meta slots are both of format `old`: it verifies, reads and
/// takes a commit, which is written in the current format (the other slot keeps `old`), and
/// the file opens again with the commit in it.
fn opens_and_is_upgraded(bytes: Vec<u8>, old: u32) {
    let s = FaultStorage::new();
    s.set_contents(bytes);
    let db = Database::open_storage(Arc::new(s.clone()), Options::default()).unwrap();
    db.verify().unwrap();
    let tables = db.begin_read().unwrap().list_tables().unwrap();
    assert!(!tables.is_empty());
    let mut w = db.begin_write().unwrap();
    w.table(&tables[0]).unwrap().put(b"new", b"value").unwrap();
    w.commit().unwrap();
    drop(db);
    let after = s.contents();
    let versions: Vec<u32> = (0..2)
        .map(|slot| u32::from_le_bytes(after[slot * 4096 + 40..][..4].try_into().unwrap()))
        .collect();
    assert!(
        versions.contains(&old) && versions.contains(&6),
        "{versions:?}"
    );
    let db = Database::open_storage(Arc::new(s), Options::default()).unwrap();
    db.verify().unwrap();
    let r = db.begin_read().unwrap();
    assert_eq!(
        r.table(&tables[0]).unwrap().get(b"new").unwrap(),
        Some(&b"value"[..])
    );
}

/// Regression (found by tests/bit_rot.rs): a bit flipped in one slot's version field made the
/// whole file unopenable as `UnsupportedVersion`; a slot whose checksum fails is damaged. A
/// damaged older slot costs nothing: the other slot opens. A damaged newest slot may have held
/// the newest commit (the file holds its pages), so the open says so, and a recovering open
/// opens the commit before it.
#[test]
fn a_flipped_version_bit_is_damage_to_that_slot_not_a_future_format() {
    let good = sample();
    let state_with = |bytes: Vec<u8>, options: Options| -> Result<(u64, Vec<String>), Error> {
        let s = FaultStorage::new();
        s.set_contents(bytes);
        let db = Database::open_storage(Arc::new(s), options)?;
        db.verify()?;
        let r = db.begin_read()?;
        Ok((r.id(), r.list_tables()?))
    };
    let db_state = |bytes: Vec<u8>| state_with(bytes, Options::default());
    let (newest, tables) = db_state(good.clone()).unwrap();
    let slot_txn =
        |slot: usize| u64::from_le_bytes(good[slot * 4096 + 16..][..8].try_into().unwrap());
    assert_eq!(slot_txn(0).max(slot_txn(1)), newest);
    for slot in 0..2 {
        for bit in 0..32 {
            let mut bad = good.clone();
            bad[slot * 4096 + 40 + bit / 8] ^= 1 << (bit % 8);
            if slot_txn(slot) == newest {
                match db_state(bad.clone()) {
                    Err(Error::WouldLoseData { .. }) => {}
                    other => panic!("slot {slot} bit {bit}: {other:?}"),
                }
                let recovering = Options::default().recover(true);
                let (txn, found) = state_with(bad, recovering)
                    .unwrap_or_else(|e| panic!("slot {slot} bit {bit}: {e}"));
                assert_eq!(found, tables);
                assert_eq!(
                    txn,
                    newest - 1 + 2,
                    "slot {slot} bit {bit}: the commit before, \
                    made durable in both slots"
                );
            } else {
                let (txn, found) =
                    db_state(bad).unwrap_or_else(|e| panic!("slot {slot} bit {bit}: {e}"));
                assert_eq!(found, tables);
                assert_eq!(txn, newest, "slot {slot} bit {bit}");
            }
        }
    }
}

/// Regression (found by fuzz/open_mutated): a leaf whose dead-space count (header field `b`) is
/// wrong but whose checksum is valid (a page read through the memory map is not checksummed)
/// made an insert that needed compaction write out of bounds (a panic) or over the slot array.
/// Now a count larger than the cell area is `Corrupted` at that page as soon as the page is
/// read; a smaller lie is found when compaction frees less than it promised, and is
/// `Corrupted` at the transaction's copy of the page. Either way the transaction cannot commit.
#[test]
fn a_wrong_dead_space_count_fails_the_write_not_the_process() {
    let good = sample();
    let roles = {
        let s = FaultStorage::new();
        s.set_contents(good.clone());
        Database::open_storage(Arc::new(s), Options::default())
            .unwrap()
            .page_roles()
            .unwrap()
    };
    let u16_at = |b: &[u8], at: usize| u16::from_le_bytes([b[at], b[at + 1]]) as usize;
    let mut leaves = 0;
    let mut caught_at_compaction = 0;
    for (id, role) in roles.iter().enumerate() {
        if *role != larchdb::PageRole::Leaf {
            continue;
        }
        // Beyond the cell area, and just within it (all of it dead).
        for beyond in [true, false] {
            let mut bad = good.clone();
            let p = &mut bad[id * 4096..(id + 1) * 4096];
            let cell_area = 4096 - u16_at(p, 24);
            let dead = if beyond { cell_area + 1 } else { cell_area } as u32;
            p[28..32].copy_from_slice(&dead.to_le_bytes());
            // Reseal (file-format.md: CRC-32C of bytes 4.., skipping the gap between the slot
            // array and the cells).
            let (gap_start, gap_end) = (32 + 2 * u16_at(p, 6), u16_at(p, 24));
            let crc = crc32c::crc32c_append(crc32c::crc32c(&p[4..gap_start]), &p[gap_end..]);
            p[..4].copy_from_slice(&crc.to_le_bytes());
            let cell = u16_at(p, 32);
            let first_key = p[cell + 6..cell + 6 + u16_at(p, cell)].to_vec();

            let s = FaultStorage::new();
            s.set_contents(bad);
            let db = Database::open_storage(Arc::new(s), Options::default()).unwrap();
            let mut w = db.begin_write().unwrap();
            let mut failed = None;
            {
                let mut t = w.table("t").unwrap();
                // Keys just after the leaf's first key land in this leaf until it is full.
                for i in 0..40u8 {
                    let mut k = first_key.clone();
                    k.extend_from_slice(&[0xff, i]);
                    if let Err(e) = t.put(&k, &[i; 200]) {
                        failed = Some(e);
                        break;
                    }
                }
            }
            match failed {
                Some(Error::Corrupted { page, reason }) if beyond => {
                    assert_eq!(page, id as u64, "{reason}");
                    assert_eq!(reason, "dead-space count exceeds the cell area");
                }
                Some(Error::Corrupted { reason, .. }) => {
                    assert_eq!(reason, "dead-space count does not match the cells");
                    caught_at_compaction += 1;
                }
                // Compaction recounts the dead space: if the real free space sufficed, the
                // lie is gone and the writes are sound.
                None if !beyond => {
                    w.commit().unwrap();
                    let r = db.begin_read().unwrap();
                    let t = r.table("t").unwrap();
                    for i in 0..40u8 {
                        let mut k = first_key.clone();
                        k.extend_from_slice(&[0xff, i]);
                        assert_eq!(t.get(&k).unwrap(), Some(&[i; 200][..]));
                    }
                    db.verify().unwrap();
                    continue;
                }
                other => panic!("leaf {id}, beyond {beyond}: {other:?}"),
            }
            assert!(matches!(w.commit(), Err(Error::TxnFailed)));
        }
        leaves += 1;
    }
    assert!(leaves > 5, "only {leaves} leaves");
    assert!(
        caught_at_compaction > 0,
        "no lie within the cell area mattered"
    );
}

/// Regression (found by fuzz/open_mutated): a catalog entry whose name is empty (its length
/// field damaged, the checksum valid) was listed by `list_tables` as a table named "", which
/// `table("")` then refused as `InvalidTableName`. A name no table can have is damage:
/// `list_tables` and `verify()` report `Corrupted` at the catalog page.
#[test]
fn an_impossible_table_name_in_the_catalog_is_corruption() {
    let good = sample();
    let s = FaultStorage::new();
    s.set_contents(good.clone());
    let roles = Database::open_storage(Arc::new(s), Options::default())
        .unwrap()
        .page_roles()
        .unwrap();
    let catalog: Vec<usize> = roles
        .iter()
        .enumerate()
        .filter(|(_, r)| **r == larchdb::PageRole::CatalogLeaf)
        .map(|(id, _)| id)
        .collect();
    assert_eq!(catalog.len(), 1, "the sample's catalog is one leaf");
    let id = catalog[0];
    let u16_at = |b: &[u8], at: usize| u16::from_le_bytes([b[at], b[at + 1]]) as usize;
    let mut bad = good;
    let p = &mut bad[id * 4096..(id + 1) * 4096];
    let cell = u16_at(p, 32);
    p[cell..cell + 2].copy_from_slice(&0u16.to_le_bytes());
    let (gap_start, gap_end) = (32 + 2 * u16_at(p, 6), u16_at(p, 24));
    let crc = crc32c::crc32c_append(crc32c::crc32c(&p[4..gap_start]), &p[gap_end..]);
    p[..4].copy_from_slice(&crc.to_le_bytes());

    let s = FaultStorage::new();
    s.set_contents(bad);
    let db = Database::open_storage(Arc::new(s), Options::default()).unwrap();
    let r = db.begin_read().unwrap();
    match r.list_tables() {
        Err(Error::Corrupted { page, reason }) => {
            assert_eq!(page, id as u64);
            assert_eq!(reason, "table name of 0 bytes");
        }
        other => panic!("list_tables: {other:?}"),
    }
    match db.verify() {
        Err(Error::Corrupted { page, reason }) => {
            assert_eq!(page, id as u64);
            assert_eq!(reason, "table name of 0 bytes");
        }
        other => panic!("verify: {other:?}"),
    }
    let mut w = db.begin_write().unwrap();
    assert!(matches!(w.list_tables(), Err(Error::Corrupted { .. })));
}
