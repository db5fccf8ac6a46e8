//! Damage is never silent (docs/design/durability.md, "Damage is never silent"): an open that
//! cannot prove it loses no acknowledged commit fails with `Error::WouldLoseData`, and one
//! opened with `Options::recover` opens the newest intact state instead. This module holds
//! what such an open reports (`Recovery`) and what it keeps aside before it changes anything
//! (`Aside`).

use crate::error::{Error, Result};
use crate::limits::PAGE_BYTES_MAX;
use std::path::{Path, PathBuf};

/// What an open with [`crate::Options::recover`] gave up to open a damaged database
/// ([`crate::Database::recovery`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovery {
    /// The commit the database opened at (the newest intact state, its log replayed).
    pub opened_txn: u64,
    /// Each piece of damage found, and what opening past it gave up.
    pub given_up: Vec<GivenUp>,
    /// The folder holding what the open copied before it changed anything: `meta-pages` (the
    /// data file's first two pages of the largest page size, both meta slots among them) and
    /// `log` (the write-ahead log as it was), beside the database as
    /// `<db>-recovered-<seconds since 1970>`. `None` for a database that is not a file
    /// ([`crate::Database::open_storage_with_log`]).
    pub kept: Option<PathBuf>,
}

/// One piece of damage an open with [`crate::Options::recover`] got past.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GivenUp {
    /// What was damaged.
    pub damage: String,
    /// What was given up for it.
    pub lost: String,
}

impl std::fmt::Display for Recovery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "opened at commit {}", self.opened_txn)?;
        for g in &self.given_up {
            writeln!(f, "damage: {}", g.damage)?;
            writeln!(f, "  gave up: {}", g.lost)?;
        }
        match &self.kept {
            Some(dir) => write!(f, "copies kept in {}", dir.display()),
            None => write!(f, "no copies kept (the database is not a file)"),
        }
    }
}

/// The copies an open with `Options::recover` takes before it changes anything: the data
/// file's meta pages and the whole log, in a folder beside the database. Removed again if
/// the open gives nothing up.
pub(crate) struct Aside {
    pub(crate) dir: PathBuf,
}

impl Aside {
    /// Copies the meta pages of the database at `db` and its log at `log` (where they exist)
    /// into a new folder beside it.
    pub(crate) fn take(db: &Path, log: &Path) -> Result<Aside> {
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let mut name = db.file_name().unwrap_or_default().to_os_string();
        name.push(format!("-recovered-{secs}"));
        let mut dir = db.with_file_name(&name);
        let mut n = 1;
        while dir.exists() {
            let mut again = name.clone();
            again.push(format!("-{n}"));
            dir = db.with_file_name(again);
            n += 1;
        }
        std::fs::create_dir(&dir).map_err(|e| Error::io_at("create", &dir, e))?;
        let aside = Aside { dir };
        if let Ok(file) = std::fs::File::open(db) {
            use std::io::Read;
            let mut head = Vec::new();
            file.take(2 * PAGE_BYTES_MAX as u64)
                .read_to_end(&mut head)
                .map_err(|e| Error::io_at("read", db, e))?;
            let to = aside.dir.join("meta-pages");
            std::fs::write(&to, &head).map_err(|e| Error::io_at("write", &to, e))?;
        }
        if log.exists() {
            let to = aside.dir.join("log");
            std::fs::copy(log, &to).map_err(|e| Error::io_at("write", &to, e))?;
        }
        crate::storage::sync_dir(&aside.dir)?;
        // The folder holding it: `.` for a path with no folder of its own.
        let parent = match aside.dir.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        crate::storage::sync_dir(parent)?;
        Ok(aside)
    }

    /// The copies were not needed: removed.
    pub(crate) fn discard(self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
