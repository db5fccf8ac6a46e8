//! LevelDB through libleveldb.so.1d (dlopen of the C API, leveldb/c.h; the calls it shares with
//! RocksDB's are in leveldb_c.rs).
//!
//! Configuration: compression off, an LRU block cache of --cache_size, a bloom filter of
//! --bloom_bits (10) bits per key (LevelDB's own recommendation for point reads), `sync` per
//! --sync; LevelDB's defaults otherwise (4 MiB write buffer, 2 MiB tables, 1000 open files).

use super::leveldb_c::{self, c_library, CLibrary, Db, Flavor, P};
use super::{dl_api, kv, loaded_library_version, EngineSpec, OpenOptions, Opened};
use crate::error::Result;
use std::ffi::{c_char, c_int};
use std::ptr;

dl_api! {
    /// LevelDB's own entry points, beside the shared ones.
    struct Api {
        fn leveldb_options_set_cache(P, P);
        fn leveldb_options_set_filter_policy(P, P);
        fn leveldb_filterpolicy_create_bloom(c_int) -> P;
        fn leveldb_filterpolicy_destroy(P);
        fn leveldb_get(P, P, *const c_char, usize, *mut usize, *mut *mut c_char) -> *mut c_char;
        fn leveldb_major_version() -> c_int;
        fn leveldb_minor_version() -> c_int;
    }
}

static LIBRARY: CLibrary = c_library!(
    "leveldb",
    libs: &["libleveldb.so.1d", "libleveldb.so.1", "libleveldb.so"],
    hint: "apt-get install libleveldb-dev (Debian/Ubuntu), or scripts/setup.sh"
);

fn version(api: &Api) -> String {
    // SAFETY: both functions return constants.
    let (a, b) = unsafe { ((api.leveldb_major_version)(), (api.leveldb_minor_version)()) };
    let full = loaded_library_version("libleveldb.so");
    format!("{a}.{b} (libleveldb.so.{full})")
}

pub fn spec() -> EngineSpec {
    EngineSpec {
        name: LIBRARY.engine,
        install_hint: LIBRARY.hint,
        probe: || {
            let (_, api) = LIBRARY.load(Api::load)?;
            Ok(version(&api))
        },
        open,
    }
}

/// LevelDB's part: its entry points and the bloom filter policy (null when off).
struct Level {
    api: Api,
    policy: P,
}

impl Drop for Level {
    fn drop(&mut self) {
        if !self.policy.is_null() {
            // SAFETY: the database that used the policy is closed.
            unsafe { (self.api.leveldb_filterpolicy_destroy)(self.policy) }
        }
    }
}

impl Flavor for Level {
    fn get(db: &Db<Self>, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        let (c, a, (d, ro)) = (db.c(), &db.flavor().api, db.handles());
        let mut len = 0;
        let (k, kl) = (key.as_ptr().cast(), key.len());
        let v = c.with_errptr("leveldb_get", |e| {
            // SAFETY: the handles are live while `db` is.
            unsafe { (a.leveldb_get)(d, ro, k, kl, &mut len, e) }
        })?;
        if v.is_null() {
            return Ok(false);
        }
        // SAFETY: the value is malloc'd by LevelDB, `len` bytes long; copied, then freed.
        unsafe {
            leveldb_c::copy_value(out, v, len);
            c.free(v.cast());
        }
        Ok(true)
    }
}

fn open(o: &OpenOptions) -> Result<Opened> {
    let (c, api) = LIBRARY.load_for_open(Api::load)?;
    let version = version(&api);
    let db = leveldb_c::open(c, o, |options, cache| {
        // SAFETY: `options` and `cache` are live; the policy is owned by `Level`.
        unsafe {
            (api.leveldb_options_set_cache)(options, cache);
            let policy = if o.bloom_bits > 0 {
                let p = (api.leveldb_filterpolicy_create_bloom)(o.bloom_bits as c_int);
                (api.leveldb_options_set_filter_policy)(options, p);
                p
            } else {
                ptr::null_mut()
            };
            Level { api, policy }
        }
    })?;
    let mut config = leveldb_c::config(o, &[], "");
    config.extend([
        kv("write_buffer_size", "default (4 MiB)"),
        kv("max_file_size", "default (2 MiB)"),
    ]);
    Ok(Opened {
        engine: Box::new(db),
        version,
        config,
    })
}
