//! LMDB 0.9 through liblmdb.so.0 (dlopen).
//!
//! Configuration, as Symas runs it (hyc/leveldb doc/bench/db_bench_mdb.cc): MDB_WRITEMAP, and
//! MDB_NOSYNC|MDB_NOMETASYNC unless --sync=1 (then every commit is durable); MDB_APPEND for
//! sequential fills; MDB_NORDAHEAD when the database may exceed RAM (--memory_limit), as the
//! LMDB docs advise for random reads; a map size well above the data. One write transaction per
//! batch; reads renew a reset read-only transaction per operation (cheap) so each read sees the
//! latest commit.

use super::{
    dl_api, kv, open_library, Engine, EngineSpec, Op, OpenOptions, Opened, Session, WriteOpts,
};
use crate::error::{Error, Result};
use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::ptr;

#[repr(C)]
struct MdbVal {
    mv_size: usize,
    mv_data: *mut c_void,
}

type Env = c_void;
type Txn = c_void;
type Cursor = c_void;

const MDB_NOSYNC: c_uint = 0x10000;
const MDB_RDONLY: c_uint = 0x20000;
const MDB_NOMETASYNC: c_uint = 0x40000;
const MDB_WRITEMAP: c_uint = 0x80000;
const MDB_NOTLS: c_uint = 0x200000;
const MDB_NORDAHEAD: c_uint = 0x800000;
const MDB_APPEND: c_uint = 0x20000;
const MDB_NOTFOUND: c_int = -30798;
const MDB_FIRST: c_int = 0;
const MDB_LAST: c_int = 6;
const MDB_NEXT: c_int = 8;
const MDB_PREV: c_int = 12;
const MDB_SET_RANGE: c_int = 17;

dl_api! {
    struct Api {
        fn mdb_version(*mut c_int, *mut c_int, *mut c_int) -> *const c_char;
        fn mdb_strerror(c_int) -> *const c_char;
        fn mdb_env_create(*mut *mut Env) -> c_int;
        fn mdb_env_open(*mut Env, *const c_char, c_uint, u32) -> c_int;
        fn mdb_env_close(*mut Env);
        fn mdb_env_set_mapsize(*mut Env, usize) -> c_int;
        fn mdb_env_set_maxreaders(*mut Env, c_uint) -> c_int;
        fn mdb_txn_begin(*mut Env, *mut Txn, c_uint, *mut *mut Txn) -> c_int;
        fn mdb_txn_commit(*mut Txn) -> c_int;
        fn mdb_txn_abort(*mut Txn);
        fn mdb_txn_reset(*mut Txn);
        fn mdb_txn_renew(*mut Txn) -> c_int;
        fn mdb_dbi_open(*mut Txn, *const c_char, c_uint, *mut c_uint) -> c_int;
        fn mdb_get(*mut Txn, c_uint, *mut MdbVal, *mut MdbVal) -> c_int;
        fn mdb_put(*mut Txn, c_uint, *mut MdbVal, *mut MdbVal, c_uint) -> c_int;
        fn mdb_del(*mut Txn, c_uint, *mut MdbVal, *mut MdbVal) -> c_int;
        fn mdb_cursor_open(*mut Txn, c_uint, *mut *mut Cursor) -> c_int;
        fn mdb_cursor_close(*mut Cursor);
        fn mdb_cursor_get(*mut Cursor, *mut MdbVal, *mut MdbVal, c_int) -> c_int;
    }
}

const LIBS: &[&str] = &["liblmdb.so.0", "liblmdb.so"];
const HINT: &str = "apt-get install liblmdb-dev (Debian/Ubuntu), or scripts/setup.sh";

pub fn spec() -> EngineSpec {
    EngineSpec {
        name: "lmdb",
        install_hint: HINT,
        probe: || {
            let api = Api::load(open_library(LIBS)?)?;
            Ok(version(&api))
        },
        open,
    }
}

fn version(api: &Api) -> String {
    let (mut a, mut b, mut c) = (0, 0, 0);
    // SAFETY: mdb_version writes three ints and returns a static string.
    unsafe {
        (api.mdb_version)(&mut a, &mut b, &mut c);
    }
    format!("{a}.{b}.{c}")
}

struct Lmdb {
    api: Api,
    env: *mut Env,
    dbi: c_uint,
}

// SAFETY: an MDB_env is thread-safe (MDB_NOTLS: read transactions are not bound to threads);
// transactions and cursors never leave the session (and thread) that created them.
unsafe impl Send for Lmdb {}
// SAFETY: as above.
unsafe impl Sync for Lmdb {}

fn err(api: &Api, op: &'static str, rc: c_int) -> Error {
    // SAFETY: mdb_strerror returns a static NUL-terminated string for any code.
    let msg = unsafe { CStr::from_ptr((api.mdb_strerror)(rc)) };
    Error::engine("lmdb", op, format!("{} ({rc})", msg.to_string_lossy()))
}

fn val(b: &[u8]) -> MdbVal {
    MdbVal {
        mv_size: b.len(),
        mv_data: b.as_ptr() as *mut c_void,
    }
}

/// # Safety
/// `v` must describe memory that is valid for the current transaction.
unsafe fn slice<'a>(v: &MdbVal) -> &'a [u8] {
    if v.mv_size == 0 {
        &[]
    } else {
        std::slice::from_raw_parts(v.mv_data as *const u8, v.mv_size)
    }
}

fn open(o: &OpenOptions) -> Result<Opened> {
    let unavailable = |reason: String| Error::Unavailable {
        engine: "lmdb".into(),
        reason,
        hint: HINT.into(),
    };
    let api = Api::load(open_library(LIBS).map_err(unavailable)?).map_err(unavailable)?;
    let mut flags = MDB_WRITEMAP | MDB_NOTLS;
    let mut names = vec!["MDB_WRITEMAP", "MDB_NOTLS"];
    if !o.sync {
        flags |= MDB_NOSYNC | MDB_NOMETASYNC;
        names.extend(["MDB_NOSYNC", "MDB_NOMETASYNC"]);
    }
    if o.memory_limit.is_some() {
        flags |= MDB_NORDAHEAD;
        names.push("MDB_NORDAHEAD");
    }
    const GIB: u64 = 1 << 30;
    let map_bytes = o.data_bytes_estimate().max(4 * GIB).div_ceil(GIB) * GIB;
    let readers = (o.threads_max + 16) as c_uint;
    let path = CString::new(o.dir.as_os_str().as_encoded_bytes())
        .map_err(|_| Error::Usage("--db path contains NUL".into()))?;
    let mut env = ptr::null_mut();
    // SAFETY: standard LMDB open sequence on a fresh env handle; the env is closed on every
    // error path, and `path` outlives the call.
    unsafe {
        let rc = (api.mdb_env_create)(&mut env);
        if rc != 0 {
            return Err(err(&api, "mdb_env_create", rc));
        }
        let fail = |op, rc| {
            (api.mdb_env_close)(env);
            Err(err(&api, op, rc))
        };
        let rc = (api.mdb_env_set_mapsize)(env, map_bytes as usize);
        if rc != 0 {
            return fail("mdb_env_set_mapsize", rc);
        }
        let rc = (api.mdb_env_set_maxreaders)(env, readers);
        if rc != 0 {
            return fail("mdb_env_set_maxreaders", rc);
        }
        let rc = (api.mdb_env_open)(env, path.as_ptr(), flags, 0o644);
        if rc != 0 {
            return fail("mdb_env_open", rc);
        }
        let mut txn = ptr::null_mut();
        let rc = (api.mdb_txn_begin)(env, ptr::null_mut(), 0, &mut txn);
        if rc != 0 {
            return fail("mdb_txn_begin", rc);
        }
        let mut dbi = 0;
        let rc = (api.mdb_dbi_open)(txn, ptr::null(), 0, &mut dbi);
        if rc != 0 {
            (api.mdb_txn_abort)(txn);
            return fail("mdb_dbi_open", rc);
        }
        let rc = (api.mdb_txn_commit)(txn);
        if rc != 0 {
            return fail("mdb_txn_commit", rc);
        }
        let version = version(&api);
        let config = vec![
            kv("flags", names.join("|")),
            kv("mapsize_bytes", map_bytes),
            kv("maxreaders", readers),
            kv("sequential_fill", "MDB_APPEND"),
            kv("reads", "reset/renew read txn per op"),
            kv("cache", "OS page cache (no engine cache)"),
        ];
        Ok(Opened {
            engine: Box::new(Lmdb { api, env, dbi }),
            version,
            config,
        })
    }
}

impl Drop for Lmdb {
    fn drop(&mut self) {
        // SAFETY: all sessions (and their transactions) borrow the engine, so they are gone.
        unsafe { (self.api.mdb_env_close)(self.env) }
    }
}

impl Engine for Lmdb {
    fn session(&self) -> Result<Box<dyn Session + '_>> {
        Ok(Box::new(LmdbSession {
            db: self,
            rtxn: ptr::null_mut(),
        }))
    }
}

struct LmdbSession<'a> {
    db: &'a Lmdb,
    /// A read-only transaction kept in the reset state between operations.
    rtxn: *mut Txn,
}

impl LmdbSession<'_> {
    /// Renews (or creates) the read transaction. Requires: it is reset.
    fn begin_read(&mut self) -> Result<*mut Txn> {
        let api = &self.db.api;
        // SAFETY: rtxn is either null or a reset read-only txn of this env.
        unsafe {
            if self.rtxn.is_null() {
                let mut t = ptr::null_mut();
                let rc = (api.mdb_txn_begin)(self.db.env, ptr::null_mut(), MDB_RDONLY, &mut t);
                if rc != 0 {
                    return Err(err(api, "mdb_txn_begin(rdonly)", rc));
                }
                self.rtxn = t;
            } else {
                let rc = (api.mdb_txn_renew)(self.rtxn);
                if rc != 0 {
                    return Err(err(api, "mdb_txn_renew", rc));
                }
            }
        }
        Ok(self.rtxn)
    }

    fn end_read(&mut self) {
        // SAFETY: rtxn is an active read-only txn of this session.
        unsafe { (self.db.api.mdb_txn_reset)(self.rtxn) }
    }
}

impl Drop for LmdbSession<'_> {
    fn drop(&mut self) {
        if !self.rtxn.is_null() {
            // SAFETY: aborting a reset read txn frees it.
            unsafe { (self.db.api.mdb_txn_abort)(self.rtxn) }
        }
    }
}

impl Session for LmdbSession<'_> {
    fn get(&mut self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        let txn = self.begin_read()?;
        let mut k = val(key);
        let mut v = MdbVal {
            mv_size: 0,
            mv_data: ptr::null_mut(),
        };
        // SAFETY: txn is active; v points into the map and is copied before the reset.
        let rc = unsafe { (self.db.api.mdb_get)(txn, self.db.dbi, &mut k, &mut v) };
        let found = match rc {
            0 => {
                out.clear();
                // SAFETY: v is valid until the txn is reset below.
                out.extend_from_slice(unsafe { slice(&v) });
                true
            }
            MDB_NOTFOUND => false,
            rc => {
                self.end_read();
                return Err(err(&self.db.api, "mdb_get", rc));
            }
        };
        self.end_read();
        Ok(found)
    }

    fn write(&mut self, ops: &[Op<'_>], opts: WriteOpts) -> Result<()> {
        let api = &self.db.api;
        // SAFETY: one write txn, committed or aborted before returning; key/value slices
        // outlive the calls that read them.
        unsafe {
            let mut txn = ptr::null_mut();
            let rc = (api.mdb_txn_begin)(self.db.env, ptr::null_mut(), 0, &mut txn);
            if rc != 0 {
                return Err(err(api, "mdb_txn_begin", rc));
            }
            for op in ops {
                let rc = match *op {
                    Op::Put(k, v) => {
                        let (mut k, mut v) = (val(k), val(v));
                        let flags = if opts.append { MDB_APPEND } else { 0 };
                        (api.mdb_put)(txn, self.db.dbi, &mut k, &mut v, flags)
                    }
                    Op::Delete(k) => {
                        let mut k = val(k);
                        match (api.mdb_del)(txn, self.db.dbi, &mut k, ptr::null_mut()) {
                            MDB_NOTFOUND => 0,
                            rc => rc,
                        }
                    }
                };
                if rc != 0 {
                    (api.mdb_txn_abort)(txn);
                    return Err(err(api, "mdb_put/mdb_del", rc));
                }
            }
            let rc = (api.mdb_txn_commit)(txn);
            if rc != 0 {
                return Err(err(api, "mdb_txn_commit", rc));
            }
        }
        Ok(())
    }

    fn scan(
        &mut self,
        start: Option<&[u8]>,
        reverse: bool,
        limit: u64,
        f: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<u64> {
        if limit == 0 {
            return Ok(0);
        }
        let txn = self.begin_read()?;
        let api = &self.db.api;
        let mut n = 0;
        // SAFETY: the cursor lives inside the active read txn and is closed before the reset;
        // key/value slices are only used inside the callback.
        let rc = unsafe {
            let mut cur = ptr::null_mut();
            let rc = (api.mdb_cursor_open)(txn, self.db.dbi, &mut cur);
            if rc != 0 {
                self.end_read();
                return Err(err(api, "mdb_cursor_open", rc));
            }
            let mut k = MdbVal {
                mv_size: 0,
                mv_data: ptr::null_mut(),
            };
            let mut v = MdbVal {
                mv_size: 0,
                mv_data: ptr::null_mut(),
            };
            let first = match (start, reverse) {
                (Some(s), _) => {
                    k = val(s);
                    MDB_SET_RANGE
                }
                (None, false) => MDB_FIRST,
                (None, true) => MDB_LAST,
            };
            let step = if reverse { MDB_PREV } else { MDB_NEXT };
            let mut rc = (api.mdb_cursor_get)(cur, &mut k, &mut v, first);
            while rc == 0 {
                f(slice(&k), slice(&v));
                n += 1;
                if n >= limit {
                    break;
                }
                rc = (api.mdb_cursor_get)(cur, &mut k, &mut v, step);
            }
            (api.mdb_cursor_close)(cur);
            rc
        };
        self.end_read();
        if rc != 0 && rc != MDB_NOTFOUND {
            return Err(err(api, "mdb_cursor_get", rc));
        }
        Ok(n)
    }
}
