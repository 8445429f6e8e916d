//! Stalled jobs: activations whose lease holder is gone. In one process the engine knows its
//! holders (each Worker is one), so a lease never expires while its holder lives, however long
//! the processor blocks the event loop; it ends when the holder is gone (a Worker closed with
//! its jobs still running, garbage-collected, or in a thread that was terminated) or, for a
//! durable queue, when the process died (found at the next open, `rebuild.rs`).
//!
//! A stalled job goes back to the head of waiting with `stalledCounter + 1`, spending no
//! attempt; past the holder's `maxStalledCount` it fails with BullMQ's reason, which counts the
//! attempt (as the PostgreSQL sweep does).

use super::{id_of, Effects, QueueState};
use crate::domain::changes::{EXTRA, STATE};
use crate::domain::dlq::{push_attempt, Attempt, AttemptEnd};
use crate::domain::event::EventKind;
use crate::domain::flow::{ChildEnd, OnChildFailure};
use crate::domain::job::{JobKey, JobState};

/// BullMQ's failure reason of a job that stalled more than `maxStalledCount` times.
pub const STALLED_TOO_OFTEN: &str = "job stalled more than allowable limit";

/// How many times a job may stall and still run again (BullMQ's `maxStalledCount` default).
pub const MAX_STALLED_COUNT: u32 = 1;

impl QueueState {
    /// Stalls every activation held by `holder` (see the module's comment): each goes back to
    /// waiting, or fails once it has stalled more than `max_stalled` times. Earlier activations
    /// stay ahead of later ones at the head of waiting. Answers how many stalled. O(active +
    /// k log n).
    pub fn stall_held(
        &mut self,
        holder: u32,
        max_stalled: u32,
        now: u64,
        fx: &mut Effects,
    ) -> usize {
        if holder == 0 {
            return 0;
        }
        let held: Vec<(u64, JobKey)> = self
            .active
            .iter()
            .filter(|(_, k)| self.jobs.get(k).is_some_and(|j| j.holder == holder))
            .map(|(&seq, &key)| (seq, key))
            .collect();
        // Latest activation first, so that pushing each to the head leaves the earliest first.
        for &(seq, key) in held.iter().rev() {
            self.active.remove(&seq);
            let job = self.jobs.get(&key);
            let dedup_id = job.and_then(|j| j.dedup_id()).map(Box::<str>::from);
            let group = job.and_then(|j| j.group().cloned());
            let failed = self.stall(key, max_stalled, now);
            self.emit(fx, || EventKind::Stalled {
                job_id: id_of(key, &self.jobs),
            });
            if failed {
                self.notify_parent(key, || {
                    ChildEnd::Failed(STALLED_TOO_OFTEN.into(), OnChildFailure::Wait)
                });
                self.emit(fx, || EventKind::Failed {
                    job_id: id_of(key, &self.jobs),
                    failed_reason: STALLED_TOO_OFTEN.into(),
                });
                if let Some(id) = dedup_id {
                    self.dedup_finished(&id, key);
                }
                self.bound_dlq(now);
            } else {
                if !self.paused {
                    self.waiters.notify(1);
                }
                self.emit(fx, || EventKind::Waiting {
                    job_id: id_of(key, &self.jobs),
                    prev: Some("active"),
                });
            }
            self.slot_freed();
            if let Some(g) = group {
                self.group_slot_freed(&g);
            }
        }
        held.len()
    }

    /// Stalls the active job `key` (already out of the active set): back to the head of
    /// waiting, or failed past `max_stalled` stalls. Answers whether it failed.
    pub(super) fn stall(&mut self, key: JobKey, max_stalled: u32, now: u64) -> bool {
        let seq = self.next_state_seq();
        let finish_at = self.finish_time(now);
        let Some(job) = self.jobs.change(&key, STATE | EXTRA) else {
            return false;
        };
        job.holder = 0;
        let (made, started_at) = (job.attempts_made, job.processed_on);
        let extra = job.extra_mut();
        extra.stalled_counter += 1;
        if extra.stalled_counter <= max_stalled {
            self.push_ready(key, true);
            return false;
        }
        extra.failed_reason = Some(STALLED_TOO_OFTEN.into());
        let attempt = Attempt {
            attempt: made + 1,
            started_at,
            failed_at: now,
            error: STALLED_TOO_OFTEN.into(),
            kind: AttemptEnd::Stalled,
            last: true,
        };
        push_attempt(&mut extra.history, attempt);
        job.attempts_made += 1;
        job.state = JobState::Failed;
        job.finished_on = finish_at;
        job.state_seq = seq;
        self.failed.insert(seq, key);
        true
    }
}
