//! Rebuilding a queue from its stored rows at open (recovery): heaps in priority order, the
//! delayed heap, the finished sets, counters and id sequences. Jobs found `active` belonged to a
//! process that died: each counts one attempt and goes back to the head of waiting, or to failed
//! when its attempts are spent; their ids are kept for the `stalled` event.

use std::sync::Arc;

use super::job::{Job, JobExtra, JobState, CUSTOM_KEY_BIT};
use super::options::JobOptions;
use super::persist::{JobRow, QueueRow, EXTRA, STATE};
use super::queue::QueueState;

/// Failure reason of a job that was active when its process stopped.
pub const STALLED_REASON: &str = "job stalled: the process stopped while the job was active";

fn parse_array(text: Option<&str>) -> Vec<Box<str>> {
    text.and_then(|t| serde_json::from_str::<Vec<String>>(t).ok())
        .map(|v| v.into_iter().map(Into::into).collect())
        .unwrap_or_default()
}

pub(super) fn job_of(row: JobRow) -> Job {
    let opts = row
        .opts
        .as_deref()
        .and_then(|t| JobOptions::from_stored_json(t).ok())
        .unwrap_or_default();
    let mut job = Job::new(row.key, row.name, row.data, &opts, row.timestamp);
    job.set_custom_id(row.custom_id);
    job.set_opts_json(row.opts);
    let s = row.state;
    job.state = s.state;
    job.priority = s.priority;
    job.delay = s.delay;
    job.processed_on = s.processed_on;
    job.finished_on = s.finished_on;
    job.attempts_made = s.attempts_made;
    job.attempts_started = s.attempts_started;
    job.state_seq = s.seq;
    let e = row.extra;
    let stacktrace = parse_array(e.stacktrace.as_deref());
    let logs = parse_array(e.logs.as_deref());
    if e.progress.is_some()
        || e.returnvalue.is_some()
        || e.failed_reason.is_some()
        || !stacktrace.is_empty()
        || !logs.is_empty()
    {
        job.extra = Some(Box::new(JobExtra {
            progress: e.progress,
            returnvalue: e.returnvalue,
            failed_reason: e.failed_reason,
            stacktrace,
            logs,
        }));
    }
    job
}

/// The JSON record of a stored job row (as `getJob` returns it).
pub fn row_json(row: JobRow) -> String {
    let job = job_of(row);
    let mut s = String::with_capacity(256 + job.data.len());
    job.write_json(&mut s, false);
    s
}

/// The log rows of a stored job row.
pub fn row_logs(row: &JobRow) -> Vec<Box<str>> {
    parse_array(row.extra.logs.as_deref())
}

impl QueueState {
    /// Rebuilds a durable queue from its rows. `now` stamps jobs failed for stalling.
    pub fn restore(
        name: Arc<str>,
        meta: Option<QueueRow>,
        rows: Vec<JobRow>,
        now: u64,
    ) -> QueueState {
        let mut q = QueueState::new(name);
        q.set_persist(true);
        if let Some(m) = meta {
            q.last_auto_id = m.last_auto_id;
            q.custom_seq = m.custom_seq;
            q.paused = m.paused;
        }
        let mut stalled = Vec::new();
        let mut ready_later = Vec::new();
        let mut delayed = Vec::new();
        for row in rows {
            let (run_at, ord) = (row.state.run_at, row.state.ord);
            let job = job_of(row);
            let key = job.key;
            if let Some(id) = job.custom_id() {
                q.custom_ids.insert(id.into(), key);
                q.custom_seq = q.custom_seq.max(key & !CUSTOM_KEY_BIT);
            } else {
                q.last_auto_id = q.last_auto_id.max(key);
            }
            q.state_seq = q.state_seq.max(job.state_seq);
            q.order_seq = q.order_seq.max(ord.unsigned_abs() as i64);
            match job.state {
                JobState::Waiting | JobState::Prioritized | JobState::WaitingChildren => {
                    if job.priority > 0 {
                        q.prioritized += 1;
                    }
                    ready_later.push((key, (job.priority, ord)));
                }
                JobState::Delayed => delayed.push((run_at, job.state_seq, key)),
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
            q.ready.push(q.jobs.heap_slots(), key, prio);
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

    fn recover_stalled(&mut self, key: u64, now: u64) {
        let seq = self.next_state_seq();
        let Some(job) = self.jobs.change(&key, STATE | EXTRA) else {
            return;
        };
        job.attempts_made += 1;
        job.extra_mut().failed_reason = Some(STALLED_REASON.into());
        let spent = job.attempts_made >= job.attempts();
        let id = job.id_string();
        if spent {
            job.state = JobState::Failed;
            job.finished_on = now;
            job.state_seq = seq;
            self.failed.insert(seq, key);
        } else {
            self.push_ready(key, true);
        }
        self.stalled.push(id);
    }
}
