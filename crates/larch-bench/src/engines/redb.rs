//! redb 2.x (pure Rust, linked in).
//!
//! Configuration, after redb's README and benches: one table of `&[u8] -> &[u8]`, a page cache
//! of --cache_size (Builder::set_cache_size), one write transaction per batch committed with
//! Durability::Immediate when --sync=1. Without --sync, commits use Durability::None and every
//! DURABLE_EVERY-th commit is Durability::Immediate: redb frees pages only at durable commits
//! ("exclusively using [None] will result in rapid growth of the database file"), and on Linux
//! its Eventual level is an fsync too, so this is the closest match to LMDB's MDB_NOSYNC and
//! RocksDB's sync=false. Reads use a fresh read transaction per operation so that every read
//! sees the latest commit.

use super::{kv, Engine, EngineSpec, Op, OpenOptions, Opened, Session, WriteOpts};
use crate::error::{Error, Result};
use redb::{Database, Durability, ReadableTable, TableDefinition};

const TABLE: TableDefinition<&[u8], &[u8]> = TableDefinition::new("bench");
/// The redb version this adapter is built against (Cargo.toml).
const VERSION: &str = "2.6";
/// Without --sync, one commit in this many is durable (see the module comment).
pub const DURABLE_EVERY: u64 = 1024;

pub fn spec() -> EngineSpec {
    EngineSpec {
        name: "redb",
        install_hint: "none: redb is a Rust dependency of larch-bench",
        probe: || Ok(VERSION.into()),
        open,
    }
}

fn e(op: &'static str, err: impl std::fmt::Display) -> Error {
    Error::engine("redb", op, err.to_string())
}

/// One item of a redb range iterator over `&[u8] -> &[u8]`.
type RangeItem<'a> = std::result::Result<
    (
        redb::AccessGuard<'a, &'static [u8]>,
        redb::AccessGuard<'a, &'static [u8]>,
    ),
    redb::StorageError,
>;

struct Redb {
    db: Database,
    commits: std::sync::atomic::AtomicU64,
}

fn open(o: &OpenOptions) -> Result<Opened> {
    let path = o.dir.join("data.redb");
    let db = Database::builder()
        .set_cache_size(o.cache_bytes as usize)
        .create(&path)
        .map_err(|x| e("create", x))?;
    // Create the table so that readers before the first write find it.
    let tx = db.begin_write().map_err(|x| e("begin_write", x))?;
    tx.open_table(TABLE).map_err(|x| e("open_table", x))?;
    tx.commit().map_err(|x| e("commit", x))?;
    Ok(Opened {
        engine: Box::new(Redb {
            db,
            commits: std::sync::atomic::AtomicU64::new(0),
        }),
        version: VERSION.into(),
        config: vec![
            kv("cache_bytes", o.cache_bytes),
            kv(
                "durability",
                if o.sync {
                    "Immediate".to_string()
                } else {
                    format!("None, Immediate every {DURABLE_EVERY} commits")
                },
            ),
            kv("table", "&[u8] -> &[u8]"),
            kv("reads", "one read txn per op"),
        ],
    })
}

impl Engine for Redb {
    fn session(&self) -> Result<Box<dyn Session + '_>> {
        Ok(Box::new(RedbSession { db: self }))
    }
}

struct RedbSession<'a> {
    db: &'a Redb,
}

impl Session for RedbSession<'_> {
    fn get(&mut self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        let tx = self.db.db.begin_read().map_err(|x| e("begin_read", x))?;
        let t = tx.open_table(TABLE).map_err(|x| e("open_table", x))?;
        match t.get(key).map_err(|x| e("get", x))? {
            Some(v) => {
                out.clear();
                out.extend_from_slice(v.value());
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn write(&mut self, ops: &[Op<'_>], opts: WriteOpts) -> Result<()> {
        let mut tx = self.db.db.begin_write().map_err(|x| e("begin_write", x))?;
        let n = self
            .db
            .commits
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        tx.set_durability(if opts.sync || n % DURABLE_EVERY == DURABLE_EVERY - 1 {
            Durability::Immediate
        } else {
            Durability::None
        });
        {
            let mut t = tx.open_table(TABLE).map_err(|x| e("open_table", x))?;
            for op in ops {
                match *op {
                    Op::Put(k, v) => {
                        t.insert(k, v).map_err(|x| e("insert", x))?;
                    }
                    Op::Delete(k) => {
                        t.remove(k).map_err(|x| e("remove", x))?;
                    }
                }
            }
        }
        tx.commit().map_err(|x| e("commit", x))
    }

    fn scan(
        &mut self,
        start: Option<&[u8]>,
        reverse: bool,
        limit: u64,
        f: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<u64> {
        let tx = self.db.db.begin_read().map_err(|x| e("begin_read", x))?;
        let t = tx.open_table(TABLE).map_err(|x| e("open_table", x))?;
        let mut n = 0;
        let mut visit = |item: RangeItem<'_>| -> Result<bool> {
            let (k, v) = item.map_err(|x| e("range", x))?;
            f(k.value(), v.value());
            n += 1;
            Ok(n < limit)
        };
        if limit == 0 {
            return Ok(0);
        }
        match (start, reverse) {
            (Some(s), false) => {
                for item in t.range(s..).map_err(|x| e("range", x))? {
                    if !visit(item)? {
                        break;
                    }
                }
            }
            (Some(s), true) => {
                for item in t.range(..=s).map_err(|x| e("range", x))?.rev() {
                    if !visit(item)? {
                        break;
                    }
                }
            }
            (None, false) => {
                for item in t.iter().map_err(|x| e("iter", x))? {
                    if !visit(item)? {
                        break;
                    }
                }
            }
            (None, true) => {
                for item in t.iter().map_err(|x| e("iter", x))?.rev() {
                    if !visit(item)? {
                        break;
                    }
                }
            }
        }
        Ok(n)
    }
}
