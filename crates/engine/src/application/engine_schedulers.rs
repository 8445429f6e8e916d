//! Job schedulers on the embedded engine: routing to the queue's methods
//! (`domain/queue/schedulers.rs`) under its shard lock.

use super::engine::Engine;
use crate::backend::{Page, QueueRef};
use crate::domain::listing::page_bounds;
use crate::domain::scheduler::Repeat;
use crate::error::Result;

impl Engine {
    /// Creates or updates job scheduler `id`: how it repeats (`repeat`, JSON) and its job
    /// template; answers the record of its pending job.
    pub fn upsert_scheduler(
        &self,
        q: &QueueRef,
        id: &str,
        repeat: &str,
        template: (Option<&str>, &str, Option<&str>),
    ) -> Result<String> {
        let repeat = Repeat::from_json(repeat)?;
        let job_id = self.with(q, |qs, now, fx| {
            qs.upsert_scheduler(id, repeat, template, now, fx)
        })?;
        Ok(self.job_json(q, &job_id).unwrap_or_else(|| "null".into()))
    }

    /// Scheduler `id` as BullMQ's `JobSchedulerJson`.
    pub fn scheduler_json(&self, q: &QueueRef, id: &str) -> Option<String> {
        self.read(q, |qs| qs.scheduler(id).map(|s| s.bullmq_json(id)))
            .flatten()
    }

    /// A page of the schedulers by next run (`asc`: soonest first), as a JSON array.
    pub fn schedulers_json(&self, q: &QueueRef, page: Page) -> String {
        self.read(q, |qs| {
            let mut all = qs.schedulers_by_next();
            if !page.asc {
                all.reverse();
            }
            let mut out = String::from("[");
            if let Some((from, to)) = page_bounds(all.len(), page.start, page.end) {
                for (i, (id, s)) in all[from..=to].iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&s.bullmq_json(id));
                }
            }
            out.push(']');
            out
        })
        .unwrap_or_else(|| "[]".into())
    }

    /// How many schedulers the queue has.
    pub fn scheduler_count(&self, q: &QueueRef) -> usize {
        self.read(q, |qs| qs.scheduler_count()).unwrap_or(0)
    }

    /// Removes scheduler `id` and its pending job; answers whether it existed.
    pub fn remove_scheduler(&self, q: &QueueRef, id: &str) -> bool {
        self.with(q, |qs, _, fx| qs.remove_scheduler(id, fx))
    }
}
