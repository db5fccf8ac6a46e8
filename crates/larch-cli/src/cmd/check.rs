//! `larch check DB`: full verification through `Database::verify_all`.

use crate::cli::{exit, open_read_only, Args, Failure};
use std::path::Path;

const HELP: &str = "\
Usage: larch check DB

Verifies the whole file: every reachable or free page is read and checksummed, every tree is
checked for order, depth and counts, and every page is accounted for exactly once. Opens the
database read-only.

Exit status 0 when clean (one summary line); 1 with one line per problem:
  page N: REASON
or, when the database cannot be opened without losing acknowledged commits (a damaged meta
page, a data file cut short or missing beside its log, a log cut short), 1 with the damage
and what opening past it would lose on stderr (`larch recover DB` opens past it).

Example:
  larch check data.larch || echo damaged
";

pub fn run(argv: &[String]) -> Result<i32, Failure> {
    let args = Args::parse(argv, &[])?;
    if args.help {
        print!("{HELP}");
        return Ok(exit::OK);
    }
    let pos = args.positionals(&["DB"])?;
    let path = Path::new(pos[0]);
    let db = open_read_only(path)?;
    let report = db.verify_all().map_err(|e| Failure::engine(path, e))?;
    if report.problems.is_empty() {
        println!(
            "ok: txn {}, {} pages checked of {}, {} tables, {} entries, {} free and {} pending pages",
            report.txn,
            report.pages_checked,
            report.page_count,
            report.tables,
            report.entries,
            report.free_pages,
            report.pending_pages
        );
        return Ok(exit::OK);
    }
    let mut out = String::new();
    for p in &report.problems {
        // One line per problem, whatever the reason text holds.
        let reason = p.reason.replace('\n', " ");
        out.push_str(&format!("page {}: {}\n", p.page, reason));
    }
    print!("{out}");
    Ok(exit::PROBLEMS)
}
