//! Moves of many jobs at once (BullMQ's `retryJobs`, `promoteJobs`): a batch at a time, oldest
//! first, so that a caller moves a queue of any size in steps that each hold the lock briefly.

use super::{id_of, Effects, QueueState};
use crate::domain::job::{JobKey, JobState};

impl QueueState {
    /// Moves job `key` of finished state `from` back to waiting (as `retry`); answers whether it
    /// moved.
    pub fn retry_key(&mut self, key: JobKey, from: JobState, fx: &mut Effects) -> bool {
        if self.jobs.get(&key).map(|j| j.state) != Some(from) {
            return false;
        }
        let id = id_of(key, &self.jobs);
        self.retry(&id, from, false, fx).is_ok()
    }

    /// Moves up to `max` jobs of finished state `from` that finished before `before` back to
    /// waiting, oldest first; answers how many. O(k log n).
    pub fn retry_finished(
        &mut self,
        from: JobState,
        before: u64,
        max: usize,
        fx: &mut Effects,
    ) -> usize {
        if !matches!(from, JobState::Completed | JobState::Failed) || max == 0 {
            return 0;
        }
        let keys = self.finished_before(from, before, max);
        keys.into_iter()
            .filter(|&k| self.retry_key(k, from, fx))
            .count()
    }

    /// Moves up to `max` delayed jobs to waiting, earliest due first (as `promote`); answers how
    /// many. O(k log n).
    pub fn promote_delayed(&mut self, max: usize, fx: &mut Effects) -> usize {
        self.promote_from_delayed(u64::MAX, max, true, fx)
    }
}
