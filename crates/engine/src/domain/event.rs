//! Events a queue emits on its transitions (BullMQ's QueueEvents names and payloads), and their
//! JSON form for the binding: `["queue","event",{payload}]`.

use std::fmt::Write as _;
use std::sync::Arc;

use super::job::push_json_str;

/// What happened.
#[derive(Debug, Clone, PartialEq)]
pub enum EventKind {
    Added {
        job_id: String,
        name: Arc<str>,
    },
    Waiting {
        job_id: String,
        prev: Option<&'static str>,
    },
    /// `delay` is the timestamp (ms) at which the job becomes ready, as in BullMQ.
    Delayed {
        job_id: String,
        delay: u64,
    },
    Active {
        job_id: String,
        prev: &'static str,
    },
    Progress {
        job_id: String,
        data: Box<str>,
    },
    Completed {
        job_id: String,
        returnvalue: Box<str>,
    },
    Failed {
        job_id: String,
        failed_reason: Box<str>,
    },
    RetriesExhausted {
        job_id: String,
        attempts_made: u32,
    },
    Removed {
        job_id: String,
        prev: &'static str,
    },
    Duplicated {
        job_id: String,
    },
    Cleaned {
        count: usize,
    },
    Drained,
    Paused,
    Resumed,
}

/// An event of one queue.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub queue: Arc<str>,
    pub kind: EventKind,
}

impl EventKind {
    /// BullMQ's event name.
    pub fn name(&self) -> &'static str {
        match self {
            EventKind::Added { .. } => "added",
            EventKind::Waiting { .. } => "waiting",
            EventKind::Delayed { .. } => "delayed",
            EventKind::Active { .. } => "active",
            EventKind::Progress { .. } => "progress",
            EventKind::Completed { .. } => "completed",
            EventKind::Failed { .. } => "failed",
            EventKind::RetriesExhausted { .. } => "retries-exhausted",
            EventKind::Removed { .. } => "removed",
            EventKind::Duplicated { .. } => "duplicated",
            EventKind::Cleaned { .. } => "cleaned",
            EventKind::Drained => "drained",
            EventKind::Paused => "paused",
            EventKind::Resumed => "resumed",
        }
    }
}

impl Event {
    /// Appends `["queue","name",{payload}]` to `out`.
    pub fn write_json(&self, out: &mut String) {
        out.push('[');
        push_json_str(out, &self.queue);
        out.push(',');
        push_json_str(out, self.kind.name());
        out.push_str(",{");
        let id = |out: &mut String, id: &str| {
            out.push_str("\"jobId\":");
            push_json_str(out, id);
        };
        match &self.kind {
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
            EventKind::Duplicated { job_id } => id(out, job_id),
            EventKind::Cleaned { count } => {
                let _ = write!(out, "\"count\":{count}");
            }
            EventKind::Drained | EventKind::Paused | EventKind::Resumed => {}
        }
        out.push_str("}]");
    }
}

/// Appends a JSON array of events to `out`.
pub fn write_events_json(events: &[Event], out: &mut String) {
    out.push('[');
    for (i, e) in events.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        e.write_json(out);
    }
    out.push(']');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_serialise_as_bullmq_payloads() {
        let q: Arc<str> = Arc::from("mail");
        let evs = vec![
            Event {
                queue: q.clone(),
                kind: EventKind::Completed {
                    job_id: "1".into(),
                    returnvalue: "{\"ok\":true}".into(),
                },
            },
            Event {
                queue: q.clone(),
                kind: EventKind::Failed {
                    job_id: "2".into(),
                    failed_reason: "bo\"om".into(),
                },
            },
            Event {
                queue: q.clone(),
                kind: EventKind::Cleaned { count: 3 },
            },
            Event {
                queue: q,
                kind: EventKind::Drained,
            },
        ];
        let mut s = String::new();
        write_events_json(&evs, &mut s);
        let v: serde_json::Value = serde_json::from_str(&s).unwrap();
        assert_eq!(v[0][1], "completed");
        assert_eq!(v[0][2]["returnvalue"]["ok"], true);
        assert_eq!(v[1][2]["failedReason"], "bo\"om");
        assert_eq!(v[2][2]["count"], 3);
        assert_eq!(v[3][1], "drained");
    }
}
