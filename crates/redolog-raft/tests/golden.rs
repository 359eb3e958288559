//! Goal: the bytes of every record kind are pinned. The store keeps
//! openraft's serde form of votes, log ids and entries inside its own
//! versioned records (docs/RAFT.md, "Records"); an openraft upgrade that
//! changes that form must fail here, not silently write a log older builds
//! cannot read. Both openraft lines write the same bytes: that is what lets
//! a log written on one open on the other.

mod common;

use common::{v0_10, v0_9, Line};

/// A record as text: the two header bytes and an entry's index in hex, the
/// rest as it is (JSON).
fn show(record: &[u8]) -> String {
    let (header, body) = match record[1] {
        1 | 4 => record.split_at(10),
        _ => record.split_at(2),
    };
    let header: Vec<String> = header.iter().map(|byte| format!("{byte:02x}")).collect();
    format!("{} {}", header.join(""), String::from_utf8_lossy(body))
}

async fn every_record_kind_has_its_pinned_bytes<S: Line>() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut store = S::open(dir.path());
    store.save_vote((2, 1, false)).await;
    store.append(vec![((2, 1), None), ((2, 2), Some("x=1".to_string()))]).await;
    store.save_committed(Some((2, 1))).await;
    store.truncate_after(Some((2, 1))).await;
    store.purge((2, 1)).await;
    drop(store);
    let (_, recovery) = redolog::Log::open(dir.path(), common::config()).expect("open");
    let records: Vec<String> =
        recovery.flat_map(|group| group.expect("group").records().map(show).collect::<Vec<_>>()).collect();
    let expected = [
        r#"0102 {"leader_id":{"term":2,"node_id":1},"committed":false}"#,
        r#"01010100000000000000 {"log_id":{"leader_id":{"term":2,"node_id":1},"index":1},"payload":"Blank"}"#,
        r#"01010200000000000000 {"log_id":{"leader_id":{"term":2,"node_id":1},"index":2},"payload":{"Normal":"x=1"}}"#,
        r#"0103 {"leader_id":{"term":2,"node_id":1},"index":1}"#,
        r#"01040200000000000000 "#,
        r#"0105 {"leader_id":{"term":2,"node_id":1},"index":1}"#,
    ];
    assert_eq!(records, expected, "{}", S::NAME);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_record_kind_has_its_pinned_bytes_0_9() {
    every_record_kind_has_its_pinned_bytes::<v0_9::Store>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_record_kind_has_its_pinned_bytes_0_10() {
    every_record_kind_has_its_pinned_bytes::<v0_10::Store>().await;
}
