//! `larch recover DB`: opens a database that an ordinary open refuses because the damage in it
//! would lose acknowledged commits, at its newest intact state, through
//! `larchdb::Options::recover`.

use crate::cli::{exit, Args, Failure, DIRECTORY_FILE};
use larchdb::{Database, Options};
use std::path::Path;

const HELP: &str = "\
Usage: larch recover DB

For a database that other commands refuse to open because it is damaged in a way that would
lose acknowledged commits (a damaged meta page, a data file cut short or missing beside its
log, a log cut short; `larch check` exits 1 and names the damage): opens its newest intact
state, makes that state durable, and prints what it gave up. Before it changes anything it
copies both meta pages and the log into a folder beside the database,
DB-recovered-<seconds since 1970>, which it names. On a database with no such damage it
changes nothing and says so. Needs the write lock (status 5 while another process writes DB).

Example:
  larch check data.larch || larch recover data.larch
";

pub fn run(argv: &[String]) -> Result<i32, Failure> {
    let args = Args::parse(argv, &[])?;
    if args.help {
        print!("{HELP}");
        return Ok(exit::OK);
    }
    let pos = args.positionals(&["DB"])?;
    // A directory holding `data.larch` (or its log): the Python package's layout.
    let in_dir = Path::new(pos[0]).join(DIRECTORY_FILE);
    let path = if Path::new(pos[0]).is_dir()
        && (in_dir.exists() || larchdb::storage::log_path(&in_dir).exists())
    {
        in_dir.as_path()
    } else {
        Path::new(pos[0])
    };
    let log = larchdb::storage::log_path(path);
    if !path.exists() && !log.exists() {
        return Err(Failure::new(
            exit::NOT_A_DATABASE,
            format!("{}: no such file, and no log beside it", path.display()),
        ));
    }
    if path.is_dir() {
        return Err(Failure::new(
            exit::NOT_A_DATABASE,
            format!("{}: is a directory", path.display()),
        ));
    }
    // With the log only where the database has one, as `compact` (opening a database without
    // one with the log would start one).
    let options = Options::default().log(log.exists()).recover(true);
    let db = Database::open(path, options).map_err(|e| Failure::engine(path, e))?;
    match db.recovery() {
        None => println!(
            "{}: no damage that loses commits; nothing changed",
            path.display()
        ),
        Some(r) => println!("{r}"),
    }
    Ok(exit::OK)
}
