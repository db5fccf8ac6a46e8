//! What the report says about the machine: cores, CPU, memory, kernel, and the storage under
//! the databases (mount, file system, device, journal).

use serde_json::{json, Value};
use std::path::Path;

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

/// The CPU's model name from /proc/cpuinfo ("unknown" if it cannot be read).
pub fn cpu_model() -> String {
    read("/proc/cpuinfo")
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

pub fn mem_total_bytes() -> Option<u64> {
    let t = read("/proc/meminfo")?;
    let l = t.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: u64 = l.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// The mount holding `path`: (mount point, file system type, source device).
pub fn mount_of(mountinfo: &str, path: &Path) -> Option<(String, String, String)> {
    let p = path.to_string_lossy();
    let mut best: Option<(String, String, String)> = None;
    for line in mountinfo.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let Some(dash) = f.iter().position(|x| *x == "-") else {
            continue;
        };
        let (Some(mp), Some(fstype), Some(src)) = (f.get(4), f.get(dash + 1), f.get(dash + 2))
        else {
            continue;
        };
        let inside =
            *mp == "/" || p == *mp || p.strip_prefix(mp).is_some_and(|rest| rest.starts_with('/'));
        if inside && best.as_ref().is_none_or(|b| mp.len() >= b.0.len()) {
            best = Some((mp.to_string(), fstype.to_string(), src.to_string()));
        }
    }
    best
}

/// Storage facts for the device behind `source` (e.g. /dev/vda1 -> vda).
fn device_facts(source: &str) -> Value {
    let name = source.trim_start_matches("/dev/").to_string();
    let mut disk = name.clone();
    // A partition's disk: /sys/class/block/<part>/.. is the disk.
    if let Ok(real) = std::fs::canonicalize(format!("/sys/class/block/{name}")) {
        if real.join("partition").exists() {
            if let Some(parent) = real.parent().and_then(|p| p.file_name()) {
                disk = parent.to_string_lossy().to_string();
            }
        }
    }
    let model = read(&format!("/sys/block/{disk}/device/model"))
        .or_else(|| read(&format!("/sys/block/{disk}/device/vendor")));
    let rotational = read(&format!("/sys/block/{disk}/queue/rotational"));
    // Readahead decides what a page fault in a memory-mapped file reads (about half of it
    // around the fault, unless the mapping is madvised random): it matters beyond RAM.
    let read_ahead_kb =
        read(&format!("/sys/block/{disk}/queue/read_ahead_kb")).and_then(|s| s.parse::<u64>().ok());
    let sectors = read(&format!("/sys/block/{disk}/size")).and_then(|s| s.parse::<u64>().ok());
    let journal = std::fs::read_dir("/proc/fs/jbd2").ok().map(|d| {
        d.filter_map(|e| e.ok()).any(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(&format!("{name}-"))
        })
    });
    json!({
        "device": disk,
        "model": model,
        "rotational": rotational.map(|r| r == "1"),
        "size_bytes": sectors.map(|s| s * 512),
        "read_ahead_kb": read_ahead_kb,
        "journal": journal,
    })
}

/// A JSON description of this machine and of the storage under `db`.
pub fn describe(db: &Path) -> Value {
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let db_abs = std::fs::canonicalize(db).unwrap_or_else(|_| db.to_path_buf());
    let mount = read("/proc/self/mountinfo").and_then(|m| mount_of(&m, &db_abs));
    let storage = match &mount {
        Some((mp, fstype, src)) => {
            let mut v = device_facts(src);
            if let Value::Object(m) = &mut v {
                m.insert("mount".into(), mp.clone().into());
                m.insert("fstype".into(), fstype.clone().into());
                m.insert("source".into(), src.clone().into());
                m.insert(
                    "db_path".into(),
                    db_abs.to_string_lossy().to_string().into(),
                );
            }
            v
        }
        None => json!({"db_path": db_abs.to_string_lossy()}),
    };
    json!({
        "cores": cores,
        "cpu": cpu_model(),
        "mem_total_bytes": mem_total_bytes(),
        "kernel": read("/proc/sys/kernel/osrelease"),
        "os": read("/etc/os-release").and_then(|t| t.lines()
            .find(|l| l.starts_with("PRETTY_NAME="))
            .map(|l| l.trim_start_matches("PRETTY_NAME=").trim_matches('"').to_string())),
        "storage": storage,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_longest_mount_prefix() {
        let mi = "22 1 0:21 / / rw - ext4 /dev/vda rw\n\
                  23 22 0:22 / /tmp rw - tmpfs tmpfs rw\n\
                  24 22 0:23 / /tmpx rw - xfs /dev/sdb rw\n";
        let (mp, fs, src) = mount_of(mi, Path::new("/tmp/larch/db")).unwrap();
        assert_eq!(
            (mp.as_str(), fs.as_str(), src.as_str()),
            ("/tmp", "tmpfs", "tmpfs")
        );
        let (mp, fs, _) = mount_of(mi, Path::new("/work/x")).unwrap();
        assert_eq!((mp.as_str(), fs.as_str()), ("/", "ext4"));
        let (mp, _, _) = mount_of(mi, Path::new("/tmpx/a")).unwrap();
        assert_eq!(mp, "/tmpx");
    }
}
