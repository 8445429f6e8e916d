//! Engine operations on job groups: routing to the queue's methods under its shard lock.

use super::engine::Engine;
use crate::backend::QueueRef;
use crate::domain::groups::{GroupChange, GroupInfo};
use crate::domain::queue::QueueState;
use crate::wire;

impl Engine {
    /// Changes a group's settings (waiters try again); answers whether they changed.
    pub fn change_group(&self, q: &QueueRef, group: &str, change: GroupChange) -> bool {
        self.with(q, |qs, _, _| qs.change_group(group, change))
    }

    /// What a group holds and its settings.
    pub fn group_info(&self, q: &QueueRef, group: &str) -> GroupInfo {
        self.read(q, |qs| qs.group_info(group)).unwrap_or_default()
    }

    /// A group's ready jobs `start..=end` in the order it hands them out, as records.
    pub fn group_jobs(&self, q: &QueueRef, group: &str, start: usize, end: i64) -> String {
        let wire = &*self.inner.wire;
        let mut out = String::from("[");
        self.read(q, |qs| {
            for key in qs.group_jobs(group, start, end) {
                if let Some(job) = qs.job(key) {
                    wire::push_record(wire, job, false, &mut out);
                }
            }
        });
        out.push(']');
        out
    }

    /// Ready jobs in every group of the queue.
    pub fn grouped_count(&self, q: &QueueRef) -> usize {
        self.read(q, QueueState::grouped_ready).unwrap_or(0)
    }
}
