//! `larch copy SRC DST [--compact]`: a copy of one consistent snapshot of SRC, through
//! `larchdb::Database::copy_to` (one read transaction, so exactly one commit; every table
//! rebuilt with sequential appends into a file written under a temporary name, synced, then
//! renamed). `DST` may be `-`: the copy is built in the temporary directory and written to
//! standard output (mdb_copy's `-` for a pipe to another host or a compressor).
//!
//! Hot copy: SRC is opened read-only, which registers in the lock file's shared reader table,
//! so the copy runs while a writer in another process keeps committing; the snapshot it reads
//! stays intact until it is done (docs/design/concurrency.md).

use crate::cli::{exit, open_read_only, Args, Failure, Flag, Progress};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

const HELP: &str = "\
Usage: larch copy SRC DST [--compact]

Copies one consistent snapshot of SRC into the new file DST (which must not exist), also while
another process is writing to SRC (a hot backup). The copy is written under a temporary name,
synced, then renamed to DST. With DST `-`, the copy is built in the temporary directory
($TMPDIR, else /tmp) and written to standard output, then removed.

Options:
  -c, --compact   write the trees densely with no free pages. Both modes do this: the copy
                  is rebuilt table by table from the snapshot.

Example:
  larch copy data.larch backup/data-$(date +%F).larch
  larch copy data.larch - | zstd > data.larch.zst
";

const FLAGS: &[Flag] = &[Flag {
    long: "compact",
    short: Some('c'),
    value: false,
}];

pub fn run(argv: &[String]) -> Result<i32, Failure> {
    let args = Args::parse(argv, FLAGS)?;
    if args.help {
        print!("{HELP}");
        return Ok(exit::OK);
    }
    let pos = args.positionals(&["SRC", "DST"])?;
    let src_path = Path::new(pos[0]);
    let to_stdout = pos[1] == "-";
    let dst_path = if to_stdout {
        std::env::temp_dir().join(format!("larch-copy-{}.larch", std::process::id()))
    } else {
        PathBuf::from(pos[1])
    };
    if dst_path.symlink_metadata().is_ok() {
        return Err(Failure::new(
            exit::FAILURE,
            format!(
                "{}: already exists; larch copy does not overwrite",
                dst_path.display()
            ),
        ));
    }
    let src = open_read_only(src_path)?;
    let mut progress = Progress::new("copied");
    let r = src.copy_to_with_progress(&dst_path, |n| progress.set(n));
    progress.finish();
    // A failure in the source (a damaged page) names the source; in the copy, the copy.
    r.map_err(|e| match e {
        larchdb::Error::Io {
            path: Some(ref p), ..
        } if p != src_path => Failure::engine(&dst_path, e),
        larchdb::Error::DiskFull => Failure::engine(&dst_path, e),
        e => Failure::engine(src_path, e),
    })?;
    if to_stdout {
        let r = stream(&dst_path);
        let _ = std::fs::remove_file(&dst_path);
        r?;
    }
    Ok(exit::OK)
}

/// Writes the file at `path` to standard output.
fn stream(path: &Path) -> Result<(), Failure> {
    let name = path.display().to_string();
    let mut file = std::fs::File::open(path).map_err(|e| Failure::io(&name, e))?;
    let mut out = io::stdout().lock();
    io::copy(&mut file, &mut out)
        .and_then(|_| out.flush())
        .map_err(|e| Failure::io("standard output", e))?;
    Ok(())
}
