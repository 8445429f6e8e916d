//! Lease holders of the embedded engine. Each Worker is a holder ([`Engine::hold`]); the jobs it
//! takes carry its id. The engine knows while a holder lives, so it never lets such a lease
//! expire (a processor that blocks the event loop is not stalled); when the holder is gone
//! ([`Engine::let_go`]: a Worker closed, garbage-collected, or in a terminated thread), the jobs
//! it still held stall at once (`domain/queue/stall.rs`).

use std::sync::Arc;

use super::engine::Engine;
use crate::backend::QueueRef;
use crate::domain::lease::{HolderInfo, LeaseTerms, WorkerInfo};

impl Engine {
    /// Registers lease holder `holder` (an id unique in the process) with its terms.
    pub fn hold(&self, holder: u32, terms: LeaseTerms) {
        self.inner.holders.lock().insert(holder, terms);
    }

    /// [`Engine::hold`], and who the holder is if `getWorkers` lists it.
    pub fn hold_as(&self, holder: u32, terms: LeaseTerms, who: Option<HolderInfo>) {
        if let Some(who) = who {
            self.inner.workers.lock().insert(holder, who);
        }
        self.hold(holder, terms);
    }

    /// The live Workers of `q` (its lease holders that said who they are), oldest first.
    pub fn workers(&self, q: &QueueRef) -> Vec<WorkerInfo> {
        let now = self.now();
        let mut list: Vec<WorkerInfo> = self
            .inner
            .workers
            .lock()
            .iter()
            .filter(|(_, w)| *w.queue == *q.name())
            .map(|(id, w)| WorkerInfo {
                id: id.to_string(),
                name: w.name.clone(),
                started: w.started,
                seen: now,
                pid: std::process::id(),
                addr: None,
            })
            .collect();
        list.sort_by(|a, b| (a.started, &a.id).cmp(&(b.started, &b.id)));
        list
    }

    /// Whether job `id` is active under `token`: the lease holds (in one process a live
    /// holder's leases never expire, so there is nothing to extend).
    pub fn holds_lock(&self, q: &QueueRef, id: &str, token: u64) -> bool {
        self.read(q, |qs| qs.holds_lock(id, token)).unwrap_or(false)
    }

    /// The jobs of a queue that holder `holder` holds, as `(id, token)`.
    pub fn held(&self, q: &QueueRef, holder: u32) -> Vec<(String, u64)> {
        self.read(q, |qs| qs.held_by(holder)).unwrap_or_default()
    }

    /// Whether jobs may be taken for `holder`: none (0) or one that lives. A holder let go takes
    /// nothing more, so a pull still pending for it (its thread gone) cannot activate jobs that
    /// nobody would process or stall. Called under the queue's shard lock, so that
    /// [`Engine::let_go`] either finds the jobs taken or refuses the take.
    pub(super) fn may_take(&self, holder: u32) -> bool {
        holder == 0 || self.inner.holders.lock().contains_key(&holder)
    }

    /// Holder `holder` is gone: the jobs it still holds stall, in every queue (as its terms'
    /// `max_stalled` says). Answers how many. O(queues + active jobs); a holder that was never
    /// registered, or already let go, stalls nothing.
    pub fn let_go(&self, holder: u32) -> usize {
        self.inner.workers.lock().remove(&holder);
        let Some(terms) = self.inner.holders.lock().remove(&holder) else {
            return 0;
        };
        let mut stalled = 0;
        for slot in 0..self.inner.shards.len() {
            let names: Vec<Arc<str>> = self.inner.shards[slot].lock().with_active();
            for name in names {
                let q = QueueRef::new(name, slot);
                stalled += self.with(&q, |qs, now, fx| {
                    qs.stall_held(holder, terms.max_stalled, now, fx)
                });
            }
        }
        stalled
    }
}
