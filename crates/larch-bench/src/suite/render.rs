//! report.md and the charts of a suite, from its results.jsonl alone: the report's frame around
//! the suite's own sections ([`super::Suite::render`]), and the helpers those sections share:
//! reading rows, formatting numbers, Markdown tables, and the tables and figures of more than
//! one kind of run (load tables, bars per engine, lines against threads, per-thread series).

use super::chart::{self, engine_color, series_color, Bar, Figure, Line, LinePanel, Panel};
use super::Suite;
use crate::engines;
use crate::error::{Error, Result};
use crate::verdict::MIN_WALL_S;
use plotters::style::RGBColor;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// A suite's results as read back from results.jsonl.
#[derive(Debug, Clone, Default)]
pub struct Results {
    pub header: Value,
    pub footer: Option<Value>,
    /// Result rows (kind = result), in file order.
    pub rows: Vec<Value>,
}

impl Results {
    pub fn parse(text: &str) -> Result<Results> {
        let mut r = Results::default();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let v: Value = serde_json::from_str(line).map_err(|e| {
                Error::Usage(format!("results.jsonl line {}: not JSON ({e})", i + 1))
            })?;
            match v.get("kind").and_then(Value::as_str) {
                Some("header") => r.header = v,
                Some("footer") => r.footer = Some(v),
                _ => r.rows.push(unrated_if_short(v)),
            }
        }
        if r.header.is_null() {
            return Err(Error::Usage(
                "results.jsonl has no header row (kind=header): not a suite's output".into(),
            ));
        }
        Ok(r)
    }

    pub fn suite(&self) -> &str {
        self.header
            .get("suite")
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    pub(super) fn ok(&self) -> impl Iterator<Item = &Value> {
        self.rows.iter().filter(|r| s(r, "status") == "ok")
    }

    /// Engines with results, in the registry's order (then any others).
    pub fn engines(&self) -> Vec<String> {
        let mut seen: Vec<String> = Vec::new();
        for r in self.ok() {
            let e = s(r, "engine").to_string();
            if !seen.contains(&e) {
                seen.push(e);
            }
        }
        let order = engines::names();
        seen.sort_by_key(|e| order.iter().position(|o| o == e).unwrap_or(usize::MAX));
        seen
    }

    pub(super) fn find<'a>(&'a self, engine: &str, bench: &str) -> Vec<&'a Value> {
        self.ok()
            .filter(|r| s(r, "engine") == engine && s(r, "benchmark") == bench)
            .collect()
    }
}

/// The rates of a run too short to trust (under [`MIN_WALL_S`]: the 2 ms runs of a tiny scale
/// whose writer had not committed yet) are taken out of the row, so that no table shows them
/// and no chart draws them, and the row is marked `"short": true`; its counts stay.
fn unrated_if_short(mut v: Value) -> Value {
    let short = s(&v, "status") == "ok"
        && v.get("wall_s")
            .and_then(Value::as_f64)
            .is_some_and(|w| w < MIN_WALL_S);
    if let (true, Some(o)) = (short, v.as_object_mut()) {
        for k in [
            "ops_per_sec",
            "writer_ops_per_sec",
            "micros_per_op",
            "mb_per_sec",
        ] {
            o.remove(k);
        }
        o.insert("short".into(), Value::Bool(true));
    }
    v
}

pub(super) fn s<'a>(v: &'a Value, k: &str) -> &'a str {
    v.get(k).and_then(Value::as_str).unwrap_or("")
}

pub(super) fn f(v: &Value, k: &str) -> f64 {
    v.get(k).and_then(Value::as_f64).unwrap_or(f64::NAN)
}

pub(super) fn u(v: &Value, k: &str) -> u64 {
    v.get(k).and_then(Value::as_u64).unwrap_or(0)
}

/// Seconds as the seeds print times: HH:MM:SS.ss.
pub fn hms(secs: f64) -> String {
    if !secs.is_finite() {
        return String::new();
    }
    let cs = (secs * 100.0).round() as u64;
    format!(
        "{:02}:{:02}:{:02}.{:02}",
        cs / 360_000,
        cs / 6000 % 60,
        cs / 100 % 60,
        cs % 100
    )
}

pub(super) fn n0(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.0}")
    } else {
        String::new()
    }
}

pub(super) fn n2(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.2}")
    } else {
        String::new()
    }
}

/// "1 reader", "4 readers".
pub(super) fn plural(n: u64, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

pub(super) fn mib(bytes: u64) -> String {
    format!("{} MiB", bytes >> 20)
}

/// A Markdown table.
pub fn table(head: &[&str], rows: &[Vec<String>]) -> String {
    let mut t = format!("| {} |\n|{}\n", head.join(" | "), "---|".repeat(head.len()));
    for r in rows {
        let _ = writeln!(t, "| {} |", r.join(" | "));
    }
    t
}

/// Largest thread count among `rows`.
pub(super) fn max_threads<'a>(rows: &[&'a Value]) -> Option<&'a Value> {
    rows.iter().copied().max_by_key(|r| u(r, "threads"))
}

/// The highest process size any step of `engine` reached (KB).
pub(super) fn process_kb(r: &Results, engine: &str) -> u64 {
    r.ok()
        .filter(|x| s(x, "engine") == engine)
        .map(|x| u(x, "maxrss_kb"))
        .max()
        .unwrap_or(0)
}

/// Each engine's memory and device writes over all its steps, beside the seed's own columns:
/// the peak resident set, the peak of its anonymous part (what the engine holds itself, beside
/// file pages the kernel can take back; sampled every `sys::ANON_SAMPLE_MS`), and the bytes
/// the device under the databases wrote, each step counted from a sync before it to a sync
/// after it, over the bytes of keys and values the steps wrote, the part of it written while
/// the steps ran (not at the syncs after them), and the device's write and read requests.
fn memory_and_device_section(md: &mut String, r: &Results) {
    let mut rows = Vec::new();
    for e in r.engines() {
        let steps: Vec<&Value> = r.ok().filter(|x| s(x, "engine") == e).collect();
        if steps.is_empty() {
            continue;
        }
        let anon = steps
            .iter()
            .filter_map(|x| x.get("anon_peak_kb").and_then(Value::as_u64))
            .max();
        // A sum over the steps, `None` if any step lacks it.
        let total = |key: &str| -> Option<u64> {
            steps
                .iter()
                .map(|x| x.get(key).and_then(Value::as_u64))
                .sum()
        };
        let dev = total("dev_write_bytes");
        let dev_run = total("dev_write_bytes_run");
        let user: u64 = steps.iter().map(|x| u(x, "user_bytes_written")).sum();
        rows.push(vec![
            e.clone(),
            process_kb(r, &e).to_string(),
            anon.map(|k| k.to_string()).unwrap_or_default(),
            dev.map(|d| n0(d as f64 / (1 << 20) as f64))
                .unwrap_or_default(),
            dev.filter(|_| user > 0)
                .map(|d| n2(d as f64 / user as f64))
                .unwrap_or_default(),
            dev_run
                .map(|d| n0(d as f64 / (1 << 20) as f64))
                .unwrap_or_default(),
            total("dev_writes")
                .map(|n| n.to_string())
                .unwrap_or_default(),
            total("dev_reads")
                .map(|n| n.to_string())
                .unwrap_or_default(),
        ]);
    }
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        md,
        "\nMemory and device writes, every step of each engine: Process Size is the peak RSS, \
         Anon Peak the peak of its anonymous memory (sampled every {} ms), Device MiB what the \
         device under the databases wrote (each step from a sync before it to a sync after \
         it), Device wamp that over the bytes of keys and values written, In Runs MiB the part \
         of Device MiB written while the steps ran (the rest the engine left dirty in the page \
         cache, written at the syncs after them, outside the timed windows), Device Writes and \
         Reads the requests the device completed (a request costs the device about the same up \
         to tens of KiB):\n",
        crate::sys::ANON_SAMPLE_MS
    );
    md.push_str(&table(
        &[
            "Engine",
            "Process Size KB",
            "Anon Peak KB",
            "Device MiB",
            "Device wamp",
            "In Runs MiB",
            "Device Writes",
            "Device Reads",
        ],
        &rows,
    ));
}

/// A thread's series as (t_s, cumulative ops).
pub(super) fn thread_points(t: &Value) -> Vec<(f64, f64)> {
    let ts = t.get("t_s").and_then(Value::as_array);
    let ops = t.get("ops").and_then(Value::as_array);
    match (ts, ops) {
        (Some(ts), Some(ops)) => ts
            .iter()
            .zip(ops)
            .filter_map(|(a, b)| Some((a.as_f64()?, b.as_f64()?)))
            .collect(),
        _ => Vec::new(),
    }
}

pub(super) fn series_threads(row: &Value) -> Vec<&Value> {
    row.get("series")
        .and_then(|s| s.get("threads"))
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default()
}

/// Rate between consecutive samples of a cumulative series: (end time, ops/s).
pub fn rates(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    points
        .windows(2)
        .filter(|w| w[1].0 > w[0].0)
        .map(|w| (w[1].0, (w[1].1 - w[0].1) / (w[1].0 - w[0].0)))
        .collect()
}

/// Rates over windows at least `rel` of the elapsed time (and `abs_s`) long: the samples of a
/// fresh thread are a millisecond apart, where one batch commit more or less swings the rate
/// from zero to millions; a window a twentieth of the elapsed time keeps a log time axis
/// readable and still shows steps.
pub fn smoothed_rates(points: &[(f64, f64)], rel: f64, abs_s: f64) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    let Some(&first) = points.first() else {
        return out;
    };
    let mut from = first;
    for &p in &points[1..] {
        let dt = p.0 - from.0;
        if dt > 0.0 && dt >= abs_s.max(rel * p.0) {
            out.push((p.0, (p.1 - from.1) / dt));
            from = p;
        }
    }
    out
}

/// Cumulative value of a series at `t`, by linear interpolation (flat after the end).
fn at(points: &[(f64, f64)], t: f64) -> f64 {
    match points.iter().position(|p| p.0 >= t) {
        None => points.last().map_or(0.0, |p| p.1),
        Some(0) => points[0].1,
        Some(i) => {
            let (a, b) = (points[i - 1], points[i]);
            a.1 + (b.1 - a.1) * (t - a.0) / (b.0 - a.0).max(1e-12)
        }
    }
}

/// The sum of the threads' cumulative series on a grid of `n` steps over their span.
pub fn summed(threads: &[Vec<(f64, f64)>], n: usize) -> Vec<(f64, f64)> {
    let end = threads
        .iter()
        .filter_map(|p| p.last().map(|q| q.0))
        .fold(0.0, f64::max);
    if end <= 0.0 {
        return Vec::new();
    }
    (0..=n)
        .map(|i| {
            let t = end * i as f64 / n as f64;
            (t, threads.iter().map(|p| at(p, t)).sum())
        })
        .collect()
}

/// The figure legend of the engines with results, in their colours.
pub(super) fn engine_legend(r: &Results) -> Vec<(String, RGBColor)> {
    r.engines()
        .into_iter()
        .map(|e| {
            let c = engine_color(&e);
            (e, c)
        })
        .collect()
}

pub(super) fn bars(r: &Results, value: impl Fn(&str) -> Option<f64>) -> Vec<Bar> {
    r.engines()
        .iter()
        .filter_map(|e| {
            // A figure a run did not give (too short, not measured) gets no bar.
            value(e).filter(|v| v.is_finite()).map(|v| Bar {
                label: e.clone(),
                color: engine_color(e),
                value: v,
            })
        })
        .collect()
}

/// One line per engine: `key` of its `bench` rows that pass `filter`, against `x` of each row
/// (engines without such rows have none).
pub(super) fn engine_lines(
    r: &Results,
    bench: &str,
    x: impl Fn(&Value) -> f64,
    key: &str,
    filter: impl Fn(&Value) -> bool,
) -> Vec<Line> {
    r.engines()
        .iter()
        .filter_map(|e| {
            let mut pts: Vec<(f64, f64)> = r
                .find(e, bench)
                .into_iter()
                .filter(|row| filter(row))
                .map(|row| (x(row), f(row, key)))
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            (!pts.is_empty()).then(|| Line {
                name: e.clone(),
                color: engine_color(e),
                points: pts,
                markers: true,
            })
        })
        .collect()
}

/// [`engine_lines`] against the thread count, of the rows that have `key`.
pub(super) fn lines_vs_threads(
    r: &Results,
    bench: &str,
    key: &str,
    filter: impl Fn(&Value) -> bool,
) -> Vec<Line> {
    let threads = |x: &Value| u(x, "threads") as f64;
    engine_lines(r, bench, threads, key, |x| {
        filter(x) && f(x, key).is_finite()
    })
}

/// The report being written: its Markdown, and the charts it has drawn so far.
pub struct Out<'a> {
    pub md: String,
    dir: &'a Path,
    charts: Vec<(String, String)>,
}

impl Out<'_> {
    /// Draws `fig` as charts/`stem`.{png,svg} and links it from the report.
    pub fn figure(&mut self, stem: &str, fig: Figure) -> Result<()> {
        let charts = self.dir.join("charts");
        std::fs::create_dir_all(&charts)
            .map_err(|e| Error::io(format!("create {}", charts.display()), e))?;
        chart::render(&fig, &charts, stem)?;
        self.charts.push((stem.to_string(), fig.title.clone()));
        let _ = writeln!(
            self.md,
            "\n![{}](charts/{stem}.png)\n\n[{stem}.svg](charts/{stem}.svg)\n",
            fig.title
        );
        Ok(())
    }
}

/// Reads DIR/results.jsonl and writes DIR/report.md and DIR/charts/*.{png,svg}.
pub fn render_dir(dir: &Path) -> Result<()> {
    let path = dir.join("results.jsonl");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| Error::io(format!("read {}", path.display()), e))?;
    let r = Results::parse(&text)?;
    let md = render(&r, dir)?;
    let out = dir.join("report.md");
    std::fs::write(&out, md).map_err(|e| Error::io(format!("write {}", out.display()), e))
}

/// The report of `r`, writing its charts under `dir/charts`.
pub fn render(r: &Results, dir: &Path) -> Result<String> {
    let name = r.suite();
    let suite = super::find(name)
        .ok_or_else(|| Error::Usage(format!("unknown suite {name:?} in results.jsonl")))?;
    let title = suite.title();
    let mut o = Out {
        md: String::new(),
        dir,
        charts: Vec::new(),
    };
    let h = &r.header;
    // The seeds' titles start with their number ("000: Symas, ...").
    let seed = if title.starts_with(|c: char| c.is_ascii_digit()) {
        "seed "
    } else {
        ""
    };
    let _ = writeln!(o.md, "# larch-bench suite `{name}`: {seed}{title}\n");
    let _ = writeln!(
        o.md,
        "Scale **{}**; command `{}`; larch-bench {}; seed {}; {}.\n",
        s(h, "scale"),
        s(h, "command"),
        s(h, "larch_bench_version"),
        u(h, "seed"),
        match &r.footer {
            Some(ft) => format!(
                "the suite ran {} and had {} failed step(s)",
                hms(f(ft, "elapsed_s")),
                u(ft, "errors")
            ),
            None => "the run did not finish (no footer row)".into(),
        }
    );
    machine_section(&mut o.md, h);
    params_section(&mut o.md, h);
    engines_section(&mut o.md, r);
    let _ = writeln!(o.md, "## Results\n");
    verdict_section(&mut o.md, r, suite);
    suite.render(r, &mut o)?;
    memory_and_device_section(&mut o.md, r);
    let errors: Vec<&Value> = r
        .rows
        .iter()
        .filter(|x| s(x, "status") == "error")
        .collect();
    if !errors.is_empty() {
        let _ = writeln!(o.md, "\n## Failed steps\n");
        for e in errors {
            let _ = writeln!(
                o.md,
                "- {} `{}`: {}",
                s(e, "engine"),
                s(e, "step"),
                s(e, "message")
            );
        }
    }
    let _ = writeln!(o.md, "\n## Charts\n");
    for (stem, t) in &o.charts {
        let _ = writeln!(
            o.md,
            "- {t}: [PNG](charts/{stem}.png), [SVG](charts/{stem}.svg)"
        );
    }
    Ok(o.md)
}

/// The verdict over the suite's headline figures (crate::verdict): each engine's ops/sec side
/// by side and Larch / best peer, so that the reader does not have to compute who won.
fn verdict_section(md: &mut String, r: &Results, suite: &dyn Suite) {
    let rows: Vec<Value> = r
        .ok()
        .filter_map(|x| {
            let label = suite.headline(x)?;
            // A short run has no rates left (`unrated_if_short`): the verdict shows it so.
            let mut x = x.clone();
            x["benchmark"] = Value::String(label);
            Some(x)
        })
        .collect();
    let table = crate::verdict::verdict_table(&crate::verdict::verdicts(&rows), &r.engines());
    if !table.is_empty() {
        let _ = writeln!(md, "### Verdict\n\n{table}");
    }
    let short: Vec<String> = r
        .ok()
        .filter(|x| x.get("short").is_some())
        .map(|x| {
            format!(
                "{} {} ({} thr, {:.1} ms)",
                s(x, "engine"),
                s(x, "benchmark"),
                u(x, "threads"),
                f(x, "wall_s") * 1000.0
            )
        })
        .collect();
    if !short.is_empty() {
        let _ = writeln!(
            md,
            "Runs under {} ms, too short to give a rate (left blank in the tables, out of the \
             charts; a larger --scale gives them one): {}.\n",
            MIN_WALL_S * 1000.0,
            short.join(", ")
        );
    }
}

fn machine_section(md: &mut String, h: &Value) {
    let m = &h["machine"];
    let st = &m["storage"];
    let _ = writeln!(md, "## Machine\n");
    let _ = writeln!(
        md,
        "- CPU: {} cores, {}\n- Memory: {:.1} GiB\n- Kernel: Linux {} ({})",
        u(m, "cores"),
        s(m, "cpu"),
        f(m, "mem_total_bytes") / (1u64 << 30) as f64,
        s(m, "kernel"),
        s(m, "os"),
    );
    let journal = match st.get("journal").and_then(Value::as_bool) {
        Some(true) => ", journal on",
        Some(false) if s(st, "fstype").starts_with("ext") => ", no journal",
        _ => "",
    };
    let _ = writeln!(
        md,
        "- Storage: databases in {} on {} ({}{journal}), device {}{}{}, {}{}\n",
        s(st, "db_path"),
        s(st, "source"),
        s(st, "fstype"),
        s(st, "device"),
        st.get("model")
            .and_then(Value::as_str)
            .map(|x| format!(" (model/vendor {x})"))
            .unwrap_or_default(),
        st.get("size_bytes")
            .and_then(Value::as_u64)
            .map(|b| format!(", {} GiB", b >> 30))
            .unwrap_or_default(),
        match st.get("rotational").and_then(Value::as_bool) {
            Some(true) => "queue/rotational=1 (a spinning disk, or a virtual disk that reports 1)",
            Some(false) => "queue/rotational=0 (SSD or NVMe)",
            None => "rotational: unknown",
        },
        st.get("read_ahead_kb")
            .and_then(Value::as_u64)
            .map(|k| format!(", read_ahead_kb={k}"))
            .unwrap_or_default()
    );
}

fn params_section(md: &mut String, h: &Value) {
    let _ = writeln!(md, "## Scale and sizes\n");
    if let Some(p) = h["params"].as_object() {
        let rows: Vec<Vec<String>> = p
            .iter()
            .map(|(k, v)| {
                let bytes = k.contains("memory") || k.contains("cache");
                let shown = match (v.as_u64(), v.as_array()) {
                    (Some(b), _) if bytes => format!("{b} ({})", mib(b)),
                    (_, Some(list)) if bytes => list
                        .iter()
                        .map(|x| x.as_u64().map_or(x.to_string(), mib))
                        .collect::<Vec<_>>()
                        .join(", "),
                    (_, Some(list)) => list
                        .iter()
                        .map(|x| x.to_string())
                        .collect::<Vec<_>>()
                        .join(", "),
                    _ => v.to_string(),
                };
                vec![k.clone(), shown]
            })
            .collect();
        md.push_str(&table(&["parameter", "value"], &rows));
    }
    md.push('\n');
}

fn engines_section(md: &mut String, r: &Results) {
    let _ = writeln!(md, "## Engines\n");
    let mut rows = Vec::new();
    for e in r.engines() {
        let mut versions: Vec<String> = Vec::new();
        let mut configs: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for x in r.ok().filter(|x| s(x, "engine") == e) {
            let v = s(x, "engine_version").to_string();
            if !versions.contains(&v) {
                versions.push(v);
            }
            let c = x
                .get("config")
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .unwrap_or_default();
            let step = s(x, "step").to_string();
            let steps = configs.entry(c).or_default();
            if !steps.contains(&step) {
                steps.push(step);
            }
        }
        let many = configs.len() > 1;
        let cfg = configs
            .iter()
            .map(|(c, steps)| {
                if many {
                    format!("`{c}` (steps: {})", steps.join(", "))
                } else {
                    format!("`{c}`")
                }
            })
            .collect::<Vec<_>>()
            .join("<br>");
        rows.push(vec![e.clone(), versions.join(", "), cfg]);
    }
    for x in r.rows.iter().filter(|x| s(x, "status") == "unavailable") {
        rows.push(vec![
            s(x, "engine").to_string(),
            "unavailable".into(),
            s(x, "message").to_string(),
        ]);
    }
    md.push_str(&table(&["Engine", "Version", "Configuration"], &rows));
    md.push('\n');
}

/// Load-throughput-over-time lines (ops/s against seconds) from each engine's `bench` row.
pub(super) fn load_lines(r: &Results, bench: &str) -> Vec<Line> {
    r.engines()
        .iter()
        .filter_map(|e| {
            let row = *r.find(e, bench).first()?;
            let threads: Vec<Vec<(f64, f64)>> = series_threads(row)
                .iter()
                .map(|t| thread_points(t))
                .collect();
            let pts = match threads.as_slice() {
                [one] => smoothed_rates(one, 0.05, 0.002),
                many => rates(&summed(many, 200)),
            };
            (!pts.is_empty()).then(|| Line {
                name: e.clone(),
                color: engine_color(e),
                points: pts,
                markers: false,
            })
        })
        .collect()
}

/// Per-thread ops/s over time, one panel per engine, for the largest thread count of `bench`.
pub(super) fn thread_figure(r: &Results, o: &mut Out, stem: &str, bench: &str) -> Result<()> {
    let mut panels = Vec::new();
    let mut readers = 0;
    for e in r.engines() {
        let Some(row) = max_threads(&r.find(&e, bench)) else {
            continue;
        };
        readers = u(row, "threads");
        let mut lines = Vec::new();
        for (i, t) in series_threads(row).iter().enumerate() {
            // A line needs two rates it can draw on the log axis: a run of a few ms gives
            // none (its samples are too close together to be a rate, or zero).
            let mut pts = smoothed_rates(&thread_points(t), 0.02, 0.01);
            pts.retain(|p| p.0.is_finite() && p.1.is_finite() && p.1 > 0.0);
            if pts.len() < 2 {
                continue;
            }
            let role = s(t, "role");
            lines.push(Line {
                name: if role == "writer" {
                    "writer".into()
                } else {
                    format!("{role} {}", u(t, "tid"))
                },
                color: if role == "writer" {
                    RGBColor(0, 0, 0)
                } else {
                    series_color(i)
                },
                points: pts,
                markers: false,
            });
        }
        if lines.is_empty() {
            continue;
        }
        panels.push(Panel::Lines(LinePanel {
            title: e.to_string(),
            x_label: "Time (s)".into(),
            y_label: "Operations per second (ops/s)".into(),
            x_log: false,
            y_log: true,
            lines,
            marks: vec![],
        }));
    }
    if panels.is_empty() {
        let _ = writeln!(
            o.md,
            "\n(No per-thread throughput chart for {bench}: no run sampled its threads over \
             time; the samples start after 1 ms and need two points a thread, which runs this \
             short or `--series_interval_ms=0` do not give.)\n"
        );
        return Ok(());
    }
    o.figure(
        stem,
        Figure {
            title: format!(
                "Per-thread throughput over time, {bench} with {} and 1 writer",
                plural(readers, "reader")
            ),
            panels,
            cols: 2,
            legend: vec![],
        },
    )
}

/// The seed 000/002 load table for `bench`.
pub(super) fn load_table(r: &Results, bench: &str, with_storage: bool) -> String {
    let h = &r.header["machine"]["storage"];
    let storage = format!("{}/{}", s(h, "device"), s(h, "fstype"));
    let journal = match h.get("journal").and_then(Value::as_bool) {
        Some(true) => "Y",
        Some(false) => "N",
        None => "-",
    };
    let mut rows = Vec::new();
    for e in r.engines() {
        let Some(x) = r.find(&e, bench).first().copied() else {
            continue;
        };
        let mut row = vec![e.clone()];
        if with_storage {
            row.push(storage.clone());
            row.push(journal.into());
        }
        row.extend([
            hms(f(x, "wall_s")),
            hms(f(x, "user_s")),
            hms(f(x, "sys_s")),
            n0(f(x, "cpu_pct")),
            n0(f(x, "db_bytes") / 1024.0),
            u(x, "vcsw").to_string(),
            u(x, "ivcsw").to_string(),
            u(x, "fs_in").to_string(),
            u(x, "fs_out").to_string(),
            format!("{:.4}", u(x, "fs_out") as f64 / u(x, "ops").max(1) as f64),
        ]);
        rows.push(row);
    }
    let mut head = vec!["Engine"];
    if with_storage {
        head.extend(["Storage", "Journal"]);
    }
    head.extend([
        "Wall",
        "User",
        "Sys",
        "%",
        "KB",
        "Vol",
        "Invol",
        "In",
        "Out",
        "Write Amp",
    ]);
    table(&head, &rows)
}

pub(super) const LOAD_NOTE: &str =
    "Wall/User/Sys are HH:MM:SS.ss; % = (User + Sys) / Wall; KB = database \
size on disk (allocated); Vol/Invol = context switches; In/Out = file-system blocks read and \
written by the process (512-byte units, getrusage), counted when pages are dirtied, as in the \
seed; Write Amp = Out / records written (the seed's definition: blocks per record; a 4016-byte \
record is 7.84 blocks, so 8 is about 1x in bytes).";

pub(super) fn rww_vs_readers(
    r: &Results,
    o: &mut Out,
    stem: &str,
    filter: impl Fn(&Value) -> bool + Copy,
    what: &str,
) -> Result<()> {
    o.figure(
        stem,
        Figure {
            title: format!("readwhilewriting: throughput against reader count{what}"),
            panels: vec![
                Panel::Lines(LinePanel {
                    title: "Write throughput (1 writer)".into(),
                    x_label: "Reader threads".into(),
                    y_label: "Writes per second (ops/s)".into(),
                    x_log: false,
                    y_log: false,
                    lines: lines_vs_threads(r, "readwhilewriting", "writer_ops_per_sec", filter),
                    marks: vec![],
                }),
                Panel::Lines(LinePanel {
                    title: "Read throughput (all readers)".into(),
                    x_label: "Reader threads".into(),
                    y_label: "Reads per second (ops/s)".into(),
                    x_log: false,
                    y_log: false,
                    lines: lines_vs_threads(r, "readwhilewriting", "ops_per_sec", filter),
                    marks: vec![],
                }),
            ],
            cols: 2,
            legend: engine_legend(r),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hms_matches_the_seed_format() {
        assert_eq!(hms(3545.93), "00:59:05.93");
        assert_eq!(hms(10837.0), "03:00:37.00");
    }

    #[test]
    fn rates_and_sums() {
        let a = vec![(0.0, 0.0), (1.0, 100.0), (2.0, 300.0)];
        assert_eq!(rates(&a), vec![(1.0, 100.0), (2.0, 200.0)]);
        let s = summed(&[a.clone(), a.clone()], 2);
        assert_eq!(s, vec![(0.0, 0.0), (1.0, 200.0), (2.0, 600.0)]);
        // Windows of at least half the elapsed time: the 1.4 s sample is merged into 1..2 s.
        let b = vec![
            (0.0, 0.0),
            (0.2, 10.0),
            (1.0, 100.0),
            (1.4, 200.0),
            (2.0, 300.0),
        ];
        assert_eq!(
            smoothed_rates(&b, 0.5, 0.0),
            vec![(0.2, 50.0), (1.0, 112.5), (2.0, 200.0)]
        );
        // And at least abs_s long.
        assert_eq!(
            smoothed_rates(&b, 0.0, 0.9),
            vec![(1.0, 100.0), (2.0, 200.0)]
        );
    }

    #[test]
    fn the_device_section_shows_the_writes_made_while_the_steps_ran() {
        let mib = 1u64 << 20;
        let text = [
            serde_json::json!({"kind": "header"}),
            // LMDB: its writes left dirty in the page cache, written at the syncs.
            serde_json::json!({"status": "ok", "engine": "lmdb", "maxrss_kb": 10,
                "user_bytes_written": 100 * mib, "dev_write_bytes": 130 * mib,
                "dev_write_bytes_run": 2 * mib, "dev_writes": 5, "dev_reads": 7}),
            serde_json::json!({"status": "ok", "engine": "lmdb", "maxrss_kb": 12,
                "user_bytes_written": 100 * mib, "dev_write_bytes": 130 * mib,
                "dev_write_bytes_run": 0, "dev_writes": 5, "dev_reads": 7}),
            // Results from before the column: the sum is left empty, not taken as 0.
            serde_json::json!({"status": "ok", "engine": "rocksdb", "maxrss_kb": 9,
                "user_bytes_written": 100 * mib, "dev_write_bytes": 150 * mib,
                "dev_writes": 5, "dev_reads": 7}),
        ]
        .iter()
        .map(|v| v.to_string())
        .collect::<Vec<_>>()
        .join("\n");
        let r = Results::parse(&text).unwrap();
        let mut md = String::new();
        memory_and_device_section(&mut md, &r);
        let row = |e: &str| {
            md.lines()
                .find(|l| l.starts_with(&format!("| {e} |")))
                .unwrap_or_default()
                .to_string()
        };
        assert!(md.contains("In Runs MiB"), "{md}");
        assert!(row("lmdb").contains("| 260 | 1.30 | 2 |"), "{md}");
        assert!(row("rocksdb").contains("| 150 | 1.50 |  |"), "{md}");
    }

    #[test]
    fn a_short_run_keeps_its_counts_and_loses_its_rates() {
        let row = serde_json::json!({"status": "ok", "engine": "lmdb", "wall_s": 0.002,
            "ops": 1000, "ops_per_sec": 500000.0, "writer_ops_per_sec": 0.0});
        let v = unrated_if_short(row);
        assert_eq!(v["short"], true);
        assert_eq!(v["ops"], 1000);
        assert!(v.get("ops_per_sec").is_none() && v.get("writer_ops_per_sec").is_none());
        let long = serde_json::json!({"status": "ok", "wall_s": 0.5, "ops_per_sec": 1.0});
        assert_eq!(unrated_if_short(long.clone()), long);
    }
}
