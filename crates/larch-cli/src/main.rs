//! `larch`: the administration tool for Larch databases, in the spirit of LMDB's mdb_stat,
//! mdb_dump, mdb_load and mdb_copy. The dump format is LMDB's and BerkeleyDB's VERSION=3
//! text format, so data moves between Larch and LMDB with `larch dump | mdb_load` and
//! `mdb_dump | larch load`. See
//! [docs/design/cli.md](https://github.com/larch-db/larch/blob/main/docs/design/cli.md) in the
//! repository.

mod cli;
mod cmd;
mod format;

use cli::{exit, Failure};

const USAGE: &str = "\
larch: administer Larch databases

Usage: larch <COMMAND> [OPTIONS] ...

Commands:
  stat   DB [--all] [--readers] [--freelist]         page, tree and space statistics
  check  DB                                          full verification; exit 1 on problems
  dump   DB [--table T | --all] [--print] [--bdb] [--file F]
                                                     write the mdb_dump VERSION=3 format
  load   DB [--table T] [--file F] [--plaintext] [--no-overwrite]
                                                     read that format into a database
  copy   SRC DST|- [--compact]                       copy one consistent snapshot
  compact DB                                         give free space back to the file system
  recover DB                                         open a damaged database at its newest
                                                     intact state, saying what it gave up

Run `larch <COMMAND> --help` for details and an example.
Exit status: 0 ok, 1 problems or damage found, 2 usage, 3 malformed input, 4 missing or not a
Larch database, 5 locked, 6 disk full, 7 other failure.
";

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let code = match run(&argv) {
        Ok(code) => code,
        Err(f) => {
            eprintln!("larch: {}", f.message);
            if f.code == exit::USAGE {
                eprintln!("Run `larch --help` for usage.");
            }
            f.code
        }
    };
    std::process::exit(code);
}

fn run(argv: &[String]) -> Result<i32, Failure> {
    let Some(command) = argv.first() else {
        eprint!("{USAGE}");
        return Ok(exit::USAGE);
    };
    let rest = &argv[1..];
    match command.as_str() {
        "--help" | "-h" | "help" => {
            print!("{USAGE}");
            Ok(exit::OK)
        }
        "--version" | "-V" => {
            println!("larch {}", env!("CARGO_PKG_VERSION"));
            Ok(exit::OK)
        }
        "stat" => cmd::stat::run(rest),
        "check" => cmd::check::run(rest),
        "dump" => cmd::dump::run(rest),
        "load" => cmd::load::run(rest),
        "copy" => cmd::copy::run(rest),
        "compact" => cmd::compact::run(rest),
        "recover" => cmd::recover::run(rest),
        other => Err(Failure::usage(format!("unknown command {other:?}"))),
    }
}
