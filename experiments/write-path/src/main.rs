//! Insert and probe costs of candidate homes for recent commits' writes (the overlay of
//! docs/design/write-path.md), with db_bench's record shape: 16-byte keys, 100-byte values.
//!
//! For each structure and overlay size N: N inserts in random key order (what one-put commits
//! of fillrandom do), then N probes for present keys and N for absent ones (what readrandom
//! does while the overlay holds N entries), in nanoseconds per operation, median of 5 runs.

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use larch_write_path_experiments::key;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

trait Overlay {
    fn name() -> &'static str;
    fn new() -> Self;
    fn insert(&mut self, k: [u8; 16], txn: u64, v: &[u8]);
    fn get(&self, k: &[u8; 16]) -> Option<usize>;
}

/// A `BTreeMap` of key -> (txn, value): ordered, single-threaded (readers would need a lock
/// or a copy).
struct Btm(BTreeMap<[u8; 16], (u64, Box<[u8]>)>);
impl Overlay for Btm {
    fn name() -> &'static str {
        "std BTreeMap"
    }
    fn new() -> Self {
        Btm(BTreeMap::new())
    }
    fn insert(&mut self, k: [u8; 16], txn: u64, v: &[u8]) {
        self.0.insert(k, (txn, v.into()));
    }
    fn get(&self, k: &[u8; 16]) -> Option<usize> {
        self.0.get(k).map(|(_, v)| v.len())
    }
}

/// A concurrent skip list (crossbeam): ordered, lock-free readers beside one writer.
struct Skip(crossbeam_skiplist::SkipMap<[u8; 16], (u64, Box<[u8]>)>);
impl Overlay for Skip {
    fn name() -> &'static str {
        "crossbeam SkipMap"
    }
    fn new() -> Self {
        Skip(crossbeam_skiplist::SkipMap::new())
    }
    fn insert(&mut self, k: [u8; 16], txn: u64, v: &[u8]) {
        self.0.insert(k, (txn, v.into()));
    }
    fn get(&self, k: &[u8; 16]) -> Option<usize> {
        self.0.get(k).map(|e| e.value().1.len())
    }
}

/// A hash map: point probes only (scans would need the keys sorted apart).
struct Hash(HashMap<[u8; 16], (u64, Box<[u8]>)>);
impl Overlay for Hash {
    fn name() -> &'static str {
        "std HashMap"
    }
    fn new() -> Self {
        Hash(HashMap::new())
    }
    fn insert(&mut self, k: [u8; 16], txn: u64, v: &[u8]) {
        self.0.insert(k, (txn, v.into()));
    }
    fn get(&self, k: &[u8; 16]) -> Option<usize> {
        self.0.get(k).map(|(_, v)| v.len())
    }
}

/// A persistent (copy-on-write, structurally shared) ordered map (`im::OrdMap`): every
/// insert makes a new version that readers can hold with an `Arc` clone of its root, so a
/// commit can publish the overlay with no lock and readers see a fixed version, in order.
struct PersistentOrd(im::OrdMap<[u8; 16], (u64, std::sync::Arc<[u8]>)>);
impl Overlay for PersistentOrd {
    fn name() -> &'static str {
        "im OrdMap (persistent)"
    }
    fn new() -> Self {
        PersistentOrd(im::OrdMap::new())
    }
    fn insert(&mut self, k: [u8; 16], txn: u64, v: &[u8]) {
        self.0.insert(k, (txn, v.into()));
    }
    fn get(&self, k: &[u8; 16]) -> Option<usize> {
        self.0.get(k).map(|(_, v)| v.len())
    }
}

/// The same, keeping every version: each insert is followed by a clone of the map (what
/// publishing every commit to readers costs: an `Arc` clone of the root).
struct PersistentOrdPublished(
    im::OrdMap<[u8; 16], (u64, std::sync::Arc<[u8]>)>,
    Vec<im::OrdMap<[u8; 16], (u64, std::sync::Arc<[u8]>)>>,
);
impl Overlay for PersistentOrdPublished {
    fn name() -> &'static str {
        "im OrdMap, published per insert"
    }
    fn new() -> Self {
        PersistentOrdPublished(im::OrdMap::new(), Vec::new())
    }
    fn insert(&mut self, k: [u8; 16], txn: u64, v: &[u8]) {
        self.0.insert(k, (txn, v.into()));
        // A reader holds the last published version; older ones are dropped as readers move on.
        let published = self.0.clone();
        if self.1.len() == 1 {
            self.1.pop();
        }
        self.1.push(published);
    }
    fn get(&self, k: &[u8; 16]) -> Option<usize> {
        self.0.get(k).map(|(_, v)| v.len())
    }
}

/// A persistent hash trie (`im::HashMap`): point lookups only, versions as above.
struct PersistentHash(im::HashMap<[u8; 16], (u64, std::sync::Arc<[u8]>)>);
impl Overlay for PersistentHash {
    fn name() -> &'static str {
        "im HashMap (persistent)"
    }
    fn new() -> Self {
        PersistentHash(im::HashMap::new())
    }
    fn insert(&mut self, k: [u8; 16], txn: u64, v: &[u8]) {
        self.0.insert(k, (txn, v.into()));
    }
    fn get(&self, k: &[u8; 16]) -> Option<usize> {
        self.0.get(k).map(|(_, v)| v.len())
    }
}

/// An append-only log buffer of records (what a commit must write in any design): the floor.
fn log_append(n: usize, value: &[u8]) -> f64 {
    let keys: Vec<[u8; 16]> = (0..n as u64).map(key).collect();
    let mut buf: Vec<u8> = Vec::with_capacity(n * 140);
    let t = Instant::now();
    for (i, k) in keys.iter().enumerate() {
        let i = i as u64;
        buf.extend_from_slice(&(k.len() as u16).to_le_bytes());
        buf.extend_from_slice(&(value.len() as u32).to_le_bytes());
        buf.extend_from_slice(&i.to_le_bytes());
        buf.extend_from_slice(k);
        buf.extend_from_slice(value);
    }
    std::hint::black_box(&buf);
    t.elapsed().as_nanos() as f64 / n as f64
}

fn run<O: Overlay>(n: usize) -> (f64, f64, f64) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(42);
    let mut ids: Vec<u64> = (0..n as u64).map(|i| i * 2).collect();
    ids.shuffle(&mut rng);
    let value: Vec<u8> = (0..100).map(|_| rng.gen()).collect();
    // Keys made before the clock starts: only the structure is timed.
    let present: Vec<[u8; 16]> = ids.iter().map(|&i| key(i)).collect();
    let absent: Vec<[u8; 16]> = ids.iter().map(|&i| key(i + 1)).collect();
    let (mut ins, mut hit, mut miss) = (vec![], vec![], vec![]);
    for _ in 0..5 {
        let mut o = O::new();
        let t = Instant::now();
        for (txn, k) in present.iter().enumerate() {
            o.insert(*k, txn as u64, &value);
        }
        ins.push(t.elapsed().as_nanos() as f64 / n as f64);
        let t = Instant::now();
        let mut found = 0;
        for k in present.iter().rev() {
            found += o.get(k).is_some() as usize;
        }
        hit.push(t.elapsed().as_nanos() as f64 / n as f64);
        assert_eq!(found, n);
        let t = Instant::now();
        for k in absent.iter() {
            found += o.get(k).is_some() as usize;
        }
        miss.push(t.elapsed().as_nanos() as f64 / n as f64);
        assert_eq!(found, n);
    }
    (median(ins), median(hit), median(miss))
}

fn main() {
    println!("16-byte keys, 100-byte values; ns per operation, median of 5");
    println!("| structure | entries | insert | probe, present | probe, absent |");
    println!("|---|---|---|---|---|");
    for n in [1_000usize, 64_000, 1_000_000] {
        for (name, (i, h, m)) in [
            (Btm::name(), run::<Btm>(n)),
            (Skip::name(), run::<Skip>(n)),
            (Hash::name(), run::<Hash>(n)),
            (PersistentOrd::name(), run::<PersistentOrd>(n)),
            (
                PersistentOrdPublished::name(),
                run::<PersistentOrdPublished>(n),
            ),
            (PersistentHash::name(), run::<PersistentHash>(n)),
        ] {
            println!("| {name} | {n} | {i:.0} | {h:.0} | {m:.0} |");
        }
    }
    let v = vec![7u8; 100];
    let a = median((0..5).map(|_| log_append(1_000_000, &v)).collect());
    println!("| log buffer append (the floor) | 1000000 | {a:.0} | - | - |");
}
