//! What every command shares: a small argument parser, the error type with its exit status,
//! and opening a database with clear messages.

use larchdb::{Database, Error, Options};
use std::path::{Path, PathBuf};

/// Exit statuses, documented in docs/design/cli.md. Why distinct codes: scripts can tell
/// "try again later" (locked) from "fix the input" from "the database is damaged".
pub mod exit {
    /// Success.
    pub const OK: i32 = 0;
    /// `check` found problems (one line per problem on stdout), or the database is damaged
    /// in a way that would lose acknowledged commits (`larch recover` opens past it).
    pub const PROBLEMS: i32 = 1;
    /// Bad command line.
    pub const USAGE: i32 = 2;
    /// Malformed dump input; nothing of the bad section was committed.
    pub const BAD_INPUT: i32 = 3;
    /// The path is missing or is not a Larch database (or a newer format version).
    pub const NOT_A_DATABASE: i32 = 4;
    /// The database is locked by another process.
    pub const LOCKED: i32 = 5;
    /// The disk (or quota) is full.
    pub const DISK_FULL: i32 = 6;
    /// Any other failure: I/O error, corruption met while reading, engine limit.
    pub const FAILURE: i32 = 7;
}

/// A failure to report: the message for stderr and the exit status.
#[derive(Debug)]
pub struct Failure {
    /// Exit status.
    pub code: i32,
    /// Message, without the leading "larch: ".
    pub message: String,
}

impl Failure {
    /// A failure with an explicit status.
    pub fn new(code: i32, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: message.into(),
        }
    }

    /// A usage error.
    pub fn usage(message: impl Into<String>) -> Failure {
        Failure::new(exit::USAGE, message)
    }

    /// An engine error met while working on `path`, with its exit status.
    pub fn engine(path: &Path, e: Error) -> Failure {
        let p = path.display();
        match e {
            Error::NotADatabase => Failure::new(
                exit::NOT_A_DATABASE,
                format!("{p}: not a Larch database (no valid meta page)"),
            ),
            Error::UnsupportedVersion { .. } => {
                Failure::new(exit::NOT_A_DATABASE, format!("{p}: {e}"))
            }
            Error::DatabaseLocked => Failure::new(
                exit::LOCKED,
                format!(
                    "{p}: database is locked by another process (a writer holds it open; \
                     close it or retry later)"
                ),
            ),
            Error::ReadersFull { .. } => Failure::new(
                exit::LOCKED,
                format!("{p}: {e}; close a reader or retry later"),
            ),
            Error::DiskFull => Failure::new(
                exit::DISK_FULL,
                format!("{p}: disk full; the transaction in progress was not committed"),
            ),
            Error::Io {
                ref source,
                ref path,
                ..
            } if source.kind() == std::io::ErrorKind::NotFound => {
                let shown = path
                    .as_deref()
                    .map_or(p.to_string(), |q| q.display().to_string());
                Failure::new(exit::NOT_A_DATABASE, format!("{shown}: no such file"))
            }
            Error::Io {
                ref source,
                ref path,
                op,
            } if source.kind() == std::io::ErrorKind::PermissionDenied => {
                let shown = path
                    .as_deref()
                    .map_or(p.to_string(), |q| q.display().to_string());
                Failure::new(exit::FAILURE, format!("{shown}: permission denied ({op})"))
            }
            Error::WouldLoseData {
                ref damage,
                ref lost,
            } => Failure::new(
                exit::PROBLEMS,
                format!(
                    "{p}: damaged: {damage}; {lost}. Nothing was changed; `larch recover {p}` \
                     opens the newest intact state and keeps a copy of what it gives up"
                ),
            ),
            other => Failure::new(exit::FAILURE, format!("{p}: {other}")),
        }
    }

    /// An I/O error on a file that is not the database (input, output).
    pub fn io(what: &str, e: std::io::Error) -> Failure {
        let code = if matches!(e.raw_os_error(), Some(28) | Some(122)) {
            exit::DISK_FULL
        } else {
            exit::FAILURE
        };
        Failure::new(code, format!("{what}: {e}"))
    }
}

/// Opens an existing database read-only (a shared lock; conflicts only with a writer).
pub fn open_read_only(path: &Path) -> Result<Database, Failure> {
    let file = check_exists(path)?;
    Database::open(&file, Options::default().read_only(true)).map_err(|e| Failure::engine(path, e))
}

/// The database file in a directory: the name the Python package gives it
/// (`larch.open(dir)` writes `dir/data.larch`).
pub const DIRECTORY_FILE: &str = "data.larch";

/// The database file `path` names: `path` itself, or `path/data.larch` when `path` is a
/// directory holding one (the Python package's layout, as LMDB's environments are
/// directories). Fails with a clear message when there is none.
pub fn check_exists(path: &Path) -> Result<PathBuf, Failure> {
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Failure::new(
            exit::NOT_A_DATABASE,
            format!("{}: no such file", path.display()),
        )),
        Err(e) => Err(Failure::io(&path.display().to_string(), e)),
        Ok(m) if m.is_dir() => {
            let file = path.join(DIRECTORY_FILE);
            if file.is_file() {
                return Ok(file);
            }
            Err(Failure::new(
                exit::NOT_A_DATABASE,
                format!(
                    "{}: is a directory without {DIRECTORY_FILE} (a Larch database is one \
                     file, or a directory holding {DIRECTORY_FILE} as the Python package \
                     makes it)",
                    path.display()
                ),
            ))
        }
        Ok(_) => Ok(path.to_path_buf()),
    }
}

/// Parsed command line of one command: positionals and flags.
#[derive(Debug, Default)]
pub struct Args {
    positionals: Vec<String>,
    flags: Vec<(String, Option<String>)>,
    /// Whether `--help` or `-h` was given.
    pub help: bool,
}

/// Declares one flag a command accepts: long name, optional short name, takes a value.
pub struct Flag {
    /// Long name without dashes.
    pub long: &'static str,
    /// Short name without the dash, as in mdb_dump (`-a`, `-s`, `-p`, `-f`, `-T`, `-n`).
    pub short: Option<char>,
    /// Whether it takes a value (`--table T` or `--table=T`).
    pub value: bool,
}

impl Args {
    /// Parses `argv` (after the command name) against the flags a command declares.
    pub fn parse(argv: &[String], flags: &[Flag]) -> Result<Args, Failure> {
        let mut args = Args::default();
        let mut i = 0;
        let mut only_positionals = false;
        while i < argv.len() {
            let a = &argv[i];
            i += 1;
            if only_positionals || a == "-" || !a.starts_with('-') {
                args.positionals.push(a.clone());
                continue;
            }
            if a == "--" {
                only_positionals = true;
                continue;
            }
            if a == "--help" || a == "-h" {
                args.help = true;
                continue;
            }
            // Short flags together (`-rf`, as getopt reads them): each letter a flag; one
            // that takes a value takes the rest of the word, or the next argument.
            if !a.starts_with("--") && a.chars().count() > 2 {
                let letters: Vec<char> = a[1..].chars().collect();
                for (at, c) in letters.iter().enumerate() {
                    let flag = flags
                        .iter()
                        .find(|f| f.short == Some(*c))
                        .ok_or_else(|| Failure::usage(format!("unknown option -{c} (in {a})")))?;
                    if !flag.value {
                        args.flags.push((flag.long.to_string(), None));
                        continue;
                    }
                    let rest: String = letters[at + 1..].iter().collect();
                    let value = if rest.is_empty() {
                        let v = argv
                            .get(i)
                            .ok_or_else(|| Failure::usage(format!("-{c} needs a value")))?;
                        i += 1;
                        v.clone()
                    } else {
                        rest
                    };
                    args.flags.push((flag.long.to_string(), Some(value)));
                    break;
                }
                continue;
            }
            let (name, inline) = match a.strip_prefix("--") {
                Some(rest) => match rest.split_once('=') {
                    Some((n, v)) => (n.to_string(), Some(v.to_string())),
                    None => (rest.to_string(), None),
                },
                None => (a[1..].to_string(), None),
            };
            let flag = flags
                .iter()
                .find(|f| {
                    if a.starts_with("--") {
                        f.long == name
                    } else {
                        name.len() == 1 && f.short == name.chars().next()
                    }
                })
                .ok_or_else(|| Failure::usage(format!("unknown option {a}")))?;
            let value = if flag.value {
                match inline {
                    Some(v) => Some(v),
                    None => {
                        let v = argv
                            .get(i)
                            .ok_or_else(|| Failure::usage(format!("{a} needs a value")))?;
                        i += 1;
                        Some(v.clone())
                    }
                }
            } else {
                if inline.is_some() {
                    return Err(Failure::usage(format!("--{name} takes no value")));
                }
                None
            };
            args.flags.push((flag.long.to_string(), value));
        }
        Ok(args)
    }

    /// Whether a flag without a value was given.
    pub fn has(&self, long: &str) -> bool {
        self.flags.iter().any(|(n, _)| n == long)
    }

    /// The value of a flag (the last one if repeated).
    pub fn value(&self, long: &str) -> Option<&str> {
        self.flags
            .iter()
            .rev()
            .find(|(n, _)| n == long)
            .and_then(|(_, v)| v.as_deref())
    }

    /// Exactly `names.len()` positionals, or a usage error naming the missing ones.
    pub fn positionals(&self, names: &[&str]) -> Result<Vec<&str>, Failure> {
        if self.positionals.len() < names.len() {
            return Err(Failure::usage(format!(
                "missing {}",
                names[self.positionals.len()..].join(" ")
            )));
        }
        if self.positionals.len() > names.len() {
            return Err(Failure::usage(format!(
                "unexpected argument {}",
                self.positionals[names.len()]
            )));
        }
        Ok(self.positionals.iter().map(|s| s.as_str()).collect())
    }
}

/// Progress on stderr, only when stderr is a terminal, at most every `step` items.
pub struct Progress {
    enabled: bool,
    verb: &'static str,
    count: u64,
}

impl Progress {
    const STEP: u64 = 100_000;

    /// A progress counter for `verb` ("loaded", "copied").
    pub fn new(verb: &'static str) -> Progress {
        use std::io::IsTerminal;
        Progress {
            enabled: std::io::stderr().is_terminal(),
            verb,
            count: 0,
        }
    }

    /// Counts one item.
    pub fn tick(&mut self) {
        self.count += 1;
        if self.enabled && self.count.is_multiple_of(Self::STEP) {
            eprint!("\r{} {} entries", self.verb, self.count);
        }
    }

    /// Sets the count to `count` items (a library call that reports its own progress).
    pub fn set(&mut self, count: u64) {
        if self.enabled && count / Self::STEP > self.count / Self::STEP {
            eprint!("\r{} {} entries", self.verb, count);
        }
        self.count = count;
    }

    /// Ends the progress line.
    pub fn finish(&self) {
        if self.enabled && self.count >= Self::STEP {
            eprintln!("\r{} {} entries", self.verb, self.count);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FLAGS: &[Flag] = &[
        Flag {
            long: "table",
            short: Some('s'),
            value: true,
        },
        Flag {
            long: "print",
            short: Some('p'),
            value: false,
        },
    ];

    fn argv(s: &[&str]) -> Vec<String> {
        s.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn parses_long_short_and_inline_values() {
        let a = Args::parse(&argv(&["db", "--table=x", "-p"]), FLAGS).unwrap();
        assert_eq!(a.value("table"), Some("x"));
        assert!(a.has("print"));
        assert_eq!(a.positionals(&["DB"]).unwrap(), vec!["db"]);
        let a = Args::parse(&argv(&["-s", "y", "db"]), FLAGS).unwrap();
        assert_eq!(a.value("table"), Some("y"));
        assert!(Args::parse(&argv(&["--nope"]), FLAGS).is_err());
        assert!(Args::parse(&argv(&["--table"]), FLAGS).is_err());
        assert!(Args::parse(&argv(&["--print=1"]), FLAGS).is_err());
        let a = Args::parse(&argv(&[]), FLAGS).unwrap();
        assert_eq!(a.positionals(&["DB"]).unwrap_err().code, exit::USAGE);
    }
}
