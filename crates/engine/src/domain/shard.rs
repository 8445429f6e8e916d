//! A shard: the queues whose name hashes to it, and running totals of their ready, delayed and
//! active jobs. The engine keeps each shard behind its own lock; a queue lives in shard
//! `fnv1a(name) & mask`. Totals are kept by comparing a queue's O(1) tallies before and after each
//! operation, so no transition can forget to update them.

use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::queue::QueueState;

/// Running totals across a shard's queues. O(1) to read.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ShardTotals {
    pub ready: usize,
    pub delayed: usize,
    pub active: usize,
}

/// The queues of one shard.
#[derive(Default)]
pub struct Shard {
    queues: FxHashMap<Arc<str>, QueueState>,
    totals: ShardTotals,
    /// New queues persist their changes (durable engine).
    persist: bool,
    /// Finished jobs per state a durable queue keeps in memory.
    finished_limit: usize,
}

impl Shard {
    /// An empty shard; with `persist`, its queues record changes for storage.
    pub fn new(persist: bool, finished_limit: usize) -> Shard {
        Shard {
            persist,
            finished_limit,
            ..Shard::default()
        }
    }

    /// Adds a queue rebuilt from storage.
    pub fn insert_restored(&mut self, q: QueueState) {
        let (r, d, a) = q.tallies();
        self.totals.ready += r;
        self.totals.delayed += d;
        self.totals.active += a;
        self.queues.insert(q.name.clone(), q);
    }

    /// A queue, if it was ever touched.
    pub fn queue(&self, name: &str) -> Option<&QueueState> {
        self.queues.get(name)
    }

    /// Runs `f` on a queue, creating it empty on first use, and keeps the totals right.
    pub fn with_queue<R>(&mut self, name: &Arc<str>, f: impl FnOnce(&mut QueueState) -> R) -> R {
        let (persist, limit) = (self.persist, self.finished_limit);
        let q = self.queues.entry(name.clone()).or_insert_with(|| {
            let mut q = QueueState::new(name.clone());
            q.set_persist(persist);
            if persist {
                q.set_finished_limit(limit);
            }
            q
        });
        let before = q.tallies();
        let r = f(q);
        let after = q.tallies();
        self.totals.ready = self.totals.ready + after.0 - before.0;
        self.totals.delayed = self.totals.delayed + after.1 - before.1;
        self.totals.active = self.totals.active + after.2 - before.2;
        r
    }

    /// Runs `f` on every queue that has delayed jobs; returns the earliest run-at left.
    pub fn each_delayed(&mut self, mut f: impl FnMut(&mut QueueState)) -> Option<u64> {
        let mut next: Option<u64> = None;
        let names: Vec<Arc<str>> = self
            .queues
            .iter()
            .filter(|(_, q)| q.tallies().1 > 0)
            .map(|(n, _)| n.clone())
            .collect();
        for name in names {
            let due = self.with_queue(&name, |q| {
                f(q);
                q.next_due()
            });
            if let Some(d) = due {
                next = Some(next.map_or(d, |n| n.min(d)));
            }
        }
        next
    }

    /// The running totals.
    pub fn totals(&self) -> ShardTotals {
        self.totals
    }

    /// Number of queues held.
    pub fn queue_count(&self) -> usize {
        self.queues.len()
    }
}
