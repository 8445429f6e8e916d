//! Taking jobs: activating ready jobs for a worker, within the queue's limits (`limits.rs`:
//! rate, cap on active jobs, hold), and changing those limits.

use super::{id_of, Effects, QueueState};
use crate::domain::changes::{EXTRA, STATE};
use crate::domain::event::EventKind;
use crate::domain::job::{Job, JobKey, JobState};
use crate::domain::limits::{LimitChange, LimitSettings, WorkerLimits};

impl QueueState {
    /// Activates up to `max` ready jobs (none while paused), handing each to `each` as it is
    /// activated (its `lock` is the token to ack with). Returns how many were taken.
    /// O(k log n).
    pub fn take(
        &mut self,
        max: usize,
        now: u64,
        fx: &mut Effects,
        each: impl FnMut(&Job),
    ) -> usize {
        self.take_limited(max, WorkerLimits::default(), now, fx, each)
    }

    /// [`QueueState::take`] for a worker whose own limits are `worker`: its rate limit (BullMQ's
    /// `limiter`: one budget for the queue, shared by every worker; the queue's own rate limit
    /// overrides it) and its group defaults. Takes no more than the queue's limits allow now,
    /// ungrouped jobs first, then the groups in turn, each within its own limits.
    pub fn take_limited(
        &mut self,
        max: usize,
        worker: WorkerLimits,
        now: u64,
        fx: &mut Effects,
        mut each: impl FnMut(&Job),
    ) -> usize {
        self.promote_due(now, fx);
        if self.paused {
            return 0;
        }
        let limiter = worker.rate;
        let limited = limiter.is_some() || !self.limits.is_unlimited();
        let max = if limited {
            self.limits.budget(max, self.active.len(), limiter, now)
        } else {
            max
        };
        let mut taken = 0;
        // Schedulers' jobs that start: their next jobs are created after the loop.
        let scheduled = !self.schedulers.is_empty();
        let mut slots: Vec<JobKey> = Vec::new();
        while taken < max {
            let Some(key) = self.next_ready(worker.group, now) else {
                break;
            };
            self.lock_seq += 1;
            let lock = self.lock_seq;
            let seq = self.next_state_seq();
            let parts = if worker.name.is_some() {
                STATE | EXTRA
            } else {
                STATE
            };
            let Some(job) = self.jobs.change(&key, parts) else {
                continue;
            };
            if let Some(name) = &worker.name {
                job.extra_mut().processed_by = Some(name.clone());
            }
            let prev = job.state.as_str();
            job.state = JobState::Active;
            job.lock = lock;
            job.holder = worker.holder;
            job.processed_on = now;
            job.attempts_started += 1;
            job.state_seq = seq;
            if scheduled && job.custom_id().is_some_and(|id| id.starts_with("repeat:")) {
                slots.push(key);
            }
            each(job);
            self.active.insert(seq, key);
            self.emit(fx, || EventKind::Active {
                job_id: id_of(key, &self.jobs),
                prev,
            });
            taken += 1;
        }
        for key in slots {
            self.slot_started(key, now, fx);
        }
        if limited {
            self.limits.spend(taken, limiter);
        }
        if taken > 0 && self.ready_len() == 0 {
            self.emit(fx, || EventKind::Drained);
        }
        taken
    }

    /// When a take that found nothing can succeed by waiting alone (ready jobs held back by a
    /// rate limit or a hold): the time to try again. `None` when waiting does not help: nothing
    /// is ready, the queue is paused, or the cap on active jobs is reached (a finished job wakes
    /// a waiter then).
    /// Grouped jobs held back by their groups' rate limits count too.
    pub fn retry_at(&self, worker: WorkerLimits, now: u64) -> Option<u64> {
        if self.paused || self.ready_len() == 0 {
            return None;
        }
        let queue = self.limits.retry_at(self.active.len(), worker.rate, now);
        if queue.is_some() || !self.ready.is_empty() {
            return queue;
        }
        self.groups.next_token_at()
    }

    /// Whether ready jobs wait only for the limits (a worker with limits `worker` would take
    /// none now): the queue is not drained. Grouped jobs wait for their groups' limits.
    pub fn held_back(&self, worker: WorkerLimits, now: u64) -> bool {
        if self.paused || self.ready_len() == 0 {
            return false;
        }
        let queue = (worker.rate.is_some() || !self.limits.is_unlimited())
            && self
                .limits
                .would_hold_back(self.active.len(), worker.rate, now);
        queue || (self.ready.is_empty() && self.groups.held_back(worker.group, now))
    }

    /// Changes the queue's limits; waiters try again, as a limit may have been lifted.
    pub fn change_limits(&mut self, change: LimitChange, now: u64) {
        if self.limits.change(change, now) {
            self.settings_changed |= self.jobs.persists();
        }
        if !self.paused && self.ready_len() > 0 {
            self.waiters.notify(self.ready_len());
        }
    }

    /// The queue's limit settings.
    pub fn limit_settings(&self) -> LimitSettings {
        self.limits.settings()
    }

    /// Ms until the queue takes jobs again by a hold or its own rate limit (0: it does now).
    pub fn rate_limit_ttl(&mut self, now: u64) -> u64 {
        self.limits.ttl(None, now)
    }

    /// An active job left: under a cap on active jobs, a waiter may take its slot.
    pub(super) fn slot_freed(&mut self) {
        if self.limits.caps_active() && !self.paused && self.ready_len() > 0 {
            self.waiters.notify(1);
        }
    }
}
