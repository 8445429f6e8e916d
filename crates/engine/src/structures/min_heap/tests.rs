//! Unit tests and proptests of [`MinHeap4`], against `BinaryHeap` and a sorted `Vec`.

use super::MinHeap4;
use proptest::prelude::*;
use std::cell::Cell;
use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;

/// Checks the heap property on every parent/child pair.
fn assert_heap<T: Ord + std::fmt::Debug>(heap: &MinHeap4<T>) {
    for i in 1..heap.data.len() {
        let parent = (i - 1) / 4;
        assert!(
            heap.data[parent] <= heap.data[i],
            "heap property violated at {i}: {:?}",
            heap.data
        );
    }
}

fn drain<T: Ord>(mut heap: MinHeap4<T>) -> Vec<T> {
    let mut out = Vec::with_capacity(heap.len());
    while let Some(item) = heap.pop() {
        out.push(item);
    }
    out
}

#[test]
fn empty_heap() {
    let mut heap: MinHeap4<u32> = MinHeap4::new();
    assert!(heap.is_empty());
    assert_eq!(heap.len(), 0);
    assert_eq!(heap.peek(), None);
    assert_eq!(heap.pop(), None);
    assert!(MinHeap4::<u8>::default().is_empty());
}

#[test]
fn push_pop_sorted_with_duplicates() {
    let mut heap = MinHeap4::with_capacity(16);
    assert!(heap.capacity() >= 16);
    for x in [5, 3, 9, 1, 3, 7, 0, 9, 2, 8, 1] {
        heap.push(x);
        assert_heap(&heap);
    }
    assert_eq!(heap.peek(), Some(&0));
    assert_eq!(heap.len(), 11);
    assert_eq!(drain(heap), vec![0, 1, 1, 2, 3, 3, 5, 7, 8, 9, 9]);
}

#[test]
fn from_vec_retain_into_vec_clear() {
    let heap = MinHeap4::from_vec((0..100).rev().collect::<Vec<u32>>());
    assert_heap(&heap);
    let mut heap = heap;
    heap.retain(|x| x % 3 == 0);
    assert_heap(&heap);
    assert_eq!(heap.iter().count(), 34);
    let mut v = heap.clone().into_vec();
    v.sort_unstable();
    assert_eq!(v, (0..100).filter(|x| x % 3 == 0).collect::<Vec<_>>());
    assert_eq!(drain(heap.clone()), v);
    heap.clear();
    assert!(heap.is_empty());
    assert_eq!(heap.pop(), None);
}

#[test]
fn collect_and_extend() {
    let mut heap: MinHeap4<i64> = [4, -2, 7].into_iter().collect();
    heap.extend([3, -9]);
    assert_heap(&heap);
    assert_eq!(drain(heap), vec![-9, -2, 3, 4, 7]);
    let heap: MinHeap4<i64> = MinHeap4::from(vec![2, 1]);
    assert_eq!(drain(heap), vec![1, 2]);
}

#[derive(Debug, Clone)]
enum Op {
    Push(u16),
    Pop,
    Peek,
    Retain(u16),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u16..64).prop_map(Op::Push),
        3 => Just(Op::Pop),
        1 => Just(Op::Peek),
        1 => (2u16..5).prop_map(Op::Retain),
    ]
}

proptest! {
    #[test]
    fn matches_std_binary_heap(ops in proptest::collection::vec(op(), 0..300)) {
        let mut heap = MinHeap4::new();
        let mut model = BinaryHeap::new();
        for op in ops {
            match op {
                Op::Push(x) => {
                    heap.push(x);
                    model.push(Reverse(x));
                }
                Op::Pop => {
                    prop_assert_eq!(heap.pop(), model.pop().map(|Reverse(x)| x));
                }
                Op::Peek => {
                    prop_assert_eq!(heap.peek(), model.peek().map(|Reverse(x)| x));
                }
                Op::Retain(m) => {
                    heap.retain(|x| x % m != 0);
                    model.retain(|Reverse(x)| x % m != 0);
                }
            }
            prop_assert_eq!(heap.len(), model.len());
            assert_heap(&heap);
        }
        let mut expected: Vec<u16> = model.into_iter().map(|Reverse(x)| x).collect();
        expected.sort_unstable();
        prop_assert_eq!(drain(heap), expected);
    }

    #[test]
    fn from_vec_pops_sorted(mut v in proptest::collection::vec(any::<i32>(), 0..500)) {
        let heap = MinHeap4::from_vec(v.clone());
        assert_heap(&heap);
        v.sort_unstable();
        prop_assert_eq!(drain(heap), v);
    }
}

#[test]
fn zero_sized_elements() {
    let mut heap = MinHeap4::new();
    for _ in 0..100 {
        heap.push(());
    }
    assert_eq!(heap.len(), 100);
    assert_eq!(drain(heap).len(), 100);
}

/// A key that owns a shared tag, so a leaked or double-dropped element shows
/// up in the tag's strong count (and a double drop of the `Rc` in its
/// allocator). Ordered by `key` only.
#[derive(Debug, Clone)]
struct Owned(u16, #[allow(dead_code)] Rc<()>);

impl PartialEq for Owned {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}
impl Eq for Owned {}
impl PartialOrd for Owned {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Owned {
    fn cmp(&self, other: &Self) -> Ordering {
        FUSE.with(|fuse| {
            let left = fuse.get();
            assert!(left > 0, "comparison fuse blew");
            fuse.set(left - 1);
        });
        self.0.cmp(&other.0)
    }
}

thread_local! {
    /// Comparisons `Owned::cmp` allows before it panics.
    static FUSE: Cell<u64> = const { Cell::new(u64::MAX) };
}

fn set_fuse(n: u64) {
    FUSE.with(|fuse| fuse.set(n));
}

/// A panicking `Ord` in the middle of any sift leaves every element in the
/// heap at most once (nothing duplicated, no double drop, no leak); only the
/// minimum a panicking `pop` was about to return is dropped.
#[test]
fn panicking_ord_keeps_every_element_once() {
    for fuse in 0..80 {
        let tag = Rc::new(());
        set_fuse(u64::MAX);
        // Distinct keys, so the heap's contents can be checked as a set.
        let mut heap: MinHeap4<Owned> = (0..150u16)
            .map(|k| Owned((k % 1000 * 7) % 1000, tag.clone()))
            .collect();
        let mut pushed: Vec<u16> = heap.iter().map(|o| o.0).collect();
        let mut popped = Vec::new();
        set_fuse(fuse);
        let result = catch_unwind(AssertUnwindSafe(|| {
            for k in 1000..1010u16 {
                pushed.push(k % 3 * 333 + k % 2);
                heap.push(Owned(*pushed.last().unwrap(), tag.clone()));
                popped.push(heap.pop().unwrap().0);
                popped.push(heap.pop().unwrap().0);
            }
        }));
        set_fuse(u64::MAX);
        assert!(result.is_err(), "fuse {fuse} never blew");
        assert_eq!(Rc::strong_count(&tag), 1 + heap.len());
        // Heap plus popped is the pushed multiset, minus at most the one
        // element a panicking `pop` had already taken out (it was dropped).
        let mut left: Vec<u16> = heap.iter().map(|o| o.0).chain(popped).collect();
        left.sort_unstable();
        pushed.sort_unstable();
        let mut extra = left.clone();
        for k in &pushed {
            if let Ok(i) = extra.binary_search(k) {
                extra.remove(i);
            }
        }
        assert!(extra.is_empty(), "fuse {fuse}: duplicated {extra:?}");
        assert!(pushed.len() - left.len() <= 1, "fuse {fuse}: lost elements");
    }
}

#[derive(Debug, Clone)]
enum ModelOp {
    Push(u16),
    Pop,
    Retain(u16),
}

fn model_op() -> impl Strategy<Value = ModelOp> {
    prop_oneof![
        12 => (0u16..2000).prop_map(ModelOp::Push),
        5 => Just(ModelOp::Pop),
        1 => (3u16..9).prop_map(ModelOp::Retain),
    ]
}

proptest! {
    /// Heaps of up to a few hundred owned (non-`Copy`) elements, so every
    /// level shape (full nodes, a last node with 1-3 children) is crossed by
    /// push, the bottom-up pop and heapify; the model is a sorted `Vec`.
    #[test]
    fn owned_elements_match_sorted_vec(
        init in proptest::collection::vec(0u16..2000, 0..300),
        ops in proptest::collection::vec(model_op(), 0..1200),
    ) {
        set_fuse(u64::MAX);
        let tag = Rc::new(());
        let mut heap = MinHeap4::from_vec(init.iter().map(|&k| Owned(k, tag.clone())).collect());
        let mut model = init;
        model.sort_unstable();
        for op in ops {
            match op {
                ModelOp::Push(k) => {
                    heap.push(Owned(k, tag.clone()));
                    model.insert(model.partition_point(|&m| m <= k), k);
                }
                ModelOp::Pop => {
                    let want = (!model.is_empty()).then(|| model.remove(0));
                    prop_assert_eq!(heap.pop().map(|o| o.0), want);
                }
                ModelOp::Retain(m) => {
                    heap.retain(|o| o.0 % m != 0);
                    model.retain(|k| k % m != 0);
                }
            }
            prop_assert_eq!(heap.peek().map(|o| o.0), model.first().copied());
            prop_assert_eq!(Rc::strong_count(&tag), 1 + model.len());
        }
        assert_heap(&heap);
        prop_assert_eq!(drain(heap).into_iter().map(|o| o.0).collect::<Vec<_>>(), model);
        prop_assert_eq!(Rc::strong_count(&tag), 1);
    }
}
