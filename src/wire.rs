//! The JSON that job records and events cross to JS in: the [`Wire`] every backend is opened
//! with. The engine calls it under its lock to write each record straight into the text a call
//! answers with (one pass, no intermediate objects; JS parses the array once).
//!
//! Records carry BullMQ's job fields. A record handed to a worker adds its activation `token`
//! and leaves out fields at their defaults (empty options, no progress, return value, failure or
//! stack trace, zero delay, priority and attempts, no finish time) to keep pulls small; the JS
//! `Job` fills those defaults in. Events are `["queue","event",{payload}]` with BullMQ's payloads.

use std::fmt::Write as _;

use ferroqueue_engine::domain::dlq::history_json;
use ferroqueue_engine::domain::event::{Event, EventKind};
use ferroqueue_engine::domain::job::Job;
use ferroqueue_engine::Wire;

/// The binding's JSON wire.
pub struct JsonWire;

impl Wire for JsonWire {
    fn record(&self, job: &Job, for_worker: bool, out: &mut String) {
        write_record(job, for_worker, out);
    }

    fn event(&self, event: &Event, out: &mut String) {
        write_event(event, out);
    }
}

fn write_record(job: &Job, slim: bool, out: &mut String) {
    out.push_str("{\"id\":");
    match job.custom_id() {
        Some(s) => push_json_str(out, s),
        // Records for workers carry an auto id as a number: V8 interns short strings that
        // JSON.parse meets, and a fresh id string per job grew its string table.
        None if slim => {
            let _ = write!(out, "{}", job.key);
        }
        None => {
            let _ = write!(out, "\"{}\"", job.key);
        }
    }
    out.push_str(",\"name\":");
    push_json_str(out, &job.name);
    out.push_str(",\"data\":");
    out.push_str(&job.data);
    if !slim || job.opts_json().is_some() {
        out.push_str(",\"opts\":");
        out.push_str(job.opts_json().unwrap_or("{}"));
    }
    let extra = job.extra.as_deref();
    let progress = extra.and_then(|e| e.progress.as_deref());
    if !slim || progress.is_some() {
        out.push_str(",\"progress\":");
        out.push_str(progress.unwrap_or("0"));
    }
    let returnvalue = extra.and_then(|e| e.returnvalue.as_deref());
    if !slim || returnvalue.is_some() {
        out.push_str(",\"returnvalue\":");
        out.push_str(returnvalue.unwrap_or("null"));
    }
    let failed = extra.and_then(|e| e.failed_reason.as_deref());
    if !slim || failed.is_some() {
        out.push_str(",\"failedReason\":");
        match failed {
            Some(r) => push_json_str(out, r),
            None => out.push_str("null"),
        }
    }
    let stack = extra.map_or(&[][..], |e| &e.stacktrace[..]);
    if !slim || !stack.is_empty() {
        out.push_str(",\"stacktrace\":[");
        for (i, s) in stack.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            push_json_str(out, s);
        }
        out.push(']');
    }
    for (key, value) in [
        ("attemptsMade", job.attempts_made as u64),
        ("delay", job.delay),
        ("priority", job.priority as u64),
        ("stalledCounter", job.stalled_counter() as u64),
    ] {
        if !slim || value != 0 {
            let _ = write!(out, ",\"{key}\":{value}");
        }
    }
    let _ = write!(
        out,
        ",\"attemptsStarted\":{},\"timestamp\":{}",
        job.attempts_started, job.timestamp
    );
    push_opt_time(out, ",\"processedOn\":", job.processed_on);
    if let Some(name) = job.processed_by() {
        out.push_str(",\"processedBy\":");
        push_json_str(out, name);
    }
    if !slim || job.finished_on != 0 {
        push_opt_time(out, ",\"finishedOn\":", job.finished_on);
    }
    // The failed attempts, which the DLQ reads (`domain/dlq_view.rs`); workers need none.
    if let Some(e) = extra.filter(|e| !slim && !e.history.is_empty()) {
        out.push_str(",\"history\":");
        out.push_str(&history_json(&e.history));
    }
    if slim {
        let _ = write!(out, ",\"token\":{}", job.lock);
    }
    out.push('}');
}

fn push_opt_time(out: &mut String, key: &str, t: u64) {
    out.push_str(key);
    if t == 0 {
        out.push_str("null");
    } else {
        let _ = write!(out, "{t}");
    }
}

fn write_event(e: &Event, out: &mut String) {
    out.push('[');
    push_json_str(out, &e.queue);
    out.push(',');
    push_json_str(out, e.kind.name());
    out.push_str(",{");
    let id = |out: &mut String, id: &str| {
        out.push_str("\"jobId\":");
        push_json_str(out, id);
    };
    match &e.kind {
        EventKind::Added { job_id, name } => {
            id(out, job_id);
            out.push_str(",\"name\":");
            push_json_str(out, name);
        }
        EventKind::Waiting { job_id, prev } => {
            id(out, job_id);
            if let Some(p) = prev {
                out.push_str(",\"prev\":");
                push_json_str(out, p);
            }
        }
        EventKind::Delayed { job_id, delay } => {
            id(out, job_id);
            let _ = write!(out, ",\"delay\":{delay}");
        }
        EventKind::Active { job_id, prev } | EventKind::Removed { job_id, prev } => {
            id(out, job_id);
            out.push_str(",\"prev\":");
            push_json_str(out, prev);
        }
        EventKind::Progress { job_id, data } => {
            id(out, job_id);
            out.push_str(",\"data\":");
            out.push_str(data);
        }
        EventKind::Completed {
            job_id,
            returnvalue,
        } => {
            id(out, job_id);
            out.push_str(",\"returnvalue\":");
            out.push_str(returnvalue);
            out.push_str(",\"prev\":\"active\"");
        }
        EventKind::Failed {
            job_id,
            failed_reason,
        } => {
            id(out, job_id);
            out.push_str(",\"failedReason\":");
            push_json_str(out, failed_reason);
            out.push_str(",\"prev\":\"active\"");
        }
        EventKind::RetriesExhausted {
            job_id,
            attempts_made,
        } => {
            id(out, job_id);
            let _ = write!(out, ",\"attemptsMade\":{attempts_made}");
        }
        EventKind::Duplicated { job_id }
        | EventKind::WaitingChildren { job_id }
        | EventKind::Stalled { job_id } => id(out, job_id),
        EventKind::Deduplicated {
            job_id,
            deduplication_id,
            deduplicated_job_id,
        } => {
            id(out, job_id);
            out.push_str(",\"deduplicationId\":");
            push_json_str(out, deduplication_id);
            out.push_str(",\"deduplicatedJobId\":");
            push_json_str(out, deduplicated_job_id);
        }
        EventKind::Cleaned { count } => {
            let _ = write!(out, "\"count\":{count}");
        }
        EventKind::LocksRenewed { holder, job_ids }
        | EventKind::LockRenewalFailed { holder, job_ids } => {
            let _ = write!(out, "\"holder\":{holder},\"jobIds\":[");
            for (i, id) in job_ids.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                push_json_str(out, id);
            }
            out.push(']');
        }
        EventKind::Drained | EventKind::Paused | EventKind::Resumed => {}
    }
    out.push_str("}]");
}

/// Appends `s` as a JSON string literal.
pub(crate) fn push_json_str(out: &mut String, s: &str) {
    out.push('"');
    let mut start = 0;
    for (i, b) in s.bytes().enumerate() {
        let esc: Option<&str> = match b {
            b'"' => Some("\\\""),
            b'\\' => Some("\\\\"),
            b'\n' => Some("\\n"),
            b'\r' => Some("\\r"),
            b'\t' => Some("\\t"),
            0..=0x1f => None,
            _ => continue,
        };
        out.push_str(&s[start..i]);
        match esc {
            Some(e) => out.push_str(e),
            None => {
                let _ = write!(out, "\\u{b:04x}");
            }
        }
        start = i + 1;
    }
    out.push_str(&s[start..]);
    out.push('"');
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use ferroqueue_engine::wire;
    use ferroqueue_engine::JobOptions;
    use serde_json::Value;

    use super::*;

    /// Fields a pulled record leaves out at their defaults.
    const DEFAULTED: [&str; 9] = [
        "opts",
        "progress",
        "returnvalue",
        "failedReason",
        "stacktrace",
        "attemptsMade",
        "delay",
        "priority",
        "finishedOn",
    ];

    fn record(j: &Job, for_worker: bool) -> Value {
        let mut s = String::new();
        JsonWire.record(j, for_worker, &mut s);
        serde_json::from_str(&s).expect("a record is JSON")
    }

    #[test]
    fn pulled_records_leave_defaults_out_and_full_records_keep_them() {
        let j = Job::new(9, Arc::from("n"), "1".into(), &JobOptions::defaults(), 5);
        let slim = record(&j, true);
        let full = record(&j, false);
        for field in DEFAULTED {
            assert!(slim.get(field).is_none(), "{field} in {slim}");
            assert!(full.get(field).is_some(), "{field} missing in {full}");
        }
        assert_eq!(slim["timestamp"], 5);
        assert_eq!(slim["attemptsStarted"], 0);
        assert!(full.get("token").is_none(), "only workers get tokens");
    }

    #[test]
    fn records_are_json_with_every_text_escaped() {
        let opts = JobOptions::defaults();
        let mut j = Job::new(3, Arc::from("em\"ail"), "{\"a\":1}".into(), &opts, 1000);
        j.extra_mut().failed_reason = Some("bad\n\u{1}thing\\ \u{7f} é".into());
        j.extra_mut().stacktrace.push("at x\t".into());
        j.lock = 11;
        let v = record(&j, true);
        assert_eq!(v["id"], 3, "worker records carry auto ids as numbers");
        assert_eq!(v["name"], "em\"ail");
        assert_eq!(v["data"]["a"], 1);
        assert_eq!(v["failedReason"], "bad\n\u{1}thing\\ \u{7f} é");
        assert_eq!(v["processedOn"], Value::Null);
        assert_eq!(v["token"], 11);
        assert_eq!(v["stacktrace"][0], "at x\t");
        assert_eq!(
            record(&j, false)["id"],
            "3",
            "full records carry ids as strings"
        );
    }

    #[test]
    fn events_are_bullmq_payloads() {
        let q: Arc<str> = Arc::from("ma\"il");
        let ev = |kind| Event {
            queue: q.clone(),
            kind,
        };
        let evs = vec![
            ev(EventKind::Completed {
                job_id: "1".into(),
                returnvalue: "{\"ok\":true}".into(),
            }),
            ev(EventKind::Failed {
                job_id: "2".into(),
                failed_reason: "bo\"om".into(),
            }),
            ev(EventKind::Waiting {
                job_id: "3".into(),
                prev: None,
            }),
            ev(EventKind::Cleaned { count: 3 }),
            ev(EventKind::Drained),
        ];
        let text = wire::events(&JsonWire, &evs);
        let v: Value = serde_json::from_str(&text).expect("events are JSON");
        assert_eq!(v[0][0], "ma\"il");
        assert_eq!(v[0][1], "completed");
        assert_eq!(v[0][2]["returnvalue"]["ok"], true);
        assert_eq!(v[0][2]["prev"], "active");
        assert_eq!(v[1][2]["failedReason"], "bo\"om");
        assert!(v[2][2].get("prev").is_none());
        assert_eq!(v[3][2]["count"], 3);
        assert_eq!(v[4][1], "drained");
        assert_eq!(v[4][2], serde_json::json!({}));
    }
}
