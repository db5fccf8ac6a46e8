//! Fault test on loopback: a 3-node cluster of `larch-kv node` processes under a write load;
//! SIGKILL a follower (long enough that it must catch up from a snapshot) and then the leader,
//! start them again on their directories; no acknowledged write is lost and every node ends
//! with the same map. Then the whole cluster is
//! killed at once and started again: every node recovers its map from its Larch file and log.

use larch_kv::cluster::LocalCluster;
use larch_kv::node::StoreKind;
use larch_raft::Request;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const WRITERS: u64 = 4;

/// Every node's map, once they are all equal and hold `acked` (or the last difference seen
/// when `timeout` passes).
async fn converged(
    cluster: &LocalCluster,
    acked: &BTreeMap<String, String>,
    timeout: Duration,
) -> Result<Vec<(String, String)>, String> {
    let start = Instant::now();
    loop {
        let mut maps = Vec::new();
        let mut problem = None;
        for id in 1..=3 {
            match cluster.dump(id).await {
                Ok(m) => maps.push(m),
                Err(e) => problem = Some(format!("node {id}: {e}")),
            }
        }
        if problem.is_none() {
            if let Some(i) = (1..3).find(|&i| maps[i] != maps[0]) {
                problem = Some(format!(
                    "node 1 holds {} keys, node {} {}",
                    maps[0].len(),
                    i + 1,
                    maps[i].len()
                ));
            } else {
                let have: BTreeMap<&str, &str> = maps[0]
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str()))
                    .collect();
                let lost: Vec<&String> = acked
                    .iter()
                    .filter(|(k, v)| have.get(k.as_str()) != Some(&v.as_str()))
                    .map(|(k, _)| k)
                    .collect();
                if lost.is_empty() {
                    return Ok(maps.swap_remove(0));
                }
                problem = Some(format!(
                    "{} acknowledged writes missing, first {:?}",
                    lost.len(),
                    lost[0]
                ));
            }
        }
        if start.elapsed() > timeout {
            return Err(problem.unwrap_or_default());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[test]
fn killed_nodes_lose_no_acknowledged_write_and_converge() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_larch-kv"));
    rt.block_on(async move {
        let mut cluster = LocalCluster::start(&exe, dir.path(), StoreKind::Larch, 3, None)
            .await
            .expect("three nodes");
        cluster.form().await.expect("a cluster");
        let client = Arc::new(cluster.client());

        // The load: each writer sets its own keys in turn and keeps the ones acknowledged.
        let stop = Arc::new(AtomicBool::new(false));
        let acks = Arc::new(AtomicU64::new(0));
        let mut writers = Vec::new();
        for w in 0..WRITERS {
            let (client, stop, acks) = (client.clone(), stop.clone(), acks.clone());
            writers.push(tokio::spawn(async move {
                let mut acked = Vec::new();
                let mut failed = 0u64;
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let (key, value) = (format!("w{w}-{i:08}"), format!("value {i} of writer {w}"));
                    let req = Request::Set {
                        key: key.clone(),
                        value: value.clone(),
                    };
                    match client.write(&req).await {
                        Ok(()) => {
                            acked.push((key, value));
                            acks.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(_) => failed += 1,
                    }
                    i += 1;
                }
                (acked, failed)
            }));
        }
        let wait_acks = |more: u64, what: &'static str| {
            let acks = acks.clone();
            async move {
                let target = acks.load(Ordering::Relaxed) + more;
                let start = Instant::now();
                while acks.load(Ordering::Relaxed) < target {
                    assert!(
                        start.elapsed() < Duration::from_secs(60),
                        "writes did not go on {what}"
                    );
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        };
        wait_acks(200, "at the start").await;

        // A follower killed: the other two go on, until the leader has built a snapshot and
        // purged its log past the follower's last entry; started again, the follower can only
        // catch up from a snapshot (sent in chunks, installed in one commit), then the log.
        let leader = cluster
            .wait_leader(Duration::from_secs(30))
            .await
            .expect("a leader");
        let follower = (1..=3).find(|&id| id != leader).expect("a follower");
        let behind = cluster
            .metrics(follower)
            .await
            .expect("the follower's metrics")
            .last_log_index
            .unwrap_or(0);
        cluster.kill(follower).expect("kill the follower");
        let start = Instant::now();
        loop {
            let purged = cluster
                .metrics(leader)
                .await
                .expect("the leader's metrics")
                .purged
                .map_or(0, |p| p.index);
            if purged > behind {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(180),
                "the leader did not purge past {behind} (at {purged})"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        cluster.restart(follower).await.expect("the follower again");
        wait_acks(200, "after the follower came back").await;

        // The leader killed: the other two elect one and the writes go on through it.
        let leader = cluster
            .wait_leader(Duration::from_secs(30))
            .await
            .expect("a leader");
        cluster.kill(leader).expect("kill the leader");
        let next = cluster
            .wait_leader(Duration::from_secs(60))
            .await
            .expect("a new leader");
        assert_ne!(next, leader, "a killed node cannot lead");
        wait_acks(200, "after the leader was killed").await;
        cluster.restart(leader).await.expect("the old leader again");
        wait_acks(200, "after the old leader came back").await;

        stop.store(true, Ordering::Relaxed);
        let mut acked = BTreeMap::new();
        for w in writers {
            let (a, _failed) = w.await.expect("a writer");
            acked.extend(a);
        }
        assert!(
            acked.len() >= 1000,
            "only {} writes acknowledged",
            acked.len()
        );
        let before = converged(&cluster, &acked, Duration::from_secs(60))
            .await
            .expect("the nodes converge with every acknowledged write");
        let installed = cluster
            .metrics(follower)
            .await
            .expect("the follower's metrics")
            .snapshot;
        assert!(
            installed.is_some_and(|s| s.index > behind),
            "the follower holds no snapshot past its old log ({installed:?})"
        );

        // The whole cluster killed at once and started again: each node finds its map in its
        // file and log (the applied state is durable), and they agree again.
        for id in 1..=3 {
            cluster.kill(id).expect("kill");
        }
        for id in 1..=3 {
            cluster.restart(id).await.expect("restart");
        }
        cluster
            .wait_leader(Duration::from_secs(60))
            .await
            .expect("a leader after the restart");
        for id in 1..=3 {
            let map = cluster.dump(id).await.expect("a node's map");
            assert_eq!(map.len(), before.len(), "node {id} after the crash");
            assert!(map == before, "node {id}'s map changed across the crash");
        }
        // And the cluster still takes writes.
        let c = cluster.client();
        c.write(&Request::Set {
            key: "after".into(),
            value: "crash".into(),
        })
        .await
        .expect("a write after the restart");
        assert_eq!(c.read("after").await.expect("a read"), Some("crash".into()));
        cluster.stop();
    });
}
