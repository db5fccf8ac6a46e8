//! RocksDB through librocksdb.so (dlopen of the C API, rocksdb/c.h; the calls it shares with
//! LevelDB's are in leveldb_c.rs).
//!
//! Configuration: compression off (as in the seed reports), WAL on, `sync` per --sync, an LRU
//! block cache of --cache_size, a full bloom filter of --bloom_bits (10) bits per key, and
//! max_background_jobs = max(2, CPUs), enable_pipelined_write (db_bench's default); everything else is RocksDB's default Options (64 MiB
//! write buffer, leveled compaction), which is also what db_bench uses, so the two can be
//! compared. Point reads use the pinned Get.

use super::leveldb_c::{self, c_library, CLibrary, Db, Flavor, P};
use super::{dl_api, kv, loaded_library_version, EngineSpec, OpenOptions, Opened};
use crate::error::Result;
use std::ffi::{c_char, c_int, c_uchar};

dl_api! {
    /// RocksDB's own entry points, beside the shared ones.
    struct Api {
        fn rocksdb_options_set_max_background_jobs(P, c_int);
        fn rocksdb_options_set_enable_pipelined_write(P, c_uchar);
        fn rocksdb_options_set_block_based_table_factory(P, P);
        fn rocksdb_block_based_options_create() -> P;
        fn rocksdb_block_based_options_destroy(P);
        fn rocksdb_block_based_options_set_block_cache(P, P);
        fn rocksdb_block_based_options_set_filter_policy(P, P);
        fn rocksdb_filterpolicy_create_bloom_full(f64) -> P;
        fn rocksdb_get_pinned(P, P, *const c_char, usize, *mut *mut c_char) -> P;
        fn rocksdb_pinnableslice_value(P, *mut usize) -> *const c_char;
        fn rocksdb_pinnableslice_destroy(P);
    }
}

static LIBRARY: CLibrary = c_library!(
    "rocksdb",
    libs: &["librocksdb.so.7.8", "librocksdb.so.7", "librocksdb.so"],
    hint: "apt-get install librocksdb-dev (Debian/Ubuntu), or scripts/setup.sh"
);

pub fn spec() -> EngineSpec {
    EngineSpec {
        name: LIBRARY.engine,
        install_hint: LIBRARY.hint,
        probe: || {
            LIBRARY.load(Api::load)?;
            Ok(loaded_library_version("librocksdb.so"))
        },
        open,
    }
}

/// RocksDB's part: its entry points and the block-based table options.
struct Rocks {
    api: Api,
    table: P,
}

impl Drop for Rocks {
    fn drop(&mut self) {
        // SAFETY: the database that used the table options is closed.
        unsafe { (self.api.rocksdb_block_based_options_destroy)(self.table) }
    }
}

impl Flavor for Rocks {
    fn get(db: &Db<Self>, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        let (c, a, (d, ro)) = (db.c(), &db.flavor().api, db.handles());
        let (k, kl) = (key.as_ptr().cast(), key.len());
        let ps = c.with_errptr("rocksdb_get_pinned", |e| {
            // SAFETY: the handles are live while `db` is.
            unsafe { (a.rocksdb_get_pinned)(d, ro, k, kl, e) }
        })?;
        if ps.is_null() {
            return Ok(false);
        }
        // SAFETY: the pinnable slice is destroyed after its value is copied.
        unsafe {
            let mut len = 0;
            let v = (a.rocksdb_pinnableslice_value)(ps, &mut len);
            leveldb_c::copy_value(out, v, len);
            (a.rocksdb_pinnableslice_destroy)(ps);
        }
        Ok(true)
    }
}

fn cpus() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
}

fn open(o: &OpenOptions) -> Result<Opened> {
    let (c, api) = LIBRARY.load_for_open(Api::load)?;
    let jobs = cpus().max(2);
    let db = leveldb_c::open(c, o, |options, cache| {
        // SAFETY: `options` and `cache` are live; the table options are owned by `Rocks`.
        unsafe {
            (api.rocksdb_options_set_max_background_jobs)(options, jobs as c_int);
            // db_bench's default, and the RocksDB wiki's advice for write throughput.
            (api.rocksdb_options_set_enable_pipelined_write)(options, 1);
            let table = (api.rocksdb_block_based_options_create)();
            (api.rocksdb_block_based_options_set_block_cache)(table, cache);
            if o.bloom_bits > 0 {
                let policy = (api.rocksdb_filterpolicy_create_bloom_full)(o.bloom_bits as f64);
                // The table options take ownership of the policy.
                (api.rocksdb_block_based_options_set_filter_policy)(table, policy);
            }
            (api.rocksdb_options_set_block_based_table_factory)(options, table);
            Rocks { api, table }
        }
    })?;
    let version = loaded_library_version("librocksdb.so");
    let mut config = leveldb_c::config(o, &[("wal", "on")], " (full filter)");
    config.extend([
        kv("max_background_jobs", jobs.to_string()),
        kv("enable_pipelined_write", "1"),
        kv("write_buffer_size", "default (64 MiB)"),
        kv("compaction", "leveled (default)"),
    ]);
    Ok(Opened {
        engine: Box::new(db),
        version,
        config,
    })
}
