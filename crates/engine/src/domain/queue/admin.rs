//! Administrative operations on one queue and on single jobs: pause/resume, drain, clean,
//! obliterate, remove, progress, logs, data, priority, delay, promote and retry.

use super::{id_of, Effects, QueueState};
use crate::domain::changes::{DATA, EXTRA, STATE};
use crate::domain::event::EventKind;
use crate::domain::job::{JobKey, JobState};
use crate::domain::listing::StateFilter;
use crate::error::{EngineError, Result};

impl QueueState {
    fn existing(&self, id: &str) -> Result<JobKey> {
        self.key_of(id)
            .ok_or_else(|| EngineError::JobNotFound(id.to_string()))
    }

    fn expect_state(&self, key: JobKey, want: JobState, op: &'static str) -> Result<()> {
        let state = self.jobs.get(&key).map(|j| j.state);
        match state {
            Some(s) if s == want => Ok(()),
            Some(s) => Err(EngineError::InvalidState {
                id: id_of(key, &self.jobs),
                state: s.as_str(),
                operation: op,
                expected: want.as_str(),
            }),
            None => Err(EngineError::JobNotFound(key.to_string())),
        }
    }

    /// Stops handing out jobs; adds still land.
    pub fn pause(&mut self, fx: &mut Effects) {
        if !self.paused {
            self.set_paused(true);
            self.emit(fx, || EventKind::Paused);
        }
    }

    /// Hands out jobs again and wakes waiters.
    pub fn resume(&mut self, fx: &mut Effects) {
        if self.paused {
            self.set_paused(false);
            let n = self.ready_len();
            if n > 0 {
                self.waiters.notify(n);
            }
            self.emit(fx, || EventKind::Resumed);
        }
    }

    /// Removes every waiting and prioritized job, and delayed ones too when `delayed`.
    /// Returns how many were removed. O(n). Schedulers whose pending job it removed go on from
    /// their next slot (so a drain with `delayed` leaves their new pending jobs).
    pub fn drain(&mut self, delayed: bool, now: u64, fx: &mut Effects) -> usize {
        let mut keys: Vec<JobKey> = self.ready.keys(&self.jobs);
        self.ready.clear(self.jobs.heap_slots());
        keys.extend(self.groups.keys(&self.jobs));
        self.groups.clear(self.jobs.heap_slots());
        self.prioritized = 0;
        if delayed {
            keys.extend(self.delayed.iter().map(|(k, _)| k));
            self.delayed.clear();
        }
        for k in &keys {
            self.forget(*k);
        }
        if !keys.is_empty() {
            self.resume_orphaned_schedulers(now, fx);
        }
        keys.len()
    }

    /// Removes jobs of `state` older than `grace` ms (finished time for completed/failed, creation
    /// time otherwise), oldest first, at most `limit` (0 = no limit); returns their ids.
    /// Active jobs are locked by workers and never cleaned.
    pub fn clean(
        &mut self,
        grace: u64,
        limit: usize,
        filter: StateFilter,
        now: u64,
        fx: &mut Effects,
    ) -> Vec<String> {
        if filter == StateFilter::State(JobState::Active) {
            return Vec::new();
        }
        let cutoff = now.saturating_sub(grace);
        let candidates = match filter {
            StateFilter::State(s @ (JobState::Completed | JobState::Failed)) => {
                self.finished_before(s, cutoff, limit)
            }
            _ => self.created_before(filter, cutoff, limit),
        };
        let mut ids = Vec::with_capacity(candidates.len());
        for key in candidates {
            if let Some(id) = self.remove_key(key) {
                ids.push(id);
            }
        }
        if !ids.is_empty() {
            let count = ids.len();
            self.emit(fx, || EventKind::Cleaned { count });
            let finished = StateFilter::State(JobState::Completed) == filter
                || StateFilter::State(JobState::Failed) == filter;
            if !finished {
                self.resume_orphaned_schedulers(now, fx);
            }
        }
        ids
    }

    /// Up to `limit` (0: all) finished jobs of `state` that finished before `cutoff`, oldest
    /// first. A finished set is ordered by `finished_on` (see `finish_time`), so this walks it
    /// from its oldest end and stops at the first job that is not old: O(k), whatever the size of
    /// the set.
    pub(super) fn finished_before(
        &self,
        state: JobState,
        cutoff: u64,
        limit: usize,
    ) -> Vec<JobKey> {
        let set = if state == JobState::Completed {
            &self.completed
        } else {
            &self.failed
        };
        let limit = if limit == 0 { usize::MAX } else { limit };
        set.values()
            .copied()
            .take_while(|k| self.jobs.get(k).is_some_and(|j| j.finished_on < cutoff))
            .take(limit)
            .collect()
    }

    /// Up to `limit` (0: all) unfinished jobs in `filter` created before `cutoff`, oldest first.
    /// O(n log n) over the state: their order is not by creation time (a job's `timestamp` is the
    /// caller's to set).
    fn created_before(&self, filter: StateFilter, cutoff: u64, limit: usize) -> Vec<JobKey> {
        let mut old: Vec<(u64, JobKey)> = self
            .keys_in(filter)
            .into_iter()
            .filter_map(|k| {
                let t = self.jobs.get(&k)?.timestamp;
                (t < cutoff).then_some((t, k))
            })
            .collect();
        old.sort_unstable();
        if limit > 0 {
            old.truncate(limit);
        }
        old.into_iter().map(|(_, k)| k).collect()
    }

    /// Removes the whole queue's content, ids and paused flag. Refuses while jobs are active
    /// unless `force`; acks of those jobs are then ignored.
    pub fn obliterate(&mut self, force: bool) -> Result<()> {
        if !self.active.is_empty() && !force {
            return Err(EngineError::QueueActive {
                queue: self.name.to_string(),
                active: self.active.len(),
            });
        }
        // Children of other queues' parents go with it: their parents no longer wait for them.
        let unfinished: Vec<JobKey> = self
            .jobs
            .iter()
            .filter(|(_, j)| {
                j.parent().is_some() && !matches!(j.state, JobState::Completed | JobState::Failed)
            })
            .map(|(k, _)| k)
            .collect();
        for k in unfinished {
            self.notify_parent(k, || crate::domain::flow::ChildEnd::Removed);
        }
        let notices = std::mem::take(&mut self.notices);
        let mut fresh = QueueState::new(self.name.clone());
        fresh.notices = notices;
        std::mem::swap(&mut fresh.waiters, &mut self.waiters);
        fresh.jobs.set_persist(self.jobs.persists());
        fresh.wiped = fresh.jobs.persists();
        fresh.settings_changed = fresh.jobs.persists();
        fresh.listeners = self.listeners;
        // Ids restart at 1, so tokens must not: an activation from before the obliterate must
        // never match a new job that reuses its id.
        fresh.lock_seq = self.lock_seq;
        // BullMQ's per-minute counts go with the queue; the Workers' wish to record them, and
        // this engine's totals (counters never go back), stay.
        fresh.metrics.points = self.metrics.points;
        fresh.metrics.stats = std::mem::take(&mut self.metrics.stats);
        *self = fresh;
        Ok(())
    }

    /// Removes a job unless it is active. Returns its previous state, `None` if absent. A
    /// scheduler whose pending job it was goes on from its next slot.
    pub fn remove(&mut self, id: &str, now: u64, fx: &mut Effects) -> Result<Option<&'static str>> {
        let prev = self.remove_job(id, fx)?;
        if prev.is_some() && !self.schedulers.is_empty() {
            self.resume_scheduler_of(id, now, fx);
        }
        Ok(prev)
    }

    /// [`QueueState::remove`] without the scheduler rule.
    pub(super) fn remove_job(
        &mut self,
        id: &str,
        fx: &mut Effects,
    ) -> Result<Option<&'static str>> {
        let Some(key) = self.key_of(id) else {
            return Ok(None);
        };
        let Some(state) = self.jobs.get(&key).map(|j| j.state) else {
            return Ok(None);
        };
        if state == JobState::Active {
            return Err(EngineError::JobLocked(id.to_string()));
        }
        let job_id = self.remove_key(key);
        if let Some(job_id) = job_id {
            let prev = state.as_str();
            self.emit(fx, || EventKind::Removed { job_id, prev });
        }
        Ok(Some(state.as_str()))
    }

    /// Takes a non-active job out of its state structure and forgets it; returns its id.
    fn remove_key(&mut self, key: JobKey) -> Option<String> {
        let job = self.jobs.get(&key)?;
        let (state, seq) = (job.state, job.state_seq);
        match state {
            JobState::Waiting | JobState::Prioritized => {
                self.unready(key);
            }
            JobState::Delayed => {
                self.delayed.remove(&key);
            }
            JobState::Completed | JobState::Failed => {
                self.finished_set(state).remove(&seq);
            }
            JobState::WaitingChildren => {
                self.waiting_children.remove(&seq);
            }
            JobState::Active => return None,
        }
        self.forget(key).map(|j| j.id_string())
    }

    /// Stores progress (JSON text) and emits `progress`.
    pub fn update_progress(
        &mut self,
        id: &str,
        progress: Box<str>,
        fx: &mut Effects,
    ) -> Result<()> {
        let key = self.existing(id)?;
        let ev = (self.listeners > 0).then(|| progress.clone());
        if let Some(job) = self.jobs.change(&key, EXTRA) {
            job.extra_mut().progress = Some(progress);
        }
        if let Some(data) = ev {
            self.emit(fx, || EventKind::Progress {
                job_id: id.to_string(),
                data,
            });
        }
        Ok(())
    }

    /// Appends a log row; returns the number of rows. `keep` > 0 keeps only the newest rows.
    pub fn add_log(&mut self, id: &str, row: Box<str>, keep: usize) -> Result<usize> {
        let key = self.existing(id)?;
        let job = self
            .jobs
            .change(&key, EXTRA)
            .ok_or_else(|| EngineError::JobNotFound(id.to_string()))?;
        let logs = &mut job.extra_mut().logs;
        logs.push(row);
        if keep > 0 && logs.len() > keep {
            let excess = logs.len() - keep;
            logs.drain(..excess);
        }
        Ok(logs.len())
    }

    /// A page of a job's log rows and their total count.
    pub fn logs(&self, id: &str, start: i64, end: i64, asc: bool) -> (Vec<String>, usize) {
        let rows: Vec<&str> = self
            .key_of(id)
            .and_then(|k| self.jobs.get(&k))
            .and_then(|j| j.extra.as_deref())
            .map(|e| e.logs.iter().map(|s| &**s).collect())
            .unwrap_or_default();
        let total = rows.len();
        let mut ordered = rows;
        if !asc {
            ordered.reverse();
        }
        let page = match crate::domain::listing::page_bounds(total, start, end) {
            Some((a, b)) => ordered[a..=b].iter().map(|s| s.to_string()).collect(),
            None => Vec::new(),
        };
        (page, total)
    }

    /// Replaces a job's data (JSON text).
    pub fn update_data(&mut self, id: &str, data: Box<str>) -> Result<()> {
        let key = self.existing(id)?;
        if let Some(job) = self.jobs.change(&key, DATA) {
            job.data = data;
        }
        Ok(())
    }

    /// Changes a job's priority; a ready job moves to its new place (at the head of its
    /// priority with `lifo`).
    pub fn change_priority(&mut self, id: &str, priority: u32, lifo: bool) -> Result<()> {
        let key = self.existing(id)?;
        let was_ready = self.unready(key);
        if let Some(job) = self.jobs.change(&key, STATE) {
            job.priority = priority;
        }
        if was_ready {
            self.push_ready(key, lifo);
        }
        Ok(())
    }

    /// Reschedules a delayed job to run `delay` ms from now.
    pub fn change_delay(&mut self, id: &str, delay: u64, now: u64, fx: &mut Effects) -> Result<()> {
        let key = self.existing(id)?;
        self.expect_state(key, JobState::Delayed, "changeDelay")?;
        let run_at = now.saturating_add(delay);
        self.schedule(key, run_at);
        if let Some(job) = self.jobs.change(&key, STATE) {
            job.delay = delay;
        }
        fx.wake_at = Some(fx.wake_at.map_or(run_at, |w| w.min(run_at)));
        self.emit(fx, || EventKind::Delayed {
            job_id: id.to_string(),
            delay: run_at,
        });
        Ok(())
    }

    /// Makes a delayed job ready now.
    pub fn promote(&mut self, id: &str, fx: &mut Effects) -> Result<()> {
        let key = self.existing(id)?;
        self.expect_state(key, JobState::Delayed, "promote")?;
        self.delayed.remove(&key);
        if let Some(job) = self.jobs.change(&key, STATE) {
            job.delay = 0;
        }
        self.push_ready(key, false);
        if !self.paused {
            self.waiters.notify(1);
        }
        self.emit(fx, || EventKind::Waiting {
            job_id: id.to_string(),
            prev: Some("delayed"),
        });
        Ok(())
    }

    /// Moves a failed (or completed) job back to waiting.
    pub fn retry(
        &mut self,
        id: &str,
        from: JobState,
        reset_attempts: bool,
        fx: &mut Effects,
    ) -> Result<()> {
        let key = self.existing(id)?;
        if !matches!(from, JobState::Failed | JobState::Completed) {
            return Err(EngineError::range(
                "state",
                format!("must be 'failed' or 'completed', got '{}'", from.as_str()),
            ));
        }
        self.expect_state(key, from, "retry")?;
        let seq = self.jobs.get(&key).map_or(0, |j| j.state_seq);
        self.finished_set(from).remove(&seq);
        if let Some(job) = self.jobs.change(&key, STATE | EXTRA) {
            job.finished_on = 0;
            job.processed_on = 0;
            if reset_attempts {
                job.attempts_made = 0;
                job.attempts_started = 0;
            }
            if let Some(e) = job.extra.as_deref_mut() {
                e.failed_reason = None;
                e.returnvalue = None;
            }
        }
        self.push_ready(key, false);
        if !self.paused {
            self.waiters.notify(1);
        }
        let prev = from.as_str();
        self.emit(fx, || EventKind::Waiting {
            job_id: id.to_string(),
            prev: Some(prev),
        });
        Ok(())
    }
}
