//! One job scheduler: how it repeats ([`Repeat`], `scheduler.rs`), the template of its jobs, how
//! many it made and the slot of its pending job. Each slot's job has the id
//! `repeat:{scheduler id}:{slot ms}`, so a slot never runs twice on any backend (custom ids are
//! unique per queue). These rules are shared by the embedded engine (`queue/schedulers.rs`) and
//! the PostgreSQL backend, which stores a scheduler as [`Scheduler::stored_json`].

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::options::JobOptions;
use super::queue::NewJob;
use super::scheduler::{Repeat, RepeatOptions};
use crate::error::{EngineError, Result};

/// One job scheduler.
#[derive(Debug, Clone)]
pub struct Scheduler {
    pub repeat: Repeat,
    /// The job template: name, data (JSON text) and options (JSON text, checked).
    pub name: Arc<str>,
    pub data: Box<str>,
    pub opts: Option<Box<str>>,
    /// `opts` read once, cloned for each job.
    job_opts: JobOptions,
    /// Jobs created so far.
    pub iteration_count: u32,
    /// The slot of its pending job.
    pub next: Option<u64>,
}

/// A scheduler as stored and restored.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Stored {
    repeat: RepeatOptions,
    name: String,
    data: String,
    opts: Option<String>,
    iteration_count: u32,
    next: Option<u64>,
}

/// The longest scheduler id: its jobs' ids (`repeat:{id}:{slot}`) stay within a custom id's
/// 1,024 bytes.
pub const MAX_ID_BYTES: usize = 990;

/// The job id of scheduler `id`'s job for `slot`.
pub fn slot_job_id(id: &str, slot: u64) -> String {
    format!("repeat:{id}:{slot}")
}

/// The scheduler id and slot a job id names, if it is a scheduler's.
pub fn parse_slot_job_id(job_id: &str) -> Option<(&str, u64)> {
    let (id, slot) = job_id.strip_prefix("repeat:")?.rsplit_once(':')?;
    Some((id, slot.parse().ok()?))
}

impl Scheduler {
    /// A scheduler named `id` that has made no job yet: `repeat` and its job template (name,
    /// default `id`; data JSON; options JSON). Errors: template options that do not parse, or
    /// that set `jobId`, `delay` or `parent` (a scheduler gives its jobs their ids and times).
    pub fn new(
        id: &str,
        repeat: Repeat,
        template: (Option<&str>, &str, Option<&str>),
    ) -> Result<Scheduler> {
        // Its jobs' ids are `repeat:{id}:{slot}`: custom ids, held to their rules.
        if id.as_bytes().contains(&0) {
            return Err(EngineError::range(
                "jobSchedulerId",
                "must not contain the character U+0000",
            ));
        }
        if id.len() > MAX_ID_BYTES {
            return Err(EngineError::range(
                "jobSchedulerId",
                format!("must be at most {MAX_ID_BYTES} bytes long (its jobs' ids add a prefix and a time)"),
            ));
        }
        let (name, data, opts_json) = template;
        let job_opts = match opts_json {
            Some(text) => JobOptions::from_json(text)?,
            None => JobOptions::default(),
        };
        if job_opts.job_id.is_some() || job_opts.delay > 0 || job_opts.parent().is_some() {
            return Err(EngineError::type_error(
                "template.opts",
                "cannot set jobId, delay or parent: a scheduler's jobs get their ids and times from it",
            ));
        }
        Ok(Scheduler {
            repeat,
            name: Arc::from(name.unwrap_or(id)),
            data: data.into(),
            opts: opts_json.map(Into::into),
            job_opts,
            iteration_count: 0,
            next: None,
        })
    }

    /// Its first slot at `now`. Errors when it has none (`endDate` past).
    pub fn first_slot(&self, now: u64) -> Result<u64> {
        self.repeat.first(now).ok_or_else(|| {
            EngineError::range("repeat.endDate", "is past: the scheduler would never run")
        })
    }

    /// The slot after `slot`, whose job started at `now` (missed slots skipped); `None` when
    /// the scheduler is done: it made `limit` jobs, or the next slot is past `endDate`.
    pub fn after(&self, slot: u64, now: u64) -> Option<u64> {
        let limited = self
            .repeat
            .options
            .limit
            .is_some_and(|l| self.iteration_count >= l);
        if limited {
            None
        } else {
            self.repeat.next(slot, now)
        }
    }

    /// The job of scheduler `id` for `slot`, made at `now` (delayed until the slot).
    pub fn slot_job(&self, id: &str, slot: u64, now: u64) -> NewJob {
        let mut opts = self.job_opts.clone();
        opts.job_id = Some(slot_job_id(id, slot).into());
        opts.delay = slot.saturating_sub(now);
        NewJob {
            name: self.name.to_string(),
            data: self.data.clone(),
            opts,
            opts_json: self.opts.clone(),
            timestamp: now,
        }
    }

    /// BullMQ's `JobSchedulerJson` of this scheduler, named `id`.
    pub fn bullmq_json(&self, id: &str) -> String {
        let o = &self.repeat.options;
        let mut m = serde_json::Map::new();
        m.insert("key".into(), id.into());
        m.insert("id".into(), id.into());
        m.insert("name".into(), (*self.name).into());
        m.insert("iterationCount".into(), self.iteration_count.into());
        let mut put = |k: &str, v: Option<serde_json::Value>| {
            if let Some(v) = v {
                m.insert(k.into(), v);
            }
        };
        put("every", o.every.map(Into::into));
        put("pattern", o.pattern.clone().map(Into::into));
        put("tz", o.tz.clone().map(Into::into));
        put("startDate", o.start_date.map(Into::into));
        put("endDate", o.end_date.map(Into::into));
        put("limit", o.limit.map(Into::into));
        put("next", self.next.map(Into::into));
        let data: serde_json::Value = serde_json::from_str(&self.data).unwrap_or_default();
        let mut template = serde_json::Map::new();
        template.insert("data".into(), data);
        if let Some(opts) = self.opts.as_deref() {
            template.insert(
                "opts".into(),
                serde_json::from_str(opts).unwrap_or_default(),
            );
        }
        m.insert("template".into(), template.into());
        serde_json::Value::Object(m).to_string()
    }

    /// The JSON it is stored as.
    pub fn stored_json(&self) -> String {
        let stored = Stored {
            repeat: self.repeat.options.clone(),
            name: self.name.to_string(),
            data: self.data.to_string(),
            opts: self.opts.as_deref().map(String::from),
            iteration_count: self.iteration_count,
            next: self.next,
        };
        serde_json::to_string(&stored).unwrap_or_default()
    }

    /// A stored scheduler; `None` for one that cannot be read.
    pub fn from_stored(body: &str) -> Option<Scheduler> {
        let stored = serde_json::from_str::<Stored>(body).ok()?;
        let repeat = Repeat::new(stored.repeat).ok()?;
        let job_opts = match stored.opts.as_deref() {
            Some(text) => JobOptions::from_json(text).ok()?,
            None => JobOptions::default(),
        };
        Some(Scheduler {
            repeat,
            name: Arc::from(stored.name),
            data: stored.data.into(),
            opts: stored.opts.map(Into::into),
            job_opts,
            iteration_count: stored.iteration_count,
            next: stored.next,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every(ms: u64, limit: Option<u32>) -> Repeat {
        Repeat::new(RepeatOptions {
            every: Some(ms),
            limit,
            ..RepeatOptions::default()
        })
        .expect("valid")
    }

    #[test]
    fn slot_job_ids_round_trip_even_with_colons_in_the_scheduler_id() {
        assert_eq!(slot_job_id("a:b", 42), "repeat:a:b:42");
        assert_eq!(parse_slot_job_id("repeat:a:b:42"), Some(("a:b", 42)));
        assert_eq!(parse_slot_job_id("repeat:a:b"), None);
        assert_eq!(parse_slot_job_id("other:a:1"), None);
    }

    #[test]
    fn a_template_cannot_set_ids_or_times() {
        for opts in [r#"{"jobId":"x"}"#, r#"{"delay":5}"#] {
            let e = Scheduler::new("s", every(10, None), (None, "{}", Some(opts)));
            assert!(e.is_err(), "{opts}");
        }
        let s = Scheduler::new("s", every(10, None), (None, "{\"a\":1}", None)).expect("ok");
        assert_eq!(&*s.name, "s");
    }

    #[test]
    fn scheduler_ids_follow_the_custom_id_rules() {
        let nul = Scheduler::new("a\0b", every(10, None), (None, "{}", None));
        assert!(nul.unwrap_err().to_string().contains("U+0000"));
        let long = "x".repeat(MAX_ID_BYTES + 1);
        assert!(Scheduler::new(&long, every(10, None), (None, "{}", None)).is_err());
        let longest = "x".repeat(MAX_ID_BYTES);
        let s = Scheduler::new(&longest, every(10, None), (None, "{}", None)).expect("ok");
        assert!(s.slot_job(&longest, u64::MAX, 0).opts.job_id.unwrap().len() <= 1024);
    }

    #[test]
    fn after_stops_at_the_limit_and_skips_missed_slots() {
        let mut s = Scheduler::new("s", every(100, Some(2)), (None, "{}", None)).expect("ok");
        s.iteration_count = 1;
        assert_eq!(s.after(1_000, 1_350), Some(1_400));
        s.iteration_count = 2;
        assert_eq!(s.after(1_000, 1_050), None);
    }

    #[test]
    fn a_slot_job_is_delayed_until_its_slot_and_named_by_it() {
        let s = Scheduler::new("s", every(100, None), (Some("tick"), "{}", None)).expect("ok");
        let job = s.slot_job("s", 1_500, 1_200);
        assert_eq!(job.opts.job_id.as_deref(), Some("repeat:s:1500"));
        assert_eq!(
            (job.opts.delay, job.timestamp, job.name.as_str()),
            (300, 1_200, "tick")
        );
    }

    #[test]
    fn it_is_stored_and_read_back() {
        let mut s = Scheduler::new(
            "s",
            every(100, Some(3)),
            (None, "[1]", Some("{\"priority\":2}")),
        )
        .expect("ok");
        s.iteration_count = 2;
        s.next = Some(77);
        let back = Scheduler::from_stored(&s.stored_json()).expect("reads");
        assert_eq!(back.stored_json(), s.stored_json());
        assert_eq!(back.bullmq_json("s"), s.bullmq_json("s"));
        assert!(Scheduler::from_stored("{").is_none());
    }
}
