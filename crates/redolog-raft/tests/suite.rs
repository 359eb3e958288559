//! Goal: the store passes openraft's own storage suite
//! (`openraft::testing::Suite`, every test of it), each test on a fresh log
//! in a temporary directory.

mod common;

use openraft::testing::{StoreBuilder, Suite};
use openraft::StorageError;

struct Builder;

impl StoreBuilder<common::TypeConfig, common::Store, common::Machine, tempfile::TempDir> for Builder {
    async fn build(&self) -> Result<(tempfile::TempDir, common::Store, common::Machine), StorageError<u64>> {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = common::open(dir.path());
        Ok((dir, store, common::Machine::default()))
    }
}

#[test]
fn openraft_storage_suite() {
    Suite::test_all(Builder).expect("openraft's storage suite");
}
