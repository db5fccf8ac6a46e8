//! The benchmark child process: opens one engine, runs the benchmark list for each thread
//! count, and measures each benchmark as a whole (rusage and /proc/self/io deltas, size on
//! disk), printing db_bench lines and appending one JSON line per benchmark for the parent.

use super::exec::{self, MtState, Outcome};
use super::stats::{merge, Merged};
use super::workload::{Kind, MtMode, Workload};
use super::ycsb;
use crate::engines::{self, Engine, EngineSpec, OpenOptions, Opened};
use crate::error::{Error, Result};
use crate::flags::{Flags, KeyFormat};
use crate::report::{result_line, BenchResult};
use crate::sys::{self, ProcIo, Usage};
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

/// The state of a child run.
struct Child {
    flags: Flags,
    spec: EngineSpec,
    dir: PathBuf,
    opened: Option<Opened>,
    results: std::fs::File,
    printed_config: bool,
    threads_max: usize,
    /// The durability the open engine was configured for.
    open_sync: bool,
    carried: Carried,
}

impl Child {
    /// (Re)opens the engine, emptied first when `fresh`. `sync` picks the engine-level
    /// durability configuration: the fill*sync benchmarks open it durable even under --sync=0,
    /// since several engines (LMDB's MDB_NOSYNC, WiredTiger without a log) cannot make one
    /// commit durable otherwise.
    fn open_engine(&mut self, fresh: bool, sync: bool) -> Result<()> {
        self.opened = None; // closes the previous handle first
        if fresh {
            self.carried.mt = None;
            match std::fs::remove_dir_all(&self.dir) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io(format!("remove {}", self.dir.display()), e)),
            }
        }
        std::fs::create_dir_all(&self.dir)
            .map_err(|e| Error::io(format!("create {}", self.dir.display()), e))?;
        let f = &self.flags;
        let o = OpenOptions {
            dir: self.dir.clone(),
            cache_bytes: f.cache_size,
            sync,
            num: f.num,
            key_size: f.key_size,
            value_size: f.value_size,
            threads_max: self.threads_max,
            memory_limit: f.memory_limit,
            bloom_bits: f.bloom_bits,
            background_nice: f.background_nice,
            checkpoint_slices: f.checkpoint_slices,
            checkpoint_bytes: f.checkpoint_bytes,
            log_room_bytes: f.log_room_bytes,
            memory_budget: f.memory_budget,
            frames_bytes: f.frames_bytes,
        };
        let opened = (self.spec.open)(&o)?;
        self.open_sync = sync;
        if !self.printed_config || sync != f.sync {
            println!("Engine:     {} {}", self.spec.name, opened.version);
            println!("Config:     {}", engines::describe(&opened.config));
            println!("DB path:    {}", self.dir.display());
            self.printed_config = true;
        }
        self.opened = Some(opened);
        Ok(())
    }

    /// Runs one benchmark and measures it as a whole: the threads' figures, this process's
    /// rusage and /proc/self/io over the run, the size on disk after it. Prints db_bench's
    /// lines and appends the JSON row.
    fn run_one(&mut self, w: &Workload, threads: usize) -> Result<()> {
        let f = self.flags.clone();
        if f.drop_caches && !w.fresh {
            // Closed first: the page cache keeps what a process maps (drop_caches skips mapped
            // pages), so an mmap engine kept every page its earlier runs touched, and an engine
            // with a cache of its own kept that: the next thread count started warm for some
            // engines and cold for others (the seeds ran each in a process of its own).
            self.open_engine(false, self.open_sync)?;
            sys::drop_caches()?;
        }
        let Some(opened) = self.opened.as_ref() else {
            return Err(Error::Child("engine not open".into()));
        };
        // The device's count starts after a sync, so that what earlier runs left dirty in
        // the page cache is not counted here.
        let device = sys::DeviceIo::for_dir(&self.dir);
        let dev0 = device.as_ref().and_then(|d| d.synced());
        let usage0 = Usage::of_self();
        let io0 = ProcIo::of_self();
        let counters0 = opened.engine.counters();
        let anon = sys::AnonPeak::start();
        let t0 = Instant::now();
        let out = execute(opened.engine.as_ref(), w, &f, threads, &mut self.carried)?;
        let window_s = t0.elapsed().as_secs_f64();
        // What the device wrote within the window, before the sync below makes it write what
        // the engine left dirty in the page cache.
        let dev_run = match (device.as_ref().and_then(|d| d.now()), dev0) {
            (Some(b), Some(a)) => Some(b.since(&a)),
            _ => None,
        };
        let usage = Usage::of_self().since(&usage0);
        let io = match (ProcIo::of_self(), io0) {
            (Some(b), Some(a)) => b.since(&a),
            _ => ProcIo::default(),
        };
        let anon_peak_kb = anon.finish().map(|b| b / 1024);
        // A final sync, outside the timed window: every byte the engine handed to the kernel
        // reaches the device and is counted (an engine's own unwritten buffers, such as an
        // LSM's memtable, are counted when it writes them).
        let dev = match (device.as_ref().and_then(|d| d.synced()), dev0) {
            (Some(b), Some(a)) => Some(b.since(&a)),
            _ => None,
        };
        let dev_write_bytes = dev.map(|d| d.write_bytes);
        let db_bytes = sys::du_bytes(&self.dir);
        let m = merge(&out.stats);
        let writer_m = out.writer.as_ref().map(|w| merge(std::slice::from_ref(w)));
        let r = Rates::of(&m);
        if let Some(wm) = &writer_m {
            let wr = Rates::of(wm);
            let line = result_line(
                "writer",
                wr.micros_per_op,
                wr.ops_per_sec,
                wm.wall_s,
                wm.ops,
                wr.mb_per_sec,
                &format!("(writer of {})", w.name),
            );
            println!("{line}");
        }
        let line = result_line(
            &w.name,
            r.micros_per_op,
            r.ops_per_sec,
            m.wall_s,
            m.ops,
            r.mb_per_sec,
            &out.message,
        );
        println!("{line}");
        if f.histogram {
            print!("{}", m.lat.render(histogram_kind(w.kind)));
            if let Some(wm) = &writer_m {
                print!("{}", wm.lat.render("write (writer)"));
            }
        }
        let cpu_pct = if window_s > 0.0 {
            (usage.user_s + usage.sys_s) * 100.0 / window_s
        } else {
            0.0
        };
        // The CPU the benchmark's own threads used, and what the rest of the process used
        // beside them: the engine's background threads (and the driver's memory sampler).
        let client_cpu_s = match &writer_m {
            Some(wm) => m.cpu_s.zip(wm.cpu_s).map(|(a, b)| a + b),
            None => m.cpu_s,
        };
        let bg_cpu_s = client_cpu_s.map(|c| sys::background_cpu_s(usage.user_s + usage.sys_s, c));
        let wamp = (out.user_bytes_written > 0)
            .then(|| io.write_bytes as f64 / out.user_bytes_written as f64);
        let wamp_dev = dev_write_bytes
            .filter(|_| out.user_bytes_written > 0)
            .map(|d| d as f64 / out.user_bytes_written as f64);
        println!(
            "rusage       : wall {window_s:.3} user {:.3} sys {:.3} cpu% {cpu_pct:.1} maxrss_kb {} vcsw {} ivcsw {} fs_in {} fs_out {} client_cpu_s {} bg_cpu_s {}",
            usage.user_s, usage.sys_s, usage.maxrss_kb, usage.vcsw, usage.ivcsw, usage.fs_in, usage.fs_out,
            client_cpu_s.map_or("-".to_string(), |x| format!("{x:.3}")),
            bg_cpu_s.map_or("-".to_string(), |x| format!("{x:.3}")),
        );
        println!(
            "io           : user_bytes {} proc_write_bytes {} proc_read_bytes {} wamp_proc {} dev_write_bytes {} wamp_dev {} dev_writes {} dev_reads {} dev_read_bytes {} db_kb {} anon_peak_kb {} dev_write_bytes_run {}",
            out.user_bytes_written,
            io.write_bytes,
            io.read_bytes,
            wamp.map_or("-".to_string(), |x| format!("{x:.2}")),
            dev_write_bytes.map_or("-".to_string(), |x| x.to_string()),
            wamp_dev.map_or("-".to_string(), |x| format!("{x:.2}")),
            dev.map_or("-".to_string(), |d| d.writes.to_string()),
            dev.map_or("-".to_string(), |d| d.reads.to_string()),
            dev.map_or("-".to_string(), |d| d.read_bytes.to_string()),
            db_bytes / 1024,
            anon_peak_kb.map_or("-".to_string(), |x| x.to_string()),
            dev_run.map_or("-".to_string(), |d| d.write_bytes.to_string()),
        );
        let counters = opened.engine.counters();
        if !counters.is_empty() {
            let changes: Vec<String> = counters
                .iter()
                .map(|&(name, n)| {
                    let before = counters0.iter().find(|c| c.0 == name).map_or(0, |c| c.1);
                    format!("{name} {}", n.saturating_sub(before))
                })
                .collect();
            println!("engine       : {}", changes.join(" "));
        }
        let ycsb = matches!(w.kind, Kind::YcsbLoad | Kind::YcsbRun(_));
        let result = BenchResult {
            engine: self.spec.name.to_string(),
            engine_version: opened.version.clone(),
            benchmark: w.name.clone(),
            threads: out.threads,
            num: f.num,
            key_size: f.key_size,
            // A YCSB record is its fields, one value.
            value_size: if ycsb {
                ycsb::record_bytes(&f)
            } else {
                f.value_size
            },
            ops: m.ops,
            ops_per_sec: r.ops_per_sec,
            micros_per_op: r.micros_per_op,
            mb_per_sec: r.mb_per_sec,
            writer_ops: writer_m.as_ref().map(|w| w.ops),
            writer_ops_per_sec: writer_m.as_ref().map(|w| Rates::of(w).ops_per_sec),
            lat: m.lat.percentiles(),
            writer_lat: writer_m.as_ref().map(|w| w.lat.percentiles()),
            wall_s: window_s,
            user_s: usage.user_s,
            sys_s: usage.sys_s,
            cpu_pct,
            client_cpu_s,
            bg_cpu_s,
            vcsw: usage.vcsw,
            ivcsw: usage.ivcsw,
            fs_in: usage.fs_in,
            fs_out: usage.fs_out,
            read_bytes: io.read_bytes,
            write_bytes: io.write_bytes,
            user_bytes_written: out.user_bytes_written,
            wamp,
            dev_write_bytes,
            wamp_dev,
            dev_write_bytes_run: dev_run.map(|d| d.write_bytes),
            dev_writes: dev.map(|d| d.writes),
            dev_reads: dev.map(|d| d.reads),
            dev_read_bytes: dev.map(|d| d.read_bytes),
            db_bytes,
            maxrss_kb: usage.maxrss_kb,
            anon_peak_kb,
            found: Some(m.found),
            message: out.message.clone(),
            config: opened.config.clone(),
        };
        let row = json_row(&result, w, &out, &f);
        writeln!(self.results, "{row}").map_err(|e| Error::io("write results", e))?;
        std::io::stdout().flush().ok();
        Ok(())
    }
}

/// What one benchmark leaves for the next ones of the same process.
#[derive(Debug, Default)]
struct Carried {
    /// Where the *unique_mt inserts of this process stopped.
    mt: Option<MtState>,
    /// The YCSB records in the database: the load's (`--num`, also when loaded by an earlier
    /// process) and the inserts of this process's run phases.
    ycsb_records: u64,
}

/// Runs benchmark `w` on `threads` threads: the function of its family of workloads.
fn execute(
    engine: &dyn Engine,
    w: &Workload,
    f: &Flags,
    threads: usize,
    carried: &mut Carried,
) -> Result<Outcome> {
    Ok(match w.kind {
        Kind::Fill(o) => exec::run_write(engine, w, f, o, false, threads)?,
        Kind::Delete(o) => exec::run_write(engine, w, f, o, true, 1)?,
        Kind::ReadSeq
        | Kind::ReadReverse
        | Kind::ReadRandom
        | Kind::ReadMissing
        | Kind::SeekRandom => exec::run_reads(engine, w, f, threads)?,
        Kind::ReadRandomWriteRandom | Kind::UpdateRandom => exec::run_mixed(engine, w, f, threads)?,
        Kind::ReadWhileWriting => exec::run_readwhilewriting(engine, w, f, threads)?,
        Kind::OverwritePinned => exec::run_pinned(engine, w, f)?,
        Kind::YcsbLoad => {
            let (out, loaded) = ycsb::run_load(engine, w, f, threads)?;
            carried.ycsb_records = loaded;
            out
        }
        Kind::YcsbRun(letter) => {
            let mix = crate::ycsb::Mix::of(letter)
                .ok_or_else(|| Error::Child(format!("no YCSB workload {letter:?}")))?;
            let (out, records) = ycsb::run_phase(engine, w, f, threads, mix, carried.ycsb_records)?;
            carried.ycsb_records = records;
            out
        }
        Kind::UniqueMt(mode) => {
            let (out, next) =
                exec::run_unique_mt(engine, w, f, threads, mode, carried.mt.as_ref())?;
            if mode == MtMode::Insert {
                carried.mt = Some(next);
            }
            out
        }
    })
}

/// db_bench's rates of combined thread figures.
struct Rates {
    ops_per_sec: f64,
    /// Sum of the threads' elapsed times over the operations (db_bench's micros/op).
    micros_per_op: f64,
    mb_per_sec: f64,
}

impl Rates {
    fn of(m: &Merged) -> Rates {
        let per_s = |x: f64| if m.wall_s > 0.0 { x / m.wall_s } else { 0.0 };
        Rates {
            ops_per_sec: per_s(m.ops as f64),
            micros_per_op: if m.ops > 0 {
                m.thread_s * 1e6 / m.ops as f64
            } else {
                0.0
            },
            mb_per_sec: per_s(m.bytes as f64 / 1_048_576.0),
        }
    }
}

/// The operation name of `--histogram`'s header for a kind of benchmark.
fn histogram_kind(kind: Kind) -> &'static str {
    match kind {
        Kind::Fill(_)
        | Kind::Delete(_)
        | Kind::UniqueMt(_)
        | Kind::OverwritePinned
        | Kind::YcsbLoad => "write",
        Kind::ReadSeq | Kind::ReadReverse => "iterate",
        Kind::SeekRandom => "seek",
        _ => "op",
    }
}

/// The JSON row of a result: its fields, the per-thread series when sampled, and the flags a
/// reader needs to compare rows (seed, sync, rate limit, key format).
fn json_row(r: &BenchResult, w: &Workload, out: &Outcome, f: &Flags) -> serde_json::Value {
    let mut line = r.to_json();
    if let serde_json::Value::Object(map) = &mut line {
        if f.series_interval_ms > 0 {
            let role = if w.kind == Kind::ReadWhileWriting {
                "reader"
            } else {
                "worker"
            };
            let mut threads: Vec<serde_json::Value> = out
                .stats
                .iter()
                .filter_map(|s| s.series.as_ref().map(|x| x.to_json(s.tid, role)))
                .collect();
            if let Some(x) = out
                .writer
                .as_ref()
                .and_then(|wr| wr.series.as_ref().map(|x| x.to_json(wr.tid, "writer")))
            {
                threads.push(x);
            }
            map.insert(
                "series".into(),
                serde_json::json!({"interval_ms": f.series_interval_ms, "threads": threads}),
            );
        }
        map.insert("status".into(), "ok".into());
        map.insert("seed".into(), f.seed.into());
        map.insert("sync".into(), f.sync.into());
        map.insert("write_rate_limit".into(), f.write_rate_limit.into());
        map.insert(
            "key_format".into(),
            match f.key_format {
                KeyFormat::Decimal => "decimal",
                KeyFormat::RocksDb => "rocksdb",
            }
            .into(),
        );
    }
    line
}

/// `larch-bench __child RESULTS_FILE --flags...`: runs one engine (the parent's --engine has
/// been narrowed to one name) and appends one JSON line per benchmark to RESULTS_FILE.
pub fn child_main(args: &[String]) -> Result<()> {
    let Some(results_path) = args.first() else {
        return Err(Error::Usage("__child RESULTS_FILE [flags]".into()));
    };
    let flags = Flags::parse(&args[1..])?;
    let [name] = flags.engines.as_slice() else {
        return Err(Error::Usage("__child takes exactly one --engine".into()));
    };
    let spec = engines::find(name)?;
    let results = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(results_path)
        .map_err(|e| Error::io(format!("open {results_path}"), e))?;
    let workloads = flags
        .benchmarks
        .iter()
        .map(|b| Workload::resolve(b, &flags))
        .collect::<Result<Vec<_>>>()?;
    let threads_max = flags.threads.iter().copied().max().unwrap_or(1) + 1;
    let mut child = Child {
        dir: flags.db.join(spec.name),
        flags: flags.clone(),
        spec,
        opened: None,
        results,
        printed_config: false,
        threads_max,
        open_sync: flags.sync,
        carried: Carried {
            mt: None,
            ycsb_records: flags.num,
        },
    };
    for (pass, &threads) in flags.threads.iter().enumerate() {
        if flags.threads.len() > 1 {
            println!("Threads:    {threads}");
        }
        for w in &workloads {
            if w.fresh && flags.use_existing_db {
                println!("{:<12} : skipped (--use_existing_db is true)", w.name);
                continue;
            }
            let threaded_fill =
                (flags.fill_threads && matches!(w.kind, Kind::Fill(_))) || w.name == "fillsync_mt";
            if w.fresh && pass > 0 && !threaded_fill {
                println!("{:<12} : skipped (loaded in the first thread pass)", w.name);
                continue;
            }
            let sync = flags.sync || (w.fresh && w.sync);
            if w.fresh || child.opened.is_none() || child.open_sync != sync {
                child.open_engine(w.fresh, sync)?;
            }
            child.run_one(
                w,
                if w.uses_threads() || threaded_fill {
                    threads
                } else {
                    1
                },
            )?;
        }
    }
    drop(child.opened.take());
    Ok(())
}
