//! A 4-ary min-heap stored in a `Vec`.
//!
//! Layout: the element at index `i` has its children at `4i+1 ..= 4i+4` and
//! its parent at `(i-1)/4`. A 4-ary heap is half as deep as a binary heap, so
//! `push` does fewer comparisons and the children of a node share a cache line
//! for small elements, which makes `pop` cheap in practice.
//!
//! Invariant (the heap property): for every `i > 0`,
//! `data[(i - 1) / 4] <= data[i]`. Hence `data[0]` is a minimum.
//!
//! Sifting moves an element along its path to the root (`sift_up`) or down the
//! chain of smallest children (`sift_down`). The element is moved with
//! `slice::swap`, one swap per level, instead of a `ptr::read`/`ptr::write`
//! "hole": that keeps the module free of `unsafe` (and trivially panic-safe if
//! a user `Ord` impl panics), and for the small entries the engine stores a
//! swap costs only a few register moves.
//!
//! Equal elements may pop in any order; callers that need a deterministic
//! order make their `Ord` total over unique values (e.g. add a sequence).

/// Number of children per node.
const ARITY: usize = 4;

/// A 4-ary min-heap: `pop` returns the smallest element first.
#[derive(Clone, Debug)]
pub struct MinHeap4<T: Ord> {
    data: Vec<T>,
}

impl<T: Ord> Default for MinHeap4<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Ord> MinHeap4<T> {
    /// Creates an empty heap. O(1), does not allocate.
    #[must_use]
    pub fn new() -> Self {
        Self { data: Vec::new() }
    }

    /// Creates an empty heap with room for `capacity` elements. O(1).
    #[must_use]
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            data: Vec::with_capacity(capacity),
        }
    }

    /// Builds a heap from arbitrary elements in O(n) (bottom-up heapify).
    #[must_use]
    pub fn from_vec(data: Vec<T>) -> Self {
        let mut heap = Self { data };
        heap.heapify();
        heap
    }

    /// Adds an element. O(log4 n) comparisons, amortised O(1) allocation.
    pub fn push(&mut self, item: T) {
        self.data.push(item);
        self.sift_up(self.data.len() - 1);
    }

    /// Removes and returns the smallest element. O(log4 n) levels,
    /// at most 4 comparisons per level.
    pub fn pop(&mut self) -> Option<T> {
        if self.data.is_empty() {
            return None;
        }
        // Move the last leaf into the root slot, take the old root out.
        let top = self.data.swap_remove(0);
        if !self.data.is_empty() {
            self.sift_down(0);
        }
        Some(top)
    }

    /// Returns the smallest element without removing it. O(1).
    #[must_use]
    pub fn peek(&self) -> Option<&T> {
        self.data.first()
    }

    /// Number of elements. O(1).
    #[must_use]
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// `true` when the heap holds no element. O(1).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Allocated capacity, in elements. O(1).
    #[must_use]
    pub fn capacity(&self) -> usize {
        self.data.capacity()
    }

    /// Removes every element, keeping the allocation. O(n) drops.
    pub fn clear(&mut self) {
        self.data.clear();
    }

    /// Keeps only the elements for which `keep` returns `true`, then restores
    /// the heap property. O(n) total: one filtering pass plus a bottom-up
    /// heapify (skipped when nothing was removed).
    pub fn retain<F: FnMut(&T) -> bool>(&mut self, keep: F) {
        let before = self.data.len();
        self.data.retain(keep);
        if self.data.len() != before {
            self.heapify();
        }
    }

    /// Iterates over all elements in unspecified (storage) order. O(1) to
    /// create, O(n) to exhaust.
    pub fn iter(&self) -> std::slice::Iter<'_, T> {
        self.data.iter()
    }

    /// Consumes the heap, returning its elements in unspecified order. O(1).
    #[must_use]
    pub fn into_vec(self) -> Vec<T> {
        self.data
    }

    /// Restores the heap property for the whole vector in O(n): sift down
    /// every internal node, from the last parent up to the root.
    fn heapify(&mut self) {
        let len = self.data.len();
        if len < 2 {
            return;
        }
        let last_parent = (len - 2) / ARITY;
        for pos in (0..=last_parent).rev() {
            self.sift_down(pos);
        }
    }

    /// Moves the element at `pos` towards the root while it is smaller than
    /// its parent.
    fn sift_up(&mut self, mut pos: usize) {
        while pos > 0 {
            let parent = (pos - 1) / ARITY;
            if self.data[pos] >= self.data[parent] {
                break;
            }
            self.data.swap(pos, parent);
            pos = parent;
        }
    }

    /// Moves the element at `pos` down the chain of smallest children while
    /// one of its children is smaller than it.
    fn sift_down(&mut self, mut pos: usize) {
        let len = self.data.len();
        loop {
            let first = ARITY * pos + 1;
            if first >= len {
                break;
            }
            let end = (first + ARITY).min(len);
            let mut smallest = first;
            for child in first + 1..end {
                if self.data[child] < self.data[smallest] {
                    smallest = child;
                }
            }
            if self.data[smallest] >= self.data[pos] {
                break;
            }
            self.data.swap(pos, smallest);
            pos = smallest;
        }
    }
}

impl<T: Ord> From<Vec<T>> for MinHeap4<T> {
    /// Same as [`MinHeap4::from_vec`]: O(n).
    fn from(data: Vec<T>) -> Self {
        Self::from_vec(data)
    }
}

impl<T: Ord> FromIterator<T> for MinHeap4<T> {
    /// Collects then heapifies: O(n).
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        Self::from_vec(iter.into_iter().collect())
    }
}

impl<T: Ord> Extend<T> for MinHeap4<T> {
    /// Pushes each element: O(k log4 n).
    fn extend<I: IntoIterator<Item = T>>(&mut self, iter: I) {
        for item in iter {
            self.push(item);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::MinHeap4;
    use proptest::prelude::*;
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

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
}
