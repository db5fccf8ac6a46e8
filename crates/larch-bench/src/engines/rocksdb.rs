//! RocksDB through librocksdb.so (dlopen of the C API, rocksdb/c.h).
//!
//! Configuration: compression off (as in the seed reports), WAL on, `sync` per --sync, an LRU
//! block cache of --cache_size, a full bloom filter of --bloom_bits (10) bits per key, and
//! max_background_jobs = max(2, CPUs), enable_pipelined_write (db_bench's default); everything else is RocksDB's default Options (64 MiB
//! write buffer, leveled compaction), which is also what db_bench uses, so the two can be
//! compared. Point reads use the pinned Get.

use super::{
    dl_api, kv, loaded_library_version, open_library, Engine, EngineSpec, Op, OpenOptions, Opened,
    Session, WriteOpts,
};
use crate::error::{Error, Result};
use std::ffi::{c_char, c_int, c_uchar, c_void, CStr, CString};
use std::ptr;

type P = *mut c_void;

dl_api! {
    struct Api {
        fn rocksdb_options_create() -> P;
        fn rocksdb_options_destroy(P);
        fn rocksdb_options_set_create_if_missing(P, c_uchar);
        fn rocksdb_options_set_compression(P, c_int);
        fn rocksdb_options_set_max_background_jobs(P, c_int);
        fn rocksdb_options_set_enable_pipelined_write(P, c_uchar);
        fn rocksdb_options_set_block_based_table_factory(P, P);
        fn rocksdb_block_based_options_create() -> P;
        fn rocksdb_block_based_options_destroy(P);
        fn rocksdb_block_based_options_set_block_cache(P, P);
        fn rocksdb_block_based_options_set_filter_policy(P, P);
        fn rocksdb_filterpolicy_create_bloom_full(f64) -> P;
        fn rocksdb_cache_create_lru(usize) -> P;
        fn rocksdb_cache_destroy(P);
        fn rocksdb_open(P, *const c_char, *mut *mut c_char) -> P;
        fn rocksdb_close(P);
        fn rocksdb_writeoptions_create() -> P;
        fn rocksdb_writeoptions_destroy(P);
        fn rocksdb_writeoptions_set_sync(P, c_uchar);
        fn rocksdb_readoptions_create() -> P;
        fn rocksdb_readoptions_destroy(P);
        fn rocksdb_put(P, P, *const c_char, usize, *const c_char, usize, *mut *mut c_char);
        fn rocksdb_delete(P, P, *const c_char, usize, *mut *mut c_char);
        fn rocksdb_write(P, P, P, *mut *mut c_char);
        fn rocksdb_writebatch_create() -> P;
        fn rocksdb_writebatch_destroy(P);
        fn rocksdb_writebatch_clear(P);
        fn rocksdb_writebatch_put(P, *const c_char, usize, *const c_char, usize);
        fn rocksdb_writebatch_delete(P, *const c_char, usize);
        fn rocksdb_get_pinned(P, P, *const c_char, usize, *mut *mut c_char) -> P;
        fn rocksdb_pinnableslice_value(P, *mut usize) -> *const c_char;
        fn rocksdb_pinnableslice_destroy(P);
        fn rocksdb_create_iterator(P, P) -> P;
        fn rocksdb_iter_destroy(P);
        fn rocksdb_iter_seek_to_first(P);
        fn rocksdb_iter_seek_to_last(P);
        fn rocksdb_iter_seek(P, *const c_char, usize);
        fn rocksdb_iter_valid(P) -> c_uchar;
        fn rocksdb_iter_next(P);
        fn rocksdb_iter_prev(P);
        fn rocksdb_iter_key(P, *mut usize) -> *const c_char;
        fn rocksdb_iter_value(P, *mut usize) -> *const c_char;
        fn rocksdb_iter_get_error(P, *mut *mut c_char);
        fn rocksdb_free(*mut c_void);
    }
}

const LIBS: &[&str] = &["librocksdb.so.7.8", "librocksdb.so.7", "librocksdb.so"];
const HINT: &str = "apt-get install librocksdb-dev (Debian/Ubuntu), or scripts/setup.sh";

pub fn spec() -> EngineSpec {
    EngineSpec {
        name: "rocksdb",
        install_hint: HINT,
        probe: || {
            Api::load(open_library(LIBS)?)?;
            Ok(loaded_library_version("librocksdb.so"))
        },
        open,
    }
}

struct Rocks {
    api: Api,
    db: P,
    options: P,
    table: P,
    cache: P,
    wo_async: P,
    wo_sync: P,
    ro: P,
}

// SAFETY: rocksdb_t and the option objects are thread-safe for concurrent reads and writes
// (RocksDB's DB is documented as safe to share); per-call objects stay within one thread.
unsafe impl Send for Rocks {}
// SAFETY: as above.
unsafe impl Sync for Rocks {}

/// Turns a RocksDB error string into an Error and frees it.
fn check(api: &Api, op: &'static str, e: *mut c_char) -> Result<()> {
    if e.is_null() {
        return Ok(());
    }
    // SAFETY: RocksDB returns a malloc'd NUL-terminated string, freed with rocksdb_free.
    let msg = unsafe {
        let m = CStr::from_ptr(e).to_string_lossy().to_string();
        (api.rocksdb_free)(e.cast());
        m
    };
    Err(Error::engine("rocksdb", op, msg))
}

fn cpus() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
}

fn open(o: &OpenOptions) -> Result<Opened> {
    let unavailable = |reason: String| Error::Unavailable {
        engine: "rocksdb".into(),
        reason,
        hint: HINT.into(),
    };
    let api = Api::load(open_library(LIBS).map_err(unavailable)?).map_err(unavailable)?;
    let path = CString::new(o.dir.as_os_str().as_encoded_bytes())
        .map_err(|_| Error::Usage("--db path contains NUL".into()))?;
    let jobs = cpus().max(2);
    // SAFETY: standard C-API construction; every object is owned by `Rocks` and destroyed in
    // Drop (or here on failure).
    unsafe {
        let options = (api.rocksdb_options_create)();
        (api.rocksdb_options_set_create_if_missing)(options, 1);
        (api.rocksdb_options_set_compression)(options, 0); // kNoCompression
        (api.rocksdb_options_set_max_background_jobs)(options, jobs as c_int);
        // db_bench's default, and the RocksDB wiki's advice for write throughput.
        (api.rocksdb_options_set_enable_pipelined_write)(options, 1);
        let table = (api.rocksdb_block_based_options_create)();
        let cache = (api.rocksdb_cache_create_lru)(o.cache_bytes as usize);
        (api.rocksdb_block_based_options_set_block_cache)(table, cache);
        if o.bloom_bits > 0 {
            let policy = (api.rocksdb_filterpolicy_create_bloom_full)(o.bloom_bits as f64);
            // The table options take ownership of the policy.
            (api.rocksdb_block_based_options_set_filter_policy)(table, policy);
        }
        (api.rocksdb_options_set_block_based_table_factory)(options, table);
        let mut e = ptr::null_mut();
        let db = (api.rocksdb_open)(options, path.as_ptr(), &mut e);
        if let Err(err) = check(&api, "rocksdb_open", e) {
            (api.rocksdb_block_based_options_destroy)(table);
            (api.rocksdb_cache_destroy)(cache);
            (api.rocksdb_options_destroy)(options);
            return Err(err);
        }
        let wo_async = (api.rocksdb_writeoptions_create)();
        let wo_sync = (api.rocksdb_writeoptions_create)();
        (api.rocksdb_writeoptions_set_sync)(wo_sync, 1);
        let ro = (api.rocksdb_readoptions_create)();
        let version = loaded_library_version("librocksdb.so");
        let config = vec![
            kv("compression", "none"),
            kv("wal", "on"),
            kv("sync", if o.sync { "1 (WriteOptions.sync)" } else { "0" }),
            kv("block_cache_bytes", o.cache_bytes),
            kv(
                "bloom_bits_per_key",
                if o.bloom_bits > 0 {
                    format!("{} (full filter)", o.bloom_bits)
                } else {
                    "off".into()
                },
            ),
            kv("max_background_jobs", jobs),
            kv("enable_pipelined_write", 1),
            kv("write_buffer_size", "default (64 MiB)"),
            kv("compaction", "leveled (default)"),
        ];
        Ok(Opened {
            engine: Box::new(Rocks {
                api,
                db,
                options,
                table,
                cache,
                wo_async,
                wo_sync,
                ro,
            }),
            version,
            config,
        })
    }
}

impl Drop for Rocks {
    fn drop(&mut self) {
        let a = &self.api;
        // SAFETY: sessions borrow the engine and are gone; close the DB before its options.
        unsafe {
            (a.rocksdb_close)(self.db);
            (a.rocksdb_writeoptions_destroy)(self.wo_async);
            (a.rocksdb_writeoptions_destroy)(self.wo_sync);
            (a.rocksdb_readoptions_destroy)(self.ro);
            (a.rocksdb_block_based_options_destroy)(self.table);
            (a.rocksdb_cache_destroy)(self.cache);
            (a.rocksdb_options_destroy)(self.options);
        }
    }
}

impl Engine for Rocks {
    fn session(&self) -> Result<Box<dyn Session + '_>> {
        // SAFETY: creates an empty write batch owned by the session.
        let batch = unsafe { (self.api.rocksdb_writebatch_create)() };
        Ok(Box::new(RocksSession { db: self, batch }))
    }
}

struct RocksSession<'a> {
    db: &'a Rocks,
    batch: P,
}

impl Drop for RocksSession<'_> {
    fn drop(&mut self) {
        // SAFETY: the batch belongs to this session.
        unsafe { (self.db.api.rocksdb_writebatch_destroy)(self.batch) }
    }
}

impl Session for RocksSession<'_> {
    fn get(&mut self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        let (a, d) = (&self.db.api, self.db);
        // SAFETY: the pinnable slice is destroyed after its value is copied.
        unsafe {
            let mut e = ptr::null_mut();
            let ps = (a.rocksdb_get_pinned)(d.db, d.ro, key.as_ptr().cast(), key.len(), &mut e);
            check(a, "rocksdb_get_pinned", e)?;
            if ps.is_null() {
                return Ok(false);
            }
            let mut len = 0;
            let v = (a.rocksdb_pinnableslice_value)(ps, &mut len);
            out.clear();
            if len > 0 {
                out.extend_from_slice(std::slice::from_raw_parts(v.cast(), len));
            }
            (a.rocksdb_pinnableslice_destroy)(ps);
            Ok(true)
        }
    }

    fn write(&mut self, ops: &[Op<'_>], opts: WriteOpts) -> Result<()> {
        let (a, d) = (&self.db.api, self.db);
        let wo = if opts.sync { d.wo_sync } else { d.wo_async };
        let mut e = ptr::null_mut();
        // SAFETY: key/value pointers are valid for the duration of each call; the batch is
        // cleared after use.
        unsafe {
            if let [op] = ops {
                match *op {
                    Op::Put(k, v) => (a.rocksdb_put)(
                        d.db,
                        wo,
                        k.as_ptr().cast(),
                        k.len(),
                        v.as_ptr().cast(),
                        v.len(),
                        &mut e,
                    ),
                    Op::Delete(k) => {
                        (a.rocksdb_delete)(d.db, wo, k.as_ptr().cast(), k.len(), &mut e)
                    }
                }
                return check(a, "rocksdb_put/delete", e);
            }
            for op in ops {
                match *op {
                    Op::Put(k, v) => (a.rocksdb_writebatch_put)(
                        self.batch,
                        k.as_ptr().cast(),
                        k.len(),
                        v.as_ptr().cast(),
                        v.len(),
                    ),
                    Op::Delete(k) => {
                        (a.rocksdb_writebatch_delete)(self.batch, k.as_ptr().cast(), k.len())
                    }
                }
            }
            (a.rocksdb_write)(d.db, wo, self.batch, &mut e);
            (a.rocksdb_writebatch_clear)(self.batch);
        }
        check(a, "rocksdb_write", e)
    }

    fn scan(
        &mut self,
        start: Option<&[u8]>,
        reverse: bool,
        limit: u64,
        f: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<u64> {
        let (a, d) = (&self.db.api, self.db);
        let mut n = 0;
        let mut e = ptr::null_mut();
        // SAFETY: the iterator is destroyed before returning; key/value slices are only used
        // inside the callback, before the iterator moves.
        unsafe {
            let it = (a.rocksdb_create_iterator)(d.db, d.ro);
            match (start, reverse) {
                (Some(s), _) => (a.rocksdb_iter_seek)(it, s.as_ptr().cast(), s.len()),
                (None, false) => (a.rocksdb_iter_seek_to_first)(it),
                (None, true) => (a.rocksdb_iter_seek_to_last)(it),
            }
            while n < limit && (a.rocksdb_iter_valid)(it) != 0 {
                let (mut kl, mut vl) = (0, 0);
                let k = (a.rocksdb_iter_key)(it, &mut kl);
                let v = (a.rocksdb_iter_value)(it, &mut vl);
                f(
                    std::slice::from_raw_parts(k.cast(), kl),
                    if vl == 0 {
                        &[]
                    } else {
                        std::slice::from_raw_parts(v.cast(), vl)
                    },
                );
                n += 1;
                if n >= limit {
                    break;
                }
                if reverse {
                    (a.rocksdb_iter_prev)(it)
                } else {
                    (a.rocksdb_iter_next)(it)
                }
            }
            (a.rocksdb_iter_get_error)(it, &mut e);
            (a.rocksdb_iter_destroy)(it);
        }
        check(a, "rocksdb_iter", e)?;
        Ok(n)
    }
}
