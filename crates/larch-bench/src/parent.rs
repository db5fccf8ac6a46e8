//! The driver process: prints the db_bench header, runs each engine in its own child process
//! (inside a memory cgroup with --memory_limit), collects the children's JSON lines, and writes
//! --json, --csv and a summary table.

use crate::engines;
use crate::error::{Error, Result};
use crate::flags::Flags;
use crate::report::{csv_row, summary_table, CSV_COLUMNS};
use crate::sys::{self, MemoryCgroup};
use serde_json::{json, Value};
use std::io::Write;
use std::process::Command;

fn print_header(f: &Flags) {
    let kv = (f.key_size + f.value_size) as f64;
    let compressed = (f.value_size as f64 * f.compression_ratio + 0.5) as usize;
    println!("Keys:       {} bytes each", f.key_size);
    println!(
        "Values:     {} bytes each ({} bytes after compression)",
        f.value_size, compressed
    );
    println!("Entries:    {}", f.num);
    println!(
        "RawSize:    {:.1} MB (estimated)",
        kv * f.num as f64 / 1_048_576.0
    );
    println!(
        "FileSize:   {:.1} MB (estimated)",
        (f.key_size + compressed) as f64 * f.num as f64 / 1_048_576.0
    );
    println!("Seed:       {}", f.seed);
    println!(
        "Threads:    {}",
        f.threads
            .iter()
            .map(|t| t.to_string())
            .collect::<Vec<_>>()
            .join(",")
    );
    println!("Sync:       {}", f.sync as u8);
    if f.repeat > 1 {
        println!(
            "Repeat:     {} runs of each engine, interleaved; medians and spread reported",
            f.repeat
        );
    }
    if let Some(m) = f.memory_limit {
        println!("MemLimit:   {m} bytes (memory cgroup per engine)");
    }
    if f.write_rate_limit > 0 {
        println!(
            "WriteRate:  {} bytes/s of key+value (readwhilewriting's writer)",
            f.write_rate_limit
        );
    }
    println!("{}", "-".repeat(48));
    eprintln!("larch-bench {}", env!("CARGO_PKG_VERSION"));
    eprintln!(
        "Date:       {}",
        crate::report::utc_datetime(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0)
        )
    );
    eprintln!(
        "CPU:        {} * {}",
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
        crate::suite::machine::cpu_model()
    );
}

/// Runs the whole comparison described by `f`.
pub fn run(flags: &Flags) -> Result<()> {
    let mut f = flags.clone();
    // Expand "all" and check every name before anything runs.
    let mut names = Vec::new();
    for e in &f.engines {
        if e == "all" {
            names.extend(engines::names().into_iter().map(String::from));
        } else {
            names.push(engines::find(e)?.name.to_string());
        }
    }
    f.engines = names;
    if f.seed == 0 {
        f.seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64 & 0xffff_ffff)
            .unwrap_or(1)
            .max(1);
    }
    print_header(&f);
    std::fs::create_dir_all(&f.db)
        .map_err(|e| Error::io(format!("create --db {}", f.db.display()), e))?;
    let exe = std::env::current_exe().map_err(|e| Error::io("current_exe", e))?;
    let mut json_out = match &f.json {
        Some(p) => Some(
            std::fs::File::create(p)
                .map_err(|e| Error::io(format!("create {}", p.display()), e))?,
        ),
        None => None,
    };
    let mut csv_out = match &f.csv {
        Some(p) => {
            let mut file = std::fs::File::create(p)
                .map_err(|e| Error::io(format!("create {}", p.display()), e))?;
            writeln!(file, "{}", CSV_COLUMNS.join(",")).map_err(|e| Error::io("write csv", e))?;
            Some(file)
        }
        None => None,
    };
    let mut rows: Vec<Value> = Vec::new();
    let mut failures = Vec::new();
    let mut emit = |v: Value, rows: &mut Vec<Value>| -> Result<()> {
        if let Some(j) = json_out.as_mut() {
            writeln!(j, "{v}").map_err(|e| Error::io("write json", e))?;
        }
        if let Some(c) = csv_out.as_mut() {
            writeln!(c, "{}", csv_row(&v)).map_err(|e| Error::io("write csv", e))?;
        }
        rows.push(v);
        Ok(())
    };

    for repeat in 0..f.repeat {
        if f.repeat > 1 {
            println!("Repeat:     {} of {}", repeat + 1, f.repeat);
        }
        for name in f.engines.clone() {
            let spec = engines::find(&name)?;
            if let Err(reason) = (spec.probe)() {
                if repeat > 0 {
                    continue;
                }
                println!(
                    "{:<12} : unavailable ({reason}); install: {}",
                    spec.name, spec.install_hint
                );
                eprintln!(
                    "larch-bench: engine {} is unavailable and was not run",
                    spec.name
                );
                emit(
                    json!({
                        "engine": spec.name, "benchmark": f.benchmarks.join(","),
                        "status": "unavailable", "message": reason, "install_hint": spec.install_hint,
                    }),
                    &mut rows,
                )?;
                continue;
            }
            let results_path = f.db.join(format!(
                ".larch-bench-{}-{}.jsonl",
                std::process::id(),
                spec.name
            ));
            let _ = std::fs::remove_file(&results_path);
            let cgroup = match f.memory_limit {
                Some(limit) => Some(MemoryCgroup::create(limit, spec.name)?),
                None => None,
            };
            if let Some(cg) = &cgroup {
                println!("cgroup       : {} (v{})", cg.dir.display(), cg.version);
            }
            let mut cmd = Command::new(&exe);
            cmd.arg(crate::CHILD_SUBCOMMAND)
                .arg(&results_path)
                .args(f.to_child_args(spec.name));
            let outcome = sys::spawn_measured(&mut cmd, cgroup.as_ref())?;
            let u = outcome.usage;
            // The engine's files once it is closed (the child drops its handle before it exits):
            // what a load leaves on the disk, where `db_kb` is measured with the engine open.
            let closed_bytes = sys::du_bytes(&f.db.join(spec.name));
            println!(
            "process      : engine {} exit {} wall {:.3} user {:.3} sys {:.3} maxrss_kb {} vcsw {} ivcsw {} fs_in {} fs_out {} db_kb_closed {}{}",
            spec.name,
            outcome.code,
            outcome.wall_s,
            u.user_s,
            u.sys_s,
            u.maxrss_kb,
            u.vcsw,
            u.ivcsw,
            u.fs_in,
            u.fs_out,
            closed_bytes / 1024,
            cgroup
                .as_ref()
                .and_then(|c| c.peak_bytes())
                .map_or(String::new(), |p| format!(" cgroup_peak_bytes {p}"))
        );
            println!("{}", "-".repeat(48));
            let text = std::fs::read_to_string(&results_path).unwrap_or_default();
            let _ = std::fs::remove_file(&results_path);
            for line in text.lines().filter(|l| !l.trim().is_empty()) {
                let mut v: Value = serde_json::from_str(line).map_err(|e| {
                    Error::Child(format!(
                        "{}: unreadable result line ({e}): {line}",
                        spec.name
                    ))
                })?;
                if let Some(o) = v.as_object_mut() {
                    o.insert("db_bytes_closed".into(), json!(closed_bytes));
                    if f.repeat > 1 {
                        o.insert("repeat".into(), json!(repeat));
                    }
                }
                emit(v, &mut rows)?;
            }
            if outcome.code != 0 {
                failures.push(format!("{} (exit {})", spec.name, outcome.code));
            }
        }
    }
    // With --repeat, the summary and the verdict are of the medians, which the JSON gets too
    // (kind=median, status=median, so that readers of the runs' rows pass them by).
    let rows = if f.repeat > 1 {
        let medians = crate::repeat::medians(&rows);
        if let Some(j) = json_out.as_mut() {
            for m in medians.iter().filter(|m| m["status"] == "ok") {
                let mut m = m.clone();
                m["kind"] = json!("median");
                m["status"] = json!("median");
                writeln!(j, "{m}").map_err(|e| Error::io("write json", e))?;
            }
        }
        medians
    } else {
        rows
    };
    println!();
    print!("{}", summary_table(&rows));
    // The verdict: the figures to compare side by side, in the JSON too (kind=verdict).
    let verdicts = crate::verdict::verdicts(&rows);
    if let Some(j) = json_out.as_mut() {
        for v in &verdicts {
            writeln!(j, "{v}").map_err(|e| Error::io("write json", e))?;
        }
    }
    let table = crate::verdict::verdict_table(&verdicts, &f.engines);
    if !table.is_empty() {
        println!();
        print!("{table}");
    }
    if !failures.is_empty() {
        return Err(Error::Child(format!(
            "engine run(s) failed: {}",
            failures.join(", ")
        )));
    }
    Ok(())
}
