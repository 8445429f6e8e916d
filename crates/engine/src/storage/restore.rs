//! Reading stored rows back into the domain: a row into a [`Job`], a queue's rows into a
//! rebuilt [`QueueState`] (the domain places each job, `domain/queue/rebuild.rs`).

use std::sync::Arc;

use super::rows::{JobRow, QueueRow};
use crate::domain::dlq::parse_history;
use crate::domain::flow::Deps;
use crate::domain::job::{Job, JobExtra};
use crate::domain::options::JobOptions;
use crate::domain::queue::{QueueState, Stored, StoredSettings};

fn parse_array(text: Option<&str>) -> Vec<Box<str>> {
    text.and_then(|t| serde_json::from_str::<Vec<String>>(t).ok())
        .map(|v| v.into_iter().map(Into::into).collect())
        .unwrap_or_default()
}

/// The job a stored row holds.
pub fn job_of(row: JobRow) -> Job {
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
    let deps = e.deps.as_deref().and_then(Deps::from_json).map(Box::new);
    let history = e.history.as_deref().map(parse_history).unwrap_or_default();
    if e.progress.is_some()
        || e.returnvalue.is_some()
        || e.failed_reason.is_some()
        || !stacktrace.is_empty()
        || !logs.is_empty()
        || deps.is_some()
        || e.stalled_counter > 0
        || e.processed_by.is_some()
        || !history.is_empty()
    {
        job.extra = Some(Box::new(JobExtra {
            progress: e.progress,
            returnvalue: e.returnvalue,
            failed_reason: e.failed_reason,
            stacktrace,
            logs,
            deps,
            stalled_counter: e.stalled_counter,
            processed_by: e.processed_by.map(Arc::from),
            history,
        }));
    }
    job
}

/// Rebuilds a durable queue from its stored rows. `now` stamps jobs failed for stalling. A
/// `view` is a look at a file another engine holds (`QueueState::rebuild`).
pub fn queue_of(
    name: Arc<str>,
    meta: Option<QueueRow>,
    rows: Vec<JobRow>,
    now: u64,
    view: bool,
) -> QueueState {
    let settings = meta.map(|m| StoredSettings {
        last_auto_id: m.last_auto_id,
        custom_seq: m.custom_seq,
        paused: m.paused,
        limits: m.limits,
        dlq: m.dlq,
    });
    let jobs = rows.into_iter().map(|row| {
        let (run_at, ord) = (row.state.run_at, row.state.ord);
        Stored {
            job: job_of(row),
            run_at,
            ord,
        }
    });
    QueueState::rebuild(name, settings, jobs, now, view)
}
