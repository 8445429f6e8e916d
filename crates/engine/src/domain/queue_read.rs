//! Reads of one queue: lookups by id, states, counts and ordered pages of jobs.
//!
//! Pages follow BullMQ: `start`/`end` are inclusive, negative values count from the end (-1 is
//! the last). Each state's natural order is the order jobs leave it (waiting and prioritized:
//! pop order; delayed: run-at) or entered it (active, completed, failed); `asc = false`, BullMQ's
//! default, reverses it (newest first). With several states, each state's list is ordered and
//! they are concatenated in the order asked, then paged.

use super::job::{parse_auto_id, JobKey, JobState};
use super::queue::QueueState;

/// A state name as getters and counts take it: a job state or `paused`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateFilter {
    State(JobState),
    /// BullMQ's `paused` list, which BullMQ 5+ keeps empty: a paused queue's jobs stay in
    /// `waiting` / `prioritized`. Always empty here, so no job is counted twice.
    Paused,
}

impl StateFilter {
    /// Parses BullMQ's names (`wait` is `waiting`). `None` for unknown names.
    pub fn parse(s: &str) -> Option<StateFilter> {
        if s == "paused" {
            return Some(StateFilter::Paused);
        }
        JobState::parse(s).map(StateFilter::State)
    }

    /// Every state `getJobCounts()` reports when none is asked.
    pub const ALL: [&'static str; 8] = [
        "waiting",
        "active",
        "completed",
        "failed",
        "delayed",
        "prioritized",
        "waiting-children",
        "paused",
    ];
}

/// Parses state names for getters, counts and clean; an unknown one is a range error on `option`.
pub fn parse_states(option: &str, names: &[String]) -> crate::error::Result<Vec<StateFilter>> {
    names
        .iter()
        .map(|n| {
            StateFilter::parse(n).ok_or_else(|| {
                crate::error::EngineError::range(
                    option,
                    format!(
                        "has an unknown state '{n}'; expected one of {}",
                        StateFilter::ALL.join(", ")
                    ),
                )
            })
        })
        .collect()
}

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

    /// The JSON record of a job by id.
    pub fn job_json(&self, id: &str) -> Option<String> {
        let job = self.jobs.get(&self.key_of(id)?)?;
        let mut s = String::with_capacity(256 + job.data.len());
        job.write_json(&mut s, false);
        Some(s)
    }

    /// Number of jobs in a state. O(1).
    pub fn count_of(&self, filter: StateFilter) -> usize {
        match filter {
            StateFilter::Paused => 0,
            StateFilter::State(s) => match s {
                JobState::Waiting => self.ready.len() - self.prioritized,
                JobState::Prioritized => self.prioritized,
                JobState::Delayed => self.delayed.len(),
                JobState::Active => self.active.len(),
                JobState::Completed => self.completed.len() + self.evicted_count(s) as usize,
                JobState::Failed => self.failed.len() + self.evicted_count(s) as usize,
                JobState::WaitingChildren => 0,
            },
        }
    }

    /// Jobs waiting to run now or later (BullMQ's `count()`). O(1).
    pub fn count(&self) -> usize {
        self.ready.len() + self.delayed.len()
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
        let ready = |want: fn(u32) -> bool| -> Vec<JobKey> {
            self.ready
                .sorted(&self.jobs)
                .into_iter()
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
                JobState::WaitingChildren => Vec::new(),
            },
        }
    }

    /// A page of jobs of the given states as a JSON array of records.
    pub fn jobs_json(&self, filters: &[StateFilter], start: i64, end: i64, asc: bool) -> String {
        let mut keys = Vec::new();
        for f in filters {
            let mut k = self.keys_in(*f);
            if !asc {
                k.reverse();
            }
            keys.extend(k);
        }
        let mut out = String::from("[");
        if let Some((from, to)) = page_bounds(keys.len(), start, end) {
            let mut first = true;
            for key in &keys[from..=to] {
                if let Some(job) = self.jobs.get(key) {
                    if !first {
                        out.push(',');
                    }
                    first = false;
                    job.write_json(&mut out, false);
                }
            }
        }
        out.push(']');
        out
    }
}

/// Resolves inclusive Redis-style bounds over `len` items; `None` when the page is empty.
pub fn page_bounds(len: usize, start: i64, end: i64) -> Option<(usize, usize)> {
    let len_i = len as i64;
    let norm = |i: i64| if i < 0 { len_i + i } else { i };
    let from = norm(start).max(0);
    let to = norm(end).min(len_i - 1);
    if len == 0 || from > to {
        return None;
    }
    Some((from as usize, to as usize))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_bounds_follow_redis() {
        assert_eq!(page_bounds(10, 0, -1), Some((0, 9)));
        assert_eq!(page_bounds(10, 2, 4), Some((2, 4)));
        assert_eq!(page_bounds(10, -3, -1), Some((7, 9)));
        assert_eq!(page_bounds(10, 5, 100), Some((5, 9)));
        assert_eq!(page_bounds(10, 8, 2), None);
        assert_eq!(page_bounds(0, 0, -1), None);
        assert_eq!(page_bounds(3, -10, 0), Some((0, 0)));
    }
}
