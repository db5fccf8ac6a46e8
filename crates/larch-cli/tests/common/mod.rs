//! Helpers shared by the integration tests: running the `larch` binary, building databases
//! with awkward data, and finding the real LMDB tools.
#![allow(dead_code)]

use larchdb::{Database, Options};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// Named tables with their sorted items.
pub type Tables = Vec<(String, Vec<(Vec<u8>, Vec<u8>)>)>;

/// Result of one run of a command.
pub struct Run {
    pub code: i32,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

impl Run {
    pub fn stdout_str(&self) -> String {
        String::from_utf8(self.stdout.clone()).expect("utf-8 stdout")
    }
}

/// Runs `program args`, feeding `stdin`.
pub fn run_program(program: &str, args: &[&str], stdin: &[u8]) -> Run {
    run_program_with(program, args, &[], stdin)
}

/// `run_program` with no input and these environment variables set.
pub fn run_program_env(program: &str, args: &[&str], env: &[(&str, &str)]) -> Run {
    run_program_with(program, args, env, b"")
}

fn run_program_with(program: &str, args: &[&str], env: &[(&str, &str)], stdin: &[u8]) -> Run {
    let mut child = Command::new(program)
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    let mut input = child.stdin.take().unwrap();
    let data = stdin.to_vec();
    let feeder = std::thread::spawn(move || {
        let _ = input.write_all(&data);
    });
    let out = child.wait_with_output().unwrap();
    feeder.join().unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: out.stdout,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs the `larch` binary under test.
pub fn larch(args: &[&str], stdin: &[u8]) -> Run {
    run_program(env!("CARGO_BIN_EXE_larch"), args, stdin)
}

/// Runs larch and asserts it succeeded; returns stdout.
pub fn larch_ok(args: &[&str], stdin: &[u8]) -> Vec<u8> {
    let r = larch(args, stdin);
    assert_eq!(r.code, 0, "larch {args:?} failed: {}", r.stderr);
    r.stdout
}

/// Fails the test with a clear message when one of `tools` is missing.
fn require_tools(tools: &[&str], what: &str) {
    for tool in tools {
        let found = Command::new(tool)
            .arg("-V")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok();
        assert!(found, "{tool} not found: {what}");
    }
}

/// Fails the test with a clear message when the Debian lmdb-utils are missing.
pub fn require_lmdb_utils() {
    require_tools(
        &["mdb_dump", "mdb_load"],
        "the interop tests need LMDB's lmdb-utils (0.9.24); \
         run scripts/setup.sh (it installs the Debian package lmdb-utils)",
    );
}

/// Fails the test with a clear message when BerkeleyDB's db_dump/db_load are missing.
pub fn require_bdb_utils() {
    require_tools(
        &["db_dump", "db_load"],
        "the BerkeleyDB interop tests need db_dump and db_load (5.3); \
         run scripts/setup.sh (it installs the Debian package db-util)",
    );
}

/// Awkward items: empty values, 0x00, 0xff, backslash, space, long keys.
pub fn awkward_tables() -> Tables {
    let mut a: Vec<(Vec<u8>, Vec<u8>)> = vec![
        (b"empty-value".to_vec(), Vec::new()),
        (vec![0x00], vec![0x00, 0x00]),
        (vec![0xff, 0xfe], vec![0xff]),
        (b"back\\slash".to_vec(), b"\\".to_vec()),
        (
            b"\\41 looks like an escape".to_vec(),
            b"C:\\dir\\file".to_vec(),
        ),
        (b" leading and trailing space ".to_vec(), b" ".to_vec()),
        (vec![b'k'; 511], vec![b'v'; 3000]),
        (b"\x7f\x80\n\r\t".to_vec(), b"DATA=END".to_vec()),
    ];
    a.sort();
    let mut b: Vec<(Vec<u8>, Vec<u8>)> = (0u32..300)
        .map(|i| (i.to_be_bytes().to_vec(), format!("value {i}").into_bytes()))
        .collect();
    b.push((vec![0xff; 400], vec![0xab; 70_000]));
    b.sort();
    vec![
        ("alpha".to_string(), a),
        ("beta".to_string(), b),
        ("empty".to_string(), Vec::new()),
    ]
}

/// The same data without any backslash, for the print-format comparisons with mdb_dump
/// 0.9.24 (which does not double backslashes).
pub fn printable_safe_tables() -> Tables {
    awkward_tables()
        .into_iter()
        .map(|(n, items)| {
            let items = items
                .into_iter()
                .filter(|(k, v)| !k.contains(&b'\\') && !v.contains(&b'\\'))
                .collect();
            (n, items)
        })
        .collect()
}

/// Creates a Larch database at `path` holding `tables`.
pub fn build_db(path: &Path, tables: &Tables) {
    let db = Database::open(path, Options::default()).unwrap();
    let mut w = db.begin_write().unwrap();
    for (name, items) in tables {
        w.create_table(name).unwrap();
        let mut t = w.table(name).unwrap();
        for (k, v) in items {
            t.put(k, v).unwrap();
        }
    }
    w.commit().unwrap();
}

/// Encodes `bytes` as mdb_dump's bytevalue format does.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A hand-written bytevalue dump of `tables`, as mdb_load reads it (no env lines).
pub fn hand_dump(tables: &Tables) -> String {
    let mut s = String::new();
    for (name, items) in tables {
        s.push_str(&format!(
            "VERSION=3\nformat=bytevalue\ndatabase={name}\ntype=btree\nHEADER=END\n"
        ));
        for (k, v) in items {
            s.push_str(&format!(" {}\n {}\n", hex(k), hex(v)));
        }
        s.push_str("DATA=END\n");
    }
    s
}

/// Drops mdb_dump's LMDB environment lines, which Larch does not write (see cli.md).
pub fn without_env_lines(dump: &[u8]) -> Vec<u8> {
    let text = String::from_utf8(dump.to_vec()).expect("dump is ASCII");
    let mut out = String::new();
    for line in text.split_inclusive('\n') {
        if line.starts_with("mapsize=") || line.starts_with("maxreaders=") {
            continue;
        }
        out.push_str(line);
    }
    out.into_bytes()
}
