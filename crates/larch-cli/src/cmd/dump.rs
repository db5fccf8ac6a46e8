//! `larch dump DB [--table T | --all] [--print] [--bdb] [--file F]`: the mdb_dump VERSION=3 format.

use crate::cli::{exit, open_read_only, Args, Failure, Flag};
use crate::format::{encode, header_lines_from_properties, write_header, Encoding};
use larchdb::{ReadTxn, DEFAULT_TABLE};
use std::io::{self, Write};
use std::path::Path;

const HELP: &str = "\
Usage: larch dump DB [--table T | --all] [--print] [--bdb] [--file F]

Writes tables in the VERSION=3 text format of mdb_dump and db_dump, one section per table,
from one consistent snapshot. Opens the database read-only.

The default table (larchdb::DEFAULT_TABLE, \"default\") is written without a database=
line, as mdb_dump writes LMDB's unnamed main database; every other table with
database=NAME. --table T is mdb_dump -s T; --all (the default) is mdb_dump -a.

Each section carries mapsize=, an LMDB map size that holds every section of the dump (the
one it was loaded with, when it came from mdb_dump and that is enough), so that mdb_load
takes the dump whatever its size. The header has mdb_dump's lines only: header lines kept
from a loaded dump that LMDB does not know (from db_dump) are left out. BerkeleyDB's db_load
refuses LMDB's environment lines: --bdb leaves those out and writes the others.

Options:
  -s, --table T   dump only table T
  -a, --all       dump every table, sorted by name (the default)
  -p, --print     format=print: printable ASCII as is, other bytes (and backslash) as \\hh
                  (default format=bytevalue: two lowercase hex digits per byte)
  -B, --bdb       for BerkeleyDB's db_load: no LMDB environment lines (mapsize=,
                  maxreaders=, mapaddr=), which it refuses
  -f, --file F    write to F instead of standard output

Example:
  larch dump data.larch --table users > users.dump
  larch dump data.larch --all | mdb_load -f /dev/stdin lmdb-env/
  larch dump data.larch --bdb | db_load data.db
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
        long: "bdb",
        short: Some('B'),
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
    let mapsize = if args.has("bdb") {
        None
    } else {
        Some(lmdb_map_bytes(&txn, &tables).map_err(|e| Failure::engine(path, e))?)
    };
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
            let kept = header_lines_from_properties(props);
            let foreign = match mapsize {
                Some(bytes) => with_mapsize(only_env_lines(kept), bytes),
                None => without_env_lines(kept),
            };
            let section = (name != DEFAULT_TABLE).then_some(name.as_str());
            write_header(&mut out, enc, section, db.page_bytes(), &foreign)
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

/// LMDB's page size, for the estimate of the map a dump needs.
const LMDB_PAGE: u64 = 4096;

/// The bytes an LMDB environment needs to hold `tables` as mdb_load builds it, with room to
/// spare: each entry as LMDB lays it out (an 8-byte node header and a 2-byte pointer beside
/// the key and value in a leaf; a value too large for half a page on overflow pages of its
/// own), twice over for leaves left half full by splits, plus branch pages, meta pages and
/// free lists; in whole MiB, at least LMDB's default of 1 MiB. A map larger than the data
/// costs LMDB nothing (the file grows with the data), one too small fails the load with
/// MDB_MAP_FULL.
fn lmdb_map_bytes(txn: &ReadTxn, tables: &[String]) -> larchdb::Result<u64> {
    let mut leaf = 0u64;
    let mut overflow = 0u64;
    for name in tables {
        for entry in txn.table(name)?.iter() {
            let (k, v) = entry?;
            let (k, v) = (k.len() as u64, v.len() as u64);
            if 8 + k + v > LMDB_PAGE / 2 {
                leaf += 8 + k + 8 + 2;
                overflow += (16 + v).div_ceil(LMDB_PAGE) * LMDB_PAGE;
            } else {
                leaf += (8 + k + v + 2).next_multiple_of(2);
            }
        }
    }
    let bytes = 2 * leaf + overflow + 64 * LMDB_PAGE;
    Ok(bytes.next_multiple_of(1 << 20).max(1 << 20))
}

/// The header lines of a section: the kept ones, with `mapsize=` raised to `mapsize` if it is
/// missing or smaller (mdb_load sizes the whole environment from the first section's).
fn with_mapsize(mut lines: Vec<String>, mapsize: u64) -> Vec<String> {
    let line = format!("mapsize={mapsize}");
    match lines.iter().position(|l| l.starts_with("mapsize=")) {
        Some(i) => {
            let kept = lines[i]["mapsize=".len()..].parse::<u64>().unwrap_or(0);
            if kept < mapsize {
                lines[i] = line;
            }
        }
        None => lines.insert(0, line),
    }
    lines
}

/// LMDB's environment lines, which BerkeleyDB's db_load refuses.
const LMDB_ENV_KEYS: &[&str] = &["mapsize=", "maxreaders=", "mapaddr="];

/// The header lines of a section without LMDB's environment lines.
fn without_env_lines(mut lines: Vec<String>) -> Vec<String> {
    lines.retain(|l| !LMDB_ENV_KEYS.iter().any(|k| l.starts_with(k)));
    lines
}

/// LMDB's environment lines alone, for a dump in mdb_dump's form: mdb_load warns "unrecognized
/// keyword ignored" about any other kept line (one kept from a db_dump, or an unknown one),
/// and mdb_dump writes none. `--bdb` writes the others.
fn only_env_lines(mut lines: Vec<String>) -> Vec<String> {
    lines.retain(|l| LMDB_ENV_KEYS.iter().any(|k| l.starts_with(k)));
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_mapsize_stays_unless_it_is_too_small() {
        let kept = vec!["mapsize=1048576".to_string(), "maxreaders=126".to_string()];
        assert_eq!(with_mapsize(kept.clone(), 1 << 20), kept);
        assert_eq!(
            with_mapsize(kept, 3 << 20),
            vec!["mapsize=3145728".to_string(), "maxreaders=126".to_string()]
        );
        assert_eq!(
            with_mapsize(vec![], 1 << 20),
            vec!["mapsize=1048576".to_string()]
        );
        assert_eq!(
            with_mapsize(vec!["mapsize=junk".to_string()], 1 << 20),
            vec!["mapsize=1048576".to_string()]
        );
        let kept = vec![
            "mapsize=1".to_string(),
            "x=y".to_string(),
            "mapaddr=0".to_string(),
        ];
        assert_eq!(without_env_lines(kept.clone()), vec!["x=y".to_string()]);
        assert_eq!(
            only_env_lines(kept),
            vec!["mapsize=1".to_string(), "mapaddr=0".to_string()]
        );
    }
}
