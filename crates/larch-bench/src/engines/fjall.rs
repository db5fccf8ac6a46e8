//! fjall 3 (a log-structured merge tree in Rust, linked in).
//!
//! Configuration, after fjall's README and docs: one database with one keyspace, a block cache
//! of --cache_size (`DatabaseBuilder::cache_size`), fjall's defaults otherwise (64 MiB memtable,
//! leveled compaction, bloom filters, its background workers, the 512 MiB journal bound). Block
//! and journal compression are off, as for RocksDB and LevelDB here: the seeds run db_bench
//! with `--compression_type=none`. One `WriteBatch` per batch; without --sync it is written to
//! the OS's buffers (fjall's default, "this matches RocksDB's default durability"), with
//! --sync=1 it commits with `PersistMode::SyncAll` (fsync of the journal, the mode of the
//! README's example). Reads go to the keyspace, which always sees the latest write.

use super::{kv, visit_up_to, Engine, EngineSpec, Op, OpenOptions, Opened, Session, WriteOpts};
use crate::error::{Error, Result};
use fjall::config::CompressionPolicy;
use fjall::{CompressionType, Database, Keyspace, KeyspaceCreateOptions, PersistMode};

const NAME: &str = "fjall";
/// The fjall version this adapter is built against (Cargo.toml).
const VERSION: &str = "3.1";

pub fn spec() -> EngineSpec {
    EngineSpec {
        name: NAME,
        install_hint: "none: fjall is a Rust dependency of larch-bench",
        probe: || Ok(VERSION.into()),
        open,
    }
}

fn e(op: &'static str, err: impl std::fmt::Display) -> Error {
    Error::engine(NAME, op, err.to_string())
}

struct Fjall {
    db: Database,
    keyspace: Keyspace,
}

fn open(o: &OpenOptions) -> Result<Opened> {
    let db = Database::builder(&o.dir)
        .cache_size(o.cache_bytes)
        .journal_compression(CompressionType::None)
        .open()
        .map_err(|x| e("open", x))?;
    let keyspace = db
        .keyspace("bench", || {
            KeyspaceCreateOptions::default()
                .data_block_compression_policy(CompressionPolicy::all(CompressionType::None))
        })
        .map_err(|x| e("keyspace", x))?;
    Ok(Opened {
        engine: Box::new(Fjall { db, keyspace }),
        version: VERSION.into(),
        config: vec![
            kv("cache_bytes", o.cache_bytes),
            kv("compression", "none (blocks and journal)"),
            kv(
                "durability",
                if o.sync {
                    "WriteBatch with PersistMode::SyncAll"
                } else {
                    "WriteBatch to OS buffers (fjall's default)"
                },
            ),
            kv(
                "otherwise",
                "fjall defaults: 64 MiB memtable, leveled compaction, bloom filters, \
                 512 MiB journal bound",
            ),
        ],
    })
}

impl Engine for Fjall {
    fn session(&self) -> Result<Box<dyn Session + '_>> {
        Ok(Box::new(FjallSession { db: self }))
    }
}

struct FjallSession<'a> {
    db: &'a Fjall,
}

impl Session for FjallSession<'_> {
    fn get(&mut self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        match self.db.keyspace.get(key).map_err(|x| e("get", x))? {
            Some(v) => {
                out.clear();
                out.extend_from_slice(&v);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn write(&mut self, ops: &[Op<'_>], opts: WriteOpts) -> Result<()> {
        let mut batch = self
            .db
            .db
            .batch()
            .durability(opts.sync.then_some(PersistMode::SyncAll));
        for op in ops {
            match *op {
                Op::Put(k, v) => batch.insert(&self.db.keyspace, k, v),
                Op::Delete(k) => batch.remove(&self.db.keyspace, k),
            }
        }
        batch.commit().map_err(|x| e("commit", x))
    }

    fn scan(
        &mut self,
        start: Option<&[u8]>,
        reverse: bool,
        limit: u64,
        f: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<u64> {
        let ks = &self.db.keyspace;
        let iter: Box<dyn Iterator<Item = fjall::Guard>> = match (start, reverse) {
            (Some(s), false) => Box::new(ks.range(s..)),
            (Some(s), true) => Box::new(ks.range(..=s).rev()),
            (None, false) => Box::new(ks.iter()),
            (None, true) => Box::new(ks.iter().rev()),
        };
        visit_up_to(iter.map(fjall::Guard::into_inner), limit, f, |x| {
            e("iter", x)
        })
    }
}
