//! Goal: the store passes openraft's own storage suite on both lines (every
//! test of it), each test on a fresh log in a temporary directory:
//! `openraft::testing::Suite` for 0.9, `openraft::testing::log::Suite` for
//! 0.10.

mod common;

mod openraft_0_9 {
    use openraft::testing::{StoreBuilder, Suite};
    use openraft::StorageError;

    use super::common::{self, v0_9};

    struct Builder;

    impl StoreBuilder<v0_9::TypeConfig, v0_9::Store, v0_9::Machine, tempfile::TempDir> for Builder {
        async fn build(&self) -> Result<(tempfile::TempDir, v0_9::Store, v0_9::Machine), StorageError<u64>> {
            let dir = tempfile::tempdir().expect("tempdir");
            let store = <v0_9::Store as common::Line>::open(dir.path());
            Ok((dir, store, v0_9::Machine::default()))
        }
    }

    #[test]
    fn openraft_storage_suite() {
        Suite::test_all(Builder).expect("openraft 0.9's storage suite");
    }
}

mod openraft_0_10 {
    use redolog_raft::openraft_0_10::openraft;

    use openraft::testing::log::{StoreBuilder, Suite};
    use openraft::StorageError;

    use super::common::{self, v0_10};

    struct Builder;

    impl StoreBuilder<v0_10::TypeConfig, v0_10::Store, v0_10::Machine, tempfile::TempDir> for Builder {
        async fn build(
            &self,
        ) -> Result<(tempfile::TempDir, v0_10::Store, v0_10::Machine), StorageError<v0_10::TypeConfig>> {
            let dir = tempfile::tempdir().expect("tempdir");
            let store = <v0_10::Store as common::Line>::open(dir.path());
            Ok((dir, store, v0_10::Machine::default()))
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn openraft_storage_suite() {
        Suite::test_all(Builder).await.expect("openraft 0.10's storage suite");
    }
}
