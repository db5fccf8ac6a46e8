//! `larch compact DB`: gives the free space at the end of the file back to the file system,
//! through `larchdb::Database::compact`.

use crate::cli::{check_exists, exit, Args, Failure};
use larchdb::{Database, Options};
use std::path::Path;

const HELP: &str = "\
Usage: larch compact DB

Compacts DB in place: moves the pages near the end of the file into free space below, then
truncates the file (and cuts the log file, if DB has one) to what is in use. Needs the write
lock: fails with status 5 while another process writes DB. Readers in other processes may go
on reading; pages their snapshots reach are not moved. Prints the sizes before and after.

Example:
  larch compact data.larch
";

pub fn run(argv: &[String]) -> Result<i32, Failure> {
    let args = Args::parse(argv, &[])?;
    if args.help {
        print!("{HELP}");
        return Ok(exit::OK);
    }
    let pos = args.positionals(&["DB"])?;
    let path = &check_exists(Path::new(pos[0]))?;
    // With the log only where the database has one (a compaction has nothing to log, and
    // opening a database without one with the log would start one). The close compacts
    // again, finding nothing left to do, and marks a log that holds nothing as not needed,
    // so that the data file is the whole database.
    let has_log = larchdb::storage::log_path(path).exists();
    let options = Options::default().create(false).log(has_log);
    let db = Database::open(path, options).map_err(|e| Failure::engine(path, e))?;
    let c = db.compact().map_err(|e| Failure::engine(path, e))?;
    println!(
        "data file: {} -> {} bytes",
        c.data_bytes_before, c.data_bytes_after
    );
    if c.log_bytes_before > 0 || c.log_bytes_after > 0 {
        println!(
            "log file: {} -> {} bytes",
            c.log_bytes_before, c.log_bytes_after
        );
    }
    Ok(exit::OK)
}
