//! canopydb 0.2 (a copy-on-write B+tree in Rust whose commits append to a write-ahead log and
//! whose pages are written at checkpoints: the design closest to Larch's logged path; linked
//! in).
//!
//! Configuration, after canopydb's README and options docs: one environment with one database
//! and one tree, its page cache of --cache_size (`EnvOptions::page_cache_size`), the WAL on,
//! checkpoints and their bounds at canopydb's defaults. Without --sync a commit is written to
//! the WAL and synced by canopydb's background thread (`wal_background_sync_interval`, 1 s by
//! default: "application crashes do not cause data loss, only device crashes"), the mode of
//! canopydb's own benchmarks ("async commit"); with --sync=1 every commit is
//! `commit_with(true)`. One write transaction per batch (`begin_write`: writers take turns, as
//! in LMDB); reads use a fresh read transaction per operation so that every read sees the
//! latest commit.

use super::{kv, visit_up_to, Engine, EngineSpec, Op, OpenOptions, Opened, Session, WriteOpts};
use crate::error::{Error, Result};
use canopydb::{Database, DbOptions, EnvOptions};

const NAME: &str = "canopydb";
/// The canopydb version this adapter is built against (Cargo.toml).
const VERSION: &str = "0.2.5";
const TREE: &[u8] = b"bench";

pub fn spec() -> EngineSpec {
    EngineSpec {
        name: NAME,
        install_hint: "none: canopydb is a Rust dependency of larch-bench",
        probe: || Ok(VERSION.into()),
        open,
    }
}

fn e(op: &'static str, err: impl std::fmt::Display) -> Error {
    Error::engine(NAME, op, err.to_string())
}

struct Canopy {
    db: Database,
}

fn open(o: &OpenOptions) -> Result<Opened> {
    let mut env = EnvOptions::new(&o.dir);
    env.page_cache_size = o.cache_bytes as usize;
    let opts = DbOptions::default();
    let wal = opts.use_wal;
    let checkpoint_target = opts.checkpoint_target_size;
    let checkpoint_interval = opts.checkpoint_interval;
    let db = Database::with_options(env, opts).map_err(|x| e("open", x))?;
    // Create the tree so that readers before the first write find it.
    let tx = db.begin_write().map_err(|x| e("begin_write", x))?;
    drop(
        tx.get_or_create_tree(TREE)
            .map_err(|x| e("create_tree", x))?,
    );
    tx.commit().map_err(|x| e("commit", x))?;
    Ok(Opened {
        engine: Box::new(Canopy { db }),
        version: VERSION.into(),
        config: vec![
            kv("page_cache_bytes", o.cache_bytes),
            kv("wal", wal),
            kv(
                "commit",
                if o.sync {
                    "commit_with(sync=true)"
                } else {
                    "WAL synced by the background thread every 1 s (canopydb's default)"
                },
            ),
            kv(
                "checkpoints",
                format!(
                    "every {} MiB of changes or {} s (canopydb's defaults)",
                    checkpoint_target >> 20,
                    checkpoint_interval.as_secs()
                ),
            ),
            kv("writers", "begin_write (one at a time)"),
            kv("reads", "one read txn per op"),
        ],
    })
}

impl Engine for Canopy {
    fn session(&self) -> Result<Box<dyn Session + '_>> {
        Ok(Box::new(CanopySession { db: self }))
    }
}

struct CanopySession<'a> {
    db: &'a Canopy,
}

impl Session for CanopySession<'_> {
    fn get(&mut self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        let rx = self.db.db.begin_read().map_err(|x| e("begin_read", x))?;
        let tree = rx
            .get_tree(TREE)
            .map_err(|x| e("get_tree", x))?
            .ok_or_else(|| e("get_tree", "the tree is missing"))?;
        match tree.get(key).map_err(|x| e("get", x))? {
            Some(v) => {
                out.clear();
                out.extend_from_slice(&v);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn write(&mut self, ops: &[Op<'_>], opts: WriteOpts) -> Result<()> {
        let tx = self.db.db.begin_write().map_err(|x| e("begin_write", x))?;
        {
            let mut tree = tx.get_or_create_tree(TREE).map_err(|x| e("get_tree", x))?;
            for op in ops {
                match *op {
                    Op::Put(k, v) => tree.insert(k, v).map_err(|x| e("insert", x))?,
                    Op::Delete(k) => {
                        tree.delete(k).map_err(|x| e("delete", x))?;
                    }
                }
            }
        }
        tx.commit_with(opts.sync).map_err(|x| e("commit", x))?;
        Ok(())
    }

    fn scan(
        &mut self,
        start: Option<&[u8]>,
        reverse: bool,
        limit: u64,
        f: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<u64> {
        let rx = self.db.db.begin_read().map_err(|x| e("begin_read", x))?;
        let tree = rx
            .get_tree(TREE)
            .map_err(|x| e("get_tree", x))?
            .ok_or_else(|| e("get_tree", "the tree is missing"))?;
        let range = match start {
            Some(s) if reverse => tree.range(..=s),
            Some(s) => tree.range(s..),
            None => tree.range::<&[u8]>(..),
        }
        .map_err(|x| e("range", x))?;
        let iter: Box<dyn Iterator<Item = _>> = if reverse {
            Box::new(range.rev())
        } else {
            Box::new(range)
        };
        visit_up_to(iter, limit, f, |x| e("range", x))
    }
}
