//! `--repeat=N`: each engine runs the benchmark list N times (the repeats interleaved over the
//! engines, so that a slow spell of a shared machine falls on every engine alike); the summary
//! and the verdict show each (engine, benchmark, threads)'s median over the repeats and its
//! spread, (max - min) / median.

use serde_json::{json, Value};
use std::collections::HashMap;

/// The median of `xs` (the mean of the middle two for an even count); None when empty.
pub fn median(xs: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// One row per (engine, benchmark, threads, occurrence within a repeat) of the ok rows: the
/// run whose ops/sec is nearest the median, carrying the medians of ops/sec, the writer's
/// ops/sec, micros/op and wall time, with `repeats`, `ops_per_sec_min`, `ops_per_sec_max` and
/// `spread_pct`. Rows that are not ok (an unavailable engine, a failed run) are kept once.
/// Rows keep the order in which their first repeat came.
pub fn medians(rows: &[Value]) -> Vec<Value> {
    let text = |r: &Value, k: &str| r.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let num = |r: &Value, k: &str| r.get(k).and_then(Value::as_f64);
    // (engine, benchmark, threads, repeat) -> runs seen so far: the occurrence of a row.
    let mut seen: HashMap<(String, String, u64, u64), usize> = HashMap::new();
    let mut groups: Vec<Vec<&Value>> = Vec::new();
    let mut index: HashMap<(String, String, u64, usize), usize> = HashMap::new();
    let mut others: Vec<(usize, Value)> = Vec::new();
    let mut other_keys: Vec<(String, String)> = Vec::new();
    for r in rows {
        if r.get("status").and_then(Value::as_str) != Some("ok") {
            let key = (text(r, "engine"), text(r, "benchmark"));
            if !other_keys.contains(&key) {
                other_keys.push(key);
                others.push((groups.len(), r.clone()));
            }
            continue;
        }
        let threads = num(r, "threads").unwrap_or(1.0) as u64;
        let repeat = num(r, "repeat").unwrap_or(0.0) as u64;
        let (engine, bench) = (text(r, "engine"), text(r, "benchmark"));
        let occ = seen
            .entry((engine.clone(), bench.clone(), threads, repeat))
            .or_insert(0);
        let key = (engine, bench, threads, *occ);
        *occ += 1;
        let i = *index.entry(key).or_insert_with(|| {
            groups.push(Vec::new());
            groups.len() - 1
        });
        groups[i].push(r);
    }
    let mut out = Vec::new();
    let mut others = others.into_iter().peekable();
    for (i, g) in groups.iter().enumerate() {
        while let Some((_, v)) = others.next_if(|(at, _)| *at <= i) {
            out.push(v);
        }
        let ops: Vec<f64> = g.iter().filter_map(|r| num(r, "ops_per_sec")).collect();
        let Some(mid) = median(&ops) else {
            out.push(g[0].clone());
            continue;
        };
        let nearest = g
            .iter()
            .min_by(|a, b| {
                let d = |r: &&Value| (num(r, "ops_per_sec").unwrap_or(f64::MAX) - mid).abs();
                d(a).total_cmp(&d(b))
            })
            .copied()
            .unwrap_or(g[0]);
        let mut row = nearest.clone();
        let (lo, hi) = ops
            .iter()
            .fold((f64::MAX, f64::MIN), |(l, h), &x| (l.min(x), h.max(x)));
        if let Some(o) = row.as_object_mut() {
            o.insert("ops_per_sec".into(), json!(mid));
            for k in ["writer_ops_per_sec", "micros_per_op", "wall_s"] {
                let xs: Vec<f64> = g.iter().filter_map(|r| num(r, k)).collect();
                if let Some(m) = median(&xs) {
                    o.insert(k.into(), json!(m));
                }
            }
            o.insert("repeats".into(), json!(g.len()));
            o.insert("ops_per_sec_min".into(), json!(lo));
            o.insert("ops_per_sec_max".into(), json!(hi));
            o.insert(
                "spread_pct".into(),
                json!(if mid > 0.0 {
                    (hi - lo) / mid * 100.0
                } else {
                    0.0
                }),
            );
            o.remove("repeat");
        }
        out.push(row);
    }
    out.extend(others.map(|(_, v)| v));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(engine: &str, bench: &str, repeat: u64, ops: f64) -> Value {
        json!({"status": "ok", "engine": engine, "benchmark": bench, "threads": 1,
               "repeat": repeat, "ops_per_sec": ops, "wall_s": 1.0})
    }

    #[test]
    fn medians_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn one_row_per_engine_and_benchmark_with_the_spread() {
        let rows = vec![
            run("larch", "fillseq", 0, 100.0),
            run("larch", "readseq", 0, 10.0),
            json!({"status": "unavailable", "engine": "bdb", "benchmark": "fillseq,readseq"}),
            run("lmdb", "fillseq", 0, 50.0),
            run("larch", "fillseq", 1, 120.0),
            run("larch", "readseq", 1, 30.0),
            json!({"status": "unavailable", "engine": "bdb", "benchmark": "fillseq,readseq"}),
            run("lmdb", "fillseq", 1, 50.0),
            run("larch", "fillseq", 2, 80.0),
            run("larch", "readseq", 2, 20.0),
            run("lmdb", "fillseq", 2, 55.0),
        ];
        let m = medians(&rows);
        assert_eq!(m.len(), 4, "{m:?}");
        assert_eq!(m[0]["ops_per_sec"], 100.0);
        assert_eq!(m[0]["repeats"], 3);
        assert_eq!(m[0]["spread_pct"], 40.0);
        assert_eq!(m[1]["ops_per_sec"], 20.0);
        assert_eq!(m[2]["status"], "unavailable");
        assert_eq!(m[3]["engine"], "lmdb");
        assert_eq!(m[3]["ops_per_sec"], 50.0);
        assert!(m[0].get("repeat").is_none());
    }

    #[test]
    fn a_benchmark_run_twice_in_one_repeat_stays_two_rows() {
        let rows = vec![
            run("larch", "overwrite", 0, 10.0),
            run("larch", "overwrite", 0, 100.0),
            run("larch", "overwrite", 1, 12.0),
            run("larch", "overwrite", 1, 120.0),
        ];
        let m = medians(&rows);
        assert_eq!(m.len(), 2);
        assert_eq!(m[0]["ops_per_sec"], 11.0);
        assert_eq!(m[1]["ops_per_sec"], 110.0);
    }
}
