//! A keyed timer heap for delayed jobs, with O(1) removal by key.
//!
//! Two structures are kept side by side:
//!
//! * `live: FxHashMap<K, (run_at, seq)>` — the **live truth**: a key is
//!   scheduled iff it is in the map, for exactly that `run_at`.
//! * `heap: MinHeap4<Entry>` with entries `(run_at, seq, key)` ordered by
//!   `(run_at, seq)` only, so `K` needs no ordering.
//!
//! `seq` comes from a per-heap counter incremented on every insert, so:
//!
//! * entries with equal `run_at` pop in insertion (FIFO) order, and the pop
//!   order is a total, deterministic order;
//! * an entry is *live* iff `live[key] == (run_at, seq)`. Removing, popping or
//!   re-inserting a key leaves its old entry *stale*, and a key removed then
//!   re-inserted gets a new `seq`, so its old entry stays recognisably stale.
//!
//! Stale entries are discarded lazily when they reach the top, and bounded by
//! this rebuild rule, checked after every `remove`, `pop_due` and replacing
//! `insert` (the calls that create stale entries or shrink the live set):
//!
//! * no live entry left → clear the heap at once;
//! * otherwise, once `stale >= 256` and `stale >= live` → rebuild the heap
//!   from the live entries only (O(n), amortised O(1) over the `stale` calls
//!   that made those entries stale).
//!
//! Hence after every public call `stale < max(256, live)`, i.e.
//! `heap_len() == 0` when `len() == 0`, and otherwise
//! `heap_len() <= max(len() + 255, 2 * len() - 1)`.

use super::min_heap::MinHeap4;
use rustc_hash::FxHashMap;
use std::cmp::Ordering;
use std::hash::Hash;

/// Minimum number of stale entries before a rebuild is considered.
const REBUILD_MIN_STALE: usize = 256;

/// A heap entry; ordered by `(run_at, seq)` only.
#[derive(Clone, Copy, Debug)]
struct Entry<K> {
    run_at: u64,
    seq: u64,
    key: K,
}

impl<K> Entry<K> {
    fn order_key(&self) -> (u64, u64) {
        (self.run_at, self.seq)
    }
}

impl<K> PartialEq for Entry<K> {
    fn eq(&self, other: &Self) -> bool {
        self.order_key() == other.order_key()
    }
}

impl<K> Eq for Entry<K> {}

impl<K> PartialOrd for Entry<K> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<K> Ord for Entry<K> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.order_key().cmp(&other.order_key())
    }
}

/// Delayed keys ordered by `run_at`, FIFO among equal `run_at`.
#[derive(Clone, Debug)]
pub struct DelayedHeap<K: Copy + Eq + Hash> {
    live: FxHashMap<K, (u64, u64)>,
    heap: MinHeap4<Entry<K>>,
    next_seq: u64,
}

impl<K: Copy + Eq + Hash> Default for DelayedHeap<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Copy + Eq + Hash> DelayedHeap<K> {
    /// Creates an empty heap. O(1), does not allocate.
    #[must_use]
    pub fn new() -> Self {
        Self {
            live: FxHashMap::default(),
            heap: MinHeap4::new(),
            next_seq: 0,
        }
    }

    /// Schedules `key` at `run_at`, replacing (and returning) its previous
    /// `run_at` if it was scheduled. A replaced key goes to the back of the
    /// FIFO among equal `run_at`. O(log n) + O(1) expected; a replacement may
    /// trigger an amortised-O(1) rebuild.
    pub fn insert(&mut self, key: K, run_at: u64) -> Option<u64> {
        let seq = self.next_seq;
        self.next_seq = seq.wrapping_add(1);
        let previous = self.live.insert(key, (run_at, seq));
        self.heap.push(Entry { run_at, seq, key });
        if previous.is_some() {
            self.maybe_rebuild();
        }
        previous.map(|(r, _)| r)
    }

    /// Unschedules `key`, returning its `run_at`. O(1) expected (the heap
    /// entry becomes stale); may trigger an amortised-O(1) rebuild.
    pub fn remove(&mut self, key: &K) -> Option<u64> {
        let (run_at, _) = self.live.remove(key)?;
        self.maybe_rebuild();
        Some(run_at)
    }

    /// `run_at` of `key`, if scheduled. O(1) expected.
    #[must_use]
    pub fn get(&self, key: &K) -> Option<u64> {
        self.live.get(key).map(|&(r, _)| r)
    }

    /// `true` if `key` is scheduled. O(1) expected.
    #[must_use]
    pub fn contains(&self, key: &K) -> bool {
        self.live.contains_key(key)
    }

    /// Number of live (scheduled) keys. O(1).
    #[must_use]
    pub fn len(&self) -> usize {
        self.live.len()
    }

    /// `true` when nothing is scheduled. O(1).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.live.is_empty()
    }

    /// Earliest live `run_at`, discarding stale entries found on top (hence
    /// `&mut self`). O(1) when the top is live, O(log n) per discarded entry.
    pub fn next_due(&mut self) -> Option<u64> {
        self.drop_stale_top().map(|e| e.run_at)
    }

    /// Removes and returns the earliest live key if its `run_at <= now`
    /// (FIFO among equal `run_at`). O(log n) amortised; may trigger an
    /// amortised-O(1) rebuild.
    pub fn pop_due(&mut self, now: u64) -> Option<(K, u64)> {
        let top = self.drop_stale_top()?;
        if top.run_at > now {
            return None;
        }
        self.heap.pop();
        self.live.remove(&top.key);
        self.maybe_rebuild();
        Some((top.key, top.run_at))
    }

    /// Live `(key, run_at)` pairs in unspecified order. O(n) to exhaust.
    pub fn iter(&self) -> impl Iterator<Item = (K, u64)> + '_ {
        self.live.iter().map(|(&k, &(r, _))| (k, r))
    }

    /// All live `(key, run_at)` pairs in pop order. O(n log n), no mutation.
    #[must_use]
    pub fn sorted(&self) -> Vec<(K, u64)> {
        self.sorted_prefix(usize::MAX)
    }

    /// The first `n` live pairs in pop order, without mutating.
    /// O(len + k log k) with `k = min(n, len)`.
    #[must_use]
    pub fn sorted_prefix(&self, n: usize) -> Vec<(K, u64)> {
        if n == 0 {
            return Vec::new();
        }
        // (run_at, seq, key); (run_at, seq) is unique, so the order is total.
        let mut all: Vec<(u64, u64, K)> = self.live.iter().map(|(&k, &(r, s))| (r, s, k)).collect();
        if n < all.len() {
            all.select_nth_unstable_by_key(n, |e| (e.0, e.1));
            all.truncate(n);
        }
        all.sort_unstable_by_key(|e| (e.0, e.1));
        all.into_iter().map(|(r, _, k)| (k, r)).collect()
    }

    /// Removes everything, keeping allocations. O(n).
    pub fn clear(&mut self) {
        self.live.clear();
        self.heap.clear();
    }

    /// Number of heap entries, live and stale. O(1).
    #[must_use]
    pub fn heap_len(&self) -> usize {
        self.heap.len()
    }

    /// Number of stale heap entries awaiting removal. O(1).
    #[must_use]
    pub fn stale_len(&self) -> usize {
        self.heap.len() - self.live.len()
    }

    fn is_live(live: &FxHashMap<K, (u64, u64)>, entry: &Entry<K>) -> bool {
        live.get(&entry.key) == Some(&(entry.run_at, entry.seq))
    }

    /// Pops stale entries off the top until the top is live (returned by
    /// copy) or the heap is empty.
    fn drop_stale_top(&mut self) -> Option<Entry<K>> {
        while let Some(&top) = self.heap.peek() {
            if Self::is_live(&self.live, &top) {
                return Some(top);
            }
            self.heap.pop();
        }
        None
    }

    /// Applies the rebuild rule (see the module docs). O(1) check.
    fn maybe_rebuild(&mut self) {
        let stale = self.stale_len();
        if self.live.is_empty() {
            self.heap.clear();
        } else if stale >= REBUILD_MIN_STALE && stale >= self.live.len() {
            let live = &self.live;
            self.heap.retain(|e| Self::is_live(live, e));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::DelayedHeap;
    use proptest::prelude::*;
    use std::collections::{BTreeMap, HashMap};

    /// The bound that the rebuild rule guarantees after every public call.
    fn assert_bound(h: &DelayedHeap<u16>) {
        let (live, heap_len) = (h.len(), h.heap_len());
        assert_eq!(heap_len, live + h.stale_len());
        if live == 0 {
            assert_eq!(heap_len, 0);
        } else {
            assert!(
                heap_len <= (live + 255).max(2 * live - 1),
                "{heap_len} for {live} live"
            );
        }
    }

    #[test]
    fn fifo_among_equal_run_at() {
        let mut h = DelayedHeap::new();
        for k in [7u16, 3, 9, 1] {
            h.insert(k, 100);
        }
        h.insert(5, 50);
        assert_eq!(h.next_due(), Some(50));
        assert_eq!(h.pop_due(49), None);
        assert_eq!(h.pop_due(50), Some((5, 50)));
        assert_eq!(h.sorted(), vec![(7, 100), (3, 100), (9, 100), (1, 100)]);
        assert_eq!(h.sorted_prefix(2), vec![(7, 100), (3, 100)]);
        // Re-inserting moves a key to the back of its run_at group.
        assert_eq!(h.insert(7, 100), Some(100));
        let order: Vec<_> = std::iter::from_fn(|| h.pop_due(u64::MAX)).collect();
        assert_eq!(order, vec![(3, 100), (9, 100), (1, 100), (7, 100)]);
        assert!(h.is_empty());
        assert_eq!(h.heap_len(), 0);
    }

    #[test]
    fn remove_get_contains_and_reinsert() {
        let mut h: DelayedHeap<u32> = DelayedHeap::default();
        h.insert(1, 10);
        h.insert(2, 20);
        assert_eq!(h.get(&1), Some(10));
        assert!(h.contains(&2));
        assert_eq!(h.remove(&1), Some(10));
        assert_eq!(h.remove(&1), None);
        assert_eq!(h.heap_len(), 2);
        h.insert(1, 30); // old (1, 10) entry must stay stale
        assert_eq!(h.next_due(), Some(20));
        assert_eq!(h.heap_len(), 2);
        assert_eq!(h.iter().count(), 2);
        assert_eq!(h.pop_due(100), Some((2, 20)));
        assert_eq!(h.pop_due(100), Some((1, 30)));
        assert_eq!(h.pop_due(100), None);
        assert_eq!(h.next_due(), None);
        h.insert(4, 1);
        h.clear();
        assert!(h.is_empty() && h.heap_len() == 0);
    }

    #[test]
    fn rebuild_rule() {
        let mut h = DelayedHeap::new();
        for k in 0..1000u16 {
            h.insert(k, u64::from(k));
        }
        // After r removals: stale = r, live = 1000 - r; the rule fires at the
        // first r with r >= 256 and r >= 1000 - r, i.e. r = 500.
        for k in 0..500u16 {
            h.remove(&k);
            assert_bound(&h);
        }
        assert_eq!(h.stale_len(), 0, "rebuilt when stale == live == 500");
        assert_eq!(h.heap_len(), 500);
        for k in 500..999u16 {
            h.remove(&k);
            assert_bound(&h);
        }
        h.remove(&999);
        assert_eq!(h.heap_len(), 0, "cleared when nothing is live");
    }

    #[test]
    fn rescheduling_one_key_stays_bounded() {
        let mut h = DelayedHeap::new();
        h.insert(1u16, 0);
        for t in 0..10_000u64 {
            h.insert(0, t);
            assert_bound(&h);
        }
        assert_eq!(h.sorted(), vec![(1, 0), (0, 9_999)]);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u16, u64),
        Remove(u16),
        PopDue(u64),
        NextDue,
        Prefix(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            8 => (0u16..400, 0u64..24).prop_map(|(k, r)| Op::Insert(k, r)),
            5 => (0u16..400).prop_map(Op::Remove),
            3 => (0u64..30).prop_map(Op::PopDue),
            1 => Just(Op::NextDue),
            1 => (0usize..10).prop_map(Op::Prefix),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]
        #[test]
        fn matches_btreemap_model(ops in proptest::collection::vec(op(), 0..2500)) {
            let mut h = DelayedHeap::new();
            let mut order: BTreeMap<(u64, u64), u16> = BTreeMap::new();
            let mut by_key: HashMap<u16, (u64, u64)> = HashMap::new();
            let mut seq = 0u64;
            for op in ops {
                match op {
                    Op::Insert(k, r) => {
                        seq += 1;
                        let old = by_key.insert(k, (r, seq));
                        if let Some(o) = old {
                            order.remove(&o);
                        }
                        order.insert((r, seq), k);
                        prop_assert_eq!(h.insert(k, r), old.map(|o| o.0));
                    }
                    Op::Remove(k) => {
                        let old = by_key.remove(&k);
                        if let Some(o) = old {
                            order.remove(&o);
                        }
                        prop_assert_eq!(h.remove(&k), old.map(|o| o.0));
                    }
                    Op::PopDue(now) => {
                        let due = order.first_key_value().filter(|(o, _)| o.0 <= now);
                        let expected = due.map(|(&o, &k)| (o, k));
                        if let Some((o, k)) = expected {
                            order.remove(&o);
                            by_key.remove(&k);
                        }
                        prop_assert_eq!(h.pop_due(now), expected.map(|(o, k)| (k, o.0)));
                    }
                    Op::NextDue => {
                        prop_assert_eq!(h.next_due(), order.keys().next().map(|o| o.0));
                    }
                    Op::Prefix(n) => {
                        let want: Vec<_> = order.iter().take(n).map(|(o, &k)| (k, o.0)).collect();
                        prop_assert_eq!(h.sorted_prefix(n), want);
                    }
                }
                prop_assert_eq!(h.len(), by_key.len());
                assert_bound(&h);
            }
            for (k, o) in &by_key {
                prop_assert_eq!(h.get(k), Some(o.0));
            }
            let want: Vec<_> = order.iter().map(|(o, &k)| (k, o.0)).collect();
            prop_assert_eq!(h.sorted(), want.clone());
            let popped: Vec<_> = std::iter::from_fn(|| h.pop_due(u64::MAX)).collect();
            prop_assert_eq!(popped, want);
            prop_assert_eq!(h.heap_len(), 0);
        }
    }
}
