//! Progress lines on stderr for long loads and copies, only when stderr is a terminal. The
//! terminal is a pseudo-terminal made by util-linux `script` (skipped, saying so, without it).

mod common;
use common::*;
use std::process::{Command, Stdio};

const ENTRIES: u32 = 250_000;

/// Runs `larch args` with its stdin, stdout and stderr on a pseudo-terminal; returns what the
/// terminal showed, or None if `script` is missing.
fn on_terminal(args: &[&str]) -> Option<String> {
    let mut line = String::from(env!("CARGO_BIN_EXE_larch"));
    for a in args {
        line.push(' ');
        line.push_str(a);
    }
    let out = Command::new("script")
        .args(["-qefc", &line, "/dev/null"])
        .stdin(Stdio::null())
        .output()
        .ok()?;
    assert!(out.status.success(), "larch {args:?} on a terminal failed");
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn long_load_and_copy_report_progress_on_a_terminal_only() {
    let dir = tempfile::tempdir().unwrap();
    let dump = dir.path().join("many.dump");
    let items = (0..ENTRIES)
        .map(|i| (i.to_be_bytes().to_vec(), b"v".to_vec()))
        .collect();
    std::fs::write(&dump, hand_dump(&vec![("t".to_string(), items)])).unwrap();
    let (dump, db) = (dump.to_str().unwrap(), dir.path().join("a.larch"));
    let db = db.to_str().unwrap();

    // Piped stderr: no progress.
    let r = larch(&["load", db, "--file", dump], b"");
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stderr, "", "progress written to a pipe");
    let r = larch(&["copy", db, &format!("{db}.piped")], b"");
    assert_eq!((r.code, r.stderr.as_str()), (0, ""));

    let fresh = dir.path().join("b.larch");
    let Some(shown) = on_terminal(&["load", fresh.to_str().unwrap(), "--file", dump]) else {
        eprintln!("SKIPPED: util-linux `script` is missing, so no pseudo-terminal");
        return;
    };
    assert!(shown.contains("loaded 100000 entries"), "{shown:?}");
    assert!(shown.contains("loaded 250000 entries\r\n"), "{shown:?}");
    let copy = dir.path().join("c.larch");
    let shown = on_terminal(&["copy", db, copy.to_str().unwrap()]).unwrap();
    assert!(shown.contains("copied 200000 entries"), "{shown:?}");
    assert!(shown.contains("copied 250000 entries\r\n"), "{shown:?}");
    assert_eq!(larch(&["check", copy.to_str().unwrap()], b"").code, 0);
}
