//! Reads of one queue: lookups by id, states, counts and ordered pages of jobs.
//!
//! Pages follow BullMQ: `start`/`end` are inclusive, negative values count from the end (-1 is
//! the last). Each state's natural order is the order jobs leave it (waiting and prioritized:
//! pop order; delayed: run-at) or entered it (active, completed, failed); `asc = false`, BullMQ's
//! default, reverses it (newest first). With several states, each state's list is ordered and
//! they are concatenated in the order asked, then paged.

use super::QueueState;
use crate::domain::job::{parse_auto_id, Job, JobKey, JobState};
use crate::domain::listing::{page_bounds, StateFilter};

impl QueueState {
    /// Resolves an id string to a key of an existing job. O(1).
    pub fn key_of(&self, id: &str) -> Option<JobKey> {
        match parse_auto_id(id) {
            Some(n) => self.jobs.contains_key(&n).then_some(n),
            None => self.custom_ids.get(id).copied(),
        }
    }

    /// Whether the job `key` is in memory.
    pub fn has_job(&self, key: JobKey) -> bool {
        self.jobs.contains_key(&key)
    }

    /// State of a job by id.
    pub fn state_of(&self, id: &str) -> Option<JobState> {
        self.key_of(id)
            .and_then(|k| self.jobs.get(&k))
            .map(|j| j.state)
    }

    /// A job by id.
    pub fn job_by_id(&self, id: &str) -> Option<&Job> {
        self.jobs.get(&self.key_of(id)?)
    }

    /// The active jobs lease holder `holder` holds, as `(id, token)`, earliest activation
    /// first. O(active jobs).
    pub fn held_by(&self, holder: u32) -> Vec<(String, u64)> {
        if holder == 0 {
            return Vec::new();
        }
        self.active
            .values()
            .filter_map(|k| self.jobs.get(k))
            .filter(|j| j.holder == holder)
            .map(|j| (j.id_string(), j.lock))
            .collect()
    }

    /// Whether job `id` is active under `token` (its lease holds). O(1).
    pub fn holds_lock(&self, id: &str, token: u64) -> bool {
        self.job_by_id(id)
            .is_some_and(|j| j.state == JobState::Active && j.lock == token)
    }

    /// Number of jobs in a state. O(1).
    pub fn count_of(&self, filter: StateFilter) -> usize {
        match filter {
            StateFilter::Paused => 0,
            StateFilter::State(s) => match s {
                JobState::Waiting => self.ready_len() - self.prioritized,
                JobState::Prioritized => self.prioritized,
                JobState::Delayed => self.delayed.len(),
                JobState::Active => self.active.len(),
                JobState::Completed => self.completed.len() + self.evicted_count(s) as usize,
                JobState::Failed => self.failed.len() + self.evicted_count(s) as usize,
                JobState::WaitingChildren => self.waiting_children.len(),
            },
        }
    }

    /// Jobs waiting to run now or later, children's parents included (BullMQ's `count()`). O(1).
    pub fn count(&self) -> usize {
        self.ready_len() + self.delayed.len() + self.waiting_children.len()
    }

    /// Whether the queue is paused.
    pub fn is_paused(&self) -> bool {
        self.paused
    }

    /// Highest automatic id handed out so far.
    pub fn last_auto_id(&self) -> u64 {
        self.last_auto_id
    }

    /// Keys of the jobs in one state, in natural order. O(n log n) for ready and delayed.
    pub fn keys_in(&self, filter: StateFilter) -> Vec<JobKey> {
        // Ungrouped jobs in the order they are taken, then the grouped ones by priority and age.
        let ready = |want: fn(u32) -> bool| -> Vec<JobKey> {
            let grouped = (!self.groups.is_empty()).then(|| self.groups.sorted(&self.jobs));
            self.ready
                .sorted(&self.jobs)
                .into_iter()
                .chain(grouped.into_iter().flatten())
                .filter(|(_, (p, _))| want(*p))
                .map(|(k, _)| k)
                .collect()
        };
        match filter {
            StateFilter::Paused => Vec::new(),
            StateFilter::State(s) => match s {
                JobState::Waiting => ready(|p| p == 0),
                JobState::Prioritized => ready(|p| p > 0),
                JobState::Delayed => self.delayed.sorted().into_iter().map(|(k, _)| k).collect(),
                JobState::Active => self.active.values().copied().collect(),
                JobState::Completed => self.completed.values().copied().collect(),
                JobState::Failed => self.failed.values().copied().collect(),
                JobState::WaitingChildren => self.waiting_children.values().copied().collect(),
            },
        }
    }

    /// The jobs of a page of the given states, handed to `each` in order.
    pub fn jobs_page(
        &self,
        filters: &[StateFilter],
        start: i64,
        end: i64,
        asc: bool,
        mut each: impl FnMut(&Job),
    ) {
        let mut keys = Vec::new();
        for f in filters {
            let mut k = self.keys_in(*f);
            if !asc {
                k.reverse();
            }
            keys.extend(k);
        }
        if let Some((from, to)) = page_bounds(keys.len(), start, end) {
            for key in &keys[from..=to] {
                if let Some(job) = self.jobs.get(key) {
                    each(job);
                }
            }
        }
    }
}
