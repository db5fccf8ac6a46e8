//! `larch-bench suite NAME`: one seed report's experiment as a plan of driver runs, and
//! `larch-bench report DIR`: the report rendered from the runs' JSON rows.
//!
//! A suite is a list of [`Step`]s, each one ordinary driver run (`larch-bench --engine=<one>
//! ...`, run as a child process of the suite so that its output lands in DIR/log.txt and its
//! engine runs in its own grandchild, cgroup included, exactly as a hand-typed run). The JSON
//! rows of every step, tagged with the suite, step and memory limit, are appended to
//! DIR/results.jsonl as they arrive, after a header row describing the suite, the scale and
//! the machine. `report` (also run at the end of `suite`) reads only results.jsonl and writes
//! DIR/report.md and the charts (PNG and SVG) under DIR/charts.
//!
//! The module reads by suite. Each suite is one file holding one value that implements
//! [`Suite`]: its name and seed, its sizes for the header, its plan and its part of the report.
//! - `ondisk.rs` (seed 000), `inmem.rs` (001), `memsweep.rs` (002), `tupl.rs` (003) and
//!   `pmemkv.rs` (004): the suites, listed in `SUITES`;
//! - `plan.rs`: what the plans share: the sizes each `--scale` gives ([`plan::Params`]), the
//!   flags a run starts from, and [`plan::plan`], which makes a suite's runs for every engine;
//! - `render.rs`: what the reports share: results.jsonl read back, the report's frame
//!   (title, machine, scale, engines, failed steps, chart list) around the suite's own part,
//!   and the tables and figures the suites build theirs from;
//! - `chart.rs`: figures as PNG and SVG; `machine.rs`: the machine the header describes;
//! - this file: the [`Suite`] interface and list, and the `suite` and `report` commands.
//!
//! A new suite is one new file implementing [`Suite`], with its `mod` line and its entry in
//! `SUITES` below.

pub mod chart;
pub mod machine;
pub mod plan;
pub mod render;

mod inmem;
mod memsweep;
mod ondisk;
mod pmemkv;
mod tupl;
mod ycsb;

use crate::engines;
use crate::error::{Error, Result};
use crate::flags::parse_size;
use plan::{Params, Run, Step};
use render::{Out, Results};
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// One seed report's experiment: the driver runs that measure it and the report that shows
/// the measurements as the seed did. Implemented by one unit struct per file.
pub trait Suite: Sync {
    /// The name `larch-bench suite NAME` takes and results.jsonl records.
    fn name(&self) -> &'static str;
    /// The seed report it reproduces, as the usage and the report's title give it.
    fn title(&self) -> &'static str;
    /// Its sizes at the scale `p`, for the header's "params" ([`Params::to_json`] adds the
    /// read phases' length and the sampling interval).
    fn params(&self, p: &Params) -> Value;
    /// Seconds its timed read phases last at the scale `p`, for the header's "params": 0 when
    /// they are counted (`p.reads` per reader), None when it has none.
    fn run_s(&self, p: &Params) -> Option<u64> {
        Some(p.run_s)
    }
    /// Its driver runs, databases under `db`; [`plan::plan`] makes them for every engine.
    fn plan(&self, p: &Params, db: &Path, seed: u64) -> Result<Vec<Run>>;
    /// Its sections of report.md (under "## Results") and its charts.
    fn render(&self, r: &Results, o: &mut Out) -> Result<()>;
    /// The label of result `row` in the verdict that opens the report (the benchmark, and
    /// what else tells the suite's runs of it apart), or None to leave the row out of it.
    fn headline(&self, row: &Value) -> Option<String> {
        row.get("benchmark")
            .and_then(Value::as_str)
            .map(String::from)
    }
}

/// The suites: one per seed report, in the order of the seeds, then YCSB's workloads.
static SUITES: &[&dyn Suite] = &[
    &ondisk::Ondisk,
    &inmem::Inmem,
    &memsweep::Memsweep,
    &tupl::Tupl,
    &pmemkv::Pmemkv,
    &ycsb::Ycsb,
];

/// Every suite: the seeds' in their order, then YCSB's.
pub fn all() -> &'static [&'static dyn Suite] {
    SUITES
}

/// The suite called `name`.
pub fn find(name: &str) -> Option<&'static dyn Suite> {
    SUITES.iter().copied().find(|s| s.name() == name)
}

/// The suite called `name`, or a usage error that lists the known ones.
fn find_or_usage(name: &str) -> Result<&'static dyn Suite> {
    find(name).ok_or_else(|| {
        Error::Usage(format!(
            "unknown suite {name:?}; known: {}",
            SUITES
                .iter()
                .map(|s| s.name())
                .collect::<Vec<_>>()
                .join(",")
        ))
    })
}

pub fn suite_usage() -> String {
    let mut s = String::from(
        "Usage: larch-bench suite NAME [--scale=tiny|small|default|seed|FACTOR] [--out=DIR]\n\
         \x20                          [--engine=LIST] [--db=DIR] [--seed=N]\n\
         \x20      larch-bench report DIR\n\n\
         Suites (each reproduces one seed report's tables and figures):\n",
    );
    for suite in SUITES {
        s.push_str(&format!("  {:<9} {}\n", suite.name(), suite.title()));
    }
    s.push_str(
        "\n--scale: tiny (seconds, for CI), small (a few minutes), default (under 30 minutes on\n\
         2 cores / 24 GiB), seed (the seed report's own sizes), or a number that multiplies the\n\
         default's record counts and memory limits. --out defaults to larch-suite-NAME-SCALE;\n\
         databases go under --db (default /tmp/larch-suite-<uid>) and are removed after each\n\
         engine. The scale table is in docs/design/bench-method.md.\n",
    );
    s
}

/// Options of `larch-bench suite`.
#[derive(Debug, Clone)]
pub struct SuiteArgs {
    pub name: String,
    pub scale: String,
    pub out: PathBuf,
    pub engines: Option<Vec<String>>,
    pub db: PathBuf,
    pub seed: u64,
}

impl SuiteArgs {
    pub fn parse(args: &[String]) -> Result<SuiteArgs> {
        let Some(name) = args.first().filter(|a| !a.starts_with("--")) else {
            return Err(Error::Usage(format!(
                "suite needs a NAME\n{}",
                suite_usage()
            )));
        };
        find_or_usage(name)?;
        // SAFETY: getuid has no preconditions and cannot fail.
        let uid = unsafe { libc::getuid() };
        let mut a = SuiteArgs {
            name: name.clone(),
            scale: "default".into(),
            out: PathBuf::new(),
            engines: None,
            db: PathBuf::from(format!("/tmp/larch-suite-{uid}")),
            seed: 42,
        };
        let mut out = None;
        for arg in &args[1..] {
            let Some((k, v)) = arg.strip_prefix("--").and_then(|b| b.split_once('=')) else {
                return Err(Error::Usage(format!("suite: unexpected argument {arg:?}")));
            };
            match k {
                "scale" => a.scale = v.to_string(),
                "out" => out = Some(PathBuf::from(v)),
                "engine" | "engines" => {
                    a.engines = Some(v.split(',').map(|s| s.trim().to_string()).collect())
                }
                "db" => a.db = PathBuf::from(v),
                "seed" => a.seed = parse_size(k, v)?.max(1),
                _ => return Err(Error::Usage(format!("suite: unknown flag --{k}"))),
            }
        }
        Params::for_scale(&a.scale)?;
        a.out = out.unwrap_or_else(|| PathBuf::from(format!("larch-suite-{}-{}", a.name, a.scale)));
        Ok(a)
    }
}

/// Engines that cannot run here, with the reason and the install hint.
type Missing = Vec<(String, String)>;

/// The engines a suite runs: the requested ones (or all), split into available and not.
fn select_engines(requested: &Option<Vec<String>>) -> Result<(Vec<String>, Missing)> {
    let names: Vec<String> = match requested {
        None => engines::names().into_iter().map(String::from).collect(),
        Some(list) => {
            let mut v = Vec::new();
            for e in list {
                if e == "all" {
                    v.extend(engines::names().into_iter().map(String::from));
                } else {
                    v.push(engines::find(e)?.name.to_string());
                }
            }
            v
        }
    };
    let mut ok = Vec::new();
    let mut missing = Vec::new();
    for n in names {
        let spec = engines::find(&n)?;
        match (spec.probe)() {
            Ok(_) => ok.push(n),
            Err(reason) => missing.push((n, format!("{reason}; install: {}", spec.install_hint))),
        }
    }
    Ok((ok, missing))
}

fn append(out: &mut std::fs::File, v: &Value) -> Result<()> {
    writeln!(out, "{v}").map_err(|e| Error::io("write results.jsonl", e))
}

/// What the step's own output says about its failure: its error lines, and a hint when the
/// engine's process was killed (SIGKILL, exit 137) inside a memory cgroup.
fn failure_reason(log: &Path, from: u64, memory_limited: bool) -> String {
    let text = std::fs::read(log).unwrap_or_default();
    let tail = String::from_utf8_lossy(text.get(from as usize..).unwrap_or_default());
    let mut why: Vec<String> = tail
        .lines()
        .filter(|l| l.contains("error:") || l.contains(" failed"))
        .map(|l| l.trim().to_string())
        .collect();
    if memory_limited && tail.contains(" exit 137 ") {
        why.push(
            "the engine's process was killed (SIGKILL): most likely the memory cgroup's OOM \
             killer, the engine needing more memory than --memory_limit"
                .into(),
        );
    }
    if why.is_empty() {
        String::new()
    } else {
        format!(": {}", why.join("; "))
    }
}

/// Runs one step (a driver run for one engine): the JSON rows it wrote, and its error if it
/// failed (rows written before a failure are kept: they are measurements like any other).
fn run_step(
    exe: &Path,
    step: &Step,
    log: &Path,
    tmp_json: &Path,
) -> Result<(Vec<Value>, Option<Error>)> {
    let _ = std::fs::remove_file(tmp_json);
    let logf = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| Error::io(format!("open {}", log.display()), e))?;
    let mut header = logf.try_clone().map_err(|e| Error::io("log handle", e))?;
    let log_start = std::fs::metadata(log).map_or(0, |m| m.len());
    let args = step.args();
    writeln!(
        header,
        "\n==== step {} engine {}: larch-bench {}",
        step.label,
        step.engine,
        args.join(" ")
    )
    .map_err(|e| Error::io("write log", e))?;
    let status = Command::new(exe)
        .args(&args)
        .arg(format!("--json={}", tmp_json.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::from(
            logf.try_clone().map_err(|e| Error::io("log handle", e))?,
        ))
        .stderr(Stdio::from(logf))
        .status()
        .map_err(|e| Error::io(format!("run {}", exe.display()), e))?;
    let text = std::fs::read_to_string(tmp_json).unwrap_or_default();
    let _ = std::fs::remove_file(tmp_json);
    let mut rows = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: Value = serde_json::from_str(line)
            .map_err(|e| Error::Child(format!("unreadable result row ({e}): {line}")))?;
        rows.push(v);
    }
    if !status.success() {
        let e = Error::Child(format!(
            "step {} for {} exited with {status} after {} result rows{} (see {})",
            step.label,
            step.engine,
            rows.len(),
            failure_reason(log, log_start, step.flags.memory_limit.is_some()),
            log.display()
        ));
        return Ok((rows, Some(e)));
    }
    Ok((rows, None))
}

/// `larch-bench suite NAME ...`
pub fn suite_main(args: &[String]) -> Result<()> {
    if args
        .first()
        .is_some_and(|a| a == "--help" || a == "-h" || a == "help")
    {
        print!("{}", suite_usage());
        return Ok(());
    }
    let a = SuiteArgs::parse(args)?;
    let suite = find_or_usage(&a.name)?;
    let params = Params::for_scale(&a.scale)?;
    let (engines, missing) = select_engines(&a.engines)?;
    std::fs::create_dir_all(&a.out)
        .map_err(|e| Error::io(format!("create {}", a.out.display()), e))?;
    std::fs::create_dir_all(&a.db)
        .map_err(|e| Error::io(format!("create {}", a.db.display()), e))?;
    let db = a.db.join(&a.name);
    let results_path = a.out.join("results.jsonl");
    let log = a.out.join("log.txt");
    let _ = std::fs::remove_file(&log);
    let mut results = std::fs::File::create(&results_path)
        .map_err(|e| Error::io(format!("create {}", results_path.display()), e))?;
    let exe = std::env::current_exe().map_err(|e| Error::io("current_exe", e))?;
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    append(
        &mut results,
        &json!({
            "kind": "header",
            "suite": a.name,
            "scale": a.scale,
            "params": params.to_json(suite),
            "seed": a.seed,
            "engines": engines,
            "started_unix_s": started,
            "larch_bench_version": env!("CARGO_PKG_VERSION"),
            "command": format!("larch-bench suite {} --scale={}", a.name, a.scale),
            "machine": machine::describe(&a.db),
        }),
    )?;
    for (e, why) in &missing {
        println!("{e:<14} unavailable: {why}");
        append(
            &mut results,
            &json!({"kind": "result", "suite": a.name, "engine": e, "status": "unavailable",
                    "message": why}),
        )?;
    }
    let steps = plan::plan(suite, &params, &engines, &db, a.seed)?;
    let total = steps.len();
    let t_suite = Instant::now();
    let mut errors = 0usize;
    let mut failed_engines: Vec<String> = Vec::new();
    let tmp_json = a.out.join(".step.jsonl");
    for (i, step) in steps.iter().enumerate() {
        if failed_engines.contains(&step.engine) && step.needs_previous {
            continue;
        }
        let t0 = Instant::now();
        print!(
            "[{}/{total}] {} {:<14} {:<22} ",
            i + 1,
            a.name,
            step.engine,
            step.label
        );
        std::io::stdout().flush().ok();
        let (rows, failure) = match run_step(&exe, step, &log, &tmp_json) {
            Ok(x) => x,
            Err(e) => (Vec::new(), Some(e)),
        };
        for mut r in rows {
            if let Value::Object(m) = &mut r {
                m.insert("kind".into(), "result".into());
                m.insert("suite".into(), a.name.clone().into());
                m.insert("step".into(), step.label.clone().into());
                m.insert("memory_limit_bytes".into(), json!(step.flags.memory_limit));
                m.insert("cache_size_bytes".into(), json!(step.flags.cache_size));
            }
            append(&mut results, &r)?;
        }
        match failure {
            None => println!("ok {:.1} s", t0.elapsed().as_secs_f64()),
            Some(e) => {
                errors += 1;
                if !step.needs_previous {
                    // The database the engine's later steps need may not exist.
                    failed_engines.push(step.engine.clone());
                }
                println!("FAILED {:.1} s: {e}", t0.elapsed().as_secs_f64());
                append(
                    &mut results,
                    &json!({"kind": "result", "suite": a.name, "engine": step.engine,
                            "step": step.label, "status": "error", "message": e.to_string(),
                            "memory_limit_bytes": step.flags.memory_limit}),
                )?;
            }
        }
        if step.last_for_engine {
            let _ = std::fs::remove_dir_all(db.join(&step.engine));
        }
    }
    append(
        &mut results,
        &json!({"kind": "footer", "suite": a.name,
                "elapsed_s": (t_suite.elapsed().as_secs_f64() * 10.0).round() / 10.0,
                "errors": errors}),
    )?;
    drop(results);
    let _ = std::fs::remove_dir(&db);
    render::render_dir(&a.out)?;
    println!(
        "suite {}: {} steps in {:.1} s, {errors} failed; report: {}",
        a.name,
        total,
        t_suite.elapsed().as_secs_f64(),
        a.out.join("report.md").display()
    );
    if errors > 0 {
        return Err(Error::Child(format!(
            "{errors} step(s) of suite {} failed; see {}",
            a.name,
            log.display()
        )));
    }
    Ok(())
}

/// `larch-bench report DIR`
pub fn report_main(args: &[String]) -> Result<()> {
    let [dir] = args else {
        return Err(Error::Usage(
            "report takes one argument: the suite's output folder (with results.jsonl)".into(),
        ));
    };
    let dir = PathBuf::from(dir);
    render::render_dir(&dir)?;
    println!("report: {}", dir.join("report.md").display());
    Ok(())
}
