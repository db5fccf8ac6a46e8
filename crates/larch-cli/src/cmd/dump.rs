//! `larch dump DB [--table T | --all] [--print] [--file F]`: the mdb_dump VERSION=3 format.

use crate::cli::{exit, open_read_only, Args, Failure, Flag};
use crate::format::{encode, header_lines_from_properties, write_header, Encoding};
use std::io::{self, Write};
use std::path::Path;

const HELP: &str = "\
Usage: larch dump DB [--table T | --all] [--print] [--file F]

Writes tables in the VERSION=3 text format of mdb_dump and db_dump, one section per table,
from one consistent snapshot. Opens the database read-only.

Larch has no unnamed main database, so every section carries database=NAME:
  --table T is mdb_dump -s T; --all (the default) is mdb_dump -a.

Options:
  -s, --table T   dump only table T
  -a, --all       dump every table, sorted by name (the default)
  -p, --print     format=print: printable ASCII as is, other bytes (and backslash) as \\hh
                  (default format=bytevalue: two lowercase hex digits per byte)
  -f, --file F    write to F instead of standard output

Example:
  larch dump data.larch --table users > users.dump
  larch dump data.larch --all | mdb_load -f /dev/stdin lmdb-env/
";

const FLAGS: &[Flag] = &[
    Flag {
        long: "table",
        short: Some('s'),
        value: true,
    },
    Flag {
        long: "all",
        short: Some('a'),
        value: false,
    },
    Flag {
        long: "print",
        short: Some('p'),
        value: false,
    },
    Flag {
        long: "file",
        short: Some('f'),
        value: true,
    },
];

pub fn run(argv: &[String]) -> Result<i32, Failure> {
    let args = Args::parse(argv, FLAGS)?;
    if args.help {
        print!("{HELP}");
        return Ok(exit::OK);
    }
    let pos = args.positionals(&["DB"])?;
    if args.has("all") && args.value("table").is_some() {
        return Err(Failure::usage("--table and --all exclude each other"));
    }
    let path = Path::new(pos[0]);
    let enc = if args.has("print") {
        Encoding::Print
    } else {
        Encoding::ByteValue
    };
    let db = open_read_only(path)?;
    let txn = db.begin_read().map_err(|e| Failure::engine(path, e))?;
    let tables = match args.value("table") {
        Some(t) => vec![t.to_string()],
        None => txn.list_tables().map_err(|e| Failure::engine(path, e))?,
    };
    for name in &tables {
        if name.contains('\n') {
            return Err(Failure::new(
                exit::FAILURE,
                format!(
                    "table name {name:?} contains a newline, which the dump format cannot carry"
                ),
            ));
        }
    }
    let (mut out, out_name): (Box<dyn Write>, String) = match args.value("file") {
        Some(f) => (
            Box::new(std::fs::File::create(f).map_err(|e| Failure::io(f, e))?),
            f.to_string(),
        ),
        None => (Box::new(io::stdout().lock()), "standard output".to_string()),
    };
    let mut out = io::BufWriter::with_capacity(1 << 16, &mut out);
    let r = (|| -> Result<(), Failure> {
        let mut line = Vec::with_capacity(1 << 12);
        for name in &tables {
            let table = txn.table(name).map_err(|e| Failure::engine(path, e))?;
            let props = txn
                .table_properties(name)
                .map_err(|e| Failure::engine(path, e))?;
            let foreign = header_lines_from_properties(props);
            write_header(&mut out, enc, Some(name), db.page_bytes(), &foreign)
                .map_err(|e| Failure::io(&out_name, e))?;
            for entry in table.iter() {
                let (k, v) = entry.map_err(|e| Failure::engine(path, e))?;
                line.clear();
                line.push(b' ');
                encode(enc, k, &mut line);
                line.extend_from_slice(b"\n ");
                encode(enc, v, &mut line);
                line.push(b'\n');
                out.write_all(&line)
                    .map_err(|e| Failure::io(&out_name, e))?;
            }
            out.write_all(b"DATA=END\n")
                .map_err(|e| Failure::io(&out_name, e))?;
        }
        out.flush().map_err(|e| Failure::io(&out_name, e))
    })();
    match r {
        // A reader that went away (`larch dump | head`) is not an error of ours.
        Err(f) if f.message.contains("Broken pipe") => Ok(exit::OK),
        Err(f) => Err(f),
        Ok(()) => Ok(exit::OK),
    }
}
