//! Steps of step jobs (BullMQ's pattern): a processor moves its own active job to delayed
//! (`job.moveToDelayed`) or to waiting for its children (`job.moveToWaitingChildren`), then
//! throws `DelayedError` / `WaitingChildrenError`. Neither spends an attempt; the job runs again
//! (its processor reading where it stands from its data) once its time comes or its children
//! are done.

use super::{id_of, AckResult, Effects, Outcome, QueueState};
use crate::domain::changes::STATE;
use crate::domain::event::EventKind;
use crate::domain::job::{JobKey, JobState};

impl QueueState {
    /// Applies step `outcome` to job `key`, active under the token the caller checked.
    pub(super) fn step(
        &mut self,
        key: JobKey,
        outcome: Outcome,
        now: u64,
        fx: &mut Effects,
    ) -> AckResult {
        match outcome {
            Outcome::Delayed { run_at } => self.step_delayed(key, run_at, now, fx),
            Outcome::WaitingChildren => self.step_waiting_children(key, fx),
            _ => AckResult::Stale,
        }
    }

    fn step_delayed(&mut self, key: JobKey, run_at: u64, now: u64, fx: &mut Effects) -> AckResult {
        let Some(job) = self.jobs.change(&key, STATE) else {
            return AckResult::Stale;
        };
        let active_seq = job.state_seq;
        job.state = JobState::Delayed;
        job.delay = run_at.saturating_sub(now);
        job.holder = 0;
        self.active.remove(&active_seq);
        // A time past runs it at the next promotion, as BullMQ's moveToDelayed does.
        let run_at = run_at.max(now);
        self.schedule(key, run_at);
        fx.wake(run_at);
        self.emit(fx, || EventKind::Delayed {
            job_id: id_of(key, &self.jobs),
            delay: run_at,
        });
        AckResult::Delayed
    }

    fn step_waiting_children(&mut self, key: JobKey, fx: &mut Effects) -> AckResult {
        let pending = self
            .jobs
            .get(&key)
            .and_then(|j| j.deps())
            .is_some_and(|d| !d.pending.is_empty());
        if !pending {
            return AckResult::StillActive;
        }
        let seq = self.next_state_seq();
        let Some(job) = self.jobs.change(&key, STATE) else {
            return AckResult::Stale;
        };
        let active_seq = job.state_seq;
        job.state = JobState::WaitingChildren;
        job.state_seq = seq;
        job.holder = 0;
        // Its children done, it goes straight back to waiting (its own `delay` was spent).
        job.delay = 0;
        self.active.remove(&active_seq);
        self.waiting_children.insert(seq, key);
        self.emit(fx, || EventKind::WaitingChildren {
            job_id: id_of(key, &self.jobs),
        });
        AckResult::WaitingChildren
    }
}
