//! Larch (crates/larchdb), linked in.
//!
//! Configuration, as the engine's documentation recommends: one file `data.larch` with the
//! default page size; one table `bench`; one write transaction per batch committed with
//! `Durability::Immediate` under --sync=1 and `Durability::None` otherwise (the engine then makes
//! a commit durable by itself at its default bound on unsynced work); `WriteTable::append`
//! for sequential fills (as LMDB's MDB_APPEND); one read transaction per session, renewed to the
//! newest snapshot before each read (`ReadTxn::renew`, as LMDB's reset/renew), so that each read
//! sees the latest commit. Larch sizes its frames from the memory it may use, so --cache_size does
//! not apply. Puts are `WriteTable::set`, which like the peers' puts does not report whether
//! the key was there (with the log, it then skips the tree lookup `put` makes to say so).
//!
//! `larch` commits through the write-ahead log beside the file (`Options::log`, the
//! default): a commit appends to the log, the tree is written at checkpoints; the data file's
//! pages are in frames of the engine's own while the file fits in the frames' share of memory
//! (`Options::frames_bytes`, the default: half of what the process may use beyond 64 MiB, its
//! --memory_limit or the machine's memory), or in --frames_bytes where set.
//! `larch-pages` is the same with `Options::log(false)`: every commit writes its pages (stage 1's
//! write path). `larch-mapped` is `larch` with frames off (`Options::frames_bytes(0)`): the
//! file read through its mapping of the OS page cache. `larch-log` and `larch-frames`, names
//! from while the log and the frames were opt-in, are aliases of `larch`.

use super::{kv, Engine, EngineSpec, Op, OpenOptions, Opened, Session, WriteOpts};
use crate::error::{Error, Result};
use larchdb::{Database, Durability, Options};

const TABLE: &str = "bench";
const VERSION: &str = "0.1.0 (crates/larchdb)";

pub fn spec() -> EngineSpec {
    EngineSpec {
        name: "larch",
        install_hint: "none: larchdb is built from this workspace",
        probe: || Ok(VERSION.into()),
        open: |o| open_with(o, true, frames_asked(o)),
    }
}

/// Larch with frames off (`Options::frames_bytes(0)`): the data file read through its mapping.
pub fn spec_mapped() -> EngineSpec {
    EngineSpec {
        name: "larch-mapped",
        install_hint: "none: larchdb is built from this workspace",
        probe: || Ok(VERSION.into()),
        open: |o| open_with(o, true, 0),
    }
}

/// The frames asked for: --frames_bytes where set, else the engine's default.
fn frames_asked(o: &OpenOptions) -> u64 {
    match o.frames_bytes {
        0 => larchdb::FRAMES_AUTO,
        n => n,
    }
}

/// Larch with every commit writing its pages (`Options::log(false)`).
pub fn spec_pages() -> EngineSpec {
    EngineSpec {
        name: "larch-pages",
        install_hint: "none: larchdb is built from this workspace",
        probe: || Ok(VERSION.into()),
        open: |o| open_with(o, false, frames_asked(o)),
    }
}

fn e(op: &'static str, err: larchdb::Error) -> Error {
    Error::engine("larch", op, err.to_string())
}

struct Larch {
    db: Database,
}

fn open_with(o: &OpenOptions, log: bool, frames_bytes: u64) -> Result<Opened> {
    let options = Options::default()
        .durability(if o.sync {
            Durability::Immediate
        } else {
            Durability::None
        })
        .log(log)
        .background_nice(o.background_nice)
        .checkpoint_slices(o.checkpoint_slices)
        .log_room_bytes(o.log_room_bytes)
        .memory_budget(o.memory_budget)
        .frames_bytes(frames_bytes);
    let options = match o.checkpoint_bytes {
        0 => options,
        bytes => options.checkpoint_bytes(bytes),
    };
    let log_config = if log {
        format!(
            "on (the default): up to {} segments of {} MiB (the ring four checkpoints, six at \
             the smallest by slices, or a third of the data file if more where checkpoints \
             merge the whole overlay), a checkpoint every {} MiB of log (by slices, of the \
             overlays' memory, at least twice that) or a 32nd of the data file if more, and \
             once the writer is idle for {} ms (0: never){}",
            options.log_segments,
            options.log_segment_bytes >> 20,
            options.checkpoint_bytes >> 20,
            options.idle_checkpoint_millis,
            match options.log_room_bytes {
                0 => String::new(),
                n => format!(
                    "; a room of {} MiB at least (--log_room_bytes), checkpoints made durable \
                     only when it runs short",
                    n >> 20
                ),
            }
        )
    } else {
        "off (Options::log(false): every commit writes pages)".to_string()
    };
    let slices = match options.checkpoint_slices {
        0 => format!(
            "0 (the default): the overlays cut into key ranges, one per {} pages of the data \
             file up to {} (a smaller file: one, each checkpoint merging the whole overlay), \
             each gathering its records, and each checkpoint merges the fullest one's, made \
             durable",
            larchdb::CHECKPOINT_SLICE_PAGES,
            larchdb::CHECKPOINT_SLICES_MAX
        ),
        1 => "1 (--checkpoint_slices): each checkpoint merges the whole overlay".to_string(),
        n => format!(
            "{n} (--checkpoint_slices): the overlays cut into {n} key ranges, each checkpoint \
             merging the fullest one's"
        ),
    };
    let budget = match options.memory_budget {
        0 => "0 (the default: a quarter of the memory the process may use beyond 64 MiB, at \
              least an eighth of it, and half while the writes are alone beyond memory; that \
              memory: its cgroup's limit or the machine's)"
            .to_string(),
        n => format!("{} MiB (--memory_budget)", n >> 20),
    };
    let page_bytes = options.page_bytes;
    let background_nice = options.background_nice;
    let readahead = options.readahead;
    let frames_bytes = options.frames_bytes;
    let db = Database::open(o.dir.join("data.larch"), options).map_err(|x| e("open", x))?;
    let mut w = db.begin_write().map_err(|x| e("begin_write", x))?;
    w.ensure_table(TABLE).map_err(|x| e("ensure_table", x))?;
    w.commit_with(Durability::Immediate)
        .map_err(|x| e("commit", x))?;
    Ok(Opened {
        engine: Box::new(Larch { db }),
        version: VERSION.into(),
        config: vec![
            kv(
                "durability",
                if o.sync {
                    "Immediate".to_string()
                } else {
                    "None (the engine forces a durable commit at its default bound)".to_string()
                },
            ),
            kv("page_bytes", page_bytes),
            kv("log", log_config),
            kv("checkpoint_slices", slices),
            kv("memory_budget", budget),
            kv("sequential_fill", "WriteTable::append"),
            kv("put", "WriteTable::set (no existence answer)"),
            kv(
                "reads",
                "one read txn per session, renewed to the newest snapshot per op",
            ),
            kv(
                "cache",
                match frames_bytes {
                    0 => "OS page cache through a mapping (Options::frames_bytes(0): no engine \
                          cache)"
                        .to_string(),
                    n => format!(
                        "frames (Options::frames_bytes, {}): the data file's pages in memory of \
                         the engine's own, in huge pages (put there ahead of the writer as \
                         the file grows, moved there once it stops), \
                         the page cache's copy let go, while the file fits (the engine takes \
                         at most half the memory the process may use beyond 64 MiB), written \
                         to the file with O_DIRECT on an io_uring ring where a sync follows \
                         (pwrite otherwise, or where the file system has no direct I/O); the \
                         OS page cache through a mapping beyond",
                        match n {
                            larchdb::FRAMES_AUTO => "the default".to_string(),
                            n => format!("{} MiB at most, --frames_bytes", n >> 20),
                        }
                    ),
                },
            ),
            kv(
                "background_nice",
                if background_nice == 0 {
                    "0 (the default: checkpoints and the log's grower at the benchmark's priority)"
                        .to_string()
                } else {
                    format!(
                        "{background_nice} (checkpoints and the log's grower that many nice \
                         steps below the benchmark's threads, --background_nice)"
                    )
                },
            ),
            kv(
                "beside_readers",
                format!(
                    "write admission (fixed): a checkpoint that starts while read transactions \
                     are open runs {} nice steps below the benchmark's threads ({} where there \
                     are fewer readers than cores, other processes are quiet and the thread \
                     may raise itself back, as it does where starved), and while \
                     more threads can run than there are cores the writer sleeps for the CPU \
                     time it takes: the two share one thread's part",
                    larchdb::CHECKPOINT_NICE_BESIDE_READERS,
                    larchdb::CHECKPOINT_NICE_WRITERS_CORE
                ),
            ),
            kv(
                "readahead",
                match readahead {
                    Some(true) => "on (MADV_NORMAL)",
                    Some(false) => "off (MADV_RANDOM)",
                    None => {
                        "by size (the default): on (MADV_NORMAL) while the file's mapping fits \
                         in half the memory the process may use, off (MADV_RANDOM) beyond"
                    }
                },
            ),
        ],
    })
}

impl Engine for Larch {
    fn session(&self) -> Result<Box<dyn Session + '_>> {
        Ok(Box::new(LarchSession {
            db: &self.db,
            reader: None,
        }))
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let c = self.db.commit_stats();
        vec![
            ("logged_commits", c.logged_commits),
            ("packed_commits", c.packed_commits),
            ("runs_written", c.runs_written),
            ("run_write_ms", c.run_write_micros / 1000),
            ("page_commits", c.page_commits),
            ("checkpoints", c.checkpoints),
            ("checkpoint_slices", c.checkpoint_slices),
            ("durable_checkpoints", c.durable_checkpoints),
            ("log_syncs", c.log_syncs),
            ("paced_ms", c.paced_micros / 1000),
            ("share_ms", c.share_micros / 1000),
            ("log_full_waits", c.log_full_waits),
            ("log_full_wait_ms", c.log_full_wait_micros / 1000),
            ("read_ahead_pages", c.read_ahead_pages),
            ("read_ahead_requests", c.read_ahead_requests),
            ("merge_ms", c.checkpoint_merge_micros / 1000),
            ("sync_ms", c.checkpoint_sync_micros / 1000),
            ("sync_wait_ms", c.checkpoint_sync_wait_micros / 1000),
        ]
    }
}

struct LarchSession<'a> {
    db: &'a Database,
    /// The session's read transaction, moved to the newest snapshot before each read
    /// (`ReadTxn::renew`, as LMDB's reset/renew), so each read sees the latest commit.
    reader: Option<larchdb::ReadTxn>,
}

impl LarchSession<'_> {
    fn reader(&mut self) -> Result<&larchdb::ReadTxn> {
        match &mut self.reader {
            Some(r) => r.renew(),
            None => self.reader = Some(self.db.begin_read().map_err(|x| e("begin_read", x))?),
        }
        Ok(self.reader.as_ref().expect("set above"))
    }
}

impl Session for LarchSession<'_> {
    fn get(&mut self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        let r = self.reader()?;
        let t = r.table(TABLE).map_err(|x| e("table", x))?;
        match t.get(key).map_err(|x| e("get", x))? {
            Some(v) => {
                out.clear();
                out.extend_from_slice(v);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn write(&mut self, ops: &[Op<'_>], opts: WriteOpts) -> Result<()> {
        let mut w = self.db.begin_write().map_err(|x| e("begin_write", x))?;
        {
            let mut t = w.table(TABLE).map_err(|x| e("table", x))?;
            for op in ops {
                match *op {
                    Op::Put(k, v) if opts.append => t.append(k, v).map_err(|x| e("append", x))?,
                    Op::Put(k, v) => t.set(k, v).map_err(|x| e("set", x))?,
                    Op::Delete(k) => {
                        t.delete(k).map_err(|x| e("delete", x))?;
                    }
                }
            }
        }
        let durability = if opts.sync {
            Durability::Immediate
        } else {
            Durability::None
        };
        w.commit_with(durability).map_err(|x| e("commit", x))
    }

    fn scan(
        &mut self,
        start: Option<&[u8]>,
        reverse: bool,
        limit: u64,
        f: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<u64> {
        if limit == 0 {
            return Ok(0);
        }
        let r = self.reader()?;
        let t = r.table(TABLE).map_err(|x| e("table", x))?;
        let iter = match (start, reverse) {
            (Some(s), false) => t.range(s..),
            (Some(s), true) => t.range_rev(..=s),
            (None, false) => t.iter(),
            (None, true) => t.iter_rev(),
        };
        let mut n = 0;
        for item in iter {
            let (k, v) = item.map_err(|x| e("range", x))?;
            f(k, v);
            n += 1;
            if n >= limit {
                break;
            }
        }
        Ok(n)
    }
}
