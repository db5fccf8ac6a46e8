//! The adapter shared by the engines whose C API has LevelDB's shape (leveldb/c.h and
//! rocksdb/c.h): the same entry points under the library's prefix (`leveldb_put`,
//! `rocksdb_put`), errors returned through an `errptr` and freed with `<prefix>_free`.
//!
//! Here: the table of those shared entry points, the open (options with create_if_missing, no
//! compression and an LRU block cache; write and read options), point writes and write
//! batches, iterator scans and the close. Each engine's file keeps its library's names, its
//! own entry points (a [`Flavor`]: the configuration beyond the shared options, and the point
//! read, which differs) and the configuration it prints.

use super::{c_bytes, kv, open_library, Engine, Op, OpenOptions, Session, WriteOpts};
use crate::error::{Error, Result};
use std::ffi::{c_char, c_int, c_uchar, c_void, CStr, CString};
use std::ptr;

pub(crate) type P = *mut c_void;

/// One library with a LevelDB-shaped C API: its prefix (which is also the engine's name), the
/// file names to dlopen, what to install where it is missing, and the names its errors give
/// the failed call. Made by [`c_library!`].
pub(crate) struct CLibrary {
    pub engine: &'static str,
    pub libs: &'static [&'static str],
    pub hint: &'static str,
    pub open_op: &'static str,
    pub put_delete_op: &'static str,
    pub write_op: &'static str,
    pub iter_op: &'static str,
}

/// `c_library!("leveldb", libs: LIBS, hint: HINT)`: the [`CLibrary`] whose entry points start
/// with `leveldb_`.
macro_rules! c_library {
    ($engine:literal, libs: $libs:expr, hint: $hint:expr) => {
        $crate::engines::leveldb_c::CLibrary {
            engine: $engine,
            libs: $libs,
            hint: $hint,
            open_op: concat!($engine, "_open"),
            put_delete_op: concat!($engine, "_put/delete"),
            write_op: concat!($engine, "_write"),
            iter_op: concat!($engine, "_iter"),
        }
    };
}
pub(crate) use c_library;

impl CLibrary {
    /// Loads the library, its shared entry points and the engine's own table (`load`, a
    /// `dl_api!` table, which keeps the library mapped for good): all of them, or why not.
    pub fn load<A>(
        &'static self,
        load: fn(libloading::Library) -> std::result::Result<A, String>,
    ) -> std::result::Result<(CApi, A), String> {
        let lib = open_library(self.libs)?;
        let shared = CApi::load(&lib, self)?;
        Ok((shared, load(lib)?))
    }

    /// [`CLibrary::load`] for an open: a failure is the engine being unavailable.
    pub fn load_for_open<A>(
        &'static self,
        load: fn(libloading::Library) -> std::result::Result<A, String>,
    ) -> Result<(CApi, A)> {
        self.load(load).map_err(|reason| Error::Unavailable {
            engine: self.engine.into(),
            reason,
            hint: self.hint.into(),
        })
    }
}

/// Declares [`CApi`] and its loader from the entry points' names without the prefix.
macro_rules! shared_entry_points {
    ($( fn $f:ident ( $($arg:ty),* ) $(-> $ret:ty)? ; )*) => {
        /// The entry points both C APIs declare with the same prototype.
        pub(crate) struct CApi {
            library: &'static CLibrary,
            $( $f: unsafe extern "C" fn($($arg),*) $(-> $ret)?, )*
        }

        impl CApi {
            fn load(
                lib: &libloading::Library,
                library: &'static CLibrary,
            ) -> std::result::Result<Self, String> {
                $(
                    let name = concat!("_", stringify!($f));
                    let symbol = format!("{}{name}\0", library.engine);
                    // SAFETY: the prototype is the one leveldb/c.h and rocksdb/c.h both give
                    // this name. The pointer is copied out; it is only called while the
                    // engine's own table (loaded from the same library right after) keeps the
                    // library mapped, and that table never closes it.
                    let $f = unsafe {
                        *lib.get::<unsafe extern "C" fn($($arg),*) $(-> $ret)?>(symbol.as_bytes())
                            .map_err(|e| format!("symbol {}{name}: {e}", library.engine))?
                    };
                )*
                Ok(CApi { library, $( $f, )* })
            }
        }
    };
}

shared_entry_points! {
    fn options_create() -> P;
    fn options_destroy(P);
    fn options_set_create_if_missing(P, c_uchar);
    fn options_set_compression(P, c_int);
    fn cache_create_lru(usize) -> P;
    fn cache_destroy(P);
    fn open(P, *const c_char, *mut *mut c_char) -> P;
    fn close(P);
    fn writeoptions_create() -> P;
    fn writeoptions_destroy(P);
    fn writeoptions_set_sync(P, c_uchar);
    fn readoptions_create() -> P;
    fn readoptions_destroy(P);
    fn put(P, P, *const c_char, usize, *const c_char, usize, *mut *mut c_char);
    fn delete(P, P, *const c_char, usize, *mut *mut c_char);
    fn write(P, P, P, *mut *mut c_char);
    fn writebatch_create() -> P;
    fn writebatch_destroy(P);
    fn writebatch_clear(P);
    fn writebatch_put(P, *const c_char, usize, *const c_char, usize);
    fn writebatch_delete(P, *const c_char, usize);
    fn create_iterator(P, P) -> P;
    fn iter_destroy(P);
    fn iter_seek_to_first(P);
    fn iter_seek_to_last(P);
    fn iter_seek(P, *const c_char, usize);
    fn iter_valid(P) -> c_uchar;
    fn iter_next(P);
    fn iter_prev(P);
    fn iter_key(P, *mut usize) -> *const c_char;
    fn iter_value(P, *mut usize) -> *const c_char;
    fn iter_get_error(P, *mut *mut c_char);
    fn free(*mut c_void);
}

impl CApi {
    /// Turns an error string returned through an errptr into an Error, and frees it.
    pub fn check(&self, op: &'static str, e: *mut c_char) -> Result<()> {
        if e.is_null() {
            return Ok(());
        }
        // SAFETY: both libraries return a malloc'd NUL-terminated string, freed with
        // <prefix>_free.
        let msg = unsafe {
            let m = CStr::from_ptr(e).to_string_lossy().to_string();
            (self.free)(e.cast());
            m
        };
        Err(Error::engine(self.library.engine, op, msg))
    }

    /// Calls `f` with an errptr, then turns the error it set, if any, into an Error.
    pub fn with_errptr<T>(
        &self,
        op: &'static str,
        f: impl FnOnce(*mut *mut c_char) -> T,
    ) -> Result<T> {
        let mut e = ptr::null_mut();
        let t = f(&mut e);
        self.check(op, e).map(|()| t)
    }

    /// Frees memory the library allocated (a value leveldb_get returned).
    ///
    /// # Safety
    /// `p` was allocated by this library and is not used again.
    pub unsafe fn free(&self, p: *mut c_void) {
        // SAFETY: as the caller promises.
        unsafe { (self.free)(p) }
    }
}

/// Copies the `len` bytes at `value` (a value a point read returned) into `out`.
///
/// # Safety
/// `value` points to `len` readable bytes (it may be null where `len` is 0).
pub(crate) unsafe fn copy_value(out: &mut Vec<u8>, value: *const c_char, len: usize) {
    out.clear();
    // SAFETY: as the caller promises.
    out.extend_from_slice(unsafe { c_bytes(value.cast(), len) });
}

/// The configuration lines for what the shared open sets, in the order both engines print
/// them: compression, `extra` (RocksDB's WAL), sync, the block cache, and the bloom filter's
/// bits per key with `bloom_note` after them (" (full filter)").
pub(crate) fn config(
    o: &OpenOptions,
    extra: &[(&str, &str)],
    bloom_note: &str,
) -> Vec<(String, String)> {
    let mut config = vec![kv("compression", "none")];
    config.extend(extra.iter().map(|(k, v)| kv(k, v)));
    config.extend([
        kv("sync", if o.sync { "1 (WriteOptions.sync)" } else { "0" }),
        kv("block_cache_bytes", o.cache_bytes),
        kv(
            "bloom_bits_per_key",
            if o.bloom_bits > 0 {
                format!("{}{bloom_note}", o.bloom_bits)
            } else {
                "off".into()
            },
        ),
    ]);
    config
}

/// What one engine adds to the shared adapter. Its value owns the objects its configuration
/// made beyond the shared options and cache (a filter policy, table options); its Drop
/// destroys them, after the database is closed and the shared objects are destroyed.
pub(crate) trait Flavor: Sized + 'static {
    /// Reads `key` into `out`; returns whether it was found.
    fn get(db: &Db<Self>, key: &[u8], out: &mut Vec<u8>) -> Result<bool>;
}

/// An open database of a LevelDB-shaped C API.
pub(crate) struct Db<F: Flavor> {
    c: CApi,
    db: P,
    options: P,
    cache: P,
    wo_async: P,
    wo_sync: P,
    ro: P,
    /// Dropped after `drop` below has closed the database.
    flavor: F,
}

// SAFETY: leveldb_t and rocksdb_t are safe for concurrent use from many threads (both
// libraries' documented contract); the option objects are only read once the database is open,
// and the per-call objects (write batches, iterators) stay within one thread.
unsafe impl<F: Flavor> Send for Db<F> {}
// SAFETY: as above.
unsafe impl<F: Flavor> Sync for Db<F> {}

/// Opens `o.dir`: options with create_if_missing, no compression and an LRU block cache of
/// `o.cache_bytes`, which `configure(options, cache)` completes with the engine's own settings
/// (it returns the engine's [`Flavor`], owning what it made); write options without and with
/// sync, and read options.
pub(crate) fn open<F: Flavor>(
    c: CApi,
    o: &OpenOptions,
    configure: impl FnOnce(P, P) -> F,
) -> Result<Db<F>> {
    let path = CString::new(o.dir.as_os_str().as_encoded_bytes())
        .map_err(|_| Error::Usage("--db path contains NUL".into()))?;
    // SAFETY: standard C-API construction (the path is NUL-terminated); every object is owned
    // by the `Db`, which destroys it in Drop, also when the open fails.
    unsafe {
        let options = (c.options_create)();
        (c.options_set_create_if_missing)(options, 1);
        (c.options_set_compression)(options, 0); // leveldb_no_compression, kNoCompression
        let cache = (c.cache_create_lru)(o.cache_bytes as usize);
        let flavor = configure(options, cache);
        let wo_async = (c.writeoptions_create)();
        let wo_sync = (c.writeoptions_create)();
        (c.writeoptions_set_sync)(wo_sync, 1);
        let ro = (c.readoptions_create)();
        let mut db = Db {
            c,
            db: ptr::null_mut(),
            options,
            cache,
            wo_async,
            wo_sync,
            ro,
            flavor,
        };
        let op = db.c.library.open_op;
        db.db =
            db.c.with_errptr(op, |e| (db.c.open)(options, path.as_ptr(), e))?;
        Ok(db)
    }
}

impl<F: Flavor> Db<F> {
    /// The shared entry points.
    pub fn c(&self) -> &CApi {
        &self.c
    }

    /// The engine's part.
    pub fn flavor(&self) -> &F {
        &self.flavor
    }

    /// The database handle and the read options, both live while `self` is.
    pub fn handles(&self) -> (P, P) {
        (self.db, self.ro)
    }
}

impl<F: Flavor> Drop for Db<F> {
    fn drop(&mut self) {
        let c = &self.c;
        // SAFETY: sessions borrow the engine and are gone; the database is closed before the
        // objects it uses. (A failed open left `db` null.)
        unsafe {
            if !self.db.is_null() {
                (c.close)(self.db);
            }
            (c.writeoptions_destroy)(self.wo_async);
            (c.writeoptions_destroy)(self.wo_sync);
            (c.readoptions_destroy)(self.ro);
            (c.options_destroy)(self.options);
            (c.cache_destroy)(self.cache);
        }
    }
}

impl<F: Flavor> Engine for Db<F> {
    fn session(&self) -> Result<Box<dyn Session + '_>> {
        // SAFETY: creates an empty write batch owned by the session.
        let batch = unsafe { (self.c.writebatch_create)() };
        Ok(Box::new(DbSession { db: self, batch }))
    }
}

struct DbSession<'a, F: Flavor> {
    db: &'a Db<F>,
    batch: P,
}

impl<F: Flavor> Drop for DbSession<'_, F> {
    fn drop(&mut self) {
        // SAFETY: the batch belongs to this session.
        unsafe { (self.db.c.writebatch_destroy)(self.batch) }
    }
}

impl<F: Flavor> Session for DbSession<'_, F> {
    fn get(&mut self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        F::get(self.db, key, out)
    }

    fn write(&mut self, ops: &[Op<'_>], opts: WriteOpts) -> Result<()> {
        let (c, d) = (&self.db.c, self.db);
        let wo = if opts.sync { d.wo_sync } else { d.wo_async };
        let mut e = ptr::null_mut();
        // SAFETY: key/value pointers are valid for the duration of each call; the batch is
        // cleared after use.
        unsafe {
            if let [op] = ops {
                match *op {
                    Op::Put(k, v) => (c.put)(
                        d.db,
                        wo,
                        k.as_ptr().cast(),
                        k.len(),
                        v.as_ptr().cast(),
                        v.len(),
                        &mut e,
                    ),
                    Op::Delete(k) => (c.delete)(d.db, wo, k.as_ptr().cast(), k.len(), &mut e),
                }
                return c.check(c.library.put_delete_op, e);
            }
            for op in ops {
                match *op {
                    Op::Put(k, v) => (c.writebatch_put)(
                        self.batch,
                        k.as_ptr().cast(),
                        k.len(),
                        v.as_ptr().cast(),
                        v.len(),
                    ),
                    Op::Delete(k) => (c.writebatch_delete)(self.batch, k.as_ptr().cast(), k.len()),
                }
            }
            (c.write)(d.db, wo, self.batch, &mut e);
            (c.writebatch_clear)(self.batch);
        }
        c.check(c.library.write_op, e)
    }

    fn scan(
        &mut self,
        start: Option<&[u8]>,
        reverse: bool,
        limit: u64,
        f: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<u64> {
        let (c, d) = (&self.db.c, self.db);
        let mut n = 0;
        let mut e = ptr::null_mut();
        // SAFETY: the iterator is destroyed before returning; key/value slices are only used
        // inside the callback, before the iterator moves.
        unsafe {
            let it = (c.create_iterator)(d.db, d.ro);
            match (start, reverse) {
                (Some(s), _) => (c.iter_seek)(it, s.as_ptr().cast(), s.len()),
                (None, false) => (c.iter_seek_to_first)(it),
                (None, true) => (c.iter_seek_to_last)(it),
            }
            while n < limit && (c.iter_valid)(it) != 0 {
                let (mut kl, mut vl) = (0, 0);
                let k = (c.iter_key)(it, &mut kl);
                let v = (c.iter_value)(it, &mut vl);
                f(c_bytes(k.cast(), kl), c_bytes(v.cast(), vl));
                n += 1;
                if n >= limit {
                    break;
                }
                if reverse {
                    (c.iter_prev)(it)
                } else {
                    (c.iter_next)(it)
                }
            }
            (c.iter_get_error)(it, &mut e);
            (c.iter_destroy)(it);
        }
        c.check(c.library.iter_op, e)?;
        Ok(n)
    }
}
