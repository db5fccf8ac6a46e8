//! libmdbx 0.14 (LMDB's successor), built from the source the `mdbx-sys` crate vendors and
//! called through its C API, as lmdb.rs calls liblmdb's.
//!
//! Why not the `libmdbx` crate's safe API: it begins and commits every write transaction on a
//! manager thread of its own (a rendezvous channel each way), which costs more than a one-put
//! commit itself; the C API is what an application in C or a thin binding pays (measured in
//! docs/design/bench-method.md, "libmdbx against LMDB").
//!
//! Configuration, after libmdbx's documentation (mdbx.h, "SYNC MODES" and the geometry) and as
//! the LMDB adapter runs LMDB: MDBX_WRITEMAP|MDBX_NOSTICKYTHREADS (LMDB's MDB_WRITEMAP|
//! MDB_NOTLS); without --sync MDBX_UTTERLY_NOSYNC, which mdbx.h calls the exact match of LMDB's
//! MDB_NOSYNC (a system crash may lose commits or corrupt the file, as with LMDB's); with
//! --sync=1 MDBX_SYNC_DURABLE (data, then meta, flushed at each commit). Not MDBX_SAFE_NOSYNC,
//! the no-sync mode that never corrupts: it may not reuse a page freed after the last synced
//! commit, so every one-put commit writes into fresh pages of the map until libmdbx runs short
//! and syncs; measured here at 40-57 us a one-put commit against 0.5-1.2 us
//! (docs/design/bench-method.md, "libmdbx against LMDB"). MDBX_APPEND for sequential fills;
//! MDBX_NORDAHEAD when the database may exceed RAM (--memory_limit); a file that grows by
//! itself (no preset map size: the geometry's upper bound only reserves address space). One
//! write transaction per batch; reads renew a reset read-only transaction per operation so
//! each read sees the latest commit.

use super::{kv, Engine, EngineSpec, Op, OpenOptions, Opened, Session, WriteOpts};
use crate::error::{Error, Result};
use mdbx_sys as ffi;
use std::ffi::{c_int, c_void, CStr, CString};
use std::ptr;

const NAME: &str = "libmdbx";
/// The upper bound of the file: address space reserved, not a size chosen in advance.
const SIZE_UPPER: isize = 1 << 40;
/// libmdbx's growth step: the file grows by this much at a time.
const GROWTH_STEP: isize = 64 << 20;

pub fn spec() -> EngineSpec {
    EngineSpec {
        name: NAME,
        install_hint: "none: libmdbx is built from the mdbx-sys crate (needs libclang: \
                       apt-get install libclang-dev, or scripts/setup.sh)",
        probe: || Ok(version()),
        open,
    }
}

fn version() -> String {
    // SAFETY: mdbx_version is a static the library initialises at compile time.
    let v = unsafe { ptr::addr_of!(ffi::mdbx_version).read() };
    format!("{}.{}.{}", v.major, v.minor, v.patch)
}

struct Mdbx {
    env: *mut ffi::MDBX_env,
    dbi: ffi::MDBX_dbi,
}

// SAFETY: an MDBX_env is thread-safe; with MDBX_NOSTICKYTHREADS read transactions are not bound
// to threads, and transactions and cursors never leave the session (and thread) that made them.
unsafe impl Send for Mdbx {}
// SAFETY: as above.
unsafe impl Sync for Mdbx {}

fn err(op: &'static str, rc: c_int) -> Error {
    // SAFETY: mdbx_strerror returns a static NUL-terminated string for any code.
    let msg = unsafe { CStr::from_ptr(ffi::mdbx_strerror(rc)) };
    Error::engine(NAME, op, format!("{} ({rc})", msg.to_string_lossy()))
}

fn val(b: &[u8]) -> ffi::MDBX_val {
    ffi::MDBX_val {
        iov_base: b.as_ptr() as *mut c_void,
        iov_len: b.len(),
    }
}

fn empty() -> ffi::MDBX_val {
    ffi::MDBX_val {
        iov_base: ptr::null_mut(),
        iov_len: 0,
    }
}

/// # Safety
/// `v` must describe memory that is valid for the current transaction.
unsafe fn slice<'a>(v: &ffi::MDBX_val) -> &'a [u8] {
    if v.iov_len == 0 {
        &[]
    } else {
        std::slice::from_raw_parts(v.iov_base as *const u8, v.iov_len)
    }
}

/// libmdbx logs notices (the file's growth, readahead, shrinking) to stderr by default; the
/// driver's output keeps its warnings and errors only.
fn quiet_notices() {
    // SAFETY: MDBX_LOGGER_DONTCHANGE in mdbx.h is the function pointer (intptr_t)-1, which
    // libmdbx compares against and never calls; a non-null fn pointer value is a valid `Some`.
    unsafe {
        let keep_logger: ffi::MDBX_debug_func = std::mem::transmute::<usize, _>(usize::MAX);
        ffi::mdbx_setup_debug(ffi::MDBX_LOG_WARN, ffi::MDBX_DBG_DONTCHANGE, keep_logger);
    }
}

fn open(o: &OpenOptions) -> Result<Opened> {
    let mut flags = ffi::MDBX_WRITEMAP | ffi::MDBX_NOSTICKYTHREADS;
    let mut names = vec!["MDBX_WRITEMAP", "MDBX_NOSTICKYTHREADS"];
    if o.sync {
        flags |= ffi::MDBX_SYNC_DURABLE;
        names.push("MDBX_SYNC_DURABLE");
    } else {
        flags |= ffi::MDBX_UTTERLY_NOSYNC;
        names.push("MDBX_UTTERLY_NOSYNC");
    }
    if o.memory_limit.is_some() {
        flags |= ffi::MDBX_NORDAHEAD;
        names.push("MDBX_NORDAHEAD");
    }
    let readers = (o.threads_max + 16) as u64;
    let path = CString::new(o.dir.as_os_str().as_encoded_bytes())
        .map_err(|_| Error::Usage("--db path contains NUL".into()))?;
    quiet_notices();
    let mut env = ptr::null_mut();
    // SAFETY: libmdbx's open sequence on a fresh env handle; the env is closed on every error
    // path, and `path` outlives the call.
    unsafe {
        let rc = ffi::mdbx_env_create(&mut env);
        if rc != 0 {
            return Err(err("mdbx_env_create", rc));
        }
        let fail = |op, rc| {
            ffi::mdbx_env_close_ex(env, false);
            Err(err(op, rc))
        };
        // -1: libmdbx's default (lower bound, current size, shrink threshold, page size).
        let rc = ffi::mdbx_env_set_geometry(env, -1, -1, SIZE_UPPER, GROWTH_STEP, -1, -1);
        if rc != 0 {
            return fail("mdbx_env_set_geometry", rc);
        }
        let rc = ffi::mdbx_env_set_option(env, ffi::MDBX_opt_max_readers, readers);
        if rc != 0 {
            return fail("mdbx_env_set_option(max_readers)", rc);
        }
        let rc = ffi::mdbx_env_open(env, path.as_ptr(), flags, 0o644);
        if rc != 0 {
            return fail("mdbx_env_open", rc);
        }
        let mut txn = ptr::null_mut();
        let rc = ffi::mdbx_txn_begin_ex(
            env,
            ptr::null_mut(),
            ffi::MDBX_TXN_READWRITE,
            &mut txn,
            ptr::null_mut(),
        );
        if rc != 0 {
            return fail("mdbx_txn_begin", rc);
        }
        let mut dbi = 0;
        let rc = ffi::mdbx_dbi_open(txn, ptr::null(), ffi::MDBX_DB_DEFAULTS, &mut dbi);
        if rc != 0 {
            ffi::mdbx_txn_abort_ex(txn, ptr::null_mut());
            return fail("mdbx_dbi_open", rc);
        }
        let rc = ffi::mdbx_txn_commit_ex(txn, ptr::null_mut());
        if rc != 0 {
            return fail("mdbx_txn_commit", rc);
        }
        let config = vec![
            kv("flags", names.join("|")),
            kv(
                "geometry",
                format!(
                    "grows by {} MiB, upper bound {} GiB (address space only)",
                    GROWTH_STEP >> 20,
                    SIZE_UPPER >> 30
                ),
            ),
            kv("maxreaders", readers),
            kv("sequential_fill", "MDBX_APPEND"),
            kv("reads", "reset/renew read txn per op"),
            kv("cache", "OS page cache (no engine cache)"),
            kv("api", "C API through mdbx-sys"),
        ];
        Ok(Opened {
            engine: Box::new(Mdbx { env, dbi }),
            version: version(),
            config,
        })
    }
}

impl Drop for Mdbx {
    fn drop(&mut self) {
        // SAFETY: all sessions (and their transactions) borrow the engine, so they are gone.
        unsafe { ffi::mdbx_env_close_ex(self.env, false) };
    }
}

impl Engine for Mdbx {
    fn session(&self) -> Result<Box<dyn Session + '_>> {
        Ok(Box::new(MdbxSession {
            db: self,
            rtxn: ptr::null_mut(),
        }))
    }
}

struct MdbxSession<'a> {
    db: &'a Mdbx,
    /// A read-only transaction kept in the reset state between operations.
    rtxn: *mut ffi::MDBX_txn,
}

impl MdbxSession<'_> {
    /// Renews (or creates) the read transaction. Requires: it is reset.
    fn begin_read(&mut self) -> Result<*mut ffi::MDBX_txn> {
        // SAFETY: rtxn is either null or a reset read-only txn of this env.
        unsafe {
            if self.rtxn.is_null() {
                let mut t = ptr::null_mut();
                let rc = ffi::mdbx_txn_begin_ex(
                    self.db.env,
                    ptr::null_mut(),
                    ffi::MDBX_TXN_RDONLY,
                    &mut t,
                    ptr::null_mut(),
                );
                if rc != 0 {
                    return Err(err("mdbx_txn_begin(rdonly)", rc));
                }
                self.rtxn = t;
            } else {
                let rc = ffi::mdbx_txn_renew(self.rtxn);
                if rc != 0 {
                    return Err(err("mdbx_txn_renew", rc));
                }
            }
        }
        Ok(self.rtxn)
    }

    fn end_read(&mut self) {
        // SAFETY: rtxn is an active read-only txn of this session.
        unsafe { ffi::mdbx_txn_reset(self.rtxn) };
    }
}

impl Drop for MdbxSession<'_> {
    fn drop(&mut self) {
        if !self.rtxn.is_null() {
            // SAFETY: aborting a reset read txn frees it.
            unsafe { ffi::mdbx_txn_abort_ex(self.rtxn, ptr::null_mut()) };
        }
    }
}

impl Session for MdbxSession<'_> {
    fn get(&mut self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        let txn = self.begin_read()?;
        let k = val(key);
        let mut v = empty();
        // SAFETY: txn is active; v points into the map and is copied before the reset.
        let rc = unsafe { ffi::mdbx_get(txn, self.db.dbi, &k, &mut v) };
        let found = match rc {
            0 => {
                out.clear();
                // SAFETY: v is valid until the txn is reset below.
                out.extend_from_slice(unsafe { slice(&v) });
                true
            }
            ffi::MDBX_NOTFOUND => false,
            rc => {
                self.end_read();
                return Err(err("mdbx_get", rc));
            }
        };
        self.end_read();
        Ok(found)
    }

    fn write(&mut self, ops: &[Op<'_>], opts: WriteOpts) -> Result<()> {
        // SAFETY: one write txn, committed or aborted before returning; key/value slices
        // outlive the calls that read them.
        unsafe {
            let mut txn = ptr::null_mut();
            let rc = ffi::mdbx_txn_begin_ex(
                self.db.env,
                ptr::null_mut(),
                ffi::MDBX_TXN_READWRITE,
                &mut txn,
                ptr::null_mut(),
            );
            if rc != 0 {
                return Err(err("mdbx_txn_begin", rc));
            }
            for op in ops {
                let rc = match *op {
                    Op::Put(k, v) => {
                        let (k, mut v) = (val(k), val(v));
                        let flags = if opts.append {
                            ffi::MDBX_APPEND
                        } else {
                            ffi::MDBX_UPSERT
                        };
                        ffi::mdbx_put(txn, self.db.dbi, &k, &mut v, flags)
                    }
                    Op::Delete(k) => {
                        let k = val(k);
                        match ffi::mdbx_del(txn, self.db.dbi, &k, ptr::null()) {
                            ffi::MDBX_NOTFOUND => 0,
                            rc => rc,
                        }
                    }
                };
                if rc != 0 {
                    ffi::mdbx_txn_abort_ex(txn, ptr::null_mut());
                    return Err(err("mdbx_put/mdbx_del", rc));
                }
            }
            // MDBX_RESULT_TRUE: nothing to commit (deletes of keys that were not there).
            let rc = ffi::mdbx_txn_commit_ex(txn, ptr::null_mut());
            if rc != 0 && rc != ffi::MDBX_RESULT_TRUE {
                return Err(err("mdbx_txn_commit", rc));
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
        let mut n = 0;
        // SAFETY: the cursor lives inside the active read txn and is closed before the reset;
        // key/value slices are only used inside the callback.
        let rc = unsafe {
            let mut cur = ptr::null_mut();
            let rc = ffi::mdbx_cursor_open(txn, self.db.dbi, &mut cur);
            if rc != 0 {
                self.end_read();
                return Err(err("mdbx_cursor_open", rc));
            }
            let mut k = empty();
            let mut v = empty();
            let first = match (start, reverse) {
                (Some(s), _) => {
                    k = val(s);
                    ffi::MDBX_SET_RANGE
                }
                (None, false) => ffi::MDBX_FIRST,
                (None, true) => ffi::MDBX_LAST,
            };
            let step = if reverse {
                ffi::MDBX_PREV
            } else {
                ffi::MDBX_NEXT
            };
            let mut rc = ffi::mdbx_cursor_get(cur, &mut k, &mut v, first);
            while rc == 0 {
                f(slice(&k), slice(&v));
                n += 1;
                if n >= limit {
                    break;
                }
                rc = ffi::mdbx_cursor_get(cur, &mut k, &mut v, step);
            }
            ffi::mdbx_cursor_close(cur);
            rc
        };
        self.end_read();
        if rc != 0 && rc != ffi::MDBX_NOTFOUND {
            return Err(err("mdbx_cursor_get", rc));
        }
        Ok(n)
    }
}
