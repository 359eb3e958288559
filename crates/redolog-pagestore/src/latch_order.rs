//! The latch order ([PAGESTORE §8](crate::docs::pagestore#8-the-btree), "Latch order"), written once
//! and checked here in debug builds, as InnoDB's sync-order check
//! (`sync0debug`) checks its latch levels: the index locks (`LockOrder`,
//! taken by `BTree`'s guards) and the page latches (`LatchOrder`, checked
//! by `Mtr::latch`). Release builds keep nothing.

#[cfg(debug_assertions)]
use crate::page::{Page, PageNo, META_PAGE};

/// The index locks' order ([PAGESTORE §8](crate::docs::pagestore#8-the-btree), "Latch order"): a thread
/// takes trees' locks in increasing tree number, so two statements never
/// wait for each other's trees (InnoDB's sync-order check, `sync0debug`).
/// Debug builds keep the trees a thread holds and panic on a lock taken out
/// of order; release builds keep nothing.
pub(crate) struct LockOrder {
    #[cfg(debug_assertions)]
    tree: u32,
}

#[cfg(debug_assertions)]
thread_local! {
    /// The trees whose index lock this thread holds, and whether exclusive.
    static HELD: std::cell::RefCell<Vec<(u32, bool)>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Whether this thread holds tree `tree`'s index lock exclusive (debug
/// builds: the page latch order lets such a tree's pages be latched at any
/// point).
#[cfg(debug_assertions)]
fn holds_exclusive(tree: u32) -> bool {
    HELD.with(|held| held.borrow().contains(&(tree, true)))
}

impl LockOrder {
    #[cfg_attr(not(debug_assertions), allow(unused_variables))]
    pub(crate) fn take(tree: u32, exclusive: bool) -> LockOrder {
        #[cfg(debug_assertions)]
        HELD.with(|held| {
            let mut held = held.borrow_mut();
            if let Some(&(last, _)) = held.iter().max() {
                assert!(
                    tree > last,
                    "index lock of tree {tree} taken while holding tree {last}'s: index locks go in tree order \
                     (docs/PAGESTORE.md §8)"
                );
            }
            held.push((tree, exclusive));
        });
        LockOrder {
            #[cfg(debug_assertions)]
            tree,
        }
    }
}

impl Drop for LockOrder {
    fn drop(&mut self) {
        #[cfg(debug_assertions)]
        HELD.with(|held| {
            let mut held = held.borrow_mut();
            if let Some(at) = held.iter().rposition(|&(tree, _)| tree == self.tree) {
                held.remove(at);
            }
        });
    }
}

/// The page latch order ([PAGESTORE §8](crate::docs::pagestore#8-the-btree), "Latch order"), checked in
/// debug builds on every latch a mini-transaction takes, as InnoDB's
/// sync-order check (`sync0debug`) checks its latch levels. Pages of a tree
/// whose index lock this thread holds exclusive, the meta page, and pages
/// allocated in this mini-transaction can be latched at any point: no
/// other thread can hold the first or the last, and the meta page is
/// latched only by `allocate`, which runs under an exclusive index lock
/// and then latches only pages of those two kinds. Every other page — a
/// page of a tree held shared, which another statement may hold too —
/// comes after every such page already held, in the order (tree, level
/// from the top down, page number), and before the meta page and any new
/// page: the order two statements could otherwise deadlock on.
#[cfg(debug_assertions)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct LatchOrder {
    no: PageNo,
    /// `(tree, top-down level, page)` for a page that others may latch;
    /// `None` for the meta page, a new page, or a tree held exclusive.
    shared: Option<(u32, std::cmp::Reverse<u8>, PageNo)>,
}

#[cfg(debug_assertions)]
impl LatchOrder {
    /// Checks the latch just taken on page `no` against those a
    /// mini-transaction `held`, with the pages it `allocated`, and returns
    /// its place in the order. Panics on a latch out of order.
    pub(crate) fn check(
        no: PageNo,
        page: &Page,
        allocated: &[PageNo],
        held: impl Iterator<Item = LatchOrder>,
    ) -> LatchOrder {
        let free = no == META_PAGE || allocated.contains(&no) || holds_exclusive(page.tree());
        let order = LatchOrder { no, shared: (!free).then(|| (page.tree(), std::cmp::Reverse(page.level()), no)) };
        if let Some(key) = order.shared {
            for held in held {
                match held.shared {
                    Some(before) => assert!(
                        before < key,
                        "page latch order: page {no} (tree {}, level {}) latched after page {} (tree {}, level {}) \
                         of a tree held shared: pages go by tree, top-down, then in page order (docs/PAGESTORE.md §8)",
                        key.0,
                        key.1 .0,
                        held.no,
                        before.0,
                        before.1 .0,
                    ),
                    None => assert!(
                        held.no != META_PAGE && !allocated.contains(&held.no),
                        "page latch order: page {no} of tree {} (held shared) latched after the meta page or a \
                         new page {}: those come last (docs/PAGESTORE.md §8)",
                        key.0,
                        held.no,
                    ),
                }
            }
        }
        order
    }
}
