//! `larch-bench --help` explains every column the driver prints: a run of every kind of output
//! (result and writer lines, rusage, io, Larch's counters, the process line, the histogram
//! block, the summary and verdict tables, the CSV header) is read column by column, and each
//! column's name must be in the help's legend.

use larch_bench::report::parse_result_line;
use std::collections::BTreeSet;
use std::process::Command;

fn help() -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_larch-bench"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

/// The cells of a Markdown table row.
fn cells(line: &str) -> Vec<String> {
    line.trim()
        .trim_matches('|')
        .split('|')
        .map(|c| c.trim().to_string())
        .collect()
}

/// Every column name the output of one small run prints.
fn printed_columns() -> BTreeSet<String> {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("help-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let csv = dir.join("out.csv");
    // Larch (its counters, a verdict's subject) beside redb (linked in, always available).
    let out = Command::new(env!("CARGO_BIN_EXE_larch-bench"))
        .args([
            "--engine=larch,redb",
            "--num=2000",
            "--benchmarks=fillseq,readwhilewriting",
            "--histogram=1",
            "--progress=0",
        ])
        .arg(format!("--db={}", dir.join("db").display()))
        .arg(format!("--csv={}", csv.display()))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let engines = ["larch", "redb"];

    let mut names = BTreeSet::new();
    let mut seen = BTreeSet::new();
    let mut tables = 0;
    for line in stdout.lines().chain(stderr.lines()) {
        // "rusage       : wall 0.031 user ...": name-value pairs.
        if let Some((label, rest)) = line.split_once(" : ") {
            let label = label.trim();
            if ["rusage", "io", "engine", "process"].contains(&label) {
                seen.insert(label.to_string());
                names.insert(label.to_string());
                for name in rest.split_whitespace().step_by(2) {
                    names.insert(name.to_string());
                }
                continue;
            }
        }
        // db_bench's result lines: their units, and what they may end with.
        if let Some(parsed) = parse_result_line(line) {
            seen.insert("result".into());
            for unit in ["micros/op", "ops/sec", "seconds", "operations", "MB/s"] {
                if line.contains(unit) {
                    names.insert(unit.to_string());
                }
            }
            if line.contains(" found)") {
                names.insert("(N of M found)".into());
            }
            if parsed.name == "writer" {
                names.insert("writer".into());
            }
            continue;
        }
        // Tables: the header row of each.
        if line.starts_with("| benchmark |") {
            tables += 1;
            for cell in cells(line) {
                if engines.contains(&cell.as_str()) {
                    names.insert("<engine>".into());
                } else {
                    names.insert(cell);
                }
            }
            continue;
        }
        // The histogram block: its heading, and each word before a colon in its lines.
        if line.starts_with("Microseconds per ") {
            seen.insert("histogram".into());
            names.insert("Microseconds per".into());
            continue;
        }
        if ["Count:", "Min:", "Percentiles:"]
            .iter()
            .any(|p| line.starts_with(p))
        {
            for word in line.split_whitespace().filter(|w| w.ends_with(':')) {
                names.insert(word.trim_end_matches(':').to_string());
            }
            continue;
        }
        // The header's labels: "Keys:       16 bytes each".
        if let Some((label, _)) = line.split_once(':') {
            if label.starts_with(|c: char| c.is_ascii_uppercase())
                && label.chars().all(|c| c.is_ascii_alphabetic() || c == ' ')
            {
                names.insert(label.to_string());
            }
        }
    }
    let header = std::fs::read_to_string(&csv).unwrap();
    for column in header.lines().next().unwrap().split(',') {
        names.insert(column.to_string());
    }
    std::fs::remove_dir_all(&dir).unwrap();
    // The run printed every kind of output this test reads.
    for kind in ["rusage", "io", "engine", "process", "result", "histogram"] {
        assert!(seen.contains(kind), "no {kind} output:\n{stdout}");
    }
    assert_eq!(tables, 2, "the summary and the verdict:\n{stdout}");
    names
}

#[test]
fn the_legend_names_every_column_the_output_prints() {
    let help = help();
    let legend = &help[help.find("Output columns:").expect("a legend")..];
    // The legend's names: the first column of its rows, split at the spaces that separate
    // names listed together ("wall user sys"), and whole ("writer ops/sec").
    let mut listed = BTreeSet::new();
    for line in legend.lines() {
        // A section's heading: "rusage: the benchmark's use ...".
        if !line.starts_with(' ') {
            if let Some((heading, _)) = line.split_once(':') {
                listed.insert(heading.to_string());
            }
            continue;
        }
        if line.starts_with("   ") {
            continue;
        }
        let name = line[2..].split("  ").next().unwrap().trim();
        listed.insert(name.to_string());
        for word in name.split(' ') {
            listed.insert(word.to_string());
        }
    }
    let missing: Vec<String> = printed_columns()
        .into_iter()
        .filter(|c| !listed.contains(c))
        .collect();
    assert!(
        missing.is_empty(),
        "columns the output prints that --help does not explain: {missing:?}\n{legend}"
    );
}

#[test]
fn the_help_lists_the_default_engines_and_the_flags_in_columns() {
    let help = help();
    let engine = help
        .lines()
        .find(|l| l.starts_with("  --engine=LIST"))
        .unwrap();
    let columns: Vec<&str> = engine.split("  ").filter(|c| !c.is_empty()).collect();
    assert_eq!(columns[1].trim(), "larch,lmdb,rocksdb", "{engine}");
    assert!(
        help.contains("the default runs larch,lmdb,rocksdb"),
        "{help}"
    );
    for name in ["wamp", "vcsw/ivcsw", "writer ops/sec"] {
        assert!(
            help.contains(&format!("\n  {name} ")),
            "{name} is not in the legend"
        );
    }
}
