//! Engine adapters: one file per engine, each the real library behind the same object-safe
//! interface, configured the way its authors recommend, and describing that configuration.
//!
//! C libraries are loaded at run time with dlopen (libloading) from hand-written declarations
//! of their flat C APIs (lmdb.h, rocksdb/c.h, leveldb/c.h), so the binary builds and starts
//! where a library is missing and reports that engine as unavailable with an install hint.
//! Berkeley DB and WiredTiger expose structs of function pointers; for those a small C shim
//! (shim/*.c, built by build.rs only when the header exists) calls the methods, and receives the
//! one free entry point it needs from our dlopen. The engines that are crates (redb, libmdbx
//! through mdbx-sys, which builds libmdbx's C source, canopydb, fjall) are linked in.

use crate::error::{Error, Result};
use std::path::PathBuf;

pub mod bdb;
pub mod canopydb;
pub mod fjall;
pub mod larch;
pub mod leveldb;
mod leveldb_c;
pub mod libmdbx;
pub mod lmdb;
pub mod redb;
pub mod rocksdb;
pub mod wiredtiger;

/// One mutation inside a write batch (one transaction / WriteBatch).
#[derive(Debug, Clone, Copy)]
pub enum Op<'a> {
    Put(&'a [u8], &'a [u8]),
    Delete(&'a [u8]),
}

/// How a batch is committed.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteOpts {
    /// Durable on return (fsync/fdatasync/msync as the engine does it).
    pub sync: bool,
    /// Keys arrive in ascending order after every existing key (LMDB's MDB_APPEND).
    pub append: bool,
}

/// What an adapter needs to pick its configuration.
#[derive(Debug, Clone)]
pub struct OpenOptions {
    pub dir: PathBuf,
    pub cache_bytes: u64,
    pub sync: bool,
    pub num: u64,
    pub key_size: usize,
    pub value_size: usize,
    /// Most threads that will hold a session at once (readers + writer).
    pub threads_max: usize,
    pub memory_limit: Option<u64>,
    pub bloom_bits: u32,
    /// Larch's `Options::background_nice`.
    pub background_nice: u8,
    /// Larch's `Options::checkpoint_slices`.
    pub checkpoint_slices: u32,
    /// Larch's `Options::checkpoint_bytes` (0: the engine's default).
    pub checkpoint_bytes: u64,
    /// Larch's `Options::log_room_bytes` (0: the engine's default).
    pub log_room_bytes: u64,
    /// Larch's `Options::memory_budget` (0: the engine's default).
    pub memory_budget: u64,
    /// Larch's `Options::frames_bytes` (0: the engine's default, the frames' share of memory).
    pub frames_bytes: u64,
}

impl OpenOptions {
    /// A generous estimate of the logical data size, for engines that need a map size.
    pub fn data_bytes_estimate(&self) -> u64 {
        self.num
            .saturating_mul((self.key_size + self.value_size + 64) as u64)
            .saturating_mul(3)
    }
}

/// An open database. Sessions are per thread; the engine is shared by reference.
pub trait Engine: Send + Sync {
    fn session(&self) -> Result<Box<dyn Session + '_>>;
    /// The engine's own counters of its work so far (name, count), cumulative since open, for
    /// the `engine` line printed after each benchmark (the change over the benchmark). Empty
    /// for engines that keep none the benchmark can read.
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}

/// Per-thread handle: lets LMDB reuse its read transaction and BDB/WiredTiger keep cursors.
pub trait Session {
    /// Reads `key` into `out`; returns whether it was found.
    fn get(&mut self, key: &[u8], out: &mut Vec<u8>) -> Result<bool>;
    /// Applies `ops` atomically (one transaction or write batch).
    fn write(&mut self, ops: &[Op<'_>], opts: WriteOpts) -> Result<()>;
    /// Visits up to `limit` entries from the first key >= `start` (or the first/last key when
    /// `start` is None), ascending, or descending from the last key when `reverse`.
    /// Returns the number visited.
    fn scan(
        &mut self,
        start: Option<&[u8]>,
        reverse: bool,
        limit: u64,
        f: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<u64>;
}

/// An engine after open, with the configuration it runs under (printed and in JSON `config`).
pub struct Opened {
    pub engine: Box<dyn Engine>,
    pub version: String,
    pub config: Vec<(String, String)>,
}

/// A registered engine.
pub struct EngineSpec {
    pub name: &'static str,
    /// What to install where the library is missing.
    pub install_hint: &'static str,
    /// Loads the library and returns its version, or says why it cannot.
    pub probe: fn() -> std::result::Result<String, String>,
    pub open: fn(&OpenOptions) -> Result<Opened>,
}

/// Every engine the driver knows, in the order `--engine=all` runs them.
pub fn registry() -> Vec<EngineSpec> {
    vec![
        larch::spec(),
        larch::spec_pages(),
        larch::spec_mapped(),
        lmdb::spec(),
        libmdbx::spec(),
        rocksdb::spec(),
        leveldb::spec(),
        bdb::spec(),
        wiredtiger::spec_btree(),
        wiredtiger::spec_lsm(),
        redb::spec(),
        canopydb::spec(),
        fjall::spec(),
    ]
}

pub fn names() -> Vec<&'static str> {
    registry().iter().map(|s| s.name).collect()
}

/// Looks an engine up by name (aliases included).
pub fn find(name: &str) -> Result<EngineSpec> {
    let canonical = match name {
        "mdb" => "lmdb",
        "berkeleydb" | "bdb-btree" => "bdb",
        "wt" | "wiredtiger-btree" | "wiredbtree" => "wiredtiger",
        "wt-lsm" | "wiredlsm" => "wiredtiger-lsm",
        "larchdb" | "larch-log" | "larch-frames" => "larch",
        "mdbx" => "libmdbx",
        "canopy" => "canopydb",
        other => other,
    };
    registry()
        .into_iter()
        .find(|s| s.name == canonical)
        .ok_or_else(|| {
            Error::Usage(format!(
                "unknown engine {name:?}; known: {}",
                names().join(",")
            ))
        })
}

/// Opens the first shared library of `names` that loads.
pub(crate) fn open_library(names: &[&str]) -> std::result::Result<libloading::Library, String> {
    let mut errors = Vec::new();
    for n in names {
        // SAFETY: loading a shared library runs its initialisers; the libraries named by the
        // adapters are the engines' own, whose initialisers have no preconditions.
        match unsafe { libloading::Library::new(n) } {
            Ok(lib) => return Ok(lib),
            Err(e) => errors.push(e.to_string()),
        }
    }
    Err(errors.join("; "))
}

/// Declares a table of C functions resolved from a dlopened library. Every field is a copied
/// function pointer; the `Library` is kept in the struct and never closed. Why never: LevelDB's
/// and RocksDB's default Env start background threads that outlive the database; a dlclose
/// would unmap code those threads are blocked in, and a later dlopen (the next fresh fill)
/// would map a second copy beside them (seen as two compaction threads and a hang).
macro_rules! dl_api {
    ($(#[$m:meta])* $vis:vis struct $name:ident {
        $( fn $f:ident ( $($arg:ty),* $(,)? ) $(-> $ret:ty)? ; )*
    }) => {
        $(#[$m])*
        #[allow(non_snake_case)]
        $vis struct $name {
            $( pub $f: unsafe extern "C" fn($($arg),*) $(-> $ret)?, )*
            _lib: std::mem::ManuallyDrop<libloading::Library>,
        }

        impl $name {
            #[allow(non_snake_case)]
            pub fn load(lib: libloading::Library) -> std::result::Result<Self, String> {
                $(
                    // SAFETY: the symbol's C prototype is the one declared here, copied from
                    // the library's public header; the pointer is only called while `_lib`
                    // (moved into the struct below) keeps the library mapped.
                    let $f = unsafe {
                        *lib.get::<unsafe extern "C" fn($($arg),*) $(-> $ret)?>(
                            concat!(stringify!($f), "\0").as_bytes(),
                        )
                        .map_err(|e| format!("symbol {}: {e}", stringify!($f)))?
                    };
                )*
                Ok(Self { $( $f, )* _lib: std::mem::ManuallyDrop::new(lib) })
            }
        }
    };
}
pub(crate) use dl_api;

/// A buffer a C library returned, as a slice: empty for a zero length, whatever the pointer
/// (which may then be null, where `from_raw_parts` would be undefined behaviour).
///
/// # Safety
/// Where `len > 0`, `p` points to `len` readable bytes that stay valid for `'a`.
pub(crate) unsafe fn c_bytes<'a>(p: *const std::ffi::c_void, len: usize) -> &'a [u8] {
    if len == 0 {
        &[]
    } else {
        // SAFETY: as the caller promises.
        unsafe { std::slice::from_raw_parts(p.cast(), len) }
    }
}

/// Feeds up to `limit` pairs of a Rust iterator over key/value results to `f` (the loop of
/// `Session::scan` for the engines whose scans are iterators); returns the number visited.
pub(crate) fn visit_up_to<K, V, E>(
    iter: impl Iterator<Item = std::result::Result<(K, V), E>>,
    limit: u64,
    f: &mut dyn FnMut(&[u8], &[u8]),
    err: impl Fn(E) -> Error,
) -> Result<u64>
where
    K: AsRef<[u8]>,
    V: AsRef<[u8]>,
{
    let mut n = 0;
    for item in iter.take(usize::try_from(limit).unwrap_or(usize::MAX)) {
        let (k, v) = item.map_err(&err)?;
        f(k.as_ref(), v.as_ref());
        n += 1;
    }
    Ok(n)
}

/// Joins config pairs for the one-line description printed before each engine's results.
pub fn describe(config: &[(String, String)]) -> String {
    config
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

pub(crate) fn kv(k: &str, v: impl ToString) -> (String, String) {
    (k.to_string(), v.to_string())
}

/// The version suffix of a loaded shared library (`librocksdb.so.7.8.3` -> `7.8.3`), read from
/// /proc/self/maps after dlopen; "unknown" if it cannot be found.
pub(crate) fn loaded_library_version(stem: &str) -> String {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    for line in maps.lines() {
        let Some(path) = line.split_whitespace().nth(5) else {
            continue;
        };
        if !path.contains(stem) {
            continue;
        }
        let real = std::fs::canonicalize(path).unwrap_or_else(|_| PathBuf::from(path));
        let name = real.file_name().map(|n| n.to_string_lossy().to_string());
        if let Some(v) = name
            .as_deref()
            .and_then(|n| n.split_once(".so."))
            .map(|x| x.1)
        {
            return v.to_string();
        }
    }
    "unknown".into()
}
