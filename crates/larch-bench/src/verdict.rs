//! The verdict that ends a comparison: per benchmark, Larch's figure beside each peer's, and
//! Larch / best peer, marked as a win, a loss or even, so that a reader does not have to find
//! the figures to compare in a table grouped by engine.
//!
//! The subjects are the engines whose name starts with "larch" (larch, larch-pages,
//! larch-mapped); every other engine is a peer. The figure is throughput (ops/sec, higher is better); readwhilewriting
//! gets a second row for its writer. A measurement that ran for less than [`MIN_WALL_S`] is
//! too short to trust: it is shown as "short", never as a figure, and gets no verdict. One
//! verdict object per row goes to the JSON (`"kind":"verdict"`, no `status`, so that readers
//! of result rows pass it by).

use serde_json::{json, Value};
use std::collections::HashMap;

/// Runs shorter than this are not compared: about five scheduler ticks at 250 Hz, below which
/// one preemption moves the figure by a fifth (the 2 ms tiny runs that showed 0 writes/s).
pub const MIN_WALL_S: f64 = 0.02;
/// Ratios within this factor of 1 are "even": run-to-run noise on a shared machine.
pub const EVEN_WITHIN: f64 = 0.05;

fn is_subject(engine: &str) -> bool {
    engine.starts_with("larch")
}

/// One figure of one engine in one row: ops/sec, or None when the run was too short.
#[derive(Debug, Clone)]
struct Figure {
    engine: String,
    ops_per_sec: Option<f64>,
    /// (max - min) / median of the repeats, in percent, for a median of `--repeat` runs.
    spread_pct: Option<f64>,
}

#[derive(Debug, Clone)]
struct Row {
    benchmark: String,
    threads: u64,
    figures: Vec<Figure>,
}

/// Groups the ok result rows into verdict rows, in the order benchmarks first appear. A
/// benchmark that an engine ran twice (the same thread count) makes two rows, matched by
/// order.
fn rows(results: &[Value]) -> Vec<Row> {
    let mut out: Vec<Row> = Vec::new();
    // (engine, label, threads) -> how many times that engine has run it so far.
    let mut runs: HashMap<(String, String, u64), usize> = HashMap::new();
    // (label, threads, occurrence) -> its row in `out`.
    let mut index: HashMap<(String, u64, usize), usize> = HashMap::new();
    for r in results {
        if r.get("status").and_then(Value::as_str) != Some("ok") {
            continue;
        }
        let text = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let num = |k: &str| r.get(k).and_then(Value::as_f64);
        let (engine, benchmark) = (text("engine"), text("benchmark"));
        let threads = num("threads").unwrap_or(1.0) as u64;
        let short = num("wall_s").is_none_or(|w| w < MIN_WALL_S);
        let mut entries = vec![(benchmark.clone(), num("ops_per_sec"))];
        if let Some(w) = num("writer_ops_per_sec") {
            entries.push((format!("{benchmark} (writer)"), Some(w)));
        }
        for (label, ops) in entries {
            let writer_row = label.ends_with("(writer)");
            let run = runs
                .entry((engine.clone(), label.clone(), threads))
                .or_insert(0);
            let occurrence = *run;
            *run += 1;
            let i = *index
                .entry((label.clone(), threads, occurrence))
                .or_insert_with(|| {
                    out.push(Row {
                        benchmark: label,
                        threads,
                        figures: Vec::new(),
                    });
                    out.len() - 1
                });
            out[i].figures.push(Figure {
                engine: engine.clone(),
                ops_per_sec: if short { None } else { ops },
                // The spread is of the repeats' ops/sec; the writer's row has none of its own.
                spread_pct: num("spread_pct").filter(|_| !writer_row),
            });
        }
    }
    out
}

fn outcome(ratio: f64) -> &'static str {
    if ratio >= 1.0 + EVEN_WITHIN {
        "win"
    } else if ratio <= 1.0 - EVEN_WITHIN {
        "loss"
    } else {
        "even"
    }
}

/// The verdict objects of a comparison: one per row that has a subject and a peer.
pub fn verdicts(results: &[Value]) -> Vec<Value> {
    let mut out = Vec::new();
    for row in rows(results) {
        let peers: Vec<&Figure> = row
            .figures
            .iter()
            .filter(|f| !is_subject(&f.engine))
            .collect();
        let subjects: Vec<&Figure> = row
            .figures
            .iter()
            .filter(|f| is_subject(&f.engine))
            .collect();
        if peers.is_empty() || subjects.is_empty() {
            continue;
        }
        let best = peers
            .iter()
            .filter_map(|f| f.ops_per_sec.map(|x| (f.engine.clone(), x)))
            .max_by(|a, b| a.1.total_cmp(&b.1));
        let figures: serde_json::Map<String, Value> = row
            .figures
            .iter()
            .map(|f| {
                (
                    f.engine.clone(),
                    f.ops_per_sec.map_or(json!("short"), |x| json!(x)),
                )
            })
            .collect();
        let spread: serde_json::Map<String, Value> = row
            .figures
            .iter()
            .filter_map(|f| f.spread_pct.map(|p| (f.engine.clone(), json!(p))))
            .collect();
        let mut against = serde_json::Map::new();
        for s in &subjects {
            let v = match (s.ops_per_sec, &best) {
                (Some(x), Some((_, b))) if *b > 0.0 => {
                    let ratio = x / b;
                    json!({ "ratio": ratio, "outcome": outcome(ratio) })
                }
                _ => json!({ "ratio": null, "outcome": "short" }),
            };
            against.insert(s.engine.clone(), v);
        }
        let mut v = json!({
            "kind": "verdict",
            "benchmark": row.benchmark,
            "threads": row.threads,
            "metric": "ops_per_sec",
            "figures": figures,
            "best_peer": best.as_ref().map(|b| b.0.clone()),
            "best_peer_ops_per_sec": best.as_ref().map(|b| b.1),
            "vs_best_peer": against,
        });
        if !spread.is_empty() {
            v["spread_pct"] = Value::Object(spread);
        }
        out.push(v);
    }
    out
}

/// ops/sec in three significant figures with a K/M suffix.
fn compact(x: f64) -> String {
    let (v, unit) = if x >= 1e6 {
        (x / 1e6, "M")
    } else if x >= 1e3 {
        (x / 1e3, "K")
    } else {
        (x, "")
    };
    let digits = if v >= 100.0 {
        0
    } else if v >= 10.0 {
        1
    } else {
        2
    };
    format!("{v:.digits$}{unit}")
}

/// The verdict as a Markdown table: engines in the order given, then the best peer and one
/// column of Larch / best peer per subject. Empty when there is nothing to compare.
pub fn verdict_table(verdicts: &[Value], engines: &[String]) -> String {
    let subjects: Vec<&String> = engines.iter().filter(|e| is_subject(e)).collect();
    if verdicts.is_empty() || subjects.is_empty() {
        return String::new();
    }
    let mut s = String::from("Verdict (ops/sec; Larch / best peer: win >= 1.05, loss <= 0.95)\n\n");
    s.push_str("| benchmark | thr |");
    for e in engines {
        s.push_str(&format!(" {e} |"));
    }
    s.push_str(" best peer |");
    for e in &subjects {
        s.push_str(&format!(" {e} / best |"));
    }
    s.push('\n');
    s.push_str(&"|---".repeat(3 + engines.len() + subjects.len()));
    s.push_str("|\n");
    let mut short = false;
    for v in verdicts {
        let figure = |e: &str| v.get("figures").and_then(|f| f.get(e));
        s.push_str(&format!(
            "| {} | {} |",
            v["benchmark"].as_str().unwrap_or(""),
            v["threads"]
        ));
        for e in engines {
            let spread = v
                .get("spread_pct")
                .and_then(|m| m.get(e.as_str()))
                .and_then(Value::as_f64)
                .map(|p| format!(" ±{p:.0}%"))
                .unwrap_or_default();
            let cell = match figure(e) {
                Some(Value::Number(n)) => format!("{}{spread}", compact(n.as_f64().unwrap_or(0.0))),
                Some(Value::String(t)) => {
                    short = true;
                    t.clone()
                }
                _ => String::new(),
            };
            s.push_str(&format!(" {cell} |"));
        }
        s.push_str(&format!(" {} |", v["best_peer"].as_str().unwrap_or("-")));
        for e in &subjects {
            let cell = match v["vs_best_peer"].get(e.as_str()) {
                Some(x) => match (x["ratio"].as_f64(), x["outcome"].as_str()) {
                    (Some(r), Some("loss")) => format!("**{r:.2} loss**"),
                    (Some(r), Some(o)) => format!("{r:.2} {o}"),
                    _ => "short".to_string(),
                },
                None => String::new(),
            };
            s.push_str(&format!(" {cell} |"));
        }
        s.push('\n');
    }
    if short {
        s.push_str(&format!(
            "\n\"short\": the run took under {MIN_WALL_S} s, too short to trust; raise --num.\n"
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(engine: &str, bench: &str, threads: u64, ops: f64, wall: f64) -> Value {
        json!({"status": "ok", "engine": engine, "benchmark": bench, "threads": threads,
               "ops_per_sec": ops, "wall_s": wall})
    }

    #[test]
    fn ratios_against_the_best_peer_with_outcomes() {
        let rows = vec![
            result("larch", "fillseq", 1, 300.0, 1.0),
            result("larch", "readrandom", 1, 90.0, 1.0),
            result("lmdb", "fillseq", 1, 200.0, 1.0),
            result("lmdb", "readrandom", 1, 100.0, 1.0),
            result("rocksdb", "fillseq", 1, 100.0, 1.0),
            result("rocksdb", "readrandom", 1, 50.0, 1.0),
        ];
        let v = verdicts(&rows);
        assert_eq!(v.len(), 2);
        assert_eq!(v[0]["benchmark"], "fillseq");
        assert_eq!(v[0]["best_peer"], "lmdb");
        assert_eq!(v[0]["vs_best_peer"]["larch"]["ratio"], 1.5);
        assert_eq!(v[0]["vs_best_peer"]["larch"]["outcome"], "win");
        assert_eq!(v[1]["vs_best_peer"]["larch"]["outcome"], "loss");
        let engines: Vec<String> = ["larch", "lmdb", "rocksdb"].map(String::from).into();
        let t = verdict_table(&v, &engines);
        assert!(
            t.contains("| fillseq | 1 | 300 | 200 | 100 | lmdb | 1.50 win |"),
            "{t}"
        );
        assert!(t.contains("**0.90 loss**"), "{t}");
    }

    #[test]
    fn short_runs_are_flagged_not_compared() {
        let rows = vec![
            result("larch", "readseq", 1, 9e6, 0.001),
            result("lmdb", "readseq", 1, 5e6, 0.5),
            result("larch", "fillseq", 1, 1e6, 0.5),
            result("lmdb", "fillseq", 1, 2e6, 0.001),
            result("rocksdb", "fillseq", 1, 5e5, 0.5),
        ];
        let v = verdicts(&rows);
        assert_eq!(v[0]["figures"]["larch"], "short");
        assert_eq!(v[0]["vs_best_peer"]["larch"]["outcome"], "short");
        // A short peer is left out of the best: rocksdb is the best that can be trusted.
        assert_eq!(v[1]["best_peer"], "rocksdb");
        assert_eq!(v[1]["vs_best_peer"]["larch"]["ratio"], 2.0);
        let engines: Vec<String> = ["larch", "lmdb", "rocksdb"].map(String::from).into();
        let t = verdict_table(&v, &engines);
        assert!(t.contains("| readseq | 1 | short | 5.00M |"), "{t}");
        assert!(t.contains("too short to trust"), "{t}");
    }

    #[test]
    fn repeats_threads_and_writers_make_their_own_rows() {
        let mut w = result("larch", "readwhilewriting", 2, 10.0, 1.0);
        w["writer_ops_per_sec"] = json!(7.0);
        let mut wl = result("lmdb", "readwhilewriting", 2, 20.0, 1.0);
        wl["writer_ops_per_sec"] = json!(3.5);
        let rows = vec![
            result("larch", "overwrite", 1, 10.0, 1.0),
            result("larch", "overwrite", 1, 30.0, 1.0),
            w,
            result("lmdb", "overwrite", 1, 10.0, 1.0),
            result("lmdb", "overwrite", 1, 10.0, 1.0),
            wl,
            json!({"status": "error", "engine": "rocksdb", "benchmark": "overwrite"}),
        ];
        let v = verdicts(&rows);
        let labels: Vec<_> = v
            .iter()
            .map(|x| format!("{} {}", x["benchmark"].as_str().unwrap(), x["threads"]))
            .collect();
        assert_eq!(
            labels,
            [
                "overwrite 1",
                "overwrite 1",
                "readwhilewriting 2",
                "readwhilewriting (writer) 2"
            ]
        );
        assert_eq!(v[1]["vs_best_peer"]["larch"]["ratio"], 3.0);
        assert_eq!(v[3]["vs_best_peer"]["larch"]["ratio"], 2.0);
        // Only one engine: nothing to compare.
        assert!(verdicts(&rows[..2]).is_empty());
    }

    #[test]
    fn medians_of_repeats_show_their_spread() {
        let mut a = result("larch", "fillseq", 1, 300.0, 1.0);
        a["spread_pct"] = json!(12.0);
        let mut b = result("lmdb", "fillseq", 1, 200.0, 1.0);
        b["spread_pct"] = json!(3.4);
        let v = verdicts(&[a, b]);
        assert_eq!(v[0]["spread_pct"]["larch"], 12.0);
        let engines: Vec<String> = ["larch", "lmdb"].map(String::from).into();
        let t = verdict_table(&v, &engines);
        assert!(
            t.contains("| fillseq | 1 | 300 ±12% | 200 ±3% | lmdb | 1.50 win |"),
            "{t}"
        );
    }
}
