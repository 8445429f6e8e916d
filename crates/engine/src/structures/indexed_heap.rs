//! A keyed priority queue with O(1) removal, built on lazy deletion.
//!
//! Two structures are kept side by side:
//!
//! * `index: FxHashMap<K, (P, generation)>` — the **live truth**: a key is in
//!   the queue iff it is in the index, with exactly that priority.
//! * `heap: MinHeap4<Entry>` with entries `(P, K, generation)`, ordered by `P`
//!   only. Ties between equal priorities pop in unspecified order; callers
//!   that need determinism make `P` unique (e.g. `(priority, seq)`).
//!
//! Every `push` takes a fresh generation from a wrapping `u32` counter. An
//! entry is *live* iff the index maps its key to the same `(P, generation)`;
//! otherwise it is *stale* (its key was removed, popped, or re-pushed).
//! Matching on the priority as well as the generation means that even after
//! the counter wraps, a stale entry can only be mistaken for the live one if it
//! is indistinguishable from it.
//!
//! Invariants:
//!
//! * each live key has exactly one live heap entry, so
//!   `heap_len() == len() + stale_len()`;
//! * after every mutating call, `heap_len() < 64` or
//!   `5 * stale_len() <= heap_len()` (stale entries are at most 20 %).
//!   Whenever stale entries exceed 20 % of a heap of at least 64 entries the
//!   heap is compacted with [`MinHeap4::retain`] in O(n); when no key is live
//!   any more the heap is simply cleared. The check runs after `push`, `pop`
//!   and `remove` (`pop` too, because shrinking the heap raises the ratio).
//!   A compaction removes all `s` stale entries, which were created by `s`
//!   O(1) calls since the previous one, and costs O(heap_len) < O(5 s):
//!   amortised O(1) per call.

use super::min_heap::MinHeap4;
use rustc_hash::FxHashMap;
use std::cmp::Ordering;
use std::hash::Hash;

/// Heaps smaller than this are never compacted (avoids churn on tiny heaps).
const COMPACT_MIN_HEAP_LEN: usize = 64;

/// A heap entry; ordered by `prio` only.
#[derive(Clone, Copy, Debug)]
struct Entry<K, P> {
    prio: P,
    key: K,
    generation: u32,
}

impl<K, P: Ord> PartialEq for Entry<K, P> {
    fn eq(&self, other: &Self) -> bool {
        self.prio == other.prio
    }
}

impl<K, P: Ord> Eq for Entry<K, P> {}

impl<K, P: Ord> PartialOrd for Entry<K, P> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<K, P: Ord> Ord for Entry<K, P> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.prio.cmp(&other.prio)
    }
}

/// A min-priority queue keyed by `K`, with O(1) `remove`/`get` by key.
#[derive(Clone, Debug)]
pub struct IndexedHeap<K, P>
where
    K: Copy + Eq + Hash,
    P: Ord + Copy,
{
    index: FxHashMap<K, (P, u32)>,
    heap: MinHeap4<Entry<K, P>>,
    next_generation: u32,
}

impl<K: Copy + Eq + Hash, P: Ord + Copy> Default for IndexedHeap<K, P> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Copy + Eq + Hash, P: Ord + Copy> IndexedHeap<K, P> {
    /// Creates an empty queue. O(1), does not allocate.
    #[must_use]
    pub fn new() -> Self {
        Self {
            index: FxHashMap::default(),
            heap: MinHeap4::new(),
            next_generation: 0,
        }
    }

    /// Creates an empty queue with room for `capacity` keys. O(1).
    #[must_use]
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            index: FxHashMap::with_capacity_and_hasher(capacity, Default::default()),
            heap: MinHeap4::with_capacity(capacity),
            next_generation: 0,
        }
    }

    /// Inserts `key` with priority `prio`, replacing (and returning) the
    /// priority it had if it was already queued; the old heap entry becomes
    /// stale. O(log n) heap push + O(1) expected index update; may trigger
    /// an amortised-O(1) compaction.
    pub fn push(&mut self, key: K, prio: P) -> Option<P> {
        let generation = self.next_generation;
        self.next_generation = generation.wrapping_add(1);
        let previous = self.index.insert(key, (prio, generation));
        self.heap.push(Entry {
            prio,
            key,
            generation,
        });
        // Checked on every push (not only replacements): growing past
        // COMPACT_MIN_HEAP_LEN can arm the 20 % rule too.
        self.maybe_compact();
        previous.map(|(p, _)| p)
    }

    /// Removes and returns the live entry with the smallest priority,
    /// discarding stale entries found on top. O(log n) amortised (each stale
    /// entry is discarded at most once).
    pub fn pop(&mut self) -> Option<(K, P)> {
        let top = self.drop_stale_top()?;
        self.heap.pop();
        self.index.remove(&top.key);
        self.maybe_compact();
        Some((top.key, top.prio))
    }

    /// Removes `key`, returning its priority. O(1) expected: only the index is
    /// touched, the heap entry becomes stale; may trigger an amortised-O(1)
    /// compaction.
    pub fn remove(&mut self, key: &K) -> Option<P> {
        let (prio, _) = self.index.remove(key)?;
        self.maybe_compact();
        Some(prio)
    }

    /// Returns the live entry with the smallest priority without removing it,
    /// discarding stale entries found on top (hence `&mut self`).
    /// O(1) when the top is live, O(log n) per discarded stale entry.
    pub fn peek(&mut self) -> Option<(K, P)> {
        self.drop_stale_top().map(|e| (e.key, e.prio))
    }

    /// Priority of `key`, if queued. O(1) expected.
    #[must_use]
    pub fn get(&self, key: &K) -> Option<P> {
        self.index.get(key).map(|&(p, _)| p)
    }

    /// `true` if `key` is queued. O(1) expected.
    #[must_use]
    pub fn contains(&self, key: &K) -> bool {
        self.index.contains_key(key)
    }

    /// Number of live entries. O(1).
    #[must_use]
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// `true` when no live entry is queued. O(1).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Removes everything, keeping allocations. O(n).
    pub fn clear(&mut self) {
        self.index.clear();
        self.heap.clear();
    }

    /// Live `(key, priority)` pairs in unspecified order. O(n) to exhaust.
    pub fn iter(&self) -> impl Iterator<Item = (K, P)> + '_ {
        self.index.iter().map(|(&k, &(p, _))| (k, p))
    }

    /// Number of stale heap entries awaiting removal. O(1).
    #[must_use]
    pub fn stale_len(&self) -> usize {
        self.heap.len() - self.index.len()
    }

    /// Number of heap entries, live and stale. O(1).
    #[must_use]
    pub fn heap_len(&self) -> usize {
        self.heap.len()
    }

    /// The first `n` live entries in pop order, without mutating the queue.
    /// O(len + k log k) with `k = min(n, len)`: collect the live entries,
    /// partition around the `n`-th with `select_nth_unstable_by`, then sort
    /// the prefix.
    #[must_use]
    pub fn sorted_prefix(&self, n: usize) -> Vec<(K, P)> {
        if n == 0 {
            return Vec::new();
        }
        let mut live: Vec<(K, P)> = self.iter().collect();
        if n < live.len() {
            live.select_nth_unstable_by_key(n, |e| e.1);
            live.truncate(n);
        }
        live.sort_unstable_by_key(|e| e.1);
        live
    }

    /// `true` if `entry` is the live entry of its key.
    fn is_live(index: &FxHashMap<K, (P, u32)>, entry: &Entry<K, P>) -> bool {
        index
            .get(&entry.key)
            .is_some_and(|&(p, g)| g == entry.generation && p == entry.prio)
    }

    /// Pops stale entries off the top until the top is live (returned by
    /// copy) or the heap is empty.
    fn drop_stale_top(&mut self) -> Option<Entry<K, P>> {
        while let Some(&top) = self.heap.peek() {
            if Self::is_live(&self.index, &top) {
                return Some(top);
            }
            self.heap.pop();
        }
        None
    }

    /// Clears the heap when nothing is live; otherwise compacts it when stale
    /// entries exceed 20 % of a heap of at least [`COMPACT_MIN_HEAP_LEN`]
    /// entries. O(1) check, O(n) rebuild.
    fn maybe_compact(&mut self) {
        let heap_len = self.heap.len();
        if self.index.is_empty() {
            self.heap.clear();
        } else if heap_len >= COMPACT_MIN_HEAP_LEN && self.stale_len() * 5 > heap_len {
            let index = &self.index;
            self.heap.retain(|e| Self::is_live(index, e));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::IndexedHeap;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    /// The bound that holds after every public call.
    fn assert_stale_bound<P: Ord + Copy>(h: &IndexedHeap<u16, P>) {
        assert_eq!(h.heap_len(), h.len() + h.stale_len());
        assert!(
            h.heap_len() < 64 || h.stale_len() * 5 <= h.heap_len(),
            "stale {} of {}",
            h.stale_len(),
            h.heap_len()
        );
    }

    #[test]
    fn basic_push_pop_replace_remove() {
        let mut h: IndexedHeap<u32, u64> = IndexedHeap::new();
        assert!(h.is_empty());
        assert_eq!(h.push(1, 50), None);
        assert_eq!(h.push(2, 10), None);
        assert_eq!(h.push(3, 30), None);
        assert_eq!(h.push(1, 5), Some(50));
        assert_eq!(h.len(), 3);
        assert_eq!(h.stale_len(), 1);
        assert_eq!(h.get(&1), Some(5));
        assert!(h.contains(&3));
        assert_eq!(h.remove(&3), Some(30));
        assert_eq!(h.remove(&3), None);
        assert!(!h.contains(&3));
        assert_eq!(h.peek(), Some((1, 5)));
        assert_eq!(h.sorted_prefix(10), vec![(1, 5), (2, 10)]);
        assert_eq!(h.pop(), Some((1, 5)));
        assert_eq!(h.pop(), Some((2, 10)));
        assert_eq!(h.pop(), None);
        assert_eq!(h.peek(), None);
        assert_eq!(h.heap_len(), 0);
    }

    #[test]
    fn remove_compacts_large_heaps_only() {
        let mut h: IndexedHeap<u16, u32> = IndexedHeap::with_capacity(100);
        for k in 0..10 {
            h.push(k, u32::from(k));
        }
        for k in 0..9 {
            h.remove(&k);
        }
        // Tiny heap: stale entries are tolerated.
        assert_eq!((h.len(), h.heap_len()), (1, 10));
        h.clear();
        for k in 0..100 {
            h.push(k, u32::from(k));
        }
        for k in 0..20 {
            h.remove(&k);
            assert_stale_bound(&h);
        }
        assert_eq!(h.stale_len(), 20);
        h.remove(&20); // 21 stale of 100 > 20 %
        assert_eq!((h.len(), h.stale_len()), (79, 0));
        assert_eq!(h.peek(), Some((21, 21)));
    }

    #[test]
    fn repeated_replace_stays_bounded() {
        let mut h: IndexedHeap<u16, u32> = IndexedHeap::new();
        for i in 0..10_000u32 {
            h.push((i % 3) as u16, i);
            assert_stale_bound(&h);
        }
        assert_eq!(h.len(), 3);
        assert!(h.heap_len() < 64);
    }

    #[test]
    fn sorted_prefix_and_iter() {
        let mut h: IndexedHeap<u16, (u32, u64)> = IndexedHeap::new();
        for k in 0..50u16 {
            h.push(k, (u32::from(k * 7 % 13), u64::from(k)));
        }
        let all = h.sorted_prefix(usize::MAX);
        assert_eq!(all.len(), 50);
        assert!(all.windows(2).all(|w| w[0].1 < w[1].1));
        assert_eq!(h.sorted_prefix(7), all[..7].to_vec());
        assert!(h.sorted_prefix(0).is_empty());
        assert_eq!(h.iter().count(), 50);
        let popped: Vec<_> = std::iter::from_fn(|| h.pop()).collect();
        assert_eq!(popped, all);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Push(u16, u32),
        Remove(u16),
        Pop,
        Peek,
        Prefix(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            8 => (0u16..150, 0u32..40).prop_map(|(k, p)| Op::Push(k, p)),
            4 => (0u16..150).prop_map(Op::Remove),
            3 => Just(Op::Pop),
            1 => Just(Op::Peek),
            1 => (0usize..20).prop_map(Op::Prefix),
        ]
    }

    proptest! {
        #[test]
        fn matches_btreemap_model(ops in proptest::collection::vec(op(), 0..800)) {
            let mut h: IndexedHeap<u16, (u32, u64)> = IndexedHeap::new();
            let mut model: BTreeMap<u16, (u32, u64)> = BTreeMap::new();
            let mut seq = 0u64;
            let model_min = |m: &BTreeMap<u16, (u32, u64)>| {
                m.iter().min_by_key(|(_, &p)| p).map(|(&k, &p)| (k, p))
            };
            for op in ops {
                match op {
                    Op::Push(k, p) => {
                        seq += 1;
                        prop_assert_eq!(h.push(k, (p, seq)), model.insert(k, (p, seq)));
                    }
                    Op::Remove(k) => prop_assert_eq!(h.remove(&k), model.remove(&k)),
                    Op::Pop => {
                        let expected = model_min(&model);
                        if let Some((k, _)) = expected {
                            model.remove(&k);
                        }
                        prop_assert_eq!(h.pop(), expected);
                    }
                    Op::Peek => prop_assert_eq!(h.peek(), model_min(&model)),
                    Op::Prefix(n) => {
                        let mut all: Vec<_> = model.iter().map(|(&k, &p)| (k, p)).collect();
                        all.sort_unstable_by_key(|e| e.1);
                        all.truncate(n);
                        prop_assert_eq!(h.sorted_prefix(n), all);
                    }
                }
                prop_assert_eq!(h.len(), model.len());
                prop_assert_eq!(h.is_empty(), model.is_empty());
                assert_stale_bound(&h);
            }
            for (k, p) in &model {
                prop_assert_eq!(h.get(k), Some(*p));
            }
            let mut live: Vec<_> = h.iter().collect();
            live.sort_unstable();
            prop_assert_eq!(live, model.iter().map(|(&k, &p)| (k, p)).collect::<Vec<_>>());
            let mut expected: Vec<_> = model.into_iter().collect();
            expected.sort_unstable_by_key(|e| e.1);
            let popped: Vec<_> = std::iter::from_fn(|| h.pop()).collect();
            prop_assert_eq!(popped, expected);
            prop_assert_eq!(h.heap_len(), 0);
        }
    }
}
