//! The ready heap of one queue: waiting and prioritized jobs in a 4-ary min-heap keyed by
//! `(priority, order)`, with lazy deletion — but without an index map of its own. Each job
//! carries the generation of its heap entry (`Job::ready_gen`: odd while in the heap, bumped on
//! every push and removal), so an entry is live iff its generation equals its job's. Removal is
//! O(1) (bump the job's generation); pop skips stale entries; the heap is compacted when more than
//! 20 % of its entries are stale. Versus a generic indexed heap this saves the index's hash table,
//! ~66 bytes per ready job, for one job-table lookup per popped entry.

use super::job::JobKey;
use super::job_table::JobTable;
use crate::structures::MinHeap4;

/// Heaps smaller than this are not compacted.
const COMPACT_MIN: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Entry {
    prio: (u32, i64),
    key: JobKey,
    gen: u32,
}

/// Ready jobs in pop order.
#[derive(Default)]
pub struct ReadyHeap {
    heap: MinHeap4<Entry>,
    live: usize,
}

fn is_live(jobs: &JobTable, e: &Entry) -> bool {
    jobs.get(&e.key).is_some_and(|j| j.ready_gen == e.gen)
}

impl ReadyHeap {
    /// Puts job `key` (already in `jobs`) in the heap at `(priority, order)`. O(log n).
    pub fn push(&mut self, jobs: &mut JobTable, key: JobKey, prio: (u32, i64)) {
        let Some(job) = jobs.get_mut(&key) else {
            return;
        };
        if job.ready_gen & 1 == 1 {
            // already in: the old entry goes stale
            job.ready_gen = job.ready_gen.wrapping_add(1);
            self.live -= 1;
        }
        job.ready_gen = job.ready_gen.wrapping_add(1);
        job.ready_order = prio.1;
        self.heap.push(Entry {
            prio,
            key,
            gen: job.ready_gen,
        });
        self.live += 1;
        self.maybe_compact(jobs);
    }

    /// Takes job `key` out (lazily); returns its `(priority, order)` if it was in. O(1).
    pub fn remove(&mut self, jobs: &mut JobTable, key: JobKey) -> Option<(u32, i64)> {
        let job = jobs.get_mut(&key)?;
        if job.ready_gen & 1 == 0 {
            return None;
        }
        job.ready_gen = job.ready_gen.wrapping_add(1);
        self.live -= 1;
        let prio = (job.priority, job.ready_order);
        self.maybe_compact(jobs);
        Some(prio)
    }

    /// Pops the first live job. O(log n) amortized.
    pub fn pop(&mut self, jobs: &mut JobTable) -> Option<(JobKey, (u32, i64))> {
        while let Some(e) = self.heap.pop() {
            if let Some(job) = jobs.get_mut(&e.key) {
                if job.ready_gen == e.gen {
                    job.ready_gen = job.ready_gen.wrapping_add(1);
                    self.live -= 1;
                    self.maybe_compact(jobs);
                    return Some((e.key, e.prio));
                }
            }
        }
        None
    }

    /// `(priority, order)` of job `key` if it is in the heap. O(1).
    pub fn get(&self, jobs: &JobTable, key: JobKey) -> Option<(u32, i64)> {
        let job = jobs.get(&key)?;
        (job.ready_gen & 1 == 1).then_some((job.priority, job.ready_order))
    }

    /// Number of ready jobs.
    pub fn len(&self) -> usize {
        self.live
    }

    /// Whether no job is ready.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Entries held, live or stale (for tests of the compaction bound).
    pub fn heap_len(&self) -> usize {
        self.heap.len()
    }

    /// Forgets every entry (the caller removes or re-homes the jobs). O(n).
    pub fn clear(&mut self, jobs: &mut JobTable) {
        for e in self.heap.iter() {
            if let Some(job) = jobs.get_mut(&e.key) {
                if job.ready_gen == e.gen {
                    job.ready_gen = job.ready_gen.wrapping_add(1);
                }
            }
        }
        self.heap.clear();
        self.live = 0;
    }

    /// Keys of the ready jobs, unordered. O(n).
    pub fn keys(&self, jobs: &JobTable) -> Vec<JobKey> {
        self.heap
            .iter()
            .filter(|e| is_live(jobs, e))
            .map(|e| e.key)
            .collect()
    }

    /// Ready jobs in pop order with their `(priority, order)`. O(n log n).
    pub fn sorted(&self, jobs: &JobTable) -> Vec<(JobKey, (u32, i64))> {
        let mut v: Vec<Entry> = self
            .heap
            .iter()
            .filter(|e| is_live(jobs, e))
            .copied()
            .collect();
        v.sort_unstable();
        v.into_iter().map(|e| (e.key, e.prio)).collect()
    }

    fn maybe_compact(&mut self, jobs: &JobTable) {
        let len = self.heap.len();
        if self.live == 0 {
            self.heap.clear();
        } else if len >= COMPACT_MIN && (len - self.live) * 5 > len {
            self.heap.retain(|e| is_live(jobs, e));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use proptest::prelude::*;

    use super::*;
    use crate::domain::job::Job;
    use crate::domain::options::JobOptions;

    fn table(n: u64) -> JobTable {
        let mut t = JobTable::default();
        for k in 0..n {
            t.insert(
                k,
                Job::new(k, Arc::from("j"), "{}".into(), &JobOptions::defaults(), 0),
            );
        }
        t
    }

    proptest! {
        #[test]
        fn pops_like_a_sorted_model(ops in proptest::collection::vec((0u8..4, 0u64..40, 0u32..4), 0..500)) {
            let mut jobs = table(40);
            let mut h = ReadyHeap::default();
            let mut model: BTreeMap<(u32, i64), JobKey> = BTreeMap::new();
            let mut at: BTreeMap<JobKey, (u32, i64)> = BTreeMap::new();
            let mut order = 0i64;
            for (op, key, prio) in ops {
                match op {
                    0 | 1 => {
                        order += 1;
                        let p = (prio, if op == 1 { -order } else { order });
                        if let Some(j) = jobs.get_mut(&key) { j.priority = prio; }
                        h.push(&mut jobs, key, p);
                        if let Some(old) = at.insert(key, p) { model.remove(&old); }
                        model.insert(p, key);
                    }
                    2 => {
                        let got = h.remove(&mut jobs, key);
                        let want = at.remove(&key);
                        if let Some(p) = want { model.remove(&p); }
                        prop_assert_eq!(got.map(|(_, o)| o), want.map(|(_, o)| o));
                    }
                    _ => {
                        let got = h.pop(&mut jobs);
                        let want = model.pop_first().map(|(p, k)| { at.remove(&k); (k, p) });
                        prop_assert_eq!(got, want);
                    }
                }
                prop_assert_eq!(h.len(), model.len());
                let stale = h.heap_len() - h.len();
                prop_assert!(h.heap_len() < COMPACT_MIN || stale * 5 <= h.heap_len(), "{} stale of {}", stale, h.heap_len());
                let sorted: Vec<JobKey> = h.sorted(&jobs).into_iter().map(|(k, _)| k).collect();
                prop_assert_eq!(sorted, model.values().copied().collect::<Vec<_>>());
            }
        }
    }

    #[test]
    fn stale_entries_are_compacted() {
        let mut jobs = table(1000);
        let mut h = ReadyHeap::default();
        for k in 0..1000 {
            h.push(&mut jobs, k, (0, k as i64));
        }
        for k in 0..900 {
            h.remove(&mut jobs, k);
        }
        assert_eq!(h.len(), 100);
        assert!(h.heap_len() <= 125, "{}", h.heap_len());
        assert_eq!(h.pop(&mut jobs).map(|(k, _)| k), Some(900));
    }
}
