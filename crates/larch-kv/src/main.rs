//! `larch-kv`: run a node, a local 3-node cluster, or the cluster benchmark.
//!
//! ```text
//! larch-kv cluster [--dir=DIR] [--nodes=3] [--port=21001] [--store=larch|rocksdb] [--run-for=SECONDS]
//! larch-kv bench   [--dir=DIR] [--store=larch,rocksdb] [--clients=1,16,64] [--duration=10]
//!                  [--value_size=100] [--keys=100000]
//! larch-kv node    --id=N --addr=HOST:PORT --dir=DIR [--store=larch|rocksdb] [--exit-with-parent]
//! ```

use larch_kv::bench::{self, BenchConfig};
use larch_kv::cluster::LocalCluster;
use larch_kv::node::{self, StoreKind};
use larch_raft::Request;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

const USAGE: &str = "usage:
  larch-kv cluster [--dir=DIR] [--nodes=3] [--port=21001] [--store=larch|rocksdb] [--run-for=SECONDS]
      starts a local cluster on 127.0.0.1 (one process per node, node i on port PORT+i-1;
      0: free ports, which a later start on the same DIR cannot reuse),
      forms it (unless DIR holds one already), writes and reads one key through it, prints how
      to reach it, and runs until Ctrl-C (or SECONDS)
  larch-kv bench [--dir=DIR] [--store=larch,rocksdb] [--clients=1,16,64] [--duration=10]
                 [--value_size=100] [--keys=100000]
      the cluster benchmark: client writes/s and latency per store and concurrency
  larch-kv node --id=N --addr=HOST:PORT --dir=DIR [--store=larch|rocksdb] [--exit-with-parent]
      one node (what `cluster` starts)";

/// `--name=value` or `--name value` flags, and bare `--name` as \"true\".
struct Flags(BTreeMap<String, String>);

impl Flags {
    fn parse(args: &[String]) -> Result<Self, String> {
        let mut map = BTreeMap::new();
        let mut i = 0;
        while i < args.len() {
            let a = &args[i];
            let Some(name) = a.strip_prefix("--") else {
                return Err(format!("unexpected argument {a:?}"));
            };
            if let Some((k, v)) = name.split_once('=') {
                map.insert(k.replace('-', "_"), v.to_string());
            } else if args.get(i + 1).is_some_and(|v| !v.starts_with("--")) {
                map.insert(name.replace('-', "_"), args[i + 1].clone());
                i += 1;
            } else {
                map.insert(name.replace('-', "_"), "true".into());
            }
            i += 1;
        }
        Ok(Flags(map))
    }

    fn take(&mut self, name: &str) -> Option<String> {
        self.0.remove(name)
    }

    fn num<T: std::str::FromStr>(&mut self, name: &str, default: T) -> Result<T, String> {
        match self.take(name) {
            Some(v) => v
                .parse()
                .map_err(|_| format!("--{name}: not a number: {v:?}")),
            None => Ok(default),
        }
    }

    fn done(self) -> Result<(), String> {
        match self.0.keys().next() {
            Some(k) => Err(format!("unknown flag --{k}")),
            None => Ok(()),
        }
    }
}

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("tokio runtime: {e}"))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(cmd) = args.first() else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let result = Flags::parse(&args[1..]).and_then(|flags| match cmd.as_str() {
        "node" => run_node(flags),
        "cluster" => run_cluster(flags),
        "bench" => run_bench(flags),
        "-h" | "--help" | "help" => {
            println!("{USAGE}");
            Ok(())
        }
        other => Err(format!("unknown command {other:?}\n{USAGE}")),
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("larch-kv: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run_node(mut flags: Flags) -> Result<(), String> {
    let id: u64 = flags.num("id", 0)?;
    let addr = flags.take("addr").ok_or("--addr is required")?;
    let dir = PathBuf::from(flags.take("dir").ok_or("--dir is required")?);
    let store = StoreKind::parse(&flags.take("store").unwrap_or_else(|| "larch".into()))?;
    let with_parent = flags.take("exit_with_parent").is_some();
    flags.done()?;
    if id == 0 {
        return Err("--id must be a positive integer".into());
    }
    runtime()?.block_on(async move {
        let listener = tokio::net::TcpListener::bind(&addr)
            .await
            .map_err(|e| format!("{addr}: {e}"))?;
        let node = node::start(id, &dir, store).await?;
        println!("node {id} serving on {addr}; store {}", node.store);
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        if with_parent {
            // The parent holds our stdin: its end (exit, crash, or a closed pipe) stops us.
            std::thread::spawn(move || {
                let mut sink = Vec::new();
                let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut sink);
                let _ = tx.send(());
            });
        } else {
            drop(tx);
        }
        let stop = async move {
            let stdin_closed = async move {
                if rx.await.is_err() {
                    std::future::pending::<()>().await;
                }
            };
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = terminated() => {}
                _ = stdin_closed => {}
            }
        };
        node::serve(node, listener, stop).await?;
        println!("node {id} stopped");
        Ok(())
    })
}

/// SIGTERM.
async fn terminated() {
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut s) => {
            s.recv().await;
        }
        Err(_) => std::future::pending::<()>().await,
    }
}

fn default_dir(what: &str) -> PathBuf {
    std::env::temp_dir().join(format!("larch-kv-{what}-{}", std::process::id()))
}

fn run_cluster(mut flags: Flags) -> Result<(), String> {
    let dir = flags
        .take("dir")
        .map_or_else(|| default_dir("cluster"), PathBuf::from);
    let nodes: u64 = flags.num("nodes", 3)?;
    let store = StoreKind::parse(&flags.take("store").unwrap_or_else(|| "larch".into()))?;
    let run_for: u64 = flags.num("run_for", 0)?;
    let port: u16 = flags.num("port", 21001)?;
    flags.done()?;
    if nodes == 0 {
        return Err("--nodes must be at least 1".into());
    }
    let exe = std::env::current_exe().map_err(|e| format!("this binary's path: {e}"))?;
    runtime()?.block_on(async move {
        let mut cluster = LocalCluster::start(&exe, &dir, store, nodes, Some(port).filter(|&p| p != 0)).await?;
        cluster.form().await?;
        let leader = cluster.wait_leader(Duration::from_secs(30)).await?;
        let addrs = cluster.addrs();
        println!("a {nodes}-node cluster ({} store) under {}:", store.name(), dir.display());
        for (id, addr) in &addrs {
            let role = if *id == leader { "leader" } else { "follower" };
            println!("  node {id}  http://{addr}  {role}  (log: {}/node{id}.log)", dir.display());
        }
        let client = cluster.client();
        let req = Request::Set {
            key: "greeting".into(),
            value: "hello".into(),
        };
        client.write(&req).await.map_err(|e| e.to_string())?;
        let read = client.read("greeting").await.map_err(|e| e.to_string())?;
        println!("wrote greeting=hello through the leader; read back linearizably: {read:?}");
        let (a, b) = (&addrs[&leader], addrs.values().find(|a| **a != addrs[&leader]).unwrap_or(&addrs[&leader]));
        println!("try:");
        println!("  curl -s -H 'content-type: application/json' -d '{{\"Set\":{{\"key\":\"k\",\"value\":\"v\"}}}}' http://{a}/api/write");
        println!("  curl -s -H 'content-type: application/json' -d '\"k\"' http://{a}/api/read");
        println!("  curl -s -H 'content-type: application/json' -d '\"k\"' http://{b}/api/local");
        println!("  curl -s http://{a}/admin/metrics");
        if run_for > 0 {
            println!("running for {run_for} s");
            tokio::time::sleep(Duration::from_secs(run_for)).await;
        } else {
            println!("Ctrl-C stops it");
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = terminated() => {}
            }
        }
        cluster.stop();
        println!("stopped; the nodes' data stays under {}", dir.display());
        Ok(())
    })
}

fn run_bench(mut flags: Flags) -> Result<(), String> {
    let dir = flags
        .take("dir")
        .map_or_else(|| default_dir("bench"), PathBuf::from);
    let stores = flags
        .take("store")
        .unwrap_or_else(|| "larch,rocksdb".into())
        .split(',')
        .map(StoreKind::parse)
        .collect::<Result<Vec<_>, _>>()?;
    let clients = flags
        .take("clients")
        .unwrap_or_else(|| "1,16,64".into())
        .split(',')
        .map(|c| {
            c.parse::<usize>()
                .map_err(|_| format!("--clients: not a number: {c:?}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let config = BenchConfig {
        exe: std::env::current_exe().map_err(|e| format!("this binary's path: {e}"))?,
        duration: Duration::from_secs_f64(flags.num("duration", 10.0)?),
        value_size: flags.num("value_size", 100)?,
        keys: flags.num("keys", 100_000)?,
        nodes: flags.num("nodes", 3)?,
        dir,
        stores,
        clients,
    };
    flags.done()?;
    println!(
        "cluster benchmark: {} nodes on 127.0.0.1, writes of {} B values to {} keys through the leader, {} s per row",
        config.nodes,
        config.value_size,
        config.keys,
        config.duration.as_secs_f64()
    );
    let (rows, sizes) = runtime()?.block_on(bench::run(&config))?;
    let _ = std::fs::remove_dir_all(&config.dir);
    println!();
    println!(
        "| store | clients | writes/s | P50 ms | P99 ms | P99.9 ms | nodes' CPU s per 1K writes |"
    );
    println!("|---|---|---|---|---|---|---|");
    for r in &rows {
        println!(
            "| {} | {} | {:.0} | {:.2} | {:.2} | {:.2} | {:.2} |",
            r.store,
            r.clients,
            r.writes_per_sec(),
            r.p50_us as f64 / 1000.0,
            r.p99_us as f64 / 1000.0,
            r.p999_us as f64 / 1000.0,
            r.cpu_secs * 1000.0 / (r.writes.max(1) as f64)
        );
    }
    for (store, bytes) in sizes {
        println!(
            "{store}: the three nodes' files after the runs: {:.1} MB",
            bytes as f64 / 1e6
        );
    }
    Ok(())
}
