//! LevelDB through libleveldb.so.1d (dlopen of the C API, leveldb/c.h).
//!
//! Configuration: compression off, an LRU block cache of --cache_size, a bloom filter of
//! --bloom_bits (10) bits per key (LevelDB's own recommendation for point reads), `sync` per
//! --sync; LevelDB's defaults otherwise (4 MiB write buffer, 2 MiB tables, 1000 open files).

use super::{
    dl_api, kv, loaded_library_version, open_library, Engine, EngineSpec, Op, OpenOptions, Opened,
    Session, WriteOpts,
};
use crate::error::{Error, Result};
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::ptr;

type P = *mut c_void;

dl_api! {
    struct Api {
        fn leveldb_options_create() -> P;
        fn leveldb_options_destroy(P);
        fn leveldb_options_set_create_if_missing(P, u8);
        fn leveldb_options_set_cache(P, P);
        fn leveldb_options_set_filter_policy(P, P);
        fn leveldb_options_set_compression(P, c_int);
        fn leveldb_cache_create_lru(usize) -> P;
        fn leveldb_cache_destroy(P);
        fn leveldb_filterpolicy_create_bloom(c_int) -> P;
        fn leveldb_filterpolicy_destroy(P);
        fn leveldb_open(P, *const c_char, *mut *mut c_char) -> P;
        fn leveldb_close(P);
        fn leveldb_writeoptions_create() -> P;
        fn leveldb_writeoptions_destroy(P);
        fn leveldb_writeoptions_set_sync(P, u8);
        fn leveldb_readoptions_create() -> P;
        fn leveldb_readoptions_destroy(P);
        fn leveldb_put(P, P, *const c_char, usize, *const c_char, usize, *mut *mut c_char);
        fn leveldb_delete(P, P, *const c_char, usize, *mut *mut c_char);
        fn leveldb_write(P, P, P, *mut *mut c_char);
        fn leveldb_get(P, P, *const c_char, usize, *mut usize, *mut *mut c_char) -> *mut c_char;
        fn leveldb_writebatch_create() -> P;
        fn leveldb_writebatch_destroy(P);
        fn leveldb_writebatch_clear(P);
        fn leveldb_writebatch_put(P, *const c_char, usize, *const c_char, usize);
        fn leveldb_writebatch_delete(P, *const c_char, usize);
        fn leveldb_create_iterator(P, P) -> P;
        fn leveldb_iter_destroy(P);
        fn leveldb_iter_seek_to_first(P);
        fn leveldb_iter_seek_to_last(P);
        fn leveldb_iter_seek(P, *const c_char, usize);
        fn leveldb_iter_valid(P) -> u8;
        fn leveldb_iter_next(P);
        fn leveldb_iter_prev(P);
        fn leveldb_iter_key(P, *mut usize) -> *const c_char;
        fn leveldb_iter_value(P, *mut usize) -> *const c_char;
        fn leveldb_iter_get_error(P, *mut *mut c_char);
        fn leveldb_free(*mut c_void);
        fn leveldb_major_version() -> c_int;
        fn leveldb_minor_version() -> c_int;
    }
}

const LIBS: &[&str] = &["libleveldb.so.1d", "libleveldb.so.1", "libleveldb.so"];
const HINT: &str = "apt-get install libleveldb-dev (Debian/Ubuntu), or scripts/setup.sh";

fn version(api: &Api) -> String {
    // SAFETY: both functions return constants.
    let (a, b) = unsafe { ((api.leveldb_major_version)(), (api.leveldb_minor_version)()) };
    let full = loaded_library_version("libleveldb.so");
    format!("{a}.{b} (libleveldb.so.{full})")
}

pub fn spec() -> EngineSpec {
    EngineSpec {
        name: "leveldb",
        install_hint: HINT,
        probe: || {
            let api = Api::load(open_library(LIBS)?)?;
            Ok(version(&api))
        },
        open,
    }
}

struct Level {
    api: Api,
    db: P,
    options: P,
    cache: P,
    policy: P,
    wo_async: P,
    wo_sync: P,
    ro: P,
}

// SAFETY: leveldb_t is safe for concurrent use from many threads (LevelDB's documented
// contract); per-call objects stay within one thread.
unsafe impl Send for Level {}
// SAFETY: as above.
unsafe impl Sync for Level {}

fn check(api: &Api, op: &'static str, e: *mut c_char) -> Result<()> {
    if e.is_null() {
        return Ok(());
    }
    // SAFETY: LevelDB returns a malloc'd NUL-terminated string, freed with leveldb_free.
    let msg = unsafe {
        let m = CStr::from_ptr(e).to_string_lossy().to_string();
        (api.leveldb_free)(e.cast());
        m
    };
    Err(Error::engine("leveldb", op, msg))
}

fn open(o: &OpenOptions) -> Result<Opened> {
    let unavailable = |reason: String| Error::Unavailable {
        engine: "leveldb".into(),
        reason,
        hint: HINT.into(),
    };
    let api = Api::load(open_library(LIBS).map_err(unavailable)?).map_err(unavailable)?;
    let path = CString::new(o.dir.as_os_str().as_encoded_bytes())
        .map_err(|_| Error::Usage("--db path contains NUL".into()))?;
    // SAFETY: standard C-API construction; objects are owned by `Level` and destroyed in Drop
    // (or here on failure).
    unsafe {
        let options = (api.leveldb_options_create)();
        (api.leveldb_options_set_create_if_missing)(options, 1);
        (api.leveldb_options_set_compression)(options, 0); // leveldb_no_compression
        let cache = (api.leveldb_cache_create_lru)(o.cache_bytes as usize);
        (api.leveldb_options_set_cache)(options, cache);
        let policy = if o.bloom_bits > 0 {
            let p = (api.leveldb_filterpolicy_create_bloom)(o.bloom_bits as c_int);
            (api.leveldb_options_set_filter_policy)(options, p);
            p
        } else {
            ptr::null_mut()
        };
        let mut e = ptr::null_mut();
        let db = (api.leveldb_open)(options, path.as_ptr(), &mut e);
        if let Err(err) = check(&api, "leveldb_open", e) {
            (api.leveldb_options_destroy)(options);
            (api.leveldb_cache_destroy)(cache);
            if !policy.is_null() {
                (api.leveldb_filterpolicy_destroy)(policy);
            }
            return Err(err);
        }
        let wo_async = (api.leveldb_writeoptions_create)();
        let wo_sync = (api.leveldb_writeoptions_create)();
        (api.leveldb_writeoptions_set_sync)(wo_sync, 1);
        let ro = (api.leveldb_readoptions_create)();
        let version = version(&api);
        let config = vec![
            kv("compression", "none"),
            kv("sync", if o.sync { "1 (WriteOptions.sync)" } else { "0" }),
            kv("block_cache_bytes", o.cache_bytes),
            kv(
                "bloom_bits_per_key",
                if o.bloom_bits > 0 {
                    o.bloom_bits.to_string()
                } else {
                    "off".into()
                },
            ),
            kv("write_buffer_size", "default (4 MiB)"),
            kv("max_file_size", "default (2 MiB)"),
        ];
        Ok(Opened {
            engine: Box::new(Level {
                api,
                db,
                options,
                cache,
                policy,
                wo_async,
                wo_sync,
                ro,
            }),
            version,
            config,
        })
    }
}

impl Drop for Level {
    fn drop(&mut self) {
        let a = &self.api;
        // SAFETY: sessions are gone; the DB is closed before the objects it uses.
        unsafe {
            (a.leveldb_close)(self.db);
            (a.leveldb_writeoptions_destroy)(self.wo_async);
            (a.leveldb_writeoptions_destroy)(self.wo_sync);
            (a.leveldb_readoptions_destroy)(self.ro);
            (a.leveldb_options_destroy)(self.options);
            (a.leveldb_cache_destroy)(self.cache);
            if !self.policy.is_null() {
                (a.leveldb_filterpolicy_destroy)(self.policy);
            }
        }
    }
}

impl Engine for Level {
    fn session(&self) -> Result<Box<dyn Session + '_>> {
        // SAFETY: creates an empty batch owned by the session.
        let batch = unsafe { (self.api.leveldb_writebatch_create)() };
        Ok(Box::new(LevelSession { db: self, batch }))
    }
}

struct LevelSession<'a> {
    db: &'a Level,
    batch: P,
}

impl Drop for LevelSession<'_> {
    fn drop(&mut self) {
        // SAFETY: the batch belongs to this session.
        unsafe { (self.db.api.leveldb_writebatch_destroy)(self.batch) }
    }
}

impl Session for LevelSession<'_> {
    fn get(&mut self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        let (a, d) = (&self.db.api, self.db);
        // SAFETY: the returned buffer is malloc'd by LevelDB, copied, and freed.
        unsafe {
            let mut e = ptr::null_mut();
            let mut len = 0;
            let v = (a.leveldb_get)(d.db, d.ro, key.as_ptr().cast(), key.len(), &mut len, &mut e);
            check(a, "leveldb_get", e)?;
            if v.is_null() {
                return Ok(false);
            }
            out.clear();
            out.extend_from_slice(std::slice::from_raw_parts(v.cast(), len));
            (a.leveldb_free)(v.cast());
            Ok(true)
        }
    }

    fn write(&mut self, ops: &[Op<'_>], opts: WriteOpts) -> Result<()> {
        let (a, d) = (&self.db.api, self.db);
        let wo = if opts.sync { d.wo_sync } else { d.wo_async };
        let mut e = ptr::null_mut();
        // SAFETY: pointers are valid for each call; the batch is cleared after use.
        unsafe {
            if let [op] = ops {
                match *op {
                    Op::Put(k, v) => (a.leveldb_put)(
                        d.db,
                        wo,
                        k.as_ptr().cast(),
                        k.len(),
                        v.as_ptr().cast(),
                        v.len(),
                        &mut e,
                    ),
                    Op::Delete(k) => {
                        (a.leveldb_delete)(d.db, wo, k.as_ptr().cast(), k.len(), &mut e)
                    }
                }
                return check(a, "leveldb_put/delete", e);
            }
            for op in ops {
                match *op {
                    Op::Put(k, v) => (a.leveldb_writebatch_put)(
                        self.batch,
                        k.as_ptr().cast(),
                        k.len(),
                        v.as_ptr().cast(),
                        v.len(),
                    ),
                    Op::Delete(k) => {
                        (a.leveldb_writebatch_delete)(self.batch, k.as_ptr().cast(), k.len())
                    }
                }
            }
            (a.leveldb_write)(d.db, wo, self.batch, &mut e);
            (a.leveldb_writebatch_clear)(self.batch);
        }
        check(a, "leveldb_write", e)
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
        // SAFETY: the iterator is destroyed before returning; slices are used only inside the
        // callback, before the iterator moves.
        unsafe {
            let it = (a.leveldb_create_iterator)(d.db, d.ro);
            match (start, reverse) {
                (Some(s), _) => (a.leveldb_iter_seek)(it, s.as_ptr().cast(), s.len()),
                (None, false) => (a.leveldb_iter_seek_to_first)(it),
                (None, true) => (a.leveldb_iter_seek_to_last)(it),
            }
            while n < limit && (a.leveldb_iter_valid)(it) != 0 {
                let (mut kl, mut vl) = (0, 0);
                let k = (a.leveldb_iter_key)(it, &mut kl);
                let v = (a.leveldb_iter_value)(it, &mut vl);
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
                    (a.leveldb_iter_prev)(it)
                } else {
                    (a.leveldb_iter_next)(it)
                }
            }
            (a.leveldb_iter_get_error)(it, &mut e);
            (a.leveldb_iter_destroy)(it);
        }
        check(a, "leveldb_iter", e)?;
        Ok(n)
    }
}
