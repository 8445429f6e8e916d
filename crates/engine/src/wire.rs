//! The wire format of job records and events: how they reach the binding. The engine does not
//! write it: whoever opens an engine gives it a [`Wire`] (the napi binding's JSON writer,
//! `src/wire.rs`), and the engine calls it under the shard lock to write each record straight
//! into the text it answers with, one pass and no intermediate objects. The [`crate::Backend`]
//! trait answers records as JSON arrays (`[record, …]`) and events as `[event, …]`; the framing
//! is written here, the elements by the [`Wire`], and each element must be a JSON value (pages
//! that mix memory and file split such arrays back into records).

use crate::domain::event::Event;
use crate::domain::job::Job;

/// Writes job records and events for the binding.
pub trait Wire: Send + Sync + 'static {
    /// Appends the record of `job`. `for_worker`: a record handed to a worker, which carries
    /// the activation token (`job.lock`) it must ack with.
    fn record(&self, job: &Job, for_worker: bool, out: &mut String);
    /// Appends one event.
    fn event(&self, event: &Event, out: &mut String);
}

/// Appends `job`'s record to a JSON array under construction in `out` (opened with `[`).
pub fn push_record(wire: &dyn Wire, job: &Job, for_worker: bool, out: &mut String) {
    if out.len() > 1 {
        out.push(',');
    }
    wire.record(job, for_worker, out);
}

/// The record of one job.
pub fn record(wire: &dyn Wire, job: &Job) -> String {
    let mut s = String::with_capacity(256 + job.data.len());
    wire.record(job, false, &mut s);
    s
}

/// A JSON array of events.
pub fn events(wire: &dyn Wire, events: &[Event]) -> String {
    let mut out = String::with_capacity(2 + 64 * events.len());
    out.push('[');
    for (i, e) in events.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        wire.event(e, &mut out);
    }
    out.push(']');
    out
}

/// A plain JSON wire for the engine's own tests, built with `serde_json` (the binding's writer is
/// the real one, tested in the binding against `serde_json` too): every field of a record,
/// always, plus `token` for workers; events as `["queue","event",{payload}]`.
#[cfg(test)]
pub mod test_json {
    use std::sync::Arc;

    use serde_json::{json, Map, Value};

    use super::Wire;
    use crate::domain::event::{Event, EventKind};
    use crate::domain::job::Job;

    /// The test wire.
    pub struct TestWire;

    /// A shared test wire.
    pub fn wire() -> Arc<dyn Wire> {
        Arc::new(TestWire)
    }

    fn raw(text: Option<&str>, default: Value) -> Value {
        text.map_or(default, |t| {
            serde_json::from_str(t).expect("stored JSON text")
        })
    }

    fn time(t: u64) -> Value {
        if t == 0 {
            Value::Null
        } else {
            t.into()
        }
    }

    /// The record of `job` as a value.
    pub fn record_value(job: &Job, for_worker: bool) -> Value {
        let extra = job.extra.as_deref();
        let mut v = json!({
            "id": job.id_string(),
            "name": &*job.name,
            "data": raw(Some(&job.data), Value::Null),
            "opts": raw(job.opts_json(), json!({})),
            "progress": raw(extra.and_then(|e| e.progress.as_deref()), 0.into()),
            "returnvalue": raw(extra.and_then(|e| e.returnvalue.as_deref()), Value::Null),
            "failedReason": extra.and_then(|e| e.failed_reason.as_deref()),
            "stacktrace": extra.map_or(Vec::new(), |e| e.stacktrace.iter().map(|s| s.to_string()).collect()),
            "attemptsMade": job.attempts_made,
            "delay": job.delay,
            "priority": job.priority,
            "stalledCounter": job.stalled_counter(),
            "attemptsStarted": job.attempts_started,
            "timestamp": job.timestamp,
            "processedOn": time(job.processed_on),
            "finishedOn": time(job.finished_on),
        });
        if let Some(name) = job.processed_by() {
            v["processedBy"] = name.into();
        }
        if let Some(e) = extra.filter(|e| !e.history.is_empty()) {
            v["history"] = raw(
                Some(&crate::domain::dlq::history_json(&e.history)),
                Value::Null,
            );
        }
        if for_worker {
            v["token"] = job.lock.into();
        }
        v
    }

    fn payload(kind: &EventKind) -> Map<String, Value> {
        let mut m = Map::new();
        let mut put = |k: &str, v: Value| {
            m.insert(k.to_string(), v);
        };
        match kind {
            EventKind::Added { job_id, name } => {
                put("jobId", job_id.as_str().into());
                put("name", (**name).into());
            }
            EventKind::Waiting { job_id, prev } => {
                put("jobId", job_id.as_str().into());
                if let Some(p) = prev {
                    put("prev", (*p).into());
                }
            }
            EventKind::Delayed { job_id, delay } => {
                put("jobId", job_id.as_str().into());
                put("delay", (*delay).into());
            }
            EventKind::Active { job_id, prev } | EventKind::Removed { job_id, prev } => {
                put("jobId", job_id.as_str().into());
                put("prev", (*prev).into());
            }
            EventKind::Deduplicated {
                job_id,
                deduplication_id,
                deduplicated_job_id,
            } => {
                put("jobId", job_id.as_str().into());
                put("deduplicationId", deduplication_id.as_str().into());
                put("deduplicatedJobId", deduplicated_job_id.as_str().into());
            }
            EventKind::Progress { job_id, data } => {
                put("jobId", job_id.as_str().into());
                put("data", raw(Some(data), Value::Null));
            }
            EventKind::Completed {
                job_id,
                returnvalue,
            } => {
                put("jobId", job_id.as_str().into());
                put("returnvalue", raw(Some(returnvalue), Value::Null));
                put("prev", "active".into());
            }
            EventKind::Failed {
                job_id,
                failed_reason,
            } => {
                put("jobId", job_id.as_str().into());
                put("failedReason", (**failed_reason).into());
                put("prev", "active".into());
            }
            EventKind::RetriesExhausted {
                job_id,
                attempts_made,
            } => {
                put("jobId", job_id.as_str().into());
                put("attemptsMade", (*attempts_made).into());
            }
            EventKind::Duplicated { job_id }
            | EventKind::WaitingChildren { job_id }
            | EventKind::Stalled { job_id } => put("jobId", job_id.as_str().into()),
            EventKind::Cleaned { count } => put("count", (*count).into()),
            EventKind::LocksRenewed { holder, job_ids }
            | EventKind::LockRenewalFailed { holder, job_ids } => {
                put("holder", (*holder).into());
                put("jobIds", job_ids.clone().into());
            }
            EventKind::Drained | EventKind::Paused | EventKind::Resumed => {}
        }
        m
    }

    impl Wire for TestWire {
        fn record(&self, job: &Job, for_worker: bool, out: &mut String) {
            out.push_str(&record_value(job, for_worker).to_string());
        }

        fn event(&self, e: &Event, out: &mut String) {
            let v = json!([&*e.queue, e.kind.name(), Value::Object(payload(&e.kind))]);
            out.push_str(&v.to_string());
        }
    }
}
