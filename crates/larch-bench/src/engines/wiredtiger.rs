//! WiredTiger 3.2 (B-tree and LSM tables) through a C shim (shim/wt_shim.c) and a runtime
//! dlopen of libwiredtiger.so.0.
//!
//! Configuration, after Symas' db_bench_wiredtiger.cc and WiredTiger's tuning guide: a cache of
//! --cache_size; no block compression; key_format=u,value_format=u; one WT_SESSION and cursor
//! per thread; one transaction per write batch. Without --sync the log is off and durability
//! comes from checkpoints (WiredTiger's default, as in Symas' runs); with --sync=1 the log is on
//! and each commit is made with sync=on. The LSM variant is `type=lsm` with WiredTiger's default
//! LSM settings (bloom filters on).

use super::{EngineSpec, OpenOptions, Opened};
use crate::error::{Error, Result};

const LIBS: &[&str] = &["libwiredtiger.so.0", "libwiredtiger.so"];
const HINT: &str = "apt-get install libwiredtiger-dev (Debian/Ubuntu), or scripts/setup.sh, then \
                    rebuild larch-bench (the shim needs /usr/include/wiredtiger.h)";

pub fn spec_btree() -> EngineSpec {
    EngineSpec {
        name: "wiredtiger",
        install_hint: HINT,
        probe: imp::probe,
        open: |o| imp::open(o, false),
    }
}

pub fn spec_lsm() -> EngineSpec {
    EngineSpec {
        name: "wiredtiger-lsm",
        install_hint: HINT,
        probe: imp::probe,
        open: |o| imp::open(o, true),
    }
}

#[cfg(not(larch_shim_wt))]
mod imp {
    use super::*;

    pub fn probe() -> std::result::Result<String, String> {
        Err(
            "larch-bench was built without /usr/include/wiredtiger.h, so the WiredTiger shim \
             is missing"
                .into(),
        )
    }

    pub fn open(_: &OpenOptions, lsm: bool) -> Result<Opened> {
        Err(Error::Unavailable {
            engine: if lsm { "wiredtiger-lsm" } else { "wiredtiger" }.into(),
            reason: probe().unwrap_err(),
            hint: HINT.into(),
        })
    }
}

#[cfg(larch_shim_wt)]
mod imp {
    use super::super::{dl_api, kv, open_library, Engine, Op, Session, WriteOpts};
    use super::*;
    use std::ffi::{c_char, c_int, c_void, CStr, CString};
    use std::ptr;

    type P = *mut c_void;
    const LB_NOTFOUND: c_int = 100001;
    const LB_ROLLBACK: c_int = 100002;
    const WRITE_RETRIES_MAX: u32 = 1000;

    extern "C" {
        fn lb_wt_open(
            open_fn: P,
            home: *const c_char,
            conn_config: *const c_char,
            table_config: *const c_char,
            out: *mut P,
        ) -> c_int;
        fn lb_wt_close(conn: P);
        fn lb_wt_session(conn: P, out: *mut P) -> c_int;
        fn lb_wt_session_free(s: P);
        fn lb_wt_get(
            s: P,
            k: *const c_void,
            kl: usize,
            v: *mut *const c_void,
            vl: *mut usize,
        ) -> c_int;
        fn lb_wt_begin(s: P) -> c_int;
        fn lb_wt_put(s: P, k: *const c_void, kl: usize, v: *const c_void, vl: usize) -> c_int;
        fn lb_wt_del(s: P, k: *const c_void, kl: usize) -> c_int;
        fn lb_wt_commit(s: P, sync: c_int) -> c_int;
        fn lb_wt_rollback(s: P);
        fn lb_wt_cursor_step(
            s: P,
            op: c_int,
            k: *const c_void,
            kl: usize,
            ko: *mut *const c_void,
            kol: *mut usize,
            vo: *mut *const c_void,
            vol: *mut usize,
        ) -> c_int;
        fn lb_wt_cursor_close(s: P);
    }

    dl_api! {
        struct Api {
            fn wiredtiger_open(*const c_char, P, *const c_char, *mut P) -> c_int;
            fn wiredtiger_strerror(c_int) -> *const c_char;
            fn wiredtiger_version(*mut c_int, *mut c_int, *mut c_int) -> *const c_char;
        }
    }

    fn version(api: &Api) -> String {
        let (mut a, mut b, mut c) = (0, 0, 0);
        // SAFETY: writes three ints and returns a static string.
        unsafe {
            (api.wiredtiger_version)(&mut a, &mut b, &mut c);
        }
        format!("{a}.{b}.{c}")
    }

    pub fn probe() -> std::result::Result<String, String> {
        let api = Api::load(open_library(LIBS)?)?;
        Ok(version(&api))
    }

    struct Wt {
        api: Api,
        conn: P,
        name: &'static str,
    }

    // SAFETY: WT_CONNECTION is thread-safe; sessions and cursors are per thread (sessions).
    unsafe impl Send for Wt {}
    // SAFETY: as above.
    unsafe impl Sync for Wt {}

    fn err(api: &Api, engine: &str, op: &'static str, rc: c_int) -> Error {
        let msg = if rc == LB_ROLLBACK {
            "WT_ROLLBACK (retries exhausted)".to_string()
        } else {
            // SAFETY: wiredtiger_strerror returns a static string for any code.
            unsafe { CStr::from_ptr((api.wiredtiger_strerror)(rc)) }
                .to_string_lossy()
                .to_string()
        };
        Error::engine(engine, op, format!("{msg} ({rc})"))
    }

    pub fn open(o: &OpenOptions, lsm: bool) -> Result<Opened> {
        let name = if lsm { "wiredtiger-lsm" } else { "wiredtiger" };
        let unavailable = |reason: String| Error::Unavailable {
            engine: name.into(),
            reason,
            hint: HINT.into(),
        };
        let api = Api::load(open_library(LIBS).map_err(unavailable)?).map_err(unavailable)?;
        let home = CString::new(o.dir.as_os_str().as_encoded_bytes())
            .map_err(|_| Error::Usage("--db path contains NUL".into()))?;
        let log = if o.sync {
            "log=(enabled=true)"
        } else {
            "log=(enabled=false)"
        };
        let conn_cfg = format!(
            "create,cache_size={},session_max={},{log},statistics=(none)",
            o.cache_bytes.max(1 << 20),
            o.threads_max + 32
        );
        let table_cfg = if lsm {
            "key_format=u,value_format=u,type=lsm,block_compressor=".to_string()
        } else {
            "key_format=u,value_format=u,block_compressor=".to_string()
        };
        let (c_conn, c_table) = (
            CString::new(conn_cfg.clone()).map_err(|_| Error::Usage("bad config".into()))?,
            CString::new(table_cfg.clone()).map_err(|_| Error::Usage("bad config".into()))?,
        );
        let mut conn = ptr::null_mut();
        // SAFETY: the pointer is libwiredtiger's wiredtiger_open, the prototype the shim casts
        // it to; the strings outlive the call.
        let rc = unsafe {
            lb_wt_open(
                api.wiredtiger_open as P,
                home.as_ptr(),
                c_conn.as_ptr(),
                c_table.as_ptr(),
                &mut conn,
            )
        };
        if rc != 0 {
            return Err(err(&api, name, "wiredtiger_open", rc));
        }
        let version = version(&api);
        let config = vec![
            kv("connection", conn_cfg),
            kv("table", table_cfg),
            kv(
                "durability",
                if o.sync {
                    "log on, commit sync=on"
                } else {
                    "log off, checkpoint at close"
                },
            ),
            kv("write_batch", "one transaction"),
        ];
        Ok(Opened {
            engine: Box::new(Wt { api, conn, name }),
            version,
            config,
        })
    }

    impl Drop for Wt {
        fn drop(&mut self) {
            // SAFETY: sessions are gone; closing the connection checkpoints.
            unsafe { lb_wt_close(self.conn) }
        }
    }

    impl Engine for Wt {
        fn session(&self) -> Result<Box<dyn Session + '_>> {
            let mut s = ptr::null_mut();
            // SAFETY: conn is open; the session is freed in Drop.
            let rc = unsafe { lb_wt_session(self.conn, &mut s) };
            if rc != 0 {
                return Err(err(&self.api, self.name, "open_session", rc));
            }
            Ok(Box::new(WtSession { db: self, s }))
        }
    }

    struct WtSession<'a> {
        db: &'a Wt,
        s: P,
    }

    impl Drop for WtSession<'_> {
        fn drop(&mut self) {
            // SAFETY: closes this thread's session and its cursors.
            unsafe { lb_wt_session_free(self.s) }
        }
    }

    impl Session for WtSession<'_> {
        fn get(&mut self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
            let (mut v, mut vl) = (ptr::null(), 0usize);
            // SAFETY: the value is in the session buffer until the next call.
            let rc = unsafe { lb_wt_get(self.s, key.as_ptr().cast(), key.len(), &mut v, &mut vl) };
            match rc {
                0 => {
                    out.clear();
                    // SAFETY: see above.
                    out.extend_from_slice(unsafe { crate::engines::c_bytes(v.cast(), vl) });
                    Ok(true)
                }
                LB_NOTFOUND => Ok(false),
                rc => Err(err(&self.db.api, self.db.name, "search", rc)),
            }
        }

        fn write(&mut self, ops: &[Op<'_>], opts: WriteOpts) -> Result<()> {
            for _ in 0..WRITE_RETRIES_MAX {
                // SAFETY: one transaction, committed or rolled back before continuing.
                let rc = unsafe {
                    let mut rc = lb_wt_begin(self.s);
                    if rc != 0 {
                        return Err(err(&self.db.api, self.db.name, "begin_transaction", rc));
                    }
                    for op in ops {
                        rc = match *op {
                            Op::Put(k, v) => lb_wt_put(
                                self.s,
                                k.as_ptr().cast(),
                                k.len(),
                                v.as_ptr().cast(),
                                v.len(),
                            ),
                            Op::Delete(k) => match lb_wt_del(self.s, k.as_ptr().cast(), k.len()) {
                                LB_NOTFOUND => 0,
                                rc => rc,
                            },
                        };
                        if rc != 0 {
                            break;
                        }
                    }
                    if rc == 0 {
                        lb_wt_commit(self.s, opts.sync as c_int)
                    } else {
                        lb_wt_rollback(self.s);
                        rc
                    }
                };
                match rc {
                    0 => return Ok(()),
                    LB_ROLLBACK => continue,
                    rc => return Err(err(&self.db.api, self.db.name, "insert/commit", rc)),
                }
            }
            Err(err(&self.db.api, self.db.name, "write", LB_ROLLBACK))
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
                // SAFETY: returned pointers stay valid until the cursor moves.
                rc = unsafe {
                    lb_wt_cursor_step(self.s, op, sk.cast(), skl, &mut k, &mut kl, &mut v, &mut vl)
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
            // SAFETY: resets the scan cursor so it pins no page.
            unsafe { lb_wt_cursor_close(self.s) };
            match rc {
                0 | LB_NOTFOUND => Ok(n),
                rc => Err(err(&self.db.api, self.db.name, "cursor", rc)),
            }
        }
    }
}
