//! `larch copy SRC DST [--compact]`: a copy of one consistent snapshot of SRC.
//!
//! The copy reads SRC through one read transaction, so it sees exactly one commit, and writes
//! every table into a new database with sequential appends (which leave pages full). The
//! engine has no page-level copy API yet, so the plain copy is dense too: both modes write a
//! compacted file with no free pages. The new file is written under a temporary name beside
//! DST, synced, then renamed, so DST never holds a partial copy.
//!
//! Hot copy: SRC is opened read-only, which registers in the lock file's shared reader table,
//! so the copy runs while a writer in another process keeps committing; the snapshot it reads
//! stays intact until it is done (docs/design/concurrency.md).

use crate::cli::{exit, open_read_only, Args, Failure, Flag, Progress};
use larchdb::{Database, Durability, Options};
use std::path::{Path, PathBuf};

const HELP: &str = "\
Usage: larch copy SRC DST [--compact]

Copies one consistent snapshot of SRC into the new file DST (which must not exist), also while
another process is writing to SRC (a hot backup). The copy is written under a temporary name,
synced, then renamed to DST.

Options:
  -c, --compact   write the trees densely with no free pages. Both modes currently do this:
                  the copy is rebuilt table by table from the snapshot.

Example:
  larch copy data.larch backup/data-$(date +%F).larch
";

const FLAGS: &[Flag] = &[Flag {
    long: "compact",
    short: Some('c'),
    value: false,
}];

/// Entries per write transaction of the copy. Why: bounds the dirty pages one commit holds;
/// the intermediate commits are not synced, only the last one is.
const BATCH_ENTRIES: u64 = 50_000;

pub fn run(argv: &[String]) -> Result<i32, Failure> {
    let args = Args::parse(argv, FLAGS)?;
    if args.help {
        print!("{HELP}");
        return Ok(exit::OK);
    }
    let pos = args.positionals(&["SRC", "DST"])?;
    let (src_path, dst_path) = (Path::new(pos[0]), Path::new(pos[1]));
    if dst_path.exists() {
        return Err(Failure::new(
            exit::FAILURE,
            format!(
                "{}: already exists; larch copy does not overwrite",
                dst_path.display()
            ),
        ));
    }
    let src = open_read_only(src_path)?;
    let tmp = temp_name(dst_path);
    let r = copy_into(&src, src_path, &tmp);
    // The temporary database's lock file (closed with it in `copy_into`) is not needed beside
    // DST: whoever opens DST creates its own.
    let _ = std::fs::remove_file(larchdb::storage::lock_path(&tmp));
    match r {
        Ok(()) => {
            std::fs::rename(&tmp, dst_path).map_err(|e| {
                let _ = std::fs::remove_file(&tmp);
                Failure::io(&dst_path.display().to_string(), e)
            })?;
            // Make the rename itself durable: sync the directory that holds DST.
            let parent = match dst_path.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
            if let Ok(dir) = std::fs::File::open(parent) {
                let _ = dir.sync_all();
            }
            Ok(exit::OK)
        }
        Err(f) => {
            let _ = std::fs::remove_file(&tmp);
            Err(f)
        }
    }
}

fn temp_name(dst: &Path) -> PathBuf {
    let mut name = dst.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".larch-copy-{}.tmp", std::process::id()));
    dst.with_file_name(name)
}

fn copy_into(src: &Database, src_path: &Path, tmp: &Path) -> Result<(), Failure> {
    let snap = src.begin_read().map_err(|e| Failure::engine(src_path, e))?;
    let dst = Database::open(
        tmp,
        Options::default()
            .page_bytes(src.page_bytes())
            .durability(Durability::None),
    )
    .map_err(|e| Failure::engine(tmp, e))?;
    let derr = |e| Failure::engine(tmp, e);
    let mut progress = Progress::new("copied");
    for name in snap
        .list_tables()
        .map_err(|e| Failure::engine(src_path, e))?
    {
        let table = snap
            .table(&name)
            .map_err(|e| Failure::engine(src_path, e))?;
        let mut entries = table.iter();
        let props = snap
            .table_properties(&name)
            .map_err(|e| Failure::engine(src_path, e))?;
        let mut w = dst.begin_write().map_err(derr)?;
        w.create_table(&name).map_err(derr)?;
        w.set_table_properties(&name, props).map_err(derr)?;
        loop {
            let mut n = 0;
            {
                let mut t = w.table(&name).map_err(derr)?;
                for entry in entries.by_ref() {
                    let (k, v) = entry.map_err(|e| Failure::engine(src_path, e))?;
                    t.append(k, v).map_err(derr)?;
                    progress.tick();
                    n += 1;
                    if n == BATCH_ENTRIES {
                        break;
                    }
                }
            }
            w.commit().map_err(derr)?;
            if n < BATCH_ENTRIES {
                break;
            }
            w = dst.begin_write().map_err(derr)?;
        }
    }
    progress.finish();
    dst.sync().map_err(derr)?;
    Ok(())
}
