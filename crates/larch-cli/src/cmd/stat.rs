//! `larch stat DB [--all]`: like mdb_stat, from `Database::stats`.

use crate::cli::{exit, open_read_only, Args, Failure, Flag};
use std::path::Path;

const HELP: &str = "\
Usage: larch stat DB [--all]

Prints the page size, tree depth, pages by type, entries, free and reclaimable pages, file
size and active readers of the newest snapshot (other processes' read-only handles with a read
in progress, from the lock file's reader table). Opens the database read-only, beside a writer
if one is running.

Options:
  -a, --all   also print the figures of every table

Example:
  larch stat data.larch --all
";

const FLAGS: &[Flag] = &[Flag {
    long: "all",
    short: Some('a'),
    value: false,
}];

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
    let _ = writeln!(out, "  Entries: {}", s.entries);
    let _ = writeln!(out, "  Tables: {}", s.tables.len());
    let _ = writeln!(out, "  Readers (this process): {}", s.readers);
    let _ = writeln!(
        out,
        "  Readers (other processes, from the lock file): {}",
        s.other_readers
    );
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
