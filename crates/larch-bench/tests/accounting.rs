//! The rusage and /proc/<pid>/io accounting, checked on a real child process writing to a real
//! file system (target/tmp, not tmpfs-only paths). No timing is asserted.

use larch_bench::sys::{spawn_measured, ProcIo};
use std::process::Command;

const PROBE_BYTES: u64 = 8 << 20;

#[test]
fn child_that_writes_n_bytes_is_charged_at_least_n() {
    if ProcIo::of_self().is_none() {
        eprintln!("skipping: this kernel has no /proc/self/io (task I/O accounting)");
        return;
    }
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("accounting-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let data = dir.join("probe.bin");
    let report = dir.join("probe.out");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_larch-bench"));
    cmd.arg("__write_probe")
        .arg(&data)
        .arg(PROBE_BYTES.to_string())
        .stdout(std::fs::File::create(&report).unwrap());
    let outcome = spawn_measured(&mut cmd, None).unwrap();
    assert_eq!(outcome.code, 0);
    let text = std::fs::read_to_string(&report).unwrap();
    let self_reported: u64 = text
        .trim()
        .strip_prefix("write_bytes=")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("unexpected probe output {text:?}"));
    // The child's own /proc/self/io delta.
    assert!(
        self_reported >= PROBE_BYTES,
        "/proc/self/io write_bytes {self_reported} < {PROBE_BYTES}"
    );
    // The parent's wait4 view: ru_oublock is write_bytes in 512-byte units.
    assert!(
        outcome.usage.fs_out * 512 >= PROBE_BYTES,
        "ru_oublock {} blocks < {PROBE_BYTES} bytes",
        outcome.usage.fs_out
    );
    assert!(outcome.usage.maxrss_kb > 0);
    assert!(outcome.usage.user_s + outcome.usage.sys_s > 0.0);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn failing_child_exit_code_is_reported() {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_larch-bench"));
    cmd.arg("--num=notanumber")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let outcome = spawn_measured(&mut cmd, None).unwrap();
    assert_eq!(outcome.code, 2, "usage errors exit 2");
}
