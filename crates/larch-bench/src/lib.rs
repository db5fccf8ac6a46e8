//! larch-bench: a db_bench-compatible benchmark driver that runs Larch and the real peer engines
//! (LMDB, libmdbx, RocksDB, LevelDB, Berkeley DB, WiredTiger, redb, canopydb, fjall) with
//! identical key and value streams.
//!
//! Layers, each depending only on the ones below it:
//! `parent` (spawns one child process per engine, cgroups, JSON/CSV, summary table) ->
//! `runner` (the child: workloads, timing, per-benchmark rusage and I/O deltas) ->
//! `engines` (one adapter per engine behind the object-safe [`engines::Engine`] trait) ->
//! `gen`, `hist`, `report`, `sys` (leaf helpers: key/value streams, histograms, output
//! formats, rusage and /proc accounting).
//!
//! `suite` (on top of the driver) runs one seed report's experiment as a plan of driver runs
//! and renders report.md and the charts from the JSON rows (`larch-bench suite`, `report`).
//!
//! `unsafe` lives only in `engines/` (FFI into the peers' C libraries) and `sys` (getrusage,
//! wait4, fork-time cgroup entry); every block carries a `// SAFETY:` comment.

pub mod engines;
pub mod error;
pub mod flags;
pub mod gen;
pub mod hist;
pub mod parent;
pub mod repeat;
pub mod report;
pub mod runner;
pub mod suite;
pub mod sys;
pub mod verdict;
pub mod ycsb;

pub use error::{Error, Result};

/// The hidden first argument that makes the binary act as a benchmark child.
pub const CHILD_SUBCOMMAND: &str = "__child";
/// The hidden first argument used by the accounting tests: write N bytes to a file and fsync.
pub const WRITE_PROBE_SUBCOMMAND: &str = "__write_probe";

/// Entry point shared by the binary: returns the process exit code.
pub fn main_with_args(args: Vec<String>) -> i32 {
    let result = match args.get(1).map(String::as_str) {
        Some(CHILD_SUBCOMMAND) => runner::child_main(&args[2..]),
        Some(WRITE_PROBE_SUBCOMMAND) => sys::write_probe_main(&args[2..]),
        Some("suite") => suite::suite_main(&args[2..]),
        Some("report") => suite::report_main(&args[2..]),
        Some("--help") | Some("-h") | Some("help") => {
            print!("{}", flags::usage());
            Ok(())
        }
        _ => flags::Flags::parse(&args[1..]).and_then(|f| parent::run(&f)),
    };
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("larch-bench: error: {e}");
            e.exit_code()
        }
    }
}
