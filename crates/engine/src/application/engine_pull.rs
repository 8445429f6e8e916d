//! Taking jobs: at once (`take`), by long-poll (`pull`, woken by adds, acks and limit timers),
//! and what the queue's limits say about it (`held_back`, the limit settings).

use std::time::Duration;

use super::engine::Engine;
use crate::backend::QueueRef;
use crate::domain::limits::{LimitChange, LimitSettings, WorkerLimits};
use crate::wire;

impl Engine {
    /// Activates up to `max` ready jobs now, within the queue's limits (`worker`: the taking
    /// worker's own rate limit and group defaults); returns their count and a JSON array of
    /// records.
    pub fn take(&self, q: &QueueRef, max: usize, worker: WorkerLimits) -> (usize, String) {
        let wire = &*self.inner.wire;
        self.with(q, |qs, now, fx| {
            let mut out = String::from("[");
            let n = if self.may_take(worker.holder) {
                qs.take_limited(max, worker, now, fx, |job| {
                    wire::push_record(wire, job, true, &mut out)
                })
            } else {
                0
            };
            out.push(']');
            (n, out)
        })
    }

    /// Long-poll pull: resolves with up to `max` activated jobs as soon as any can start, or with
    /// none after `timeout` or when cancelled by [`Engine::cancel_pulls`]. Ready jobs held back by
    /// a rate limit or a hold are taken again when the next token comes or the hold ends (a
    /// timer, not a poll); a cap on active jobs is waited out until a job finishes.
    pub async fn pull(
        &self,
        q: &QueueRef,
        puller: u32,
        max: usize,
        worker: WorkerLimits,
        timeout: Duration,
    ) -> (usize, String) {
        if max == 0 {
            return (0, "[]".into());
        }
        let deadline = tokio::time::Instant::now() + timeout;
        let wire = self.inner.wire.clone();
        loop {
            let (taken, rx, retry_at) = self.with(q, |qs, now, fx| {
                if !self.may_take(worker.holder) {
                    return (Some((0, "[]".into())), None, None);
                }
                let mut out = String::from("[");
                let n = qs.take_limited(max, worker.clone(), now, fx, |job| {
                    wire::push_record(&*wire, job, true, &mut out)
                });
                if n > 0 || timeout.is_zero() {
                    out.push(']');
                    return (Some((n, out)), None, None);
                }
                let retry = qs
                    .retry_at(worker.clone(), now)
                    .map(|at| Duration::from_millis(at.saturating_sub(now)));
                (None, qs.waiters().register(puller), retry)
            });
            if let Some(t) = taken {
                return t;
            }
            let Some(mut rx) = rx else {
                return (0, "[]".into());
            };
            let retry = retry_at.and_then(|d| tokio::time::Instant::now().checked_add(d));
            let until = retry.map_or(deadline, |r| r.min(deadline));
            match tokio::time::timeout_at(until, &mut rx).await {
                Ok(Ok(())) => continue,
                Ok(Err(_)) => return (0, "[]".into()),
                Err(_) => {
                    // Timed out; a wake-up may have raced the deadline. Close the receiver under
                    // the shard lock (notifications happen under it) and pass a wake-up that
                    // arrived on to the next waiter, so no job waits for another timeout.
                    self.with(q, |qs, _, _| qs.waiters().give_up(&mut rx));
                    if until < deadline {
                        continue; // a token came or a hold ended: try again
                    }
                    return (0, "[]".into());
                }
            }
        }
    }

    /// Whether the queue's ready jobs wait only for its limits (see [`QueueState::held_back`]).
    pub fn held_back(&self, q: &QueueRef, worker: WorkerLimits) -> bool {
        let now = self.now();
        self.read(q, |qs| qs.held_back(worker, now))
            .unwrap_or(false)
    }

    /// Changes a queue's limits (waiters try again).
    pub fn change_limits(&self, q: &QueueRef, change: LimitChange) {
        self.with(q, |qs, now, _| qs.change_limits(change, now));
    }

    /// A queue's limit settings and the ms until it takes jobs again by its own rate limit or a
    /// hold (0: it does now).
    pub fn limits(&self, q: &QueueRef) -> (LimitSettings, u64) {
        self.with(q, |qs, now, _| {
            (qs.limit_settings(), qs.rate_limit_ttl(now))
        })
    }

    /// Wakes every pending pull of `puller` on a queue with an empty result; if none is pending
    /// yet, the next one resolves empty at once. A cancelled puller id should not be reused.
    pub fn cancel_pulls(&self, q: &QueueRef, puller: u32) {
        let mut shard = self.inner.shards[q.slot()].lock();
        shard.with_queue(q.name_arc(), |qs| qs.waiters().cancel(puller));
    }
}
