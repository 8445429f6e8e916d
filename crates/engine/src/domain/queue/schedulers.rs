//! A queue's job schedulers (`domain/scheduler.rs` says when each repeats). Each keeps one job
//! pending, with the id `repeat:{scheduler id}:{slot ms}`: the id makes a slot's job unique, so
//! no slot ever runs twice (custom ids are unique per queue, in memory, in the file and in a
//! database). When that job starts, the next one is created for the first slot after that
//! moment (missed slots skipped); a scheduler past its `limit` or `endDate` is removed.

use std::collections::BTreeMap;

use super::{Added, Effects, QueueState};
use crate::domain::job::{JobKey, JobState};
use crate::domain::job_scheduler::{parse_slot_job_id, slot_job_id, Scheduler};
use crate::domain::scheduler::Repeat;
use crate::error::Result;

/// Schedulers by id, and their changes not yet handed to storage.
#[derive(Default)]
pub struct Schedulers {
    by_id: BTreeMap<Box<str>, Scheduler>,
    ops: Vec<(Box<str>, Option<String>)>,
}

impl Schedulers {
    /// Whether the queue has none (most queues: then starting a job looks for nothing).
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }
}

impl QueueState {
    /// Creates or updates scheduler `id` (`name`, `data` and `opts_json` are its job template)
    /// and its pending job: an update replaces the job it had pending unless that one runs
    /// already. Answers the id of the pending job. Errors: bad template options, or no slot left
    /// (`endDate` past).
    pub fn upsert_scheduler(
        &mut self,
        id: &str,
        repeat: Repeat,
        template: (Option<&str>, &str, Option<&str>),
        now: u64,
        fx: &mut Effects,
    ) -> Result<String> {
        let mut scheduler = Scheduler::new(id, repeat, template)?;
        let slot = scheduler.first_slot(now)?;
        let count = match self.schedulers.by_id.get(id) {
            Some(old) => {
                // A pending job that never ran is replaced: it does not count.
                let (count, prev) = (old.iteration_count, old.next);
                let dropped = prev.is_some_and(|p| self.drop_pending(id, p, fx));
                count - u32::from(dropped && count > 0)
            }
            None => 0,
        };
        scheduler.iteration_count = count;
        self.schedulers.by_id.insert(id.into(), scheduler);
        self.create_slot_job(id, slot, now, fx)?;
        Ok(slot_job_id(id, slot))
    }

    /// Removes scheduler `id` and its pending job (unless it runs already); answers whether it
    /// existed.
    pub fn remove_scheduler(&mut self, id: &str, fx: &mut Effects) -> bool {
        let Some(old) = self.schedulers.by_id.remove(id) else {
            return false;
        };
        if let Some(prev) = old.next {
            self.drop_pending(id, prev, fx);
        }
        self.record_scheduler(id);
        true
    }

    /// Scheduler `id`.
    pub fn scheduler(&self, id: &str) -> Option<&Scheduler> {
        self.schedulers.by_id.get(id)
    }

    /// Every scheduler with its id, by next run (those without one last), then id.
    pub fn schedulers_by_next(&self) -> Vec<(&str, &Scheduler)> {
        let mut all: Vec<(&str, &Scheduler)> = self
            .schedulers
            .by_id
            .iter()
            .map(|(id, s)| (&**id, s))
            .collect();
        all.sort_by_key(|(id, s)| (s.next.unwrap_or(u64::MAX), *id));
        all
    }

    /// How many schedulers the queue has.
    pub fn scheduler_count(&self) -> usize {
        self.schedulers.by_id.len()
    }

    /// Job `key` just started: if it is a scheduler's pending job, the scheduler's next job is
    /// created (for the first slot after `now`), or, past its `limit` or `endDate`, the
    /// scheduler is removed.
    pub(super) fn slot_started(&mut self, key: JobKey, now: u64, fx: &mut Effects) {
        let Some(job_id) = self
            .jobs
            .get(&key)
            .and_then(|j| j.custom_id())
            .map(String::from)
        else {
            return;
        };
        self.resume_scheduler_of(&job_id, now, fx);
    }

    /// Job `job_id` started, or was removed before it started: if it was a scheduler's pending
    /// job, the scheduler goes on from the first slot after `now` (a removal skips one run, as
    /// the PostgreSQL backend's repair does).
    pub(super) fn resume_scheduler_of(&mut self, job_id: &str, now: u64, fx: &mut Effects) {
        if let Some((id, slot)) = parse_slot_job_id(job_id) {
            let id = id.to_string();
            self.advance(&id, slot, now, fx);
        }
    }

    /// After a drain or clean: every scheduler whose pending job is gone goes on. O(schedulers).
    pub(super) fn resume_orphaned_schedulers(&mut self, now: u64, fx: &mut Effects) {
        if self.schedulers.is_empty() {
            return;
        }
        let orphans: Vec<(Box<str>, u64)> = self
            .schedulers
            .by_id
            .iter()
            .filter_map(|(id, s)| {
                let slot = s.next?;
                let gone = self.job_by_id(&slot_job_id(id, slot)).is_none();
                gone.then(|| (id.clone(), slot))
            })
            .collect();
        for (id, slot) in orphans {
            self.advance(&id, slot, now, fx);
        }
    }

    /// Scheduler `id`'s job for `slot` started or is gone: the scheduler makes its next job, or
    /// is removed when it is done. Nothing when its pending job is another one.
    fn advance(&mut self, id: &str, slot: u64, now: u64, fx: &mut Effects) {
        let Some(s) = self.schedulers.by_id.get(id) else {
            return;
        };
        if s.next != Some(slot) {
            return;
        }
        match s.after(slot, now) {
            Some(n) => {
                let _ = self.create_slot_job(id, n, now, fx);
            }
            None => {
                self.schedulers.by_id.remove(id);
                self.record_scheduler(id);
            }
        }
    }

    /// Adds scheduler `id`'s job for `slot` (delayed until then) and counts it.
    fn create_slot_job(&mut self, id: &str, slot: u64, now: u64, fx: &mut Effects) -> Result<()> {
        let Some(s) = self.schedulers.by_id.get(id) else {
            return Ok(());
        };
        let job = s.slot_job(id, slot, now);
        let added = self.add(job, now, fx);
        if let Some(s) = self.schedulers.by_id.get_mut(id) {
            if matches!(added, Added::New(_)) {
                s.iteration_count += 1;
            }
            s.next = Some(slot);
        }
        self.record_scheduler(id);
        Ok(())
    }

    /// Removes scheduler `id`'s job for `slot` if it has not started; answers whether it did.
    /// The scheduler does not go on from it (it is being replaced or removed).
    fn drop_pending(&mut self, id: &str, slot: u64, fx: &mut Effects) -> bool {
        let job_id = slot_job_id(id, slot);
        let waiting = self.job_by_id(&job_id).is_some_and(|j| {
            matches!(
                j.state,
                JobState::Delayed | JobState::Waiting | JobState::Prioritized
            )
        });
        waiting && matches!(self.remove_job(&job_id, fx), Ok(Some(_)))
    }

    fn record_scheduler(&mut self, id: &str) {
        if !self.persists() {
            return;
        }
        let body = self.schedulers.by_id.get(id).map(Scheduler::stored_json);
        self.schedulers.ops.push((id.into(), body));
    }

    /// The scheduler changes since the last call (durable queues).
    pub fn take_scheduler_ops(&mut self) -> Vec<(Box<str>, Option<String>)> {
        std::mem::take(&mut self.schedulers.ops)
    }

    /// Takes in a stored scheduler (recovery); one that cannot be read is left out.
    pub fn restore_scheduler(&mut self, id: Box<str>, body: &str) {
        if let Some(scheduler) = Scheduler::from_stored(body) {
            self.schedulers.by_id.insert(id, scheduler);
        }
    }
}
