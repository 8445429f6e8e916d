//! The ready heap of one queue: waiting and prioritized jobs in a 4-ary min-heap keyed by
//! `(priority, order)`, with lazy deletion — but without an index map of its own. Each job
//! carries the generation of its heap entry (`Job::ready_gen`: odd while in the heap, bumped on
//! every push and removal), so an entry is live iff its generation equals its job's. Removal is
//! O(1) (bump the job's generation); pop skips stale entries; the heap is compacted when more than
//! 20 % of its entries are stale. Versus a generic indexed heap this saves the index's hash table,
//! ~66 bytes per ready job, for one job-table lookup per popped entry.
//!
//! Most pushes arrive in order: FIFO jobs of one priority come with rising order, lifo and
//! released jobs go before everything. So next to the heap there is a sorted run, a `VecDeque`:
//! an entry not smaller than the run's last goes at its back, one not larger than its first at
//! its front, O(1) each, and only the others go into the heap. Pop takes the smaller of the two
//! fronts. The run stays sorted by construction, so the pop order is the heap's order; it just
//! costs O(1) instead of O(log n) sift work with cache misses on a big heap.

use std::collections::VecDeque;

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
    /// Entries in ascending order (see the module doc).
    run: VecDeque<Entry>,
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
        let e = Entry {
            prio,
            key,
            gen: job.ready_gen,
        };
        match (self.run.front(), self.run.back()) {
            (Some(_), Some(last)) if e >= *last => self.run.push_back(e),
            (Some(first), _) if e <= *first => self.run.push_front(e),
            (None, _) => self.run.push_back(e),
            _ => self.heap.push(e),
        }
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

    /// Pops the first live job. O(1) from the run, O(log n) amortized from the heap.
    pub fn pop(&mut self, jobs: &mut JobTable) -> Option<(JobKey, (u32, i64))> {
        while self.run.front().is_some_and(|e| !is_live(jobs, e)) {
            self.run.pop_front();
        }
        while self.heap.peek().is_some_and(|e| !is_live(jobs, e)) {
            self.heap.pop();
        }
        let from_run = match (self.run.front(), self.heap.peek()) {
            (Some(r), Some(h)) => r < h,
            (Some(_), None) => true,
            (None, _) => false,
        };
        let e = if from_run {
            self.run.pop_front()
        } else {
            self.heap.pop()
        }?;
        let job = jobs.get_mut(&e.key)?;
        job.ready_gen = job.ready_gen.wrapping_add(1);
        self.live -= 1;
        self.maybe_compact(jobs);
        Some((e.key, e.prio))
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
        self.heap.len() + self.run.len()
    }

    fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.heap.iter().chain(self.run.iter())
    }

    /// Forgets every entry (the caller removes or re-homes the jobs). O(n).
    pub fn clear(&mut self, jobs: &mut JobTable) {
        for e in self.heap.iter().chain(self.run.iter()) {
            if let Some(job) = jobs.get_mut(&e.key) {
                if job.ready_gen == e.gen {
                    job.ready_gen = job.ready_gen.wrapping_add(1);
                }
            }
        }
        self.heap.clear();
        self.run.clear();
        self.live = 0;
    }

    /// Keys of the ready jobs, unordered. O(n).
    pub fn keys(&self, jobs: &JobTable) -> Vec<JobKey> {
        self.entries()
            .filter(|e| is_live(jobs, e))
            .map(|e| e.key)
            .collect()
    }

    /// Ready jobs in pop order with their `(priority, order)`. O(n log n).
    pub fn sorted(&self, jobs: &JobTable) -> Vec<(JobKey, (u32, i64))> {
        let mut v: Vec<Entry> = self
            .entries()
            .filter(|e| is_live(jobs, e))
            .copied()
            .collect();
        v.sort_unstable();
        v.into_iter().map(|e| (e.key, e.prio)).collect()
    }

    fn maybe_compact(&mut self, jobs: &JobTable) {
        let len = self.heap_len();
        if self.live == 0 {
            self.heap.clear();
            self.run.clear();
        } else if len >= COMPACT_MIN && (len - self.live) * 5 > len {
            self.heap.retain(|e| is_live(jobs, e));
            self.run.retain(|e| is_live(jobs, e));
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

    /// Runs `ops` (push fifo / push lifo / remove / pop, key, priority) against a sorted model.
    fn check_against_model(ops: Vec<(u8, u64, u32)>) -> Result<(), TestCaseError> {
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
                    if let Some(j) = jobs.get_mut(&key) {
                        j.priority = prio;
                    }
                    h.push(&mut jobs, key, p);
                    if let Some(old) = at.insert(key, p) {
                        model.remove(&old);
                    }
                    model.insert(p, key);
                }
                2 => {
                    let got = h.remove(&mut jobs, key);
                    let want = at.remove(&key);
                    if let Some(p) = want {
                        model.remove(&p);
                    }
                    prop_assert_eq!(got.map(|(_, o)| o), want.map(|(_, o)| o));
                }
                _ => {
                    let got = h.pop(&mut jobs);
                    let want = model.pop_first().map(|(p, k)| {
                        at.remove(&k);
                        (k, p)
                    });
                    prop_assert_eq!(got, want);
                }
            }
            prop_assert_eq!(h.len(), model.len());
            let stale = h.heap_len() - h.len();
            prop_assert!(
                h.heap_len() < COMPACT_MIN || stale * 5 <= h.heap_len(),
                "{} stale of {}",
                stale,
                h.heap_len()
            );
            let sorted: Vec<JobKey> = h.sorted(&jobs).into_iter().map(|(k, _)| k).collect();
            prop_assert_eq!(sorted, model.values().copied().collect::<Vec<_>>());
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn pops_like_a_sorted_model(ops in proptest::collection::vec((0u8..4, 0u64..40, 0u32..4), 0..500)) {
            check_against_model(ops)?;
        }

        /// Mostly priority-0 FIFO pushes, so most entries take the sorted run, with lifo pushes,
        /// other priorities, removals and pops mixed in.
        #[test]
        fn mostly_fifo_pops_like_a_sorted_model(
            ops in proptest::collection::vec((0u8..12, 0u64..40, 0u32..8), 0..800)
        ) {
            let ops = ops
                .into_iter()
                .map(|(op, key, p)| {
                    let op = match op { 0..=5 => 0, 6 => 1, 7 | 8 => 2, _ => 3 };
                    (op, key, if p < 6 { 0 } else { p - 5 })
                })
                .collect();
            check_against_model(ops)?;
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
