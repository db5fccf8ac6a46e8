//! Berkeley DB 5.3 (B-tree access method) through a C shim (shim/bdb_shim.c) and a runtime
//! dlopen of libdb-5.3.so.
//!
//! Configuration, after Symas' db_bench_bdb.cc and the BDB reference guide's transactional data
//! store: an environment with locking, logging, a memory pool of --cache_size and transactions
//! (DB_INIT_LOCK|DB_INIT_LOG|DB_INIT_MPOOL|DB_INIT_TXN|DB_THREAD), DB_TXN_WRITE_NOSYNC unless
//! --sync=1 (then DB_TXN_SYNC on commit), automatic log removal, deadlock detection
//! (DB_LOCK_DEFAULT) with retries, the default page size, one transaction per write batch, and
//! reads without a transaction.

use super::{EngineSpec, OpenOptions, Opened};
use crate::error::{Error, Result};

const LIBS: &[&str] = &["libdb-5.3.so", "libdb.so", "libdb-5.so"];
const HINT: &str = "apt-get install libdb-dev (Debian/Ubuntu), or scripts/setup.sh, then rebuild \
                    larch-bench (the shim needs /usr/include/db.h)";

pub fn spec() -> EngineSpec {
    EngineSpec {
        name: "bdb",
        install_hint: HINT,
        probe: imp::probe,
        open: imp::open,
    }
}

#[cfg(not(larch_shim_bdb))]
mod imp {
    use super::*;

    pub fn probe() -> std::result::Result<String, String> {
        Err(
            "larch-bench was built without /usr/include/db.h, so the Berkeley DB shim is \
             missing"
                .into(),
        )
    }

    pub fn open(_: &OpenOptions) -> Result<Opened> {
        Err(Error::Unavailable {
            engine: "bdb".into(),
            reason: probe().unwrap_err(),
            hint: HINT.into(),
        })
    }
}

#[cfg(larch_shim_bdb)]
mod imp {
    use super::super::{dl_api, kv, open_library, Engine, Op, Session, WriteOpts};
    use super::*;
    use std::ffi::{c_char, c_int, c_void, CStr, CString};
    use std::ptr;

    type P = *mut c_void;
    const LB_NOTFOUND: c_int = 100001;
    const LB_DEADLOCK: c_int = 100002;
    const WRITE_RETRIES_MAX: u32 = 1000;

    extern "C" {
        fn lb_bdb_open(
            env_create: P,
            db_create: P,
            home: *const c_char,
            cache_bytes: u64,
            sync: c_int,
            page_bytes: u32,
            out: *mut P,
        ) -> c_int;
        fn lb_bdb_close(h: P);
        fn lb_bdb_session(h: P) -> P;
        fn lb_bdb_session_free(s: P);
        fn lb_bdb_get(
            s: P,
            k: *const c_void,
            kl: usize,
            v: *mut *const c_void,
            vl: *mut usize,
        ) -> c_int;
        fn lb_bdb_begin(s: P) -> c_int;
        fn lb_bdb_put(s: P, k: *const c_void, kl: usize, v: *const c_void, vl: usize) -> c_int;
        fn lb_bdb_del(s: P, k: *const c_void, kl: usize) -> c_int;
        fn lb_bdb_commit(s: P, sync: c_int) -> c_int;
        fn lb_bdb_abort(s: P);
        fn lb_bdb_cursor_step(
            s: P,
            op: c_int,
            k: *const c_void,
            kl: usize,
            ko: *mut *const c_void,
            kol: *mut usize,
            vo: *mut *const c_void,
            vol: *mut usize,
        ) -> c_int;
        fn lb_bdb_cursor_close(s: P);
    }

    dl_api! {
        struct Api {
            fn db_env_create(*mut P, u32) -> c_int;
            fn db_create(*mut P, P, u32) -> c_int;
            fn db_strerror(c_int) -> *const c_char;
            fn db_version(*mut c_int, *mut c_int, *mut c_int) -> *const c_char;
        }
    }

    fn version(api: &Api) -> String {
        let (mut a, mut b, mut c) = (0, 0, 0);
        // SAFETY: db_version writes three ints and returns a static string.
        unsafe {
            (api.db_version)(&mut a, &mut b, &mut c);
        }
        format!("{a}.{b}.{c}")
    }

    pub fn probe() -> std::result::Result<String, String> {
        let api = Api::load(open_library(LIBS)?)?;
        Ok(version(&api))
    }

    struct Bdb {
        api: Api,
        h: P,
        sync: bool,
    }

    // SAFETY: the environment and database are opened with DB_THREAD, which makes the handles
    // free-threaded; per-thread state lives in sessions.
    unsafe impl Send for Bdb {}
    // SAFETY: as above.
    unsafe impl Sync for Bdb {}

    fn err(api: &Api, op: &'static str, rc: c_int) -> Error {
        let msg = if rc == LB_DEADLOCK {
            "deadlock (retries exhausted)".to_string()
        } else {
            // SAFETY: db_strerror returns a static string for any code.
            unsafe { CStr::from_ptr((api.db_strerror)(rc)) }
                .to_string_lossy()
                .to_string()
        };
        Error::engine("bdb", op, format!("{msg} ({rc})"))
    }

    pub fn open(o: &OpenOptions) -> Result<Opened> {
        let unavailable = |reason: String| Error::Unavailable {
            engine: "bdb".into(),
            reason,
            hint: HINT.into(),
        };
        let api = Api::load(open_library(LIBS).map_err(unavailable)?).map_err(unavailable)?;
        let home = CString::new(o.dir.as_os_str().as_encoded_bytes())
            .map_err(|_| Error::Usage("--db path contains NUL".into()))?;
        let mut h = ptr::null_mut();
        // SAFETY: the function pointers are libdb's db_env_create/db_create with the
        // prototypes the shim casts them to; `home` outlives the call.
        let rc = unsafe {
            lb_bdb_open(
                api.db_env_create as P,
                api.db_create as P,
                home.as_ptr(),
                o.cache_bytes,
                o.sync as c_int,
                0,
                &mut h,
            )
        };
        if rc != 0 {
            return Err(err(&api, "open", rc));
        }
        let version = version(&api);
        let config = vec![
            kv("access_method", "DB_BTREE"),
            kv(
                "env",
                "DB_INIT_LOCK|DB_INIT_LOG|DB_INIT_MPOOL|DB_INIT_TXN|DB_THREAD",
            ),
            kv(
                "durability",
                if o.sync {
                    "DB_TXN_SYNC per commit"
                } else {
                    "DB_TXN_WRITE_NOSYNC"
                },
            ),
            kv("cache_bytes", o.cache_bytes),
            kv("page_size", "default"),
            kv("log", "DB_LOG_AUTO_REMOVE"),
            kv("lock_detect", "DB_LOCK_DEFAULT, retry"),
            kv("reads", "no txn (degree 2)"),
        ];
        Ok(Opened {
            engine: Box::new(Bdb {
                api,
                h,
                sync: o.sync,
            }),
            version,
            config,
        })
    }

    impl Drop for Bdb {
        fn drop(&mut self) {
            // SAFETY: sessions are gone; closes the database and environment.
            unsafe { lb_bdb_close(self.h) }
        }
    }

    impl Engine for Bdb {
        fn session(&self) -> Result<Box<dyn Session + '_>> {
            // SAFETY: h is an open handle; the session is freed in Drop.
            let s = unsafe { lb_bdb_session(self.h) };
            if s.is_null() {
                return Err(Error::engine("bdb", "session", "out of memory"));
            }
            Ok(Box::new(BdbSession { db: self, s }))
        }
    }

    struct BdbSession<'a> {
        db: &'a Bdb,
        s: P,
    }

    impl Drop for BdbSession<'_> {
        fn drop(&mut self) {
            // SAFETY: the session belongs to this thread.
            unsafe { lb_bdb_session_free(self.s) }
        }
    }

    impl Session for BdbSession<'_> {
        fn get(&mut self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
            let (mut v, mut vl) = (ptr::null(), 0usize);
            // SAFETY: the value points into the session's buffer until its next call.
            let rc = unsafe { lb_bdb_get(self.s, key.as_ptr().cast(), key.len(), &mut v, &mut vl) };
            match rc {
                0 => {
                    out.clear();
                    // SAFETY: see above.
                    out.extend_from_slice(unsafe { crate::engines::c_bytes(v.cast(), vl) });
                    Ok(true)
                }
                LB_NOTFOUND => Ok(false),
                rc => Err(err(&self.db.api, "get", rc)),
            }
        }

        fn write(&mut self, ops: &[Op<'_>], opts: WriteOpts) -> Result<()> {
            let sync = (opts.sync || self.db.sync) as c_int;
            for _ in 0..WRITE_RETRIES_MAX {
                // SAFETY: one transaction, committed or aborted before the loop continues.
                let rc = unsafe {
                    let mut rc = lb_bdb_begin(self.s);
                    if rc != 0 {
                        return Err(err(&self.db.api, "txn_begin", rc));
                    }
                    for op in ops {
                        rc = match *op {
                            Op::Put(k, v) => lb_bdb_put(
                                self.s,
                                k.as_ptr().cast(),
                                k.len(),
                                v.as_ptr().cast(),
                                v.len(),
                            ),
                            Op::Delete(k) => match lb_bdb_del(self.s, k.as_ptr().cast(), k.len()) {
                                LB_NOTFOUND => 0,
                                rc => rc,
                            },
                        };
                        if rc != 0 {
                            break;
                        }
                    }
                    if rc == 0 {
                        lb_bdb_commit(self.s, sync)
                    } else {
                        lb_bdb_abort(self.s);
                        rc
                    }
                };
                match rc {
                    0 => return Ok(()),
                    LB_DEADLOCK => continue,
                    rc => return Err(err(&self.db.api, "put/del/commit", rc)),
                }
            }
            Err(err(&self.db.api, "write", LB_DEADLOCK))
        }

        fn scan(
            &mut self,
            start: Option<&[u8]>,
            reverse: bool,
            limit: u64,
            f: &mut dyn FnMut(&[u8], &[u8]),
        ) -> Result<u64> {
            let mut n = 0;
            let (first, step) = match (start, reverse) {
                (Some(_), _) => (4, if reverse { 3 } else { 1 }),
                (None, false) => (0, 1),
                (None, true) => (2, 3),
            };
            let (sk, skl) = start.map_or((ptr::null(), 0), |s| (s.as_ptr(), s.len()));
            let mut op = first;
            let mut rc = 0;
            while n < limit {
                let (mut k, mut kl, mut v, mut vl) = (ptr::null(), 0usize, ptr::null(), 0usize);
                // SAFETY: returned pointers stay valid until the next cursor call.
                rc = unsafe {
                    lb_bdb_cursor_step(self.s, op, sk.cast(), skl, &mut k, &mut kl, &mut v, &mut vl)
                };
                if rc != 0 {
                    break;
                }
                // SAFETY: as above; used only inside the callback.
                unsafe {
                    f(
                        crate::engines::c_bytes(k.cast(), kl),
                        crate::engines::c_bytes(v.cast(), vl),
                    );
                }
                n += 1;
                op = step;
            }
            // SAFETY: closes this session's cursor, releasing its page locks.
            unsafe { lb_bdb_cursor_close(self.s) };
            match rc {
                0 | LB_NOTFOUND => Ok(n),
                rc => Err(err(&self.db.api, "cursor", rc)),
            }
        }
    }
}
