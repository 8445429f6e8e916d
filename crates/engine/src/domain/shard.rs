//! A shard: the queues whose name hashes to it. The engine keeps each shard behind its own lock;
//! a queue lives in shard `fnv1a(name) & mask`.

use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::queue::QueueState;

/// The queues of one shard.
#[derive(Default)]
pub struct Shard {
    queues: FxHashMap<Arc<str>, QueueState>,
    /// New queues persist their changes (durable engine).
    persist: bool,
}

impl Shard {
    /// An empty shard; with `persist`, its queues record changes for storage.
    pub fn new(persist: bool) -> Shard {
        Shard {
            persist,
            ..Shard::default()
        }
    }

    /// Adds a queue rebuilt from storage.
    pub fn insert_restored(&mut self, q: QueueState) {
        self.queues.insert(q.name().clone(), q);
    }

    /// A queue, if it was ever touched.
    pub fn queue(&self, name: &str) -> Option<&QueueState> {
        self.queues.get(name)
    }

    /// Runs `f` on a queue, creating it empty on first use.
    pub fn with_queue<R>(&mut self, name: &Arc<str>, f: impl FnOnce(&mut QueueState) -> R) -> R {
        f(self.queue_mut(name))
    }

    /// A queue, created empty on first use.
    pub fn queue_mut(&mut self, name: &Arc<str>) -> &mut QueueState {
        let persist = self.persist;
        self.queues.entry(name.clone()).or_insert_with(|| {
            let mut q = QueueState::new(name.clone());
            q.set_persist(persist);
            q
        })
    }

    /// The names of its queues.
    pub fn names(&self) -> impl Iterator<Item = &Arc<str>> {
        self.queues.keys()
    }

    /// The names of the queues that have active jobs.
    pub fn with_active(&self) -> Vec<Arc<str>> {
        self.queues
            .values()
            .filter(|q| q.active_len() > 0)
            .map(|q| q.name().clone())
            .collect()
    }

    /// Runs `f` on every queue that has delayed jobs; returns the earliest run-at left.
    pub fn each_delayed(&mut self, mut f: impl FnMut(&mut QueueState)) -> Option<u64> {
        let mut next: Option<u64> = None;
        for q in self.queues.values_mut().filter(|q| q.has_delayed()) {
            f(q);
            if let Some(d) = q.next_due() {
                next = Some(next.map_or(d, |n| n.min(d)));
            }
        }
        next
    }
}
