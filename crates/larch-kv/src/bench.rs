//! The cluster benchmark: a local 3-node cluster per store, client writes through the leader
//! at each concurrency for a fixed time; writes/s, latency percentiles, the nodes' CPU time
//! and their files' size.

use crate::cluster::LocalCluster;
use crate::node::StoreKind;
use hdrhistogram::Histogram;
use larch_raft::Request;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What to run.
pub struct BenchConfig {
    pub exe: PathBuf,
    pub dir: PathBuf,
    pub stores: Vec<StoreKind>,
    pub clients: Vec<usize>,
    pub duration: Duration,
    pub value_size: usize,
    /// Keys are drawn uniformly from this many.
    pub keys: u64,
    pub nodes: u64,
}

/// One store at one concurrency.
#[derive(Debug, Clone)]
pub struct Row {
    pub store: &'static str,
    pub clients: usize,
    pub writes: u64,
    pub failed: u64,
    pub secs: f64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    /// User + system CPU seconds of all the nodes over the run.
    pub cpu_secs: f64,
}

impl Row {
    pub fn writes_per_sec(&self) -> f64 {
        self.writes as f64 / self.secs.max(1e-9)
    }
}

/// A node process's user + system CPU seconds so far (/proc/PID/stat; Linux counts in
/// USER_HZ = 100 ticks a second).
fn cpu_secs(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // Fields after the command name (which is in parentheses and may hold spaces).
    let Some(rest) = stat.rfind(')').map(|i| &stat[i + 2..]) else {
        return 0.0;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    (tick(11) + tick(12)) as f64 / 100.0
}

fn dir_bytes(dir: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    rd.flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

/// A small xorshift: the keys each client writes.
fn next(state: &mut u64) -> u64 {
    let mut x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *state = x;
    x
}

/// Runs every store at every concurrency; prints a line per row as it ends and returns the
/// rows with each store's files' size after its runs.
pub async fn run(config: &BenchConfig) -> Result<(Vec<Row>, Vec<(&'static str, u64)>), String> {
    let mut rows = Vec::new();
    let mut sizes = Vec::new();
    for &store in &config.stores {
        let dir = config.dir.join(store.name());
        let _ = std::fs::remove_dir_all(&dir);
        let mut cluster = LocalCluster::start(&config.exe, &dir, store, config.nodes, None).await?;
        cluster.form().await?;
        let client = Arc::new(cluster.client());
        // Warm up: connections opened, the leader's first entries written.
        load(&client, 4, Duration::from_millis(500), config, 0).await?;
        for &clients in &config.clients {
            let pids: Vec<u32> = (1..=config.nodes)
                .filter_map(|id| cluster.pid(id))
                .collect();
            let cpu0: f64 = pids.iter().map(|&p| cpu_secs(p)).sum();
            let (hist, failed, secs) =
                load(&client, clients, config.duration, config, clients as u64).await?;
            let cpu1: f64 = pids.iter().map(|&p| cpu_secs(p)).sum();
            let row = Row {
                store: store.name(),
                clients,
                writes: hist.len(),
                failed,
                secs,
                p50_us: hist.value_at_quantile(0.50),
                p99_us: hist.value_at_quantile(0.99),
                p999_us: hist.value_at_quantile(0.999),
                cpu_secs: cpu1 - cpu0,
            };
            println!(
                "{:8} clients {:3}: {:8.0} writes/s  p50 {:6} us  p99 {:6} us  p99.9 {:6} us  nodes' cpu {:5.1} s{}",
                row.store,
                row.clients,
                row.writes_per_sec(),
                row.p50_us,
                row.p99_us,
                row.p999_us,
                row.cpu_secs,
                if failed > 0 { format!("  ({failed} failed)") } else { String::new() }
            );
            rows.push(row);
        }
        cluster.stop();
        let bytes: u64 = (1..=config.nodes)
            .map(|id| dir_bytes(&cluster.node_dir(id)))
            .sum();
        sizes.push((store.name(), bytes));
        drop(cluster);
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok((rows, sizes))
}

/// Latencies from 1 µs to 100 s, 3 significant digits.
fn histogram() -> Result<Histogram<u64>, String> {
    Histogram::new_with_bounds(1, 100_000_000, 3).map_err(|e| e.to_string())
}

/// `clients` tasks writing for `duration`; the latency of each acknowledged write (µs), the
/// count of failed ones, and the seconds it took.
async fn load(
    client: &Arc<crate::client::Client>,
    clients: usize,
    duration: Duration,
    config: &BenchConfig,
    seed: u64,
) -> Result<(Histogram<u64>, u64, f64), String> {
    let start = Instant::now();
    let deadline = start + duration;
    let mut tasks = Vec::new();
    for c in 0..clients {
        let client = client.clone();
        let (keys, value_size) = (config.keys.max(1), config.value_size);
        let mut state = (seed << 32) ^ (c as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        tasks.push(tokio::spawn(async move {
            let mut hist = histogram()?;
            let mut failed = 0u64;
            let value: String = "v".repeat(value_size);
            while Instant::now() < deadline {
                let key = format!("key{:012}", next(&mut state) % keys);
                let t = Instant::now();
                match client
                    .write(&Request::Set {
                        key,
                        value: value.clone(),
                    })
                    .await
                {
                    Ok(()) => hist.saturating_record(t.elapsed().as_micros() as u64),
                    Err(_) => failed += 1,
                }
            }
            Ok::<_, String>((hist, failed))
        }));
    }
    let mut all = histogram()?;
    let mut failed = 0;
    for t in tasks {
        let (h, f) = t.await.map_err(|e| e.to_string())??;
        all.add(&h).map_err(|e| e.to_string())?;
        failed += f;
    }
    Ok((all, failed, start.elapsed().as_secs_f64()))
}
