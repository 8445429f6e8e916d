//! Where ready jobs wait: a job without a group in the queue's ready heap, a grouped one in its
//! group's lane (`domain/groups`). Taking serves the ungrouped jobs first, then the groups in
//! round-robin. Also the group operations (settings, getters).

use std::sync::Arc;

use super::QueueState;
use crate::domain::changes::STATE;
use crate::domain::groups::{GroupChange, GroupDefaults, GroupInfo, GroupSettings};
use crate::domain::job::{JobKey, JobState};

impl QueueState {
    /// Puts a job (already in `jobs`) with the ready jobs, by its priority: in the ready heap, or
    /// its group's lane; sets its state.
    pub(super) fn push_ready(&mut self, key: JobKey, lifo: bool) {
        self.order_seq += 1;
        let order = if lifo {
            -self.order_seq
        } else {
            self.order_seq
        };
        let Some(job) = self.jobs.change(&key, STATE) else {
            return;
        };
        job.state = if job.priority > 0 {
            self.prioritized += 1;
            JobState::Prioritized
        } else {
            JobState::Waiting
        };
        let prio = (job.priority, order);
        match job.group().cloned() {
            None => self.ready.push(self.jobs.heap_slots(), key, prio),
            Some(g) => self.groups.push(self.jobs.heap_slots(), &g, key, prio),
        }
    }

    /// Takes a job out of the ready jobs (lazy O(1) removal), keeping the counters right.
    pub(super) fn unready(&mut self, key: JobKey) -> bool {
        // Not recorded here: every caller changes the job next (removes it, or records its new
        // priority and place), which writes the `ord` column.
        let group = self.jobs.get(&key).and_then(|j| j.group().cloned());
        let removed = match group {
            None => self.ready.remove(self.jobs.heap_slots(), key),
            Some(g) => self.groups.remove(self.jobs.heap_slots(), &g, key),
        };
        match removed {
            Some((priority, _)) => {
                if priority > 0 {
                    self.prioritized -= 1;
                }
                true
            }
            None => false,
        }
    }

    /// The next ready job a worker with group defaults `d` may start: ungrouped first, then
    /// the groups in turn. Counters kept right; the caller activates it.
    pub(super) fn next_ready(&mut self, d: GroupDefaults, now: u64) -> Option<JobKey> {
        let (key, (priority, _)) = match self.ready.pop(self.jobs.heap_slots()) {
            Some(found) => found,
            None => self.groups.next(self.jobs.heap_slots(), d, now)?,
        };
        if priority > 0 {
            self.prioritized -= 1;
        }
        Some(key)
    }

    /// Ready jobs, grouped or not.
    pub fn ready_len(&self) -> usize {
        self.ready.len() + self.groups.len()
    }

    /// An active job of `group` left: the group may take its turn again.
    pub(super) fn group_slot_freed(&mut self, group: &str) {
        if self.groups.finished(group) && !self.paused {
            self.waiters.notify(1);
        }
    }

    /// Changes a group's settings; waiters try again. Answers whether they changed.
    pub fn change_group(&mut self, group: &str, change: GroupChange) -> bool {
        let changed = self.groups.change(group, change);
        if changed && !self.paused && !self.groups.is_empty() {
            self.waiters.notify(self.groups.len());
        }
        changed
    }

    /// What a group holds and its settings.
    pub fn group_info(&self, group: &str) -> GroupInfo {
        self.groups.info(group).unwrap_or_default()
    }

    /// Ids of a group's ready jobs in the order the group hands them out, `start..=end` (a
    /// negative `end` counts from the last).
    pub fn group_jobs(&self, group: &str, start: usize, end: i64) -> Vec<JobKey> {
        let lane = self.groups.lane(&self.jobs, group);
        let len = lane.len() as i64;
        let end = if end < 0 { len + end } else { end.min(len - 1) };
        if (start as i64) > end {
            return Vec::new();
        }
        lane[start..=end as usize].iter().map(|(k, _)| *k).collect()
    }

    /// Ready jobs in every group.
    pub fn grouped_ready(&self) -> usize {
        self.groups.len()
    }

    /// Group settings changed since the last call (durable queues write them).
    pub fn take_group_changes(&mut self) -> Vec<(Arc<str>, GroupSettings)> {
        self.groups.take_changes()
    }

    /// Restores a group's stored settings (recovery).
    pub fn restore_group(&mut self, group: Arc<str>, settings: GroupSettings) {
        self.groups.restore(group, settings);
    }
}
