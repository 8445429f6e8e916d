//! The job record, its states and ids. How a record is written for JS is the binding's wire
//! (`crate::wire`).
//!
//! Ids: automatic ids are per-queue increasing integers ("1", "2", ...); their internal key is the
//! number itself. Custom ids (strings that are not canonical integers) get keys with
//! [`CUSTOM_KEY_BIT`] set, so an id string maps to a key without hashing when it is automatic.
//! Rarely used fields (progress, logs, results, errors) live in a boxed [`JobExtra`] so that a
//! waiting job costs little memory beyond its payload.

use std::sync::Arc;

use super::flow::{Deps, ParentLink};
use super::options::{Backoff, JobOptions, KeepJobs};

/// Internal job key, unique within a queue.
pub type JobKey = u64;

/// Keys of jobs with custom ids have this bit set.
pub const CUSTOM_KEY_BIT: u64 = 1 << 63;

/// A job id as the user sees it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum JobId {
    /// "1", "2", ...
    Auto(u64),
    /// A user-given string that is not an integer.
    Custom(Box<str>),
}

impl JobId {
    /// Reads an id string: canonical positive integers are automatic ids.
    pub fn parse(s: &str) -> JobId {
        match parse_auto_id(s) {
            Some(n) => JobId::Auto(n),
            None => JobId::Custom(s.into()),
        }
    }
}

impl std::fmt::Display for JobId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JobId::Auto(n) => write!(f, "{n}"),
            JobId::Custom(s) => f.write_str(s),
        }
    }
}

/// Parses a canonical positive integer ("1", "42"; not "01", "+1", "0") below 2^63.
pub fn parse_auto_id(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.is_empty() || b.len() > 19 || b[0] == b'0' || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    s.parse::<u64>().ok().filter(|n| *n < CUSTOM_KEY_BIT)
}

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JobState {
    Waiting,
    Prioritized,
    Delayed,
    Active,
    Completed,
    Failed,
    WaitingChildren,
}

impl JobState {
    /// BullMQ's name of the state.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Waiting => "waiting",
            JobState::Prioritized => "prioritized",
            JobState::Delayed => "delayed",
            JobState::Active => "active",
            JobState::Completed => "completed",
            JobState::Failed => "failed",
            JobState::WaitingChildren => "waiting-children",
        }
    }

    /// Parses a state name as used by getters, counts and `clean` ("wait" is "waiting").
    pub fn parse(s: &str) -> Option<JobState> {
        Some(match s {
            "waiting" | "wait" => JobState::Waiting,
            "prioritized" => JobState::Prioritized,
            "delayed" => JobState::Delayed,
            "active" => JobState::Active,
            "completed" => JobState::Completed,
            "failed" => JobState::Failed,
            "waiting-children" => JobState::WaitingChildren,
            _ => return None,
        })
    }
}

/// Retry and retention rules of a job that differ from the defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct JobPolicy {
    pub attempts: u32,
    pub backoff: Option<Backoff>,
    pub remove_on_complete: Option<KeepJobs>,
    pub remove_on_fail: Option<KeepJobs>,
}

/// Fields most waiting jobs never use.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobExtra {
    /// Progress as JSON text.
    pub progress: Option<Box<str>>,
    /// Return value as JSON text.
    pub returnvalue: Option<Box<str>>,
    pub failed_reason: Option<Box<str>>,
    pub stacktrace: Vec<Box<str>>,
    pub logs: Vec<Box<str>>,
    /// A flow parent's dependencies (`flow.rs`).
    pub deps: Option<Box<Deps>>,
    /// How many times the job stalled (its holder went away while it was active).
    pub stalled_counter: u32,
    /// The name of the Worker that last took it (BullMQ's `processedBy`; Workers with a `name`).
    pub processed_by: Option<Arc<str>>,
    /// Its failed attempts, newest last (`dlq.rs`).
    pub history: Vec<super::dlq::Attempt>,
}

/// Fields only jobs given options carry, in one allocation that the others do not have
/// (32 bytes less per job than three separate optional fields).
#[derive(Debug, Clone, Default)]
pub struct JobRare {
    pub custom_id: Option<Box<str>>,
    /// The options as the user gave them (JSON text), echoed back in `opts`.
    pub opts_json: Option<Box<str>>,
    pub policy: Option<JobPolicy>,
    /// The `deduplication` id, whose key the job may hold.
    pub dedup_id: Option<Box<str>>,
    /// The `group` the job belongs to (its group priority is the job's `priority`).
    pub group: Option<Arc<str>>,
    /// A flow child's parent.
    pub parent: Option<ParentLink>,
}

/// One job.
#[derive(Debug, Clone)]
pub struct Job {
    pub key: JobKey,
    pub name: Arc<str>,
    /// Payload as JSON text, never parsed by the engine.
    pub data: Box<str>,
    /// Custom id, options text and retry/retention policy, when the job has any.
    rare: Option<Box<JobRare>>,
    pub state: JobState,
    pub priority: u32,
    pub delay: u64,
    pub timestamp: u64,
    pub processed_on: u64,
    pub finished_on: u64,
    pub attempts_made: u32,
    pub attempts_started: u32,
    /// Generation of the job's entry in the ready heap: odd while it is in the heap, bumped on
    /// every push and removal (see `ready.rs`).
    pub ready_gen: u32,
    /// Position within its priority while ready (negative for lifo).
    pub ready_order: i64,
    /// Token of the current activation; acks with another token are stale.
    pub lock: u64,
    /// The lease holder (a live Worker) of the current activation, 0 for none: when the holder
    /// is gone its jobs stall (`queue/stall.rs`).
    pub holder: u32,
    /// Position in the ordered set of its state (active/completed/failed).
    pub state_seq: u64,
    pub extra: Option<Box<JobExtra>>,
}

impl Job {
    /// Creates a job from validated options.
    pub fn new(
        key: JobKey,
        name: Arc<str>,
        data: Box<str>,
        opts: &JobOptions,
        timestamp: u64,
    ) -> Job {
        let policy = if opts.attempts > 1
            || opts.backoff.is_some()
            || opts.remove_on_complete.is_some()
            || opts.remove_on_fail.is_some()
        {
            Some(JobPolicy {
                attempts: opts.attempts,
                backoff: opts.backoff,
                remove_on_complete: opts.remove_on_complete,
                remove_on_fail: opts.remove_on_fail,
            })
        } else {
            None
        };
        let dedup_id = opts.deduplication().map(|d| d.id.clone());
        let group = opts.group().map(|g| g.id.clone());
        let parent = opts.parent().map(|(queue, id)| ParentLink {
            queue: queue.clone(),
            id: id.clone(),
            on_failure: opts.on_child_failure(),
        });
        let rare = (policy.is_some()
            || opts.job_id.is_some()
            || dedup_id.is_some()
            || group.is_some()
            || parent.is_some())
        .then(|| {
            Box::new(JobRare {
                custom_id: opts.job_id.clone(),
                opts_json: None,
                policy,
                dedup_id,
                group,
                parent,
            })
        });
        Job {
            key,
            name,
            data,
            rare,
            state: JobState::Waiting,
            priority: opts.priority,
            delay: opts.delay,
            timestamp,
            processed_on: 0,
            finished_on: 0,
            attempts_made: 0,
            attempts_started: 0,
            ready_gen: 0,
            ready_order: 0,
            lock: 0,
            holder: 0,
            state_seq: 0,
            extra: None,
        }
    }

    /// The id as the user sees it.
    pub fn id_string(&self) -> String {
        match self.custom_id() {
            Some(s) => s.to_string(),
            None => self.key.to_string(),
        }
    }

    /// The custom id (`jobId`), if the job was given one.
    pub fn custom_id(&self) -> Option<&str> {
        self.rare.as_ref()?.custom_id.as_deref()
    }

    /// The custom id, taking the job.
    pub fn into_custom_id(self) -> Option<Box<str>> {
        self.rare?.custom_id
    }

    /// The `deduplication` id, if the job was given one.
    pub fn dedup_id(&self) -> Option<&str> {
        self.rare.as_ref()?.dedup_id.as_deref()
    }

    /// The group the job belongs to, if any.
    pub fn group(&self) -> Option<&Arc<str>> {
        self.rare.as_ref()?.group.as_ref()
    }

    /// A flow child's parent, if any.
    pub fn parent(&self) -> Option<&ParentLink> {
        self.rare.as_ref()?.parent.as_ref()
    }

    /// Links the job to a flow parent (a child added by a flow; its options text says so too).
    pub fn set_parent(&mut self, link: ParentLink) {
        self.rare.get_or_insert_with(Default::default).parent = Some(link);
    }

    /// How many times the job stalled.
    pub fn stalled_counter(&self) -> u32 {
        self.extra.as_ref().map_or(0, |e| e.stalled_counter)
    }

    /// The name of the Worker that last took it, if that Worker had one.
    pub fn processed_by(&self) -> Option<&str> {
        self.extra.as_ref()?.processed_by.as_deref()
    }

    /// A flow parent's dependencies, if it has any.
    pub fn deps(&self) -> Option<&Deps> {
        self.extra.as_ref()?.deps.as_deref()
    }

    /// The options as the user gave them (JSON text), if any.
    pub fn opts_json(&self) -> Option<&str> {
        self.rare.as_ref()?.opts_json.as_deref()
    }

    /// Retry and retention rules, if the job has any of its own.
    pub fn policy(&self) -> Option<&JobPolicy> {
        self.rare.as_ref()?.policy.as_ref()
    }

    /// Sets the custom id (restoring a job from its row).
    pub fn set_custom_id(&mut self, id: Option<Box<str>>) {
        if id.is_some() || self.rare.is_some() {
            self.rare.get_or_insert_with(Default::default).custom_id = id;
        }
    }

    /// Sets the options text echoed back in `opts`.
    pub fn set_opts_json(&mut self, opts: Option<Box<str>>) {
        if opts.is_some() || self.rare.is_some() {
            self.rare.get_or_insert_with(Default::default).opts_json = opts;
        }
    }

    /// Total tries allowed.
    pub fn attempts(&self) -> u32 {
        self.policy().map_or(1, |p| p.attempts)
    }

    /// The mutable extra fields, created on first use.
    pub fn extra_mut(&mut self) -> &mut JobExtra {
        self.extra.get_or_insert_with(Default::default)
    }
}

/// The id of a parsed job record as a string (worker records carry auto ids as numbers).
#[cfg(test)]
pub fn record_id(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `(id, token)` of each record of a take result (test helper).
#[cfg(test)]
pub fn parse_taken(json: &str) -> Vec<(String, u64)> {
    let v: Vec<serde_json::Value> = serde_json::from_str(json).expect("a JSON array");
    v.iter()
        .map(|j| (record_id(&j["id"]), j["token"].as_u64().expect("a token")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_ids_are_canonical_integers() {
        assert_eq!(parse_auto_id("1"), Some(1));
        assert_eq!(parse_auto_id("42"), Some(42));
        for s in [
            "",
            "0",
            "01",
            "+1",
            "-1",
            "1.0",
            "a",
            "99999999999999999999",
        ] {
            assert_eq!(parse_auto_id(s), None, "{s}");
        }
        assert_eq!(JobId::parse("7"), JobId::Auto(7));
        assert_eq!(JobId::parse("x7").to_string(), "x7");
    }

    #[test]
    fn a_job_record_stays_small() {
        // Memory per waiting job is a published target (docs/benchmarks-rust.md, README), and
        // docs and comments quote this size (docs/engine.md, job_table.rs): keep them in step.
        assert_eq!(std::mem::size_of::<Job>(), 136, "Job's size changed");
        let opts = JobOptions::defaults();
        let plain = Job::new(1, Arc::from("j"), "{}".into(), &opts, 0);
        assert!(
            plain.rare.is_none(),
            "a job without options allocates no rare fields"
        );
    }
}
