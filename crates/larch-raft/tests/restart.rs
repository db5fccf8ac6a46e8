//! What a node finds after a restart: the vote, the log, the purge pointer, the applied state
//! and its data, and the current snapshot, as they were when its database was closed.

use larch_raft::{Request, TypeConfig};
use openraft::storage::{RaftLogStorage, RaftLogStorageExt, RaftStateMachine};
use openraft::{
    CommittedLeaderId, Entry, EntryPayload, LogId, Membership, RaftLogReader, RaftSnapshotBuilder,
    Vote,
};
use std::collections::{BTreeMap, BTreeSet};

fn log_id(term: u64, index: u64) -> LogId<u64> {
    LogId::new(CommittedLeaderId::new(term, 1), index)
}

fn set(index: u64, key: &str, value: &str) -> Entry<TypeConfig> {
    Entry {
        log_id: log_id(1, index),
        payload: EntryPayload::Normal(Request::Set {
            key: key.into(),
            value: value.into(),
        }),
    }
}

#[tokio::test]
async fn a_restarted_node_finds_what_it_stored() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("node.larch");
    let members: BTreeSet<u64> = [1].into();
    let membership = Entry {
        log_id: log_id(1, 1),
        payload: EntryPayload::Membership(Membership::new(vec![members], None)),
    };
    let entries: Vec<Entry<TypeConfig>> = std::iter::once(membership)
        .chain((2..=20).map(|i| set(i, &format!("k{:02}", i % 7), &format!("v{i}"))))
        .collect();
    let snapshot_meta = {
        let (mut log, mut sm) = larch_raft::open(&path).unwrap();
        log.save_vote(&Vote::new_committed(1, 1)).await.unwrap();
        log.blocking_append(entries.clone()).await.unwrap();
        log.save_committed(Some(log_id(1, 20))).await.unwrap();
        let replies = sm.apply(entries[..15].to_vec()).await.unwrap();
        assert_eq!(replies.len(), 15, "one reply an entry");
        let snapshot = sm
            .get_snapshot_builder()
            .await
            .build_snapshot()
            .await
            .unwrap();
        assert_eq!(snapshot.meta.last_log_id, Some(log_id(1, 15)));
        sm.apply(entries[15..].to_vec()).await.unwrap();
        log.purge(log_id(1, 10)).await.unwrap();
        snapshot.meta
    };
    let (mut log, mut sm) = larch_raft::open(&path).unwrap();
    assert_eq!(
        log.read_vote().await.unwrap(),
        Some(Vote::new_committed(1, 1))
    );
    assert_eq!(log.read_committed().await.unwrap(), Some(log_id(1, 20)));
    let state = log.get_log_state().await.unwrap();
    assert_eq!(state.last_purged_log_id, Some(log_id(1, 10)));
    assert_eq!(state.last_log_id, Some(log_id(1, 20)));
    let kept = log.try_get_log_entries(0..100).await.unwrap();
    let indexes: Vec<u64> = kept.iter().map(|e| e.log_id.index).collect();
    assert_eq!(indexes, (11..=20).collect::<Vec<_>>());
    let (applied, stored_membership) = sm.applied_state().await.unwrap();
    assert_eq!(applied, Some(log_id(1, 20)));
    assert_eq!(stored_membership.log_id(), &Some(log_id(1, 1)));
    let mut want = BTreeMap::new();
    for i in 2..=20u64 {
        want.insert(format!("k{:02}", i % 7), format!("v{i}"));
    }
    assert_eq!(sm.entries().unwrap(), want.into_iter().collect::<Vec<_>>());
    assert_eq!(sm.get("k06").unwrap(), Some("v20".into()));
    let current = sm
        .get_current_snapshot()
        .await
        .unwrap()
        .expect("a snapshot");
    assert_eq!(current.meta, snapshot_meta);
}

/// Installing a snapshot replaces the whole state: keys the snapshot does not hold are gone.
#[tokio::test]
async fn an_installed_snapshot_replaces_the_state() {
    let dir = tempfile::tempdir().unwrap();
    let (_, mut leader) = larch_raft::open(dir.path().join("leader.larch")).unwrap();
    let (_, mut follower) = larch_raft::open(dir.path().join("follower.larch")).unwrap();
    leader
        .apply(vec![set(1, "a", "1"), set(2, "b", "2")])
        .await
        .unwrap();
    follower
        .apply(vec![set(1, "stale", "x"), set(2, "b", "old")])
        .await
        .unwrap();
    let snapshot = leader
        .get_snapshot_builder()
        .await
        .build_snapshot()
        .await
        .unwrap();
    let mut receiving = follower.begin_receiving_snapshot().await.unwrap();
    *receiving = *snapshot.snapshot;
    follower
        .install_snapshot(&snapshot.meta, receiving)
        .await
        .unwrap();
    assert_eq!(
        follower.entries().unwrap(),
        vec![("a".into(), "1".into()), ("b".into(), "2".into())]
    );
    let (applied, _) = follower.applied_state().await.unwrap();
    assert_eq!(applied, Some(log_id(1, 2)));
}
