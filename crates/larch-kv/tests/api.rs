//! The service's API on a local 3-node cluster: writes through a follower reach the leader,
//! deletes, linearizable and local reads, requests it refuses with a reason, and membership
//! changes (a node removed, then added back, catching up).

use larch_kv::client::{Client, ClientError};
use larch_kv::cluster::LocalCluster;
use larch_kv::node::{StoreKind, KEY_BYTES_MAX};
use larch_raft::Request;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

fn set(key: &str, value: &str) -> Request {
    Request::Set {
        key: key.into(),
        value: value.into(),
    }
}

/// Waits until node `id`'s own copy holds `key` = `value`.
async fn local_holds(cluster: &LocalCluster, id: u64, key: &str, value: Option<&str>) {
    let start = Instant::now();
    loop {
        let map = cluster.dump(id).await.expect("a node's map");
        let got = map.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str());
        if got == value {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "node {id} holds {key:?} = {got:?}, not {value:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[test]
fn the_api_on_a_three_node_cluster() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_larch-kv"));
    rt.block_on(async move {
        let cluster = LocalCluster::start(&exe, dir.path(), StoreKind::Larch, 3, None)
            .await
            .expect("three nodes");
        cluster.form().await.expect("a cluster");
        let leader = cluster
            .wait_leader(Duration::from_secs(30))
            .await
            .expect("a leader");
        let addrs = cluster.addrs();
        let follower = *addrs.keys().find(|&&id| id != leader).expect("a follower");

        // A client that knows only a follower: its write is redirected to the leader.
        let via_follower = Client::new(&BTreeMap::from([(follower, addrs[&follower].clone())]));
        via_follower
            .write(&set("a", "1"))
            .await
            .expect("a write sent to a follower");
        let client = cluster.client();
        assert_eq!(client.read("a").await.expect("a read"), Some("1".into()));
        for id in 1..=3 {
            local_holds(&cluster, id, "a", Some("1")).await;
        }

        // Delete, and the longest key there is.
        client
            .write(&Request::Delete { key: "a".into() })
            .await
            .expect("a delete");
        assert_eq!(client.read("a").await.expect("a read"), None);
        let longest = "k".repeat(KEY_BYTES_MAX);
        client
            .write(&set(&longest, "v"))
            .await
            .expect("the longest key");
        assert_eq!(
            client.read(&longest).await.expect("a read"),
            Some("v".into())
        );

        // Refused with a reason, at once, and nothing written: a key one byte too long, a
        // body over the limit, a body that is not a request.
        let started = Instant::now();
        let too_long = "k".repeat(KEY_BYTES_MAX + 1);
        match client.write(&set(&too_long, "v")).await {
            Err(ClientError::Rejected(why)) => assert!(why.contains("the most is"), "{why}"),
            other => panic!("a key over the limit: {other:?}"),
        }
        match client.write(&set("big", &"v".repeat(3 << 20))).await {
            Err(ClientError::Rejected(why)) => assert!(why.contains("413"), "{why}"),
            other => panic!("a body over the limit: {other:?}"),
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "refusals are not retried"
        );
        let http = reqwest::Client::new();
        let status = http
            .post(format!("http://{}/api/write", addrs[&leader]))
            .header("content-type", "application/json")
            .body("{\"Put\":1}")
            .send()
            .await
            .expect("an answer")
            .status();
        assert!(status.is_client_error(), "{status}");
        assert_eq!(client.read("big").await.expect("a read"), None);

        // Membership: a follower removed keeps its copy but gets no more writes; added back
        // as a learner and then a voter, it catches up.
        let voters: BTreeSet<u64> = (1..=3).filter(|&id| id != follower).collect();
        cluster.change_members(voters).await.expect("remove a node");
        client
            .write(&set("b", "2"))
            .await
            .expect("a write to two nodes");
        tokio::time::sleep(Duration::from_millis(500)).await;
        let map = cluster
            .dump(follower)
            .await
            .expect("the removed node's map");
        assert!(
            map.iter().all(|(k, _)| k != "b"),
            "a removed node got a write"
        );
        cluster
            .add_learner(follower)
            .await
            .expect("the node back as a learner");
        cluster
            .change_members((1..=3).collect())
            .await
            .expect("the node back as a voter");
        local_holds(&cluster, follower, "b", Some("2")).await;
        let metrics = cluster.metrics(leader).await.expect("metrics");
        let voters: Vec<u64> = metrics.membership_config.membership().voter_ids().collect();
        assert_eq!(voters, vec![1, 2, 3]);
    });
}

/// A node refuses a directory that holds another node, or this node in the other store.
#[test]
fn a_node_refuses_another_nodes_directory() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let exe = env!("CARGO_BIN_EXE_larch-kv");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(async {
        let mut cluster = LocalCluster::start(exe.as_ref(), dir.path(), StoreKind::Larch, 1, None)
            .await
            .expect("one node");
        cluster.stop();
    });
    let node1 = dir.path().join("node1");
    for (id, store, expected) in [
        ("2", "larch", "holds node \"1 larch\"; this is node 2"),
        (
            "1",
            "rocksdb",
            "holds node \"1 larch\"; this is node 1 with the rocksdb store",
        ),
    ] {
        let out = std::process::Command::new(exe)
            .args(["node", &format!("--id={id}"), "--addr=127.0.0.1:0"])
            .arg(format!("--dir={}", node1.display()))
            .arg(format!("--store={store}"))
            .output()
            .expect("the binary runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "node {id} ({store}) started");
        assert!(err.contains(expected), "{err}");
    }
}
