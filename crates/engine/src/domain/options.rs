//! Job options in BullMQ's shape (`delay`, `priority`, `lifo`, `attempts`, `backoff`,
//! `removeOnComplete`, `removeOnFail`, `jobId`, `keepLogs`, `timestamp`, `timeout`,
//! `deduplication`, `parent` and the four child failure flags, and BullMQ Pro's `group`), parsed
//! from JSON text and validated into [`JobOptions`] (`keepLogs` and `timeout` are only validated:
//! the JS layer applies them, when logging and while a worker runs the job). No option is ignored: a BullMQ option that ferroqueue does not implement yet is
//! refused with `ERR_UNSUPPORTED_OPTION`, a name that is no option at all with
//! `ERR_INVALID_OPTION`; every known one is range-checked and an error names it. Options read
//! back from a file are parsed leniently ([`JobOptions::from_stored_json`]), so a job stored by
//! an older version that took unknown names keeps its policy.

use super::controls::Controls;
use super::dedup::Deduplication;
use super::flow::{on_failure, parse_parent, OnChildFailure};
use super::groups::option::JobGroup;
pub use super::options_raw::RawKeep;
use super::options_raw::{RawBackoff, RawOptions};
use crate::error::{EngineError, Result};

/// Longest job `timeout` in ms: the longest wait a JS timer keeps (2^31 - 1, about 24.8 days).
pub const MAX_TIMEOUT_MS: u32 = 2_147_483_647;

/// Highest priority accepted, as in BullMQ (2^21).
pub const MAX_PRIORITY: u32 = 2_097_152;

/// How long to wait before a retry.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Backoff {
    /// The same wait every time.
    Fixed { delay: u64, jitter: f64 },
    /// `round(delay * 2^(attemptsMade - 1))`.
    Exponential { delay: u64, jitter: f64 },
    /// A type the worker's `settings.backoffStrategy` computes; the worker sends the wait with
    /// the failure (without one, the retry waits nothing).
    Custom,
}

impl Backoff {
    /// The wait in ms after the `attempts_made`-th failure (1-based), before jitter.
    pub fn base_delay(&self, attempts_made: u32) -> u64 {
        match *self {
            Backoff::Custom => 0,
            Backoff::Fixed { delay, .. } => delay,
            Backoff::Exponential { delay, .. } => {
                let exp = attempts_made.saturating_sub(1).min(62);
                let factor = 1u64 << exp;
                delay.saturating_mul(factor)
            }
        }
    }

    /// The wait with jitter applied: uniform in `[d * (1 - jitter), d]`, `unit` in `[0, 1)`.
    pub fn delay_with_jitter(&self, attempts_made: u32, unit: f64) -> u64 {
        let d = self.base_delay(attempts_made);
        let jitter = match *self {
            Backoff::Fixed { jitter, .. } | Backoff::Exponential { jitter, .. } => jitter,
            Backoff::Custom => 0.0,
        };
        if jitter <= 0.0 || d == 0 {
            return d;
        }
        let low = d as f64 * (1.0 - jitter);
        (low + (d as f64 - low) * unit).round() as u64
    }
}

/// Which finished jobs to keep (`removeOnComplete` / `removeOnFail`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeepJobs {
    /// `false`: keep every finished job.
    All,
    /// `true`: delete the job as soon as it finishes.
    None,
    /// Keep at most `count` newest, and only those younger than `age_secs`.
    Bounded {
        count: Option<u64>,
        age_secs: Option<u64>,
    },
}

/// Validated options of one job. `Default` is BullMQ's defaults (one attempt).
#[derive(Debug, Clone, PartialEq)]
pub struct JobOptions {
    pub job_id: Option<Box<str>>,
    pub delay: u64,
    pub priority: u32,
    pub lifo: bool,
    /// Total tries (>= 1).
    pub attempts: u32,
    pub backoff: Option<Backoff>,
    pub remove_on_complete: Option<KeepJobs>,
    pub remove_on_fail: Option<KeepJobs>,
    /// `deduplication`, `group`, `parent` and the child failure rule, when the job has any
    /// (`controls.rs`: read them through its accessors).
    pub controls: Option<Box<Controls>>,
}

/// The job options ferroqueue implements, as BullMQ names them.
pub const JOB_OPTIONS: [&str; 18] = [
    "jobId",
    "delay",
    "priority",
    "lifo",
    "attempts",
    "backoff",
    "removeOnComplete",
    "removeOnFail",
    "keepLogs",
    "timestamp",
    "timeout",
    "deduplication",
    "group",
    "parent",
    "failParentOnFailure",
    "ignoreDependencyOnFailure",
    "removeDependencyOnFailure",
    "continueParentOnFailure",
];

/// BullMQ (and BullMQ Pro) job options that ferroqueue does not implement yet.
pub const UNSUPPORTED_JOB_OPTIONS: [&str; 7] = [
    "repeat",
    "repeatJobKey",
    "debounce",
    "prevMillis",
    "telemetry",
    "sizeLimit",
    "stackTraceLimit",
];

/// The error for an option name ferroqueue does not take: `ERR_UNSUPPORTED_OPTION` for one of
/// BullMQ's that is not implemented yet, `ERR_INVALID_OPTION` for any other name.
pub fn refuse_option(name: &str, unsupported: &[&str], known: &[&str]) -> EngineError {
    if unsupported.contains(&name) {
        EngineError::Unsupported {
            option: name.to_string(),
            reason: "is a BullMQ option that ferroqueue does not support yet".into(),
        }
    } else {
        EngineError::type_error(
            shown(name),
            format!("is not an option; expected one of {}", known.join(", ")),
        )
    }
}

/// A name as an error message quotes it: at most 60 characters.
fn shown(name: &str) -> String {
    match name.char_indices().nth(60) {
        Some((i, _)) => format!("{}…", &name[..i]),
        None => name.to_string(),
    }
}

impl Default for JobOptions {
    fn default() -> Self {
        JobOptions {
            job_id: None,
            delay: 0,
            priority: 0,
            lifo: false,
            attempts: 1,
            backoff: None,
            remove_on_complete: None,
            remove_on_fail: None,
            controls: None,
        }
    }
}

impl JobOptions {
    /// Parses and validates options from JSON text (BullMQ's option object).
    ///
    /// Errors: [`EngineError::InvalidOption`] naming the first bad option or unknown name,
    /// [`EngineError::Unsupported`] for a BullMQ option not implemented yet.
    pub fn from_json(text: &str) -> Result<Self> {
        Self::parse(text, true)
    }

    /// Parses options stored by an earlier run: names that are not options are skipped (an
    /// older version accepted them), everything else is validated as by [`JobOptions::from_json`].
    pub fn from_stored_json(text: &str) -> Result<Self> {
        Self::parse(text, false)
    }

    fn parse(text: &str, strict: bool) -> Result<Self> {
        let raw: RawOptions = serde_json::from_str(text).map_err(|e| {
            EngineError::type_error("opts", format!("are not valid job options: {e}"))
        })?;
        if let (true, Some(name)) = (strict, &raw.other) {
            return Err(refuse_option(name, &UNSUPPORTED_JOB_OPTIONS, &JOB_OPTIONS));
        }
        let mut o = JobOptions::default();
        if let Some(id) = raw.job_id {
            o.job_id = Some(validate_custom_id(&id)?.into());
        }
        if let Some(d) = raw.delay {
            o.delay = non_negative_ms("delay", d)?;
        }
        if let Some(p) = raw.priority {
            o.priority = priority("priority", p)?;
        }
        o.lifo = raw.lifo.unwrap_or(false);
        if let Some(a) = raw.attempts {
            let n = integer_in("attempts", a, 0.0, u32::MAX as f64)? as u32;
            o.attempts = n.max(1);
        }
        if let Some(b) = raw.backoff {
            o.backoff = parse_backoff(b)?;
        }
        if let Some(k) = raw.remove_on_complete {
            o.remove_on_complete = Some(parse_keep("removeOnComplete", k)?);
        }
        if let Some(k) = raw.remove_on_fail {
            o.remove_on_fail = Some(parse_keep("removeOnFail", k)?);
        }
        if let Some(n) = raw.keep_logs {
            integer_in("keepLogs", n, 0.0, u32::MAX as f64)?;
        }
        if let Some(t) = raw.timeout {
            integer_in("timeout", t, 1.0, MAX_TIMEOUT_MS as f64)?;
        }
        if let Some(t) = raw.timestamp {
            non_negative_ms("timestamp", t)?;
        }
        if let Some(d) = raw.deduplication {
            o.controls_mut().deduplication = Some(Deduplication::parse(d)?);
        }
        if let Some(g) = raw.group {
            if raw.priority.is_some() {
                return Err(EngineError::type_error(
                    "priority",
                    "cannot be combined with group; give group.priority instead",
                ));
            }
            let g = JobGroup::parse(g)?;
            o.priority = g.priority;
            o.controls_mut().group = Some(g);
        }
        if let Some(p) = raw.parent {
            o.controls_mut().parent = Some(parse_parent(p)?);
        }
        let flag = |f: Option<bool>| f.unwrap_or(false);
        let on_child_failure = on_failure(
            flag(raw.fail_parent),
            flag(raw.ignore_dependency),
            flag(raw.remove_dependency),
            flag(raw.continue_parent),
        )?;
        if on_child_failure != OnChildFailure::Wait {
            o.controls_mut().on_child_failure = on_child_failure;
        }
        Ok(o)
    }

    /// The defaults: one attempt, no delay, no priority.
    pub fn defaults() -> Self {
        JobOptions::default()
    }
}

/// Checks a custom job id: a non-empty string of at most 1024 bytes that is not a canonical
/// integer (integers are automatic ids) and holds no U+0000 (which PostgreSQL's text cannot
/// hold: refused on every backend, so that an id means the same everywhere). `:` is allowed, as
/// in BullMQ.
pub fn validate_custom_id(id: &str) -> Result<&str> {
    if id.is_empty() {
        return Err(EngineError::range("jobId", "must not be empty"));
    }
    if id.as_bytes().contains(&0) {
        return Err(EngineError::range(
            "jobId",
            "must not contain the character U+0000",
        ));
    }
    if id.len() > 1024 {
        return Err(EngineError::range(
            "jobId",
            "must be at most 1024 bytes long",
        ));
    }
    if crate::domain::job::parse_auto_id(id).is_some() || is_canonical_negative(id) {
        return Err(EngineError::range(
            "jobId",
            format!(
                "must not be an integer (integers are reserved for automatic ids), got \"{id}\""
            ),
        ));
    }
    Ok(id)
}

fn is_canonical_negative(id: &str) -> bool {
    id.strip_prefix('-')
        .is_some_and(|rest| crate::domain::job::parse_auto_id(rest).is_some())
        || id == "0"
}

/// Validates a priority value (integer 0..=2,097,152).
pub fn priority(option: &str, p: f64) -> Result<u32> {
    Ok(integer_in(option, p, 0.0, MAX_PRIORITY as f64)? as u32)
}

/// Validates a duration in ms: finite and non-negative; fractions are truncated.
pub fn non_negative_ms(option: &str, v: f64) -> Result<u64> {
    if !v.is_finite() || v < 0.0 {
        return Err(EngineError::range(
            option,
            format!("must be a finite number >= 0 (milliseconds), got {v}"),
        ));
    }
    Ok(v.min(u64::MAX as f64 / 2.0) as u64)
}

fn integer_in(option: &str, v: f64, lo: f64, hi: f64) -> Result<u64> {
    if !v.is_finite() || v.fract() != 0.0 || v < lo || v > hi {
        return Err(EngineError::range(
            option,
            format!("must be an integer in {lo}..={hi}, got {v}"),
        ));
    }
    Ok(v as u64)
}

fn parse_backoff(b: RawBackoff) -> Result<Option<Backoff>> {
    match b {
        RawBackoff::Delay(d) => Ok(Some(Backoff::Fixed {
            delay: non_negative_ms("backoff", d)?,
            jitter: 0.0,
        })),
        RawBackoff::Spec {
            kind,
            delay,
            jitter,
        } => {
            let delay = non_negative_ms("backoff.delay", delay.unwrap_or(0.0))?;
            let jitter = jitter.unwrap_or(0.0);
            if !(0.0..=1.0).contains(&jitter) {
                return Err(EngineError::range(
                    "backoff.jitter",
                    format!("must be a number in [0, 1], got {jitter}"),
                ));
            }
            match kind.as_str() {
                "fixed" => Ok(Some(Backoff::Fixed { delay, jitter })),
                "exponential" => Ok(Some(Backoff::Exponential { delay, jitter })),
                "" => Err(EngineError::range(
                    "backoff.type",
                    "must be 'fixed', 'exponential' or the name of a custom strategy, got ''",
                )),
                _ => Ok(Some(Backoff::Custom)),
            }
        }
    }
}

/// Validates a `removeOnComplete` / `removeOnFail` value.
pub fn parse_keep(option: &str, k: RawKeep) -> Result<KeepJobs> {
    match k {
        RawKeep::Flag(true) => Ok(KeepJobs::None),
        RawKeep::Flag(false) => Ok(KeepJobs::All),
        RawKeep::Count(n) => Ok(KeepJobs::Bounded {
            count: Some(integer_in(option, n, 0.0, 9.0e15)?),
            age_secs: None,
        }),
        RawKeep::Spec { age, count } => {
            let count = match count {
                Some(n) => Some(integer_in(&format!("{option}.count"), n, 0.0, 9.0e15)?),
                None => None,
            };
            let age_secs = match age {
                Some(a) => Some(non_negative_ms(&format!("{option}.age"), a)?),
                None => None,
            };
            Ok(KeepJobs::Bounded { count, age_secs })
        }
    }
}
