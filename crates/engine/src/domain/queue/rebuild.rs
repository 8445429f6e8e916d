//! Rebuilding a queue from the jobs storage kept (recovery at open): each job back in the
//! structure its state names (ready heap in priority order, delayed heap, finished sets),
//! counters and id sequences. Jobs found `active` belonged to a process that died: each stalled
//! once more and goes back to the head of waiting without spending an attempt, or, stalled more
//! than [`MAX_STALLED_COUNT`] times, fails with BullMQ's reason; their ids are kept for the
//! `stalled` event. Reading rows into [`Job`]s is storage's business
//! (`storage/restore.rs`).

use std::sync::Arc;

use super::stall::MAX_STALLED_COUNT;
use super::QueueState;
use crate::domain::job::{Job, JobKey, JobState, CUSTOM_KEY_BIT};
use crate::domain::limits::LimitSettings;

/// A stored job and where it stood.
pub struct Stored {
    pub job: Job,
    /// Run-at of a delayed job.
    pub run_at: u64,
    /// Position key of a ready job in its priority (negative for lifo).
    pub ord: i64,
}

/// A queue's own stored settings.
#[derive(Debug, Clone, Copy, Default)]
pub struct StoredSettings {
    pub last_auto_id: u64,
    pub custom_seq: u64,
    pub paused: bool,
    pub limits: LimitSettings,
    pub dlq: crate::domain::dlq::DlqConfig,
}

impl QueueState {
    /// Rebuilds a durable queue from its stored jobs. `now` stamps jobs failed for stalling.
    /// Recovering active jobs is recorded (they change); everything else is taken in as stored.
    /// A `view` (a look at a file another engine holds) records nothing and keeps active jobs
    /// active: their worker may well be alive.
    pub fn rebuild(
        name: Arc<str>,
        settings: Option<StoredSettings>,
        jobs: impl IntoIterator<Item = Stored>,
        now: u64,
        view: bool,
    ) -> QueueState {
        let mut q = QueueState::new(name);
        q.set_persist(!view);
        if let Some(m) = settings {
            q.last_auto_id = m.last_auto_id;
            q.custom_seq = m.custom_seq;
            q.paused = m.paused;
            q.limits.restore(m.limits);
            q.dlq = m.dlq;
        }
        let mut stalled = Vec::new();
        let mut ready_later = Vec::new();
        let mut delayed = Vec::new();
        for Stored { job, run_at, ord } in jobs {
            let key = job.key;
            if let Some(id) = job.custom_id() {
                q.custom_ids.insert(id.into(), key);
                q.custom_seq = q.custom_seq.max(key & !CUSTOM_KEY_BIT);
            } else {
                q.last_auto_id = q.last_auto_id.max(key);
            }
            q.state_seq = q.state_seq.max(job.state_seq);
            q.last_finished = q.last_finished.max(job.finished_on);
            q.order_seq = q.order_seq.max(ord.unsigned_abs() as i64);
            match job.state {
                JobState::WaitingChildren => {
                    q.waiting_children.insert(job.state_seq, key);
                }
                JobState::Waiting | JobState::Prioritized => {
                    if job.priority > 0 {
                        q.prioritized += 1;
                    }
                    ready_later.push((key, (job.priority, ord)));
                }
                JobState::Delayed => delayed.push((run_at, job.state_seq, key)),
                JobState::Active if view => {
                    q.active.insert(job.state_seq, key);
                }
                JobState::Active => stalled.push((job.state_seq, key)),
                JobState::Completed => {
                    q.completed.insert(job.state_seq, key);
                }
                JobState::Failed => {
                    q.failed.insert(job.state_seq, key);
                }
            }
            q.jobs.restore(key, job);
        }
        for (key, prio) in ready_later {
            match q.jobs.get(&key).and_then(|j| j.group().cloned()) {
                None => q.ready.push(q.jobs.heap_slots(), key, prio),
                Some(g) => q.groups.push(q.jobs.heap_slots(), &g, key, prio),
            }
        }
        // In the order they were scheduled: jobs due at the same time keep their order.
        delayed.sort_unstable();
        for (run_at, _, key) in delayed {
            q.delayed.insert(key, run_at);
        }
        // Latest activation first, so that pushing each to the head leaves the earliest first.
        stalled.sort_unstable_by(|a, b| b.cmp(a));
        for (_, key) in stalled {
            q.recover_stalled(key, now);
        }
        q.stalled.reverse();
        q
    }

    fn recover_stalled(&mut self, key: JobKey, now: u64) {
        let id = self.jobs.get(&key).map(|j| j.id_string());
        self.stall(key, MAX_STALLED_COUNT, now);
        self.stalled.extend(id);
    }
}
