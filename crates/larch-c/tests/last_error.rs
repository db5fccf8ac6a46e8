//! `larch_last_error()` describes the last failing call on this thread, never an earlier one:
//! every entry point that fails sets it, so a message left by an earlier failure (and kept
//! through calls that succeed, as `errno` is) never stands for a later one.

use larch::*;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::ptr::{null, null_mut};

fn last_error() -> String {
    // SAFETY: `larch_last_error` returns a NUL-terminated string valid until the next failing
    // call on this thread; it is copied at once.
    unsafe { CStr::from_ptr(larch_last_error()) }
        .to_string_lossy()
        .into_owned()
}

/// Leaves a message that no call below would write, so that a call that failed without
/// setting its own would show it.
fn prime() -> String {
    let path = CString::new("/nonexistent-larch-prime/sub/db").unwrap();
    let mut db = null_mut();
    // SAFETY: valid arguments.
    let rc = unsafe { larch_open(path.as_ptr(), null(), &mut db) };
    assert_eq!(rc, LARCH_EIO);
    let m = last_error();
    assert!(m.contains("nonexistent-larch-prime"), "{m}");
    m
}

/// Asserts that `rc` is `code` and that the message is the call's own.
fn failed_with(what: &str, rc: c_int, code: c_int, primed: &str, fragment: &str) {
    assert_eq!(rc, code, "{what}: {}", last_error());
    let m = last_error();
    assert_ne!(m, primed, "{what} failed and left the earlier message");
    assert!(!m.is_empty(), "{what} failed with an empty message");
    assert!(
        m.contains(fragment),
        "{what}: {m:?} does not say {fragment:?}"
    );
}

struct Fixture {
    _dir: tempfile::TempDir,
    db: *mut larch_db,
}

fn open() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let path = CString::new(dir.path().join("db").to_str().unwrap()).unwrap();
    let mut db = null_mut();
    // SAFETY: valid arguments.
    assert_eq!(
        unsafe { larch_open(path.as_ptr(), null(), &mut db) },
        LARCH_OK
    );
    Fixture { _dir: dir, db }
}

#[test]
fn a_success_keeps_the_message_and_the_next_failure_replaces_it() {
    let f = open();
    let primed = prime();
    // A call that succeeds, and one that answers "not found", leave the message.
    let mut txn = null_mut();
    // SAFETY: valid arguments.
    assert_eq!(unsafe { larch_begin(f.db, 0, &mut txn) }, LARCH_OK);
    let key = larch_val {
        data: b"k".as_ptr(),
        len: 1,
    };
    let mut value = larch_val {
        data: null(),
        len: 0,
    };
    // SAFETY: valid arguments.
    assert_eq!(
        unsafe { larch_get(txn, null(), &key, &mut value) },
        LARCH_NOTFOUND
    );
    assert_eq!(last_error(), primed);
    // The next failure has its own message.
    let empty = CString::new("").unwrap();
    // SAFETY: valid arguments.
    let rc = unsafe { larch_table_create(txn, empty.as_ptr()) };
    failed_with(
        "larch_table_create",
        rc,
        LARCH_ETABLENAME,
        &primed,
        "table name",
    );
    assert_eq!(larch_abort(txn), LARCH_OK);
    assert_eq!(larch_close(f.db), LARCH_OK);
}

unsafe extern "C" fn stop_with_eio(_: *mut c_void, _: *const c_char, _: usize) -> c_int {
    LARCH_EIO
}

#[test]
fn a_callback_that_stops_the_listing_leaves_a_message_of_its_own() {
    let f = open();
    let mut txn = null_mut();
    // SAFETY: valid arguments.
    assert_eq!(unsafe { larch_begin(f.db, 0, &mut txn) }, LARCH_OK);
    let name = CString::new("alpha").unwrap();
    // SAFETY: valid arguments.
    assert_eq!(unsafe { larch_table_create(txn, name.as_ptr()) }, LARCH_OK);
    let primed = prime();
    // SAFETY: the callback ignores its arguments.
    let rc = unsafe { larch_list_tables(txn, Some(stop_with_eio), null_mut()) };
    failed_with(
        "larch_list_tables",
        rc,
        LARCH_EIO,
        &primed,
        "callback returned 13",
    );
    assert_eq!(larch_abort(txn), LARCH_OK);
    assert_eq!(larch_close(f.db), LARCH_OK);
}

/// Primes the message, runs a call that fails, and checks that the message is the call's own.
macro_rules! fails {
    ($call:expr, $code:expr, $fragment:expr) => {{
        let primed = prime();
        // SAFETY: every pointer is valid, or null where the test means it; freed handles
        // are only given back to the library, which detects them. (Some of the calls are
        // safe functions.)
        #[allow(unused_unsafe)]
        let rc = unsafe { $call };
        failed_with(stringify!($call), rc, $code, &primed, $fragment);
    }};
}

/// Every entry point that can fail, made to fail (a freed handle, a null argument), sets the
/// message.
#[test]
fn every_failing_entry_point_sets_the_message() {
    let f = open();
    // Freed handles of each kind: a transaction after its abort, a cursor after its close, a
    // database after its close.
    let mut txn = null_mut();
    let mut cursor = null_mut();
    // SAFETY: valid arguments.
    unsafe {
        assert_eq!(larch_begin(f.db, LARCH_RDONLY, &mut txn), LARCH_OK);
        assert_eq!(larch_cursor_open(txn, null(), &mut cursor), LARCH_OK);
        assert_eq!(larch_cursor_close(cursor), LARCH_OK);
        assert_eq!(larch_abort(txn), LARCH_OK);
    }
    let closed = open();
    assert_eq!(larch_close(closed.db), LARCH_OK);
    let db = closed.db;

    let key = larch_val {
        data: b"k".as_ptr(),
        len: 1,
    };
    let mut value = key;
    let path = CString::new("/nonexistent-larch-target/copy").unwrap();
    let name = CString::new("t").unwrap();
    let mut out_u64 = 0u64;
    let mut out_int: c_int = 0;
    let mut stats = larch_stats::default();
    let mut report = larch_verify_report::default();
    let mut copied = larch_copied::default();
    let mut compacted = larch_compacted::default();
    let mut new_db = null_mut();
    let mut new_txn = null_mut();
    let mut new_cursor = null_mut();
    const DB: &str = "database handle";
    const TXN: &str = "transaction";
    const CURSOR: &str = "cursor";

    fails!(
        larch_open(null(), null(), &mut new_db),
        LARCH_EINVAL,
        "path is null"
    );
    fails!(larch_close(db), LARCH_EBADHANDLE, DB);
    fails!(larch_checkpoint(db), LARCH_EBADHANDLE, DB);
    fails!(larch_sync(db), LARCH_EBADHANDLE, DB);
    fails!(larch_stat(db, &mut stats), LARCH_EBADHANDLE, DB);
    fails!(larch_verify(db, 0, &mut report), LARCH_EBADHANDLE, DB);
    fails!(
        larch_copy(db, path.as_ptr(), &mut copied),
        LARCH_EBADHANDLE,
        DB
    );
    fails!(larch_compact(db, &mut compacted), LARCH_EBADHANDLE, DB);
    fails!(larch_begin(db, 0, &mut new_txn), LARCH_EBADHANDLE, DB);
    fails!(
        larch_commit(txn, LARCH_DURABILITY_DEFAULT),
        LARCH_EBADHANDLE,
        TXN
    );
    fails!(larch_abort(txn), LARCH_EBADHANDLE, TXN);
    fails!(larch_txn_id(txn, &mut out_u64), LARCH_EBADHANDLE, TXN);
    fails!(larch_txn_renew(txn), LARCH_EBADHANDLE, TXN);
    fails!(
        larch_table_create(txn, name.as_ptr()),
        LARCH_EBADHANDLE,
        TXN
    );
    fails!(
        larch_table_ensure(txn, name.as_ptr(), &mut out_int),
        LARCH_EBADHANDLE,
        TXN
    );
    fails!(
        larch_table_delete(txn, name.as_ptr()),
        LARCH_EBADHANDLE,
        TXN
    );
    fails!(
        larch_list_tables(txn, Some(stop_with_eio), null_mut()),
        LARCH_EBADHANDLE,
        TXN
    );
    fails!(
        larch_table_len(txn, null(), &mut out_u64),
        LARCH_EBADHANDLE,
        TXN
    );
    fails!(
        larch_get(txn, null(), &key, &mut value),
        LARCH_EBADHANDLE,
        TXN
    );
    fails!(larch_put(txn, null(), &key, &key, 0), LARCH_EBADHANDLE, TXN);
    fails!(larch_delete(txn, null(), &key), LARCH_EBADHANDLE, TXN);
    fails!(
        larch_delete_range(txn, null(), null(), null(), &mut out_u64),
        LARCH_EBADHANDLE,
        TXN
    );
    fails!(larch_savepoint(txn, &mut out_u64), LARCH_EBADHANDLE, TXN);
    fails!(larch_rollback_to(txn, 1), LARCH_EBADHANDLE, TXN);
    fails!(larch_release(txn, 1), LARCH_EBADHANDLE, TXN);
    fails!(
        larch_cursor_open(txn, null(), &mut new_cursor),
        LARCH_EBADHANDLE,
        TXN
    );
    fails!(
        larch_cursor_bounds(cursor, null(), null()),
        LARCH_EBADHANDLE,
        CURSOR
    );
    fails!(
        larch_cursor_get(cursor, &mut value, null_mut(), LARCH_FIRST),
        LARCH_EBADHANDLE,
        CURSOR
    );
    fails!(larch_cursor_close(cursor), LARCH_EBADHANDLE, CURSOR);

    assert_eq!(larch_close(f.db), LARCH_OK);
}

/// The test above covers every exported function that returns a code: a function added to the
/// API without a case there fails here.
#[test]
fn the_sweep_covers_every_entry_point_that_returns_a_code() {
    let source = include_str!("../src/lib.rs");
    // Without whitespace: rustfmt breaks a long case over lines.
    let this: String = include_str!("last_error.rs")
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    let mut missing = Vec::new();
    for piece in source.split("extern \"C\" fn ").skip(1) {
        let name: String = piece
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let signature = &piece[..piece.find('{').unwrap_or(piece.len())];
        if !name.starts_with("larch_") || !signature.contains("-> c_int") {
            continue;
        }
        if !this.contains(&format!("fails!({name}(")) {
            missing.push(name);
        }
    }
    assert!(missing.is_empty(), "not made to fail here: {missing:?}");
}
