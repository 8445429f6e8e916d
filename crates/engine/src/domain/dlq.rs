//! The dead-letter queue (spec: DLQ flow). A queue's DLQ is its failed jobs: a job that fails
//! for good stays `failed` (BullMQ's getters see it as before) and is, at the same time, a DLQ
//! entry. What an entry adds to the job is its *history*: one [`Attempt`] per failed try,
//! recorded on the job as it fails (by every backend) and kept with it across retries and
//! restarts. The entry's reason, its retries from the DLQ and its next automatic retry are all
//! read from that history and the queue's [`DlqConfig`], so nothing else is stored per job.

use serde::{Deserialize, Serialize};

use crate::error::{EngineError, Result};

/// Newest attempts kept in a job's history.
pub const HISTORY_LIMIT: usize = 100;

/// How a failed attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AttemptEnd {
    /// The processor threw (or `moveToFailed`).
    Error,
    /// The job's `timeout` ran out.
    Timeout,
    /// Its holder went away once too often (`maxStalledCount`).
    Stalled,
    /// Failed whatever attempts remained (`UnrecoverableError`).
    Unrecoverable,
    /// The worker thread or child process that ran it died (`Worker` with a processor file).
    #[serde(rename = "worker_lost")]
    WorkerLost,
}

impl AttemptEnd {
    /// How a failure reported by a worker ended its attempt.
    pub fn of_failure(unrecoverable: bool, timed_out: bool, lost: bool) -> AttemptEnd {
        if lost {
            AttemptEnd::WorkerLost
        } else if timed_out {
            AttemptEnd::Timeout
        } else if unrecoverable {
            AttemptEnd::Unrecoverable
        } else {
            AttemptEnd::Error
        }
    }

    /// The name stored and shown (`kind` of an attempt).
    pub fn as_str(self) -> &'static str {
        match self {
            AttemptEnd::Error => "error",
            AttemptEnd::Timeout => "timeout",
            AttemptEnd::Stalled => "stalled",
            AttemptEnd::Unrecoverable => "unrecoverable",
            AttemptEnd::WorkerLost => "worker_lost",
        }
    }
}

/// One failed attempt of a job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Attempt {
    /// Which attempt (1 for the first; counts again from 1 after a retry from the DLQ).
    pub attempt: u32,
    /// When it started (ms; 0 when unknown).
    pub started_at: u64,
    /// When it failed (ms).
    pub failed_at: u64,
    pub error: Box<str>,
    pub kind: AttemptEnd,
    /// The failure that sent the job to the DLQ (no retry followed).
    #[serde(rename = "final", default)]
    pub last: bool,
}

/// Appends `a` to a history of at most [`HISTORY_LIMIT`] attempts. Over it, the oldest attempt
/// that was not final goes: final ones count the job's returns from the DLQ (see
/// [`retries_of`]), which bound its automatic retries.
pub fn push_attempt(history: &mut Vec<Attempt>, a: Attempt) {
    history.push(a);
    if history.len() > HISTORY_LIMIT {
        let oldest = history.iter().position(|a| !a.last).unwrap_or(0);
        history.remove(oldest);
    }
}

/// A history as stored: a JSON array of attempts.
pub fn history_json(history: &[Attempt]) -> String {
    serde_json::to_string(history).unwrap_or_else(|_| "[]".into())
}

/// Reads a stored history; a malformed one reads as empty (the job stays, its reason `unknown`).
pub fn parse_history(text: &str) -> Vec<Attempt> {
    serde_json::from_str(text).unwrap_or_default()
}

/// Why a job is in the DLQ (the spec's reasons).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DlqReason {
    /// Failed by `UnrecoverableError`, whatever attempts remained.
    ExplicitFail,
    /// Its last allowed attempt failed.
    MaxAttemptsExceeded,
    /// Its last attempt ran past the job's `timeout`.
    Timeout,
    /// It stalled more than `maxStalledCount` times.
    Stalled,
    /// Not produced by ferroqueue today (jobs have no time to live); accepted by filters.
    TtlExpired,
    /// The worker thread or child process that ran its last attempt died.
    WorkerLost,
    /// Failed without a recorded attempt: a flow parent failed by its child, or a job that
    /// failed before histories were kept.
    Unknown,
}

impl DlqReason {
    /// Every reason, in the order stats list them.
    pub const ALL: [DlqReason; 7] = [
        DlqReason::ExplicitFail,
        DlqReason::MaxAttemptsExceeded,
        DlqReason::Timeout,
        DlqReason::Stalled,
        DlqReason::TtlExpired,
        DlqReason::WorkerLost,
        DlqReason::Unknown,
    ];

    /// The spec's name.
    pub fn as_str(self) -> &'static str {
        match self {
            DlqReason::ExplicitFail => "explicit_fail",
            DlqReason::MaxAttemptsExceeded => "max_attempts_exceeded",
            DlqReason::Timeout => "timeout",
            DlqReason::Stalled => "stalled",
            DlqReason::TtlExpired => "ttl_expired",
            DlqReason::WorkerLost => "worker_lost",
            DlqReason::Unknown => "unknown",
        }
    }

    /// Reads a reason name.
    pub fn parse(s: &str) -> Option<DlqReason> {
        DlqReason::ALL.into_iter().find(|r| r.as_str() == s)
    }

    /// The reason of a failed job with this history: how its final attempt ended.
    pub fn of(history: &[Attempt]) -> DlqReason {
        match history.last() {
            Some(a) if a.last => match a.kind {
                AttemptEnd::Error => DlqReason::MaxAttemptsExceeded,
                AttemptEnd::Timeout => DlqReason::Timeout,
                AttemptEnd::Stalled => DlqReason::Stalled,
                AttemptEnd::Unrecoverable => DlqReason::ExplicitFail,
                AttemptEnd::WorkerLost => DlqReason::WorkerLost,
            },
            _ => DlqReason::Unknown,
        }
    }
}

/// How many times a failed job went back from the DLQ (by a retry of any kind): its final
/// attempts before the current one.
pub fn retries_of(history: &[Attempt]) -> u32 {
    let finals = history.iter().filter(|a| a.last).count() as u32;
    finals.saturating_sub(1)
}

/// Seven days, the spec's default `maxAge`.
pub const DEFAULT_MAX_AGE: u64 = 7 * 24 * 3_600_000;
/// The spec's default `maxEntries`.
pub const DEFAULT_MAX_ENTRIES: u64 = 10_000;
/// The first automatic retry's wait by default (one hour), doubled for each later one.
pub const DEFAULT_AUTO_RETRY_INTERVAL: u64 = 3_600_000;
/// Automatic retries of one entry by default.
pub const DEFAULT_MAX_AUTO_RETRIES: u32 = 3;
/// Most automatic retries of one entry: a history keeps more final attempts than that, so their
/// count never stops short (`push_attempt`).
pub const MAX_AUTO_RETRIES: u32 = 50;
/// Largest duration accepted (ms): JavaScript's safe integers.
const MAX_MS: u64 = (1 << 53) - 1;

/// A queue's DLQ settings (`setDlqConfig`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DlqConfig {
    /// Retry entries automatically, after `auto_retry_interval` ms, doubled for each later retry.
    pub auto_retry: bool,
    pub auto_retry_interval: u64,
    /// Automatic retries of one entry at most.
    pub max_auto_retries: u32,
    /// An entry is removed this many ms after it entered.
    pub max_age: u64,
    /// The oldest entries beyond this many are removed.
    pub max_entries: u64,
}

impl Default for DlqConfig {
    fn default() -> Self {
        DlqConfig {
            auto_retry: false,
            auto_retry_interval: DEFAULT_AUTO_RETRY_INTERVAL,
            max_auto_retries: DEFAULT_MAX_AUTO_RETRIES,
            max_age: DEFAULT_MAX_AGE,
            max_entries: DEFAULT_MAX_ENTRIES,
        }
    }
}

impl DlqConfig {
    /// This configuration with the fields of `change` (a JSON object of `setDlqConfig`'s
    /// fields, each optional) applied; refuses unknown fields and bad values, naming them.
    pub fn merged(self, change: &str) -> Result<DlqConfig> {
        let v: serde_json::Value = serde_json::from_str(change)
            .map_err(|e| EngineError::type_error("dlqConfig", format!("is not JSON: {e}")))?;
        let obj = v
            .as_object()
            .ok_or_else(|| EngineError::type_error("dlqConfig", "must be an object"))?;
        let mut c = self;
        for (k, val) in obj {
            let name = format!("dlqConfig.{k}");
            match k.as_str() {
                "autoRetry" => {
                    c.auto_retry = val
                        .as_bool()
                        .ok_or_else(|| EngineError::type_error(&name, "must be a boolean"))?;
                }
                "autoRetryInterval" => c.auto_retry_interval = ms(&name, val, 1, MAX_MS)?,
                "maxAutoRetries" => {
                    c.max_auto_retries = ms(&name, val, 0, u64::from(MAX_AUTO_RETRIES))? as u32;
                }
                "maxAge" => c.max_age = ms(&name, val, 1, MAX_MS)?,
                "maxEntries" => c.max_entries = ms(&name, val, 1, MAX_MS)?,
                _ => {
                    return Err(EngineError::Unsupported {
                        option: name,
                        reason: "is not a DLQ setting (autoRetry, autoRetryInterval, \
                                 maxAutoRetries, maxAge, maxEntries)"
                            .into(),
                    })
                }
            }
        }
        Ok(c)
    }

    /// As stored and shown (`getDlqConfig`).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Reads a stored configuration; `None` (or a malformed one) is the default.
    pub fn stored(text: Option<&str>) -> DlqConfig {
        text.and_then(|t| serde_json::from_str(t).ok())
            .unwrap_or_default()
    }

    /// When an entry that entered at `entered_at` expires.
    pub fn expires_at(&self, entered_at: u64) -> u64 {
        entered_at.saturating_add(self.max_age)
    }

    /// When an entry that entered at `entered_at`, after `retries` returns from the DLQ, is
    /// retried automatically: the interval doubles with each retry; `None` when automatic
    /// retries are off or spent.
    pub fn next_retry_at(&self, entered_at: u64, retries: u32) -> Option<u64> {
        if !self.auto_retry || retries >= self.max_auto_retries {
            return None;
        }
        let factor = 1u64.checked_shl(retries.min(62)).unwrap_or(u64::MAX);
        Some(entered_at.saturating_add(self.auto_retry_interval.saturating_mul(factor)))
    }
}

/// A non-negative integer in `lo..=hi`, or an error naming `name`.
fn ms(name: &str, v: &serde_json::Value, lo: u64, hi: u64) -> Result<u64> {
    let n = v.as_u64().or_else(|| {
        v.as_f64()
            .filter(|f| f.fract() == 0.0 && *f >= 0.0)
            .map(|f| f as u64)
    });
    match n {
        Some(n) if (lo..=hi).contains(&n) => Ok(n),
        Some(_) => Err(EngineError::range(
            name,
            format!("must be an integer in {lo}..={hi}, got {v}"),
        )),
        None if v.is_number() => Err(EngineError::range(
            name,
            format!("must be an integer in {lo}..={hi}, got {v}"),
        )),
        None => Err(EngineError::type_error(
            name,
            format!("must be a number, got {v}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt(n: u32, kind: AttemptEnd, last: bool) -> Attempt {
        Attempt {
            attempt: n,
            started_at: 10 * u64::from(n),
            failed_at: 10 * u64::from(n) + 5,
            error: format!("e{n}").into(),
            kind,
            last,
        }
    }

    #[test]
    fn the_reason_is_how_the_final_attempt_ended() {
        assert_eq!(DlqReason::of(&[]), DlqReason::Unknown);
        let retried = [attempt(1, AttemptEnd::Timeout, false)];
        assert_eq!(DlqReason::of(&retried), DlqReason::Unknown);
        for (kind, reason) in [
            (AttemptEnd::Error, DlqReason::MaxAttemptsExceeded),
            (AttemptEnd::Timeout, DlqReason::Timeout),
            (AttemptEnd::Stalled, DlqReason::Stalled),
            (AttemptEnd::Unrecoverable, DlqReason::ExplicitFail),
        ] {
            let h = [attempt(1, AttemptEnd::Error, false), attempt(2, kind, true)];
            assert_eq!(DlqReason::of(&h), reason);
        }
        for r in DlqReason::ALL {
            assert_eq!(DlqReason::parse(r.as_str()), Some(r));
        }
        assert_eq!(DlqReason::parse("nope"), None);
    }

    #[test]
    fn retries_count_earlier_final_attempts() {
        let mut h = vec![attempt(1, AttemptEnd::Error, true)];
        assert_eq!(retries_of(&h), 0);
        h.push(attempt(1, AttemptEnd::Error, false));
        h.push(attempt(2, AttemptEnd::Error, true));
        assert_eq!(retries_of(&h), 1);
    }

    #[test]
    fn a_history_keeps_its_final_and_newest_attempts_and_round_trips() {
        let mut h = Vec::new();
        push_attempt(&mut h, attempt(1, AttemptEnd::Error, true));
        for n in 2..=(HISTORY_LIMIT as u32 + 5) {
            push_attempt(&mut h, attempt(n, AttemptEnd::Error, n % 40 == 0));
        }
        assert_eq!(h.len(), HISTORY_LIMIT);
        let finals: Vec<u32> = h.iter().filter(|a| a.last).map(|a| a.attempt).collect();
        assert_eq!(finals, [1, 40, 80], "final attempts stay");
        assert_eq!(retries_of(&h), 2);
        assert_eq!(h[1].attempt, 7, "then the newest others");
        assert_eq!(h.last().map(|a| a.attempt), Some(HISTORY_LIMIT as u32 + 5));
        let text = history_json(&h);
        assert!(text.contains(r#""kind":"error","final":false"#), "{text}");
        assert_eq!(parse_history(&text), h);
        assert!(parse_history("not json").is_empty());
    }

    #[test]
    fn auto_retries_double_their_wait_until_spent() {
        let c = DlqConfig {
            auto_retry: true,
            auto_retry_interval: 100,
            max_auto_retries: 3,
            ..DlqConfig::default()
        };
        assert_eq!(c.next_retry_at(1_000, 0), Some(1_100));
        assert_eq!(c.next_retry_at(1_000, 1), Some(1_200));
        assert_eq!(c.next_retry_at(1_000, 2), Some(1_400));
        assert_eq!(c.next_retry_at(1_000, 3), None);
        assert_eq!(DlqConfig::default().next_retry_at(1_000, 0), None);
        let huge = DlqConfig {
            max_auto_retries: u32::MAX,
            ..c
        };
        assert_eq!(huge.next_retry_at(1, 100), Some(u64::MAX));
        assert_eq!(c.expires_at(5), 5 + DEFAULT_MAX_AGE);
    }

    #[test]
    fn a_config_change_names_what_it_refuses() {
        let c = DlqConfig::default()
            .merged(r#"{"autoRetry":true,"maxEntries":5,"maxAge":1000}"#)
            .expect("valid");
        assert!(c.auto_retry);
        assert_eq!((c.max_entries, c.max_age), (5, 1000));
        assert_eq!(c.max_auto_retries, DEFAULT_MAX_AUTO_RETRIES);
        assert_eq!(DlqConfig::stored(Some(&c.to_json())), c);
        assert_eq!(DlqConfig::stored(Some("{bad")), DlqConfig::default());
        for (change, code, names) in [
            (
                r#"{"maxEntries":0}"#,
                "ERR_INVALID_OPTION",
                "dlqConfig.maxEntries",
            ),
            (r#"{"maxAge":-1}"#, "ERR_INVALID_OPTION", "dlqConfig.maxAge"),
            (
                r#"{"maxAge":1.5}"#,
                "ERR_INVALID_OPTION",
                "dlqConfig.maxAge",
            ),
            (
                r#"{"autoRetry":1}"#,
                "ERR_INVALID_OPTION",
                "dlqConfig.autoRetry",
            ),
            (
                r#"{"maxAge":"1"}"#,
                "ERR_INVALID_OPTION",
                "dlqConfig.maxAge",
            ),
            (r#"{"ttl":1}"#, "ERR_UNSUPPORTED_OPTION", "dlqConfig.ttl"),
            ("[]", "ERR_INVALID_OPTION", "dlqConfig"),
        ] {
            let e = DlqConfig::default().merged(change).expect_err(change);
            assert_eq!(e.code(), code, "{change}");
            assert!(e.to_string().contains(names), "{change}: {e}");
        }
    }
}
