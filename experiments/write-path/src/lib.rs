//! What the experiments share: db_bench's key shape, the random base tree they start from,
//! and the one-put commit they time.

use larchdb::{Database, Durability};
use rand::{Rng, SeedableRng};

/// Key `i` as db_bench writes it: 16 decimal digits.
pub fn key(i: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k.copy_from_slice(format!("{i:016}").as_bytes());
    k
}

/// Creates table `t` in `db` and puts `n` records into it, keys drawn from `0..space`, each
/// with `value`, in unsynced commits of 100,000.
pub fn load_random(db: &Database, n: u64, space: u64, rng: &mut impl Rng, value: &[u8]) {
    {
        let mut w = db.begin_write().unwrap();
        w.create_table("t").unwrap();
        w.commit().unwrap();
    }
    let mut loaded = 0;
    while loaded < n {
        let mut w = db.begin_write().unwrap();
        {
            let mut t = w.table("t").unwrap();
            for _ in 0..100_000.min(n - loaded) {
                t.put(&key(rng.gen_range(0..space)), value).unwrap();
            }
        }
        w.commit_with(Durability::None).unwrap();
        loaded += 100_000;
    }
}

/// One unsynced commit that sets a key drawn from `0..space` in table `t` to `value` (the
/// one-put commit the experiments time).
pub fn set_random(db: &Database, space: u64, rng: &mut impl Rng, value: &[u8]) {
    let mut w = db.begin_write().unwrap();
    w.table("t")
        .unwrap()
        .set(&key(rng.gen_range(0..space)), value)
        .unwrap();
    w.commit_with(Durability::None).unwrap();
}

/// The child of a crash experiment: loads `base` random records into `db` (`load_random`),
/// makes a durable checkpoint, makes `n` one-put commits (`set_random`), and exits without
/// closing anything (a process crash: no destructor runs, nothing is closed or synced).
pub fn load_then_crash(db: &Database, base: u64, n: u64) -> ! {
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let value: Vec<u8> = (0..100).map(|_| rng.gen()).collect();
    load_random(db, base, base, &mut rng, &value);
    db.checkpoint().unwrap();
    for _ in 0..n {
        set_random(db, base, &mut rng, &value);
    }
    std::process::exit(0);
}
