//! `Database::copy_to`: a hot, consistent copy of one snapshot into a new file.
//!
//! The copy reads through one read transaction, so it holds exactly one commit, while the
//! writer goes on (in this process or another); it writes every table into a new database
//! with sequential appends, which leave pages full: the copy is also compacted (no log, and
//! no free space but the few pages its own batches' commits freed). It is written under a temporary name beside the destination, in
//! unsynced batches, then synced once and renamed, and the directory synced, so the
//! destination never holds a partial copy.

use crate::db::Database;
use crate::error::{Error, Result};
use crate::options::{Durability, Options};
use std::path::{Path, PathBuf};

/// Entries per write transaction of the copy: bounds the pages one commit holds; only the
/// last commit is synced.
const BATCH_ENTRIES: u64 = 50_000;

/// What [`Database::copy_to`] copied.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Copied {
    /// The commit the copy holds.
    pub txn: u64,
    /// Tables copied.
    pub tables: u64,
    /// Entries copied, in all tables.
    pub entries: u64,
    /// Length of the new file.
    pub bytes: u64,
}

impl Database {
    /// Copies the newest snapshot into a new database file at `path`, compacted (leaves
    /// full, no log, no free space but the few pages the copy's own batches freed), with each
    /// table's properties. A hot backup: it runs beside
    /// the writer, which goes on committing; the copy holds exactly the commit that was
    /// newest when it began. `path` must not exist (an `Error::Io` with op `"create"` if it
    /// does); the copy is written under a temporary name beside it and renamed once synced,
    /// so `path` never holds a partial copy, and nothing is left behind on failure.
    ///
    /// ```
    /// use larchdb::{Database, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Database::open(dir.path().join("live.larch"), Options::default())?;
    /// db.put(b"k", b"v")?;
    /// let copied = db.copy_to(dir.path().join("backup.larch"))?;
    /// assert_eq!(copied.entries, 1);
    /// let backup = Database::open(dir.path().join("backup.larch"), Options::default())?;
    /// assert_eq!(backup.get(b"k")?, Some(b"v".to_vec()));
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn copy_to(&self, path: impl AsRef<Path>) -> Result<Copied> {
        self.copy_to_with_progress(path, |_| {})
    }

    /// [`Database::copy_to`], calling `progress` with the number of entries copied so far
    /// after every batch of 50,000 and at the end.
    ///
    /// ```
    /// # use larchdb::{Database, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = Database::open(dir.path().join("live.larch"), Options::default())?;
    /// # db.put(b"k", b"v")?;
    /// let mut seen = Vec::new();
    /// db.copy_to_with_progress(dir.path().join("backup.larch"), |n| seen.push(n))?;
    /// assert_eq!(seen.last(), Some(&1));
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn copy_to_with_progress(
        &self,
        path: impl AsRef<Path>,
        mut progress: impl FnMut(u64),
    ) -> Result<Copied> {
        let path = path.as_ref();
        if path.symlink_metadata().is_ok() {
            return Err(Error::io_at(
                "create",
                path,
                std::io::Error::from(std::io::ErrorKind::AlreadyExists),
            ));
        }
        let tmp = temp_name(path);
        let r = self.copy_into(&tmp, &mut progress);
        // The temporary database's lock file is not needed beside the copy: whoever opens
        // it creates its own.
        let _ = std::fs::remove_file(crate::storage::lock_path(&tmp));
        let copied = match r {
            Ok(c) => c,
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                return Err(e);
            }
        };
        if let Err(e) = std::fs::rename(&tmp, path) {
            let _ = std::fs::remove_file(&tmp);
            return Err(Error::io_at("rename", path, e));
        }
        // The rename made durable: the directory that holds the copy, synced.
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        std::fs::File::open(parent)
            .and_then(|d| d.sync_all())
            .map_err(|e| Error::io_at("sync", parent, e))?;
        Ok(copied)
    }

    fn copy_into(&self, tmp: &Path, progress: &mut impl FnMut(u64)) -> Result<Copied> {
        let snap = self.begin_read()?;
        let dst = Database::open(
            tmp,
            // Pages only: the copy is one file, renamed into place, with no log beside it.
            Options::default()
                .page_bytes(self.page_bytes())
                .durability(Durability::None)
                .log(false),
        )?;
        let mut copied = Copied {
            txn: snap.id(),
            ..Copied::default()
        };
        for name in snap.list_tables()? {
            let mut entries = snap.table(&name)?.iter();
            let mut w = dst.begin_write()?;
            w.create_table(&name)?;
            w.set_table_properties(&name, snap.table_properties(&name)?)?;
            loop {
                let mut n = 0;
                let mut t = w.table(&name)?;
                for entry in entries.by_ref() {
                    let (k, v) = entry?;
                    t.append(k, v)?;
                    n += 1;
                    if n == BATCH_ENTRIES {
                        break;
                    }
                }
                w.commit()?;
                copied.entries += n;
                if n < BATCH_ENTRIES {
                    break;
                }
                progress(copied.entries);
                w = dst.begin_write()?;
            }
            copied.tables += 1;
        }
        dst.sync()?;
        drop(dst);
        copied.bytes = std::fs::metadata(tmp)
            .map_err(|e| Error::io_at("stat", tmp, e))?
            .len();
        progress(copied.entries);
        Ok(copied)
    }
}

/// `<path>.larch-copy-<pid>.tmp` beside `path`.
fn temp_name(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".larch-copy-{}.tmp", std::process::id()));
    path.with_file_name(name)
}
