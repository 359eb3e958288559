//! Goal: the cluster fault test's checker (tests/checker) accepts exactly
//! the linearizable histories of a register with read, write and
//! compare-and-set — tried on histories whose answer is known, among them
//! the anomalies the fault test hunts: a stale read after a completed
//! write, two compare-and-sets that both won, a read of a value never
//! written; and operations that ended unknown, which may or may not have
//! taken effect.

mod checker;

use checker::{History, Op, Ret};

fn write(value: &str) -> Op {
    Op::Write(value.to_string())
}

fn read(value: Option<&str>) -> Ret {
    Ret::Read(value.map(str::to_string))
}

fn cas(expected: Option<&str>, new: &str) -> Op {
    Op::Cas { expected: expected.map(str::to_string), new: new.to_string() }
}

/// Client `client` runs `op` on `key` alone (invoked and returned before
/// anything else happens).
fn alone(history: &mut History, client: u64, key: &str, op: Op, ret: Ret) {
    history.invoke(client, key, op);
    history.returned(client, ret);
}

#[test]
fn sequential_operations_that_agree_are_linearizable() {
    let mut history = History::default();
    alone(&mut history, 1, "k", Op::Read, read(None));
    alone(&mut history, 1, "k", write("a"), Ret::Written);
    alone(&mut history, 2, "k", Op::Read, read(Some("a")));
    alone(&mut history, 2, "k", cas(Some("a"), "b"), Ret::Cas(true));
    alone(&mut history, 1, "k", cas(Some("a"), "c"), Ret::Cas(false));
    alone(&mut history, 3, "k", Op::Read, read(Some("b")));
    assert_eq!(history.check(), Ok(()));
}

#[test]
fn a_read_after_a_completed_write_that_misses_it_is_caught() {
    let mut history = History::default();
    alone(&mut history, 1, "k", write("a"), Ret::Written);
    alone(&mut history, 1, "k", write("b"), Ret::Written);
    // A stale read, as an old leader serving reads without the read index
    // would return.
    alone(&mut history, 2, "k", Op::Read, read(Some("a")));
    let error = history.check().expect_err("a stale read passed");
    assert!(error.contains("key k"), "{error}");
}

#[test]
fn a_read_concurrent_with_a_write_may_see_either_value() {
    for seen in [Some("a"), Some("b")] {
        let mut history = History::default();
        alone(&mut history, 1, "k", write("a"), Ret::Written);
        history.invoke(1, "k", write("b"));
        history.invoke(2, "k", Op::Read);
        history.returned(2, read(seen));
        history.returned(1, Ret::Written);
        assert_eq!(history.check(), Ok(()), "reading {seen:?}");
    }
}

#[test]
fn two_compare_and_sets_from_the_same_value_cannot_both_win() {
    let mut history = History::default();
    history.invoke(1, "k", cas(None, "a"));
    history.invoke(2, "k", cas(None, "b"));
    history.returned(1, Ret::Cas(true));
    history.returned(2, Ret::Cas(true));
    assert!(history.check().is_err(), "a lost update passed");
}

#[test]
fn an_operation_that_ended_unknown_may_or_may_not_have_taken_effect() {
    for seen in [None, Some("a")] {
        let mut history = History::default();
        // Client 1's write timed out: no return, and client 1 is retired.
        history.invoke(1, "k", write("a"));
        alone(&mut history, 2, "k", Op::Read, read(seen));
        alone(&mut history, 3, "k", Op::Read, read(seen));
        assert_eq!(history.check(), Ok(()), "reading {seen:?}");
    }
    // But once seen, it cannot be unseen.
    let mut history = History::default();
    history.invoke(1, "k", write("a"));
    alone(&mut history, 2, "k", Op::Read, read(Some("a")));
    alone(&mut history, 3, "k", Op::Read, read(None));
    assert!(history.check().is_err(), "a write seen, then unseen, passed");
}

#[test]
fn a_value_never_written_is_caught() {
    let mut history = History::default();
    alone(&mut history, 1, "k", write("a"), Ret::Written);
    alone(&mut history, 2, "k", Op::Read, read(Some("z")));
    assert!(history.check().is_err());
}

#[test]
fn keys_are_checked_apart_and_the_bad_one_is_named() {
    let mut history = History::default();
    alone(&mut history, 1, "good", write("a"), Ret::Written);
    alone(&mut history, 2, "good", Op::Read, read(Some("a")));
    alone(&mut history, 3, "bad", write("a"), Ret::Written);
    alone(&mut history, 4, "bad", Op::Read, read(None));
    let error = history.check().expect_err("the bad key passed");
    assert!(error.starts_with("key bad "), "{error}");
    assert_eq!(history.len(), 4);
}
