//! openraft's storage test suite against the benchmark's other store (`peer_store`, on
//! RocksDB): the cluster benchmark compares two stores that both pass it.

use larch_bench::engines::{find, OpenOptions};
use larch_kv::peer_store::{self, PeerLogStore, PeerStateMachine};
use larch_raft::{NodeId, TypeConfig};
use openraft::testing::{StoreBuilder, Suite};
use openraft::StorageError;
use std::sync::Arc;
use tempfile::TempDir;

struct RocksBuilder;

impl StoreBuilder<TypeConfig, PeerLogStore, PeerStateMachine, TempDir> for RocksBuilder {
    async fn build(
        &self,
    ) -> Result<(TempDir, PeerLogStore, PeerStateMachine), StorageError<NodeId>> {
        let dir = TempDir::new().expect("a temporary directory");
        let spec = find("rocksdb").expect("larch-bench knows rocksdb");
        let opened = (spec.open)(&OpenOptions {
            dir: dir.path().to_path_buf(),
            cache_bytes: 8 << 20,
            sync: true,
            num: 1000,
            key_size: 16,
            value_size: 100,
            threads_max: 2,
            memory_limit: None,
            bloom_bits: 10,
            background_nice: 0,
            checkpoint_slices: 0,
            checkpoint_bytes: 0,
            log_room_bytes: 0,
            memory_budget: 0,
            frames_bytes: 0,
        })
        .expect("RocksDB opens (scripts/setup.sh installs librocksdb)");
        let (log, sm) = peer_store::open(Arc::from(opened.engine))?;
        Ok((dir, log, sm))
    }
}

#[test]
fn openraft_storage_suite_on_rocksdb() {
    if let Err(e) = Suite::test_all(RocksBuilder) {
        panic!("openraft's storage suite: {e}");
    }
}
