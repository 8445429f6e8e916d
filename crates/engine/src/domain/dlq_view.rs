//! The DLQ seen through a queue's failed job records (`domain/dlq.rs`): entries, their filter,
//! stats and the automatic retries due. Every backend answers failed jobs as records (the
//! [`crate::Wire`]'s JSON, which carries `history`), so these views are computed once, here,
//! for all of them.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};

use super::dlq::{retries_of, Attempt, DlqConfig, DlqReason};
use crate::error::{EngineError, Result};

/// Which entries a DLQ call is about (`getDlq`, `retryDlqByFilter`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DlqFilter {
    pub reason: Option<DlqReason>,
    /// Entries that entered at least this many ms ago.
    pub older_than: Option<u64>,
    /// Entries that entered at most this many ms ago.
    pub newer_than: Option<u64>,
    /// One job (`retryDlq(id)`).
    pub id: Option<String>,
    /// Matching entries skipped, newest first.
    pub offset: usize,
    /// Matching entries answered at most (`None`: all).
    pub limit: Option<usize>,
}

impl DlqFilter {
    /// Reads a filter given as a JSON object (`reason`, `olderThan`, `newerThan`, `offset`,
    /// `limit`; each optional), naming what it refuses.
    pub fn parse(text: &str) -> Result<DlqFilter> {
        let v: Value = serde_json::from_str(text)
            .map_err(|e| EngineError::type_error("filter", format!("is not JSON: {e}")))?;
        let obj = v
            .as_object()
            .ok_or_else(|| EngineError::type_error("filter", "must be an object"))?;
        let mut f = DlqFilter::default();
        for (k, val) in obj {
            let name = format!("filter.{k}");
            let count = |val: &Value| {
                val.as_u64().ok_or_else(|| {
                    EngineError::range(&name, format!("must be a non-negative integer, got {val}"))
                })
            };
            match k.as_str() {
                "reason" => {
                    let s = val
                        .as_str()
                        .ok_or_else(|| EngineError::type_error(&name, "must be a string"))?;
                    let r = DlqReason::parse(s).ok_or_else(|| {
                        let names: Vec<&str> = DlqReason::ALL.iter().map(|r| r.as_str()).collect();
                        EngineError::range(
                            &name,
                            format!("must be one of {}, got {s:?}", names.join(", ")),
                        )
                    })?;
                    f.reason = Some(r);
                }
                "olderThan" => f.older_than = Some(count(val)?),
                "newerThan" => f.newer_than = Some(count(val)?),
                "offset" => f.offset = usize::try_from(count(val)?).unwrap_or(usize::MAX),
                "limit" => f.limit = Some(usize::try_from(count(val)?).unwrap_or(usize::MAX)),
                _ => {
                    return Err(EngineError::Unsupported {
                        option: name,
                        reason: "is not a DLQ filter (reason, olderThan, newerThan, offset, \
                                 limit)"
                            .into(),
                    })
                }
            }
        }
        Ok(f)
    }

    /// A filter of the one job `id`.
    pub fn of_id(id: &str) -> DlqFilter {
        DlqFilter {
            id: Some(id.to_string()),
            ..DlqFilter::default()
        }
    }

    fn matches(&self, e: &Entry<'_>, now: u64) -> bool {
        let age = now.saturating_sub(e.entered_at);
        self.reason.is_none_or(|r| r == e.reason)
            && self.older_than.is_none_or(|t| age >= t)
            && self.newer_than.is_none_or(|t| age <= t)
            && self.id.as_ref().is_none_or(|id| *id == e.id)
    }
}

/// What an entry reads from its job's record (every other field is skipped unparsed).
#[derive(Deserialize)]
struct Facts<'a> {
    #[serde(borrow)]
    id: &'a RawValue,
    #[serde(rename = "finishedOn", default)]
    finished_on: Option<u64>,
    #[serde(rename = "failedReason", default, borrow)]
    failed_reason: Option<&'a RawValue>,
    #[serde(default)]
    history: Vec<Attempt>,
}

/// One DLQ entry: a failed job (its record, borrowed from the records' text) and what its
/// history says.
#[derive(Debug, Clone)]
pub struct Entry<'a> {
    pub id: String,
    pub reason: DlqReason,
    pub history: Vec<Attempt>,
    pub entered_at: u64,
    pub expires_at: u64,
    pub next_retry_at: Option<u64>,
    pub retries: u32,
    /// The job's record, as JSON text.
    pub record: &'a RawValue,
    error: Option<&'a RawValue>,
}

impl<'a> Entry<'a> {
    fn of(record: &'a RawValue, config: &DlqConfig) -> Result<Entry<'a>> {
        let facts: Facts<'a> = serde_json::from_str(record.get())
            .map_err(|e| EngineError::Internal(format!("a failed job's record: {e}")))?;
        let raw_id = facts.id.get();
        let id = if raw_id.starts_with('"') {
            serde_json::from_str::<String>(raw_id).unwrap_or_default()
        } else {
            raw_id.to_string()
        };
        let entered_at = facts.finished_on.unwrap_or(0);
        let retries = retries_of(&facts.history);
        Ok(Entry {
            id,
            reason: DlqReason::of(&facts.history),
            entered_at,
            expires_at: config.expires_at(entered_at),
            next_retry_at: config.next_retry_at(entered_at, retries),
            retries,
            history: facts.history,
            record,
            error: facts.failed_reason,
        })
    }
}

/// An attempt as `getDlq` answers it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AttemptOut<'a> {
    attempt: u32,
    started_at: u64,
    failed_at: u64,
    duration: u64,
    error: &'a str,
    kind: &'static str,
    #[serde(rename = "final")]
    last: bool,
}

/// An entry as `getDlq` answers it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct EntryOut<'a> {
    job: &'a RawValue,
    reason: &'static str,
    error: Option<&'a RawValue>,
    attempts: Vec<AttemptOut<'a>>,
    entered_at: u64,
    expires_at: u64,
    next_retry_at: Option<u64>,
    retries: u32,
}

impl Entry<'_> {
    fn out(&self) -> EntryOut<'_> {
        let attempts = self
            .history
            .iter()
            .map(|a| AttemptOut {
                attempt: a.attempt,
                started_at: a.started_at,
                failed_at: a.failed_at,
                duration: a.failed_at.saturating_sub(a.started_at),
                error: &a.error,
                kind: a.kind.as_str(),
                last: a.last,
            })
            .collect();
        EntryOut {
            job: self.record,
            reason: self.reason.as_str(),
            error: self.error,
            attempts,
            entered_at: self.entered_at,
            expires_at: self.expires_at,
            next_retry_at: self.next_retry_at,
            retries: self.retries,
        }
    }
}

/// The entries of a JSON array of failed job records (newest first, as they come), borrowing
/// the records from its text.
pub fn entries_of<'a>(records: &'a str, config: &DlqConfig) -> Result<Vec<Entry<'a>>> {
    let list: Vec<&'a RawValue> = serde_json::from_str(records)
        .map_err(|e| EngineError::Internal(format!("failed job records: {e}")))?;
    list.into_iter().map(|r| Entry::of(r, config)).collect()
}

/// The entries `filter` selects (its offset and limit applied), newest first.
pub fn select<'e, 'a>(
    entries: &'e [Entry<'a>],
    filter: &DlqFilter,
    now: u64,
) -> Vec<&'e Entry<'a>> {
    entries
        .iter()
        .filter(|e| filter.matches(e, now))
        .skip(filter.offset)
        .take(filter.limit.unwrap_or(usize::MAX))
        .collect()
}

/// Selected entries as `getDlq` answers them: a JSON array.
pub fn entries_json(selected: &[&Entry]) -> String {
    let out: Vec<EntryOut> = selected.iter().map(|e| e.out()).collect();
    serde_json::to_string(&out).unwrap_or_else(|_| "[]".into())
}

/// `getDlqStats`: totals by reason, the oldest and newest entry, automatic retries pending.
pub fn stats_json(entries: &[Entry]) -> String {
    let mut by_reason = Map::new();
    for r in DlqReason::ALL {
        let n = entries.iter().filter(|e| e.reason == r).count();
        by_reason.insert(r.as_str().into(), n.into());
    }
    let entered = entries.iter().map(|e| e.entered_at);
    let next_retry = entries.iter().filter_map(|e| e.next_retry_at).min();
    json!({
        "total": entries.len(),
        "byReason": by_reason,
        "oldestEnteredAt": entered.clone().min(),
        "newestEnteredAt": entered.max(),
        "pendingAutoRetries": entries.iter().filter(|e| e.next_retry_at.is_some()).count(),
        "nextAutoRetryAt": next_retry,
    })
    .to_string()
}

/// The entries whose automatic retry is due at `now`, and the earliest one not yet due.
pub fn due_retries(entries: &[Entry], now: u64) -> (Vec<String>, Option<u64>) {
    let mut due = Vec::new();
    let mut next = None::<u64>;
    for e in entries {
        match e.next_retry_at {
            Some(at) if at <= now => due.push(e.id.clone()),
            Some(at) => next = Some(next.map_or(at, |n| n.min(at))),
            None => {}
        }
    }
    (due, next)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: u64, finished: u64, kind: &str, last: bool) -> Value {
        json!({
            "id": id.to_string(),
            "finishedOn": finished,
            "failedReason": format!("boom {id}"),
            "history": [{"attempt": 1, "startedAt": finished - 7, "failedAt": finished,
                         "error": format!("boom {id}"), "kind": kind, "final": last}],
        })
    }

    fn records(list: &[Value]) -> String {
        Value::Array(list.to_vec()).to_string()
    }

    #[test]
    fn filters_select_by_reason_age_and_page() {
        let text = records(&[
            record(4, 900, "timeout", true),
            record(3, 800, "error", true),
            record(2, 500, "stalled", true),
            record(1, 100, "error", false),
        ]);
        let all = entries_of(&text, &DlqConfig::default()).expect("records");
        let ids = |f: &DlqFilter| -> Vec<String> {
            select(&all, f, 1_000)
                .iter()
                .map(|e| e.id.clone())
                .collect()
        };
        assert_eq!(ids(&DlqFilter::default()), ["4", "3", "2", "1"]);
        let f = DlqFilter::parse(r#"{"reason":"max_attempts_exceeded"}"#).expect("filter");
        assert_eq!(ids(&f), ["3"]);
        let f = DlqFilter::parse(r#"{"reason":"unknown"}"#).expect("filter");
        assert_eq!(ids(&f), ["1"]);
        let f = DlqFilter::parse(r#"{"olderThan":200}"#).expect("filter");
        assert_eq!(ids(&f), ["3", "2", "1"]);
        let f = DlqFilter::parse(r#"{"newerThan":500}"#).expect("filter");
        assert_eq!(ids(&f), ["4", "3", "2"]);
        let f = DlqFilter::parse(r#"{"offset":1,"limit":2}"#).expect("filter");
        assert_eq!(ids(&f), ["3", "2"]);
        assert_eq!(ids(&DlqFilter::of_id("2")), ["2"]);
        let json: Value =
            serde_json::from_str(&entries_json(&select(&all, &DlqFilter::default(), 0)))
                .expect("entries");
        let first = &json[0];
        assert_eq!(first["reason"], "timeout");
        assert_eq!(first["error"], "boom 4");
        assert_eq!(first["attempts"][0]["duration"], 7);
        assert_eq!(
            first["expiresAt"],
            900 + crate::domain::dlq::DEFAULT_MAX_AGE
        );
        assert_eq!(first["nextRetryAt"], Value::Null);
        assert_eq!(first["job"]["id"], "4");
    }

    #[test]
    fn a_bad_filter_names_its_field() {
        for (text, names) in [
            (r#"{"reason":"lost"}"#, "filter.reason"),
            (r#"{"reason":3}"#, "filter.reason"),
            (r#"{"limit":-1}"#, "filter.limit"),
            (r#"{"olderThan":1.5}"#, "filter.olderThan"),
            (r#"{"state":"failed"}"#, "filter.state"),
            ("7", "filter"),
        ] {
            let e = DlqFilter::parse(text).expect_err(text);
            assert!(e.to_string().contains(names), "{text}: {e}");
        }
    }

    #[test]
    fn stats_and_due_retries_follow_the_config() {
        let config = DlqConfig {
            auto_retry: true,
            auto_retry_interval: 50,
            ..DlqConfig::default()
        };
        let text = records(&[
            record(2, 900, "error", true),
            record(1, 100, "stalled", true),
        ]);
        let all = entries_of(&text, &config).expect("records");
        let (due, next) = due_retries(&all, 200);
        assert_eq!(due, ["1"]);
        assert_eq!(next, Some(950));
        let stats: Value = serde_json::from_str(&stats_json(&all)).expect("stats");
        assert_eq!(stats["total"], 2);
        assert_eq!(stats["byReason"]["stalled"], 1);
        assert_eq!(stats["byReason"]["max_attempts_exceeded"], 1);
        assert_eq!(stats["byReason"]["worker_lost"], 0);
        assert_eq!(stats["oldestEnteredAt"], 100);
        assert_eq!(stats["newestEnteredAt"], 900);
        assert_eq!(stats["pendingAutoRetries"], 2);
        assert_eq!(stats["nextAutoRetryAt"], 150);
    }
}
