//! Engine operations that read a queue or change single jobs: thin routing to the queue's
//! methods under its shard lock.

use super::engine::Engine;
use crate::backend::QueueRef;
use crate::domain::job::JobState;
use crate::domain::listing::StateFilter;
use crate::domain::queue::QueueState;
use crate::error::{EngineError, Result};
use crate::wire;

pub use crate::domain::listing::parse_states;

impl Engine {
    /// A job's record, `None` when absent.
    pub fn job_json(&self, q: &QueueRef, id: &str) -> Option<String> {
        self.read(q, |qs| self.record_of(qs, id)).flatten()
    }

    /// The record of job `id` of `qs` in memory.
    pub(super) fn record_of(&self, qs: &QueueState, id: &str) -> Option<String> {
        qs.job_by_id(id).map(|j| wire::record(&*self.inner.wire, j))
    }

    /// A page of `qs`'s jobs in `filters` as a JSON array of records.
    pub(super) fn page_of(
        &self,
        qs: &QueueState,
        filters: &[StateFilter],
        start: i64,
        end: i64,
        asc: bool,
    ) -> String {
        let wire = &*self.inner.wire;
        let mut out = String::from("[");
        qs.jobs_page(filters, start, end, asc, |j| {
            wire::push_record(wire, j, false, &mut out)
        });
        out.push(']');
        out
    }

    /// A job's state name, `"unknown"` when absent.
    pub fn state(&self, q: &QueueRef, id: &str) -> &'static str {
        self.read(q, |qs| qs.state_of(id))
            .flatten()
            .map_or("unknown", JobState::as_str)
    }

    /// Counts per state; all states when `states` is empty.
    pub fn counts(&self, q: &QueueRef, states: &[String]) -> Result<Vec<(String, usize)>> {
        let names: Vec<String> = if states.is_empty() {
            StateFilter::ALL.iter().map(|s| s.to_string()).collect()
        } else {
            states.to_vec()
        };
        let filters = parse_states("types", &names)?;
        Ok(names
            .into_iter()
            .zip(filters)
            .map(|(n, f)| {
                let c = self.read(q, |qs| qs.count_of(f)).unwrap_or(0);
                (n, c)
            })
            .collect())
    }

    /// Waiting + prioritized + delayed.
    pub fn count(&self, q: &QueueRef) -> usize {
        self.read(q, |qs| qs.count()).unwrap_or(0)
    }

    /// A page of jobs in the given states as a JSON array.
    pub fn jobs_json(
        &self,
        q: &QueueRef,
        states: &[String],
        start: i64,
        end: i64,
        asc: bool,
    ) -> Result<String> {
        let filters = parse_states("types", states)?;
        Ok(self
            .read(q, |qs| self.page_of(qs, &filters, start, end, asc))
            .unwrap_or_else(|| "[]".into()))
    }

    /// Pauses a queue.
    pub fn pause(&self, q: &QueueRef) {
        self.with(q, |qs, _, fx| qs.pause(fx));
    }

    /// Resumes a queue.
    pub fn resume(&self, q: &QueueRef) {
        self.with(q, |qs, _, fx| qs.resume(fx));
    }

    /// Whether a queue is paused.
    pub fn is_paused(&self, q: &QueueRef) -> bool {
        self.read(q, |qs| qs.is_paused()).unwrap_or(false)
    }

    /// Removes waiting/prioritized (and delayed) jobs.
    pub fn drain(&self, q: &QueueRef, delayed: bool) -> usize {
        self.with(q, |qs, now, fx| qs.drain(delayed, now, fx))
    }

    /// Removes old jobs of one state; returns their ids.
    pub fn clean(
        &self,
        q: &QueueRef,
        grace: u64,
        limit: usize,
        state: &str,
    ) -> Result<Vec<String>> {
        let filter = parse_states("type", &[state.to_string()])?[0];
        Ok(self.with(q, |qs, now, fx| qs.clean(grace, limit, filter, now, fx)))
    }

    /// Removes everything of a queue.
    pub fn obliterate(&self, q: &QueueRef, force: bool) -> Result<()> {
        self.with(q, |qs, _, _| qs.obliterate(force))
    }

    /// Removes a job unless active; `Ok(false)` when absent.
    pub fn remove(&self, q: &QueueRef, id: &str) -> Result<bool> {
        self.with(q, |qs, now, fx| qs.remove(id, now, fx))
            .map(|p| p.is_some())
    }

    /// Stores progress (JSON text).
    pub fn update_progress(&self, q: &QueueRef, id: &str, progress: &str) -> Result<()> {
        self.with(q, |qs, _, fx| qs.update_progress(id, progress.into(), fx))
    }

    /// Appends a log row; returns the row count.
    pub fn add_log(&self, q: &QueueRef, id: &str, row: &str, keep: usize) -> Result<usize> {
        self.with(q, |qs, _, _| qs.add_log(id, row.into(), keep))
    }

    /// A page of log rows and the total.
    pub fn logs(
        &self,
        q: &QueueRef,
        id: &str,
        start: i64,
        end: i64,
        asc: bool,
    ) -> (Vec<String>, usize) {
        self.read(q, |qs| qs.logs(id, start, end, asc))
            .unwrap_or_default()
    }

    /// Replaces a job's data (JSON text).
    pub fn update_data(&self, q: &QueueRef, id: &str, data: &str) -> Result<()> {
        self.with(q, |qs, _, _| qs.update_data(id, data.into()))
    }

    /// Changes a job's priority.
    pub fn change_priority(&self, q: &QueueRef, id: &str, priority: u32, lifo: bool) -> Result<()> {
        self.with(q, |qs, _, _| qs.change_priority(id, priority, lifo))
    }

    /// Reschedules a delayed job to `delay` ms from now.
    pub fn change_delay(&self, q: &QueueRef, id: &str, delay: u64) -> Result<()> {
        self.with(q, |qs, now, fx| qs.change_delay(id, delay, now, fx))
    }

    /// Makes a delayed job ready.
    pub fn promote(&self, q: &QueueRef, id: &str) -> Result<()> {
        self.with(q, |qs, _, fx| qs.promote(id, fx))
    }

    /// Moves a failed or completed job back to waiting.
    pub fn retry(&self, q: &QueueRef, id: &str, from: &str, reset_attempts: bool) -> Result<()> {
        let state = match JobState::parse(from) {
            Some(s @ (JobState::Failed | JobState::Completed)) => s,
            _ => {
                return Err(EngineError::range(
                    "state",
                    format!("must be 'failed' or 'completed', got '{from}'"),
                ))
            }
        };
        self.with(q, |qs, _, fx| qs.retry(id, state, reset_attempts, fx))
    }
}
