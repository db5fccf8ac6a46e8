//! `larch stat DB [--all] [--readers] [--freelist]`: like mdb_stat, from `Database::stats`.

use crate::cli::{exit, open_read_only, Args, Failure, Flag};
use std::path::Path;

const HELP: &str = "\
Usage: larch stat DB [--all] [--readers] [--freelist]

Prints the page size, tree depth, pages by type, entries, free and reclaimable pages, the
data file's and the log file's sizes and active readers of the newest snapshot (other
processes' read-only handles with a read in progress, from the lock file's reader table).
Opens the database read-only, beside a writer if one is running.

Options:
  -a, --all       also print the figures of every table
  -r, --readers   list the live readers (mdb_stat -r): process id and the commit whose pages
                  each one holds, oldest first for this process, then other processes
  -f, --freelist  free-space detail (mdb_stat -f): free, pending and freelist pages, the
                  bytes they hold, and the oldest reader that pending pages wait for

Example:
  larch stat data.larch --all
  larch stat data.larch -rf
";

const FLAGS: &[Flag] = &[
    Flag {
        long: "all",
        short: Some('a'),
        value: false,
    },
    Flag {
        long: "readers",
        short: Some('r'),
        value: false,
    },
    Flag {
        long: "freelist",
        short: Some('f'),
        value: false,
    },
];

pub fn run(argv: &[String]) -> Result<i32, Failure> {
    let args = Args::parse(argv, FLAGS)?;
    if args.help {
        print!("{HELP}");
        return Ok(exit::OK);
    }
    let pos = args.positionals(&["DB"])?;
    let path = Path::new(pos[0]);
    let db = open_read_only(path)?;
    let s = db.stats().map_err(|e| Failure::engine(path, e))?;
    let mut out = String::new();
    use std::fmt::Write;
    let _ = writeln!(out, "Status of {}", path.display());
    let _ = writeln!(out, "  Page size: {}", s.page_bytes);
    let _ = writeln!(out, "  Last transaction ID: {}", s.txn);
    let _ = writeln!(out, "  Tree depth: {}", s.depth);
    let _ = writeln!(out, "  Branch pages: {}", s.branch_pages);
    let _ = writeln!(out, "  Leaf pages: {}", s.leaf_pages);
    let _ = writeln!(out, "  Overflow pages: {}", s.overflow_pages);
    let _ = writeln!(out, "  Freelist pages: {}", s.freelist_pages);
    let _ = writeln!(out, "  Free pages: {}", s.free_pages);
    let _ = writeln!(out, "  Reclaimable pages (pending): {}", s.pending_pages);
    let _ = writeln!(out, "  Pages used: {}", s.page_count);
    let _ = writeln!(out, "  File size: {} bytes", s.file_bytes);
    // The handle here reads only: the log's figures are the file's own.
    match std::fs::metadata(larchdb::storage::log_path(path)) {
        Ok(m) => {
            let _ = writeln!(out, "  Log file size: {} bytes", m.len());
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let _ = writeln!(out, "  Log file size: none");
        }
        Err(e) => {
            let _ = writeln!(out, "  Log file size: unknown ({e})");
        }
    }
    let _ = writeln!(out, "  Entries: {}", s.entries);
    let _ = writeln!(out, "  Tables: {}", s.tables.len());
    let _ = writeln!(out, "  Readers (this process): {}", s.readers);
    let _ = writeln!(
        out,
        "  Readers (other processes, from the lock file): {}",
        s.other_readers
    );
    if args.has("freelist") {
        let page = u64::from(s.page_bytes);
        let _ = writeln!(out, "Freelist Status");
        let _ = writeln!(out, "  Freelist pages: {}", s.freelist_pages);
        let _ = writeln!(
            out,
            "  Free pages: {} ({} bytes, reusable now)",
            s.free_pages,
            s.free_pages * page
        );
        let _ = writeln!(
            out,
            "  Pending pages: {} ({} bytes, reusable once no reader or durable commit reaches them)",
            s.pending_pages,
            s.pending_pages * page
        );
        let used = s.page_count.saturating_sub(s.free_pages + s.pending_pages);
        let _ = writeln!(out, "  Pages in use: {used} of {}", s.page_count);
        match s.oldest_reader {
            Some(txn) => {
                let _ = writeln!(
                    out,
                    "  Oldest reader: commit {txn} ({} commits behind, up to {} pages pinned)",
                    s.txn.saturating_sub(txn),
                    s.oldest_reader_pages
                );
            }
            None => {
                let _ = writeln!(out, "  Oldest reader: none");
            }
        }
    }
    if args.has("readers") {
        let _ = writeln!(out, "Reader Table Status");
        let _ = writeln!(out, "    pid     txn  readers  handle");
        for r in &s.reader_list {
            let handle = if r.this_handle { "this" } else { "other" };
            let _ = writeln!(out, "{:>7} {:>7} {:>8}  {handle}", r.pid, r.txn, r.count);
        }
        if s.reader_list.is_empty() {
            let _ = writeln!(out, "  (no active readers)");
        }
    }
    if args.has("all") {
        for t in &s.tables {
            let _ = writeln!(out, "Status of table {}", t.name);
            let _ = writeln!(out, "  Tree depth: {}", t.depth);
            let _ = writeln!(out, "  Branch pages: {}", t.branch_pages);
            let _ = writeln!(out, "  Leaf pages: {}", t.leaf_pages);
            let _ = writeln!(out, "  Overflow pages: {}", t.overflow_pages);
            let _ = writeln!(out, "  Entries: {}", t.entries);
        }
    }
    print!("{out}");
    Ok(exit::OK)
}
