//! `larch load DB [--table T] [--file F] [--plaintext] [--no-overwrite]`.
//!
//! Promise: each section is loaded in one write transaction, committed only when the whole
//! section parsed and every put succeeded. A malformed section exits non-zero naming the line,
//! and nothing of it is committed; earlier sections stay committed (their count is reported).
//! mdb_load 0.9.24, by contrast, exits 0 after some malformed inputs and keeps a partial load.

use crate::cli::{exit, Args, Failure, Flag, Progress, DIRECTORY_FILE};
use crate::format::{header_properties, Encoding, Header, LineReader, ParseError};
use larchdb::{Database, Options, WriteTable};
use std::io::{self, BufRead};
use std::path::Path;

const HELP: &str = "\
Usage: larch load DB [--table T] [--file F] [--plaintext] [--no-overwrite]

Reads the VERSION=3 text format of mdb_dump, db_dump and `larch dump` (bytevalue or print)
into DB, creating the file if needed (with the dump's db_pagesize when it is a valid Larch
page size). Each section goes to the table named by its database= line, created if missing;
a section without one (a dump of LMDB's unnamed main database) to the default table
(\"default\"), which `larch dump` writes back without a database= line.
One write transaction per section: a malformed section exits with status 3 naming the line
and commits nothing of that section.

Options:
  -s, --table T      load every section into table T (needed for --plaintext)
  -f, --file F       read F instead of standard input
  -T, --plaintext    input is pairs of lines, key then value, print-encoded, no header and
                     no leading space (mdb_load -T)
  -n, --no-overwrite keep the existing value when a key is already present

Example:
  mdb_dump -a lmdb-env/ | larch load data.larch
  larch load data.larch --table users --file users.dump
";

const FLAGS: &[Flag] = &[
    Flag {
        long: "table",
        short: Some('s'),
        value: true,
    },
    Flag {
        long: "file",
        short: Some('f'),
        value: true,
    },
    Flag {
        long: "plaintext",
        short: Some('T'),
        value: false,
    },
    Flag {
        long: "no-overwrite",
        short: Some('n'),
        value: false,
    },
];

struct Loader<'a> {
    path: &'a Path,
    input_name: String,
    db: Option<Database>,
    no_overwrite: bool,
    sections_committed: u64,
    progress: Progress,
}

/// Why a section failed.
enum SectionError {
    Parse(ParseError),
    Engine { line: u64, failure: Failure },
}

impl From<ParseError> for SectionError {
    fn from(e: ParseError) -> Self {
        SectionError::Parse(e)
    }
}

pub fn run(argv: &[String]) -> Result<i32, Failure> {
    let args = Args::parse(argv, FLAGS)?;
    if args.help {
        print!("{HELP}");
        return Ok(exit::OK);
    }
    let pos = args.positionals(&["DB"])?;
    // A directory is the Python package's layout: its `data.larch`, created if missing (as
    // mdb_load writes into an environment's directory).
    let in_dir = Path::new(pos[0]).join(DIRECTORY_FILE);
    let path = if Path::new(pos[0]).is_dir() {
        in_dir.as_path()
    } else {
        Path::new(pos[0])
    };
    let (input, input_name): (Box<dyn BufRead>, String) = match args.value("file") {
        Some(f) if f != "-" => (
            Box::new(io::BufReader::with_capacity(
                1 << 16,
                std::fs::File::open(f).map_err(|e| Failure::io(f, e))?,
            )),
            f.to_string(),
        ),
        _ => (Box::new(io::stdin().lock()), "standard input".to_string()),
    };
    let mut reader = LineReader::new(input);
    let mut loader = Loader {
        path,
        input_name,
        db: None,
        no_overwrite: args.has("no-overwrite"),
        sections_committed: 0,
        progress: Progress::new("loaded"),
    };
    let table_flag = args.value("table");
    let r = if args.has("plaintext") {
        let Some(table) = table_flag else {
            return Err(Failure::usage("--plaintext needs --table T"));
        };
        loader.open(None)?;
        loader.section(&mut reader, table, None)
    } else {
        loader.sections(&mut reader, table_flag)
    };
    loader.progress.finish();
    match r {
        Ok(()) => Ok(exit::OK),
        Err(f) => Err(f),
    }
}

impl Loader<'_> {
    fn open(&mut self, header: Option<&Header>) -> Result<&Database, Failure> {
        if self.db.is_none() {
            let mut options = Options::default();
            if let Some(p) = header.and_then(|h| h.page_bytes) {
                if p.is_power_of_two()
                    && (larchdb::limits::PAGE_BYTES_MIN..=larchdb::limits::PAGE_BYTES_MAX)
                        .contains(&p)
                {
                    options = options.page_bytes(p);
                }
            }
            let db =
                Database::open(self.path, options).map_err(|e| Failure::engine(self.path, e))?;
            self.db = Some(db);
        }
        Ok(self.db.as_ref().expect("opened above"))
    }

    fn sections<R: BufRead>(
        &mut self,
        reader: &mut LineReader<R>,
        table_flag: Option<&str>,
    ) -> Result<(), Failure> {
        loop {
            let header = match reader.read_header() {
                Ok(Some(h)) => h,
                Ok(None) => {
                    if self.db.is_none() {
                        return Err(Failure::new(
                            exit::BAD_INPUT,
                            format!("{}: empty input, no section to load", self.input_name),
                        ));
                    }
                    return Ok(());
                }
                Err(e) => return Err(self.bad_input(e, None)),
            };
            for (line, text) in &header.ignored {
                eprintln!(
                    "larch: {}:{line}: unrecognized header line (kept for larch dump): {text}",
                    self.input_name
                );
            }
            let table = match (table_flag, header.database.as_deref()) {
                (Some(t), _) => t.to_string(),
                (None, Some(d)) => d.to_string(),
                // A dump of LMDB's unnamed main database: the default table.
                (None, None) => larchdb::DEFAULT_TABLE.to_string(),
            };
            self.open(Some(&header))?;
            self.section(reader, &table, Some(&header))?;
        }
    }

    /// Loads one section (`header` None: plaintext, to the end of input) into `table`.
    /// The header lines Larch does not interpret become the table's kept header lines
    /// (replacing earlier ones), so that `larch dump` writes them back.
    fn section<R: BufRead>(
        &mut self,
        reader: &mut LineReader<R>,
        table: &str,
        header: Option<&Header>,
    ) -> Result<(), Failure> {
        let enc = header.map(|h| h.encoding);
        let db = self.db.as_ref().expect("opened before a section");
        let path = self.path;
        let mut txn = db.begin_write().map_err(|e| Failure::engine(path, e))?;
        txn.ensure_table(table)
            .map_err(|e| Failure::engine(path, e))?;
        if let Some(h) = header {
            let props = header_properties(&h.foreign).unwrap_or_else(|| {
                eprintln!(
                    "larch: {}: the section's unused header lines are too long to keep; \
                     larch dump will not write them",
                    self.input_name
                );
                Vec::new()
            });
            txn.set_table_properties(table, &props)
                .map_err(|e| Failure::engine(path, e))?;
        }
        let result = {
            let mut t = txn.table(table).map_err(|e| Failure::engine(path, e))?;
            fill(
                reader,
                &mut t,
                enc,
                self.no_overwrite,
                &mut self.progress,
                path,
            )
        };
        match result {
            Ok(()) => {
                txn.commit().map_err(|e| Failure::engine(path, e))?;
                self.sections_committed += 1;
                Ok(())
            }
            Err(SectionError::Parse(e)) => {
                drop(txn);
                Err(self.bad_input(e, Some(table)))
            }
            Err(SectionError::Engine { line, failure }) => {
                drop(txn);
                Err(Failure::new(
                    failure.code,
                    format!(
                        "{}:{line}: {}; nothing of the section for table {table:?} was \
                         committed ({} earlier sections were)",
                        self.input_name, failure.message, self.sections_committed
                    ),
                ))
            }
        }
    }

    fn bad_input(&self, e: ParseError, table: Option<&str>) -> Failure {
        let what = match table {
            Some(t) => format!("nothing of the section for table {t:?} was committed"),
            None => "nothing of this section was committed".to_string(),
        };
        Failure::new(
            exit::BAD_INPUT,
            format!(
                "{}:{}: {}; {what} ({} earlier sections were)",
                self.input_name, e.line, e.message, self.sections_committed
            ),
        )
    }
}

/// Reads key/value pairs up to `DATA=END` (or the end of plaintext input) into `t`.
fn fill<R: BufRead>(
    reader: &mut LineReader<R>,
    t: &mut WriteTable<'_>,
    enc: Option<Encoding>,
    no_overwrite: bool,
    progress: &mut Progress,
    path: &Path,
) -> Result<(), SectionError> {
    let mut key = Vec::new();
    let mut value = Vec::new();
    loop {
        let more = match enc {
            Some(e) => reader.read_item(e, &mut key)?,
            None => reader.read_plain_item(&mut key)?,
        };
        if !more {
            return Ok(());
        }
        let key_line = reader.line();
        let more = match enc {
            Some(e) => reader.read_item(e, &mut value)?,
            None => reader.read_plain_item(&mut value)?,
        };
        if !more {
            return Err(SectionError::Parse(ParseError {
                line: key_line,
                message: "key without a value".into(),
            }));
        }
        let engine = |e| SectionError::Engine {
            line: key_line,
            failure: Failure::engine(path, e),
        };
        if no_overwrite && t.get(&key).map_err(engine)?.is_some() {
            progress.tick();
            continue;
        }
        t.put(&key, &value).map_err(engine)?;
        progress.tick();
    }
}
