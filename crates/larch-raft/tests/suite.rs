//! openraft's storage test suite (`openraft::testing::Suite`) against the Larch store: each of
//! its tests on a fresh database in a directory of its own.

use larch_raft::{LogStore, NodeId, StateMachineStore, TypeConfig};
use openraft::testing::{StoreBuilder, Suite};
use openraft::StorageError;
use tempfile::TempDir;

struct LarchBuilder;

impl StoreBuilder<TypeConfig, LogStore, StateMachineStore, TempDir> for LarchBuilder {
    async fn build(&self) -> Result<(TempDir, LogStore, StateMachineStore), StorageError<NodeId>> {
        let dir = TempDir::new().expect("a temporary directory");
        let (log, sm) = larch_raft::open(dir.path().join("node.larch"))?;
        Ok((dir, log, sm))
    }
}

#[test]
fn openraft_storage_suite() {
    if let Err(e) = Suite::test_all(LarchBuilder) {
        panic!("openraft's storage suite: {e}");
    }
}
