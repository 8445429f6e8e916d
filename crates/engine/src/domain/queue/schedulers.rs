//! A queue's job schedulers (`domain/scheduler.rs` says when each repeats). Each keeps one job
//! pending, with the id `repeat:{scheduler id}:{slot ms}`: the id makes a slot's job unique, so
//! no slot ever runs twice (custom ids are unique per queue, in memory, in the file and in a
//! database). When that job starts, the next one is created for the first slot after that
//! moment (missed slots skipped); a scheduler past its `limit` or `endDate` is removed.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{Added, Effects, NewJob, QueueState};
use crate::domain::job::{JobKey, JobState};
use crate::domain::options::JobOptions;
use crate::domain::scheduler::{Repeat, RepeatOptions};
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

/// A scheduler as stored (the body column) and restored.
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

/// Schedulers by id, and their changes not yet handed to storage.
#[derive(Default)]
pub struct Schedulers {
    by_id: BTreeMap<Box<str>, Scheduler>,
    ops: Vec<(Box<str>, Option<String>)>,
}

impl Schedulers {
    /// Whether the queue has none (most queues: then starting a job looks for nothing).
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }
}

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

    fn to_json(&self) -> String {
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
}

impl QueueState {
    /// Creates or updates scheduler `id` (`name`, `data` and `opts_json` are its job template)
    /// and its pending job: an update replaces the job it had pending unless that one runs
    /// already. Answers the id of the pending job. Errors: bad template options, or no slot left
    /// (`endDate` past).
    pub fn upsert_scheduler(
        &mut self,
        id: &str,
        repeat: Repeat,
        template: (Option<&str>, &str, Option<&str>),
        now: u64,
        fx: &mut Effects,
    ) -> Result<String> {
        let (name, data, opts_json) = template;
        let opts = match opts_json {
            Some(text) => JobOptions::from_json(text)?,
            None => JobOptions::default(),
        };
        if opts.job_id.is_some() || opts.delay > 0 || opts.parent().is_some() {
            return Err(EngineError::type_error(
                "template.opts",
                "cannot set jobId, delay or parent: a scheduler's jobs get their ids and times from it",
            ));
        }
        let Some(slot) = repeat.first(now) else {
            return Err(EngineError::range(
                "repeat.endDate",
                "is past: the scheduler would never run",
            ));
        };
        let count = match self.schedulers.by_id.get(id) {
            Some(old) => {
                // A pending job that never ran is replaced: it does not count.
                let (count, prev) = (old.iteration_count, old.next);
                let dropped = prev.is_some_and(|p| self.drop_pending(id, p, fx));
                count - u32::from(dropped && count > 0)
            }
            None => 0,
        };
        let scheduler = Scheduler {
            repeat,
            name: Arc::from(name.unwrap_or(id)),
            data: data.into(),
            opts: opts_json.map(Into::into),
            job_opts: opts,
            iteration_count: count,
            next: None,
        };
        self.schedulers.by_id.insert(id.into(), scheduler);
        self.create_slot_job(id, slot, now, fx)?;
        Ok(slot_job_id(id, slot))
    }

    /// Removes scheduler `id` and its pending job (unless it runs already); answers whether it
    /// existed.
    pub fn remove_scheduler(&mut self, id: &str, fx: &mut Effects) -> bool {
        let Some(old) = self.schedulers.by_id.remove(id) else {
            return false;
        };
        if let Some(prev) = old.next {
            self.drop_pending(id, prev, fx);
        }
        self.record_scheduler(id);
        true
    }

    /// Scheduler `id`.
    pub fn scheduler(&self, id: &str) -> Option<&Scheduler> {
        self.schedulers.by_id.get(id)
    }

    /// Every scheduler with its id, by next run (those without one last), then id.
    pub fn schedulers_by_next(&self) -> Vec<(&str, &Scheduler)> {
        let mut all: Vec<(&str, &Scheduler)> = self
            .schedulers
            .by_id
            .iter()
            .map(|(id, s)| (&**id, s))
            .collect();
        all.sort_by_key(|(id, s)| (s.next.unwrap_or(u64::MAX), *id));
        all
    }

    /// How many schedulers the queue has.
    pub fn scheduler_count(&self) -> usize {
        self.schedulers.by_id.len()
    }

    /// Job `key` just started: if it is a scheduler's pending job, the scheduler's next job is
    /// created (for the first slot after `now`), or, past its `limit` or `endDate`, the
    /// scheduler is removed.
    pub(super) fn slot_started(&mut self, key: JobKey, now: u64, fx: &mut Effects) {
        let Some(job_id) = self
            .jobs
            .get(&key)
            .and_then(|j| j.custom_id())
            .map(String::from)
        else {
            return;
        };
        let Some((id, slot)) = parse_slot_job_id(&job_id) else {
            return;
        };
        let Some(s) = self.schedulers.by_id.get(id) else {
            return;
        };
        if s.next != Some(slot) {
            return;
        }
        let limited = s
            .repeat
            .options
            .limit
            .is_some_and(|l| s.iteration_count >= l);
        let next = if limited {
            None
        } else {
            s.repeat.next(slot, now)
        };
        match next {
            Some(n) => {
                let _ = self.create_slot_job(id, n, now, fx);
            }
            None => {
                self.schedulers.by_id.remove(id);
                self.record_scheduler(id);
            }
        }
    }

    /// Adds scheduler `id`'s job for `slot` (delayed until then) and counts it.
    fn create_slot_job(&mut self, id: &str, slot: u64, now: u64, fx: &mut Effects) -> Result<()> {
        let Some(s) = self.schedulers.by_id.get(id) else {
            return Ok(());
        };
        let mut opts = s.job_opts.clone();
        let job_id = slot_job_id(id, slot);
        opts.job_id = Some(job_id.into());
        opts.delay = slot.saturating_sub(now);
        let job = NewJob {
            name: s.name.to_string(),
            data: s.data.clone(),
            opts,
            opts_json: s.opts.clone(),
            timestamp: now,
        };
        let added = self.add(job, now, fx);
        if let Some(s) = self.schedulers.by_id.get_mut(id) {
            if matches!(added, Added::New(_)) {
                s.iteration_count += 1;
            }
            s.next = Some(slot);
        }
        self.record_scheduler(id);
        Ok(())
    }

    /// Removes scheduler `id`'s job for `slot` if it has not started; answers whether it did.
    fn drop_pending(&mut self, id: &str, slot: u64, fx: &mut Effects) -> bool {
        let job_id = slot_job_id(id, slot);
        let waiting = self.job_by_id(&job_id).is_some_and(|j| {
            matches!(
                j.state,
                JobState::Delayed | JobState::Waiting | JobState::Prioritized
            )
        });
        waiting && matches!(self.remove(&job_id, fx), Ok(Some(_)))
    }

    fn record_scheduler(&mut self, id: &str) {
        if !self.persists() {
            return;
        }
        let body = self.schedulers.by_id.get(id).map(Scheduler::to_json);
        self.schedulers.ops.push((id.into(), body));
    }

    /// The scheduler changes since the last call (durable queues).
    pub fn take_scheduler_ops(&mut self) -> Vec<(Box<str>, Option<String>)> {
        std::mem::take(&mut self.schedulers.ops)
    }

    /// Takes in a stored scheduler (recovery); one that cannot be read is left out.
    pub fn restore_scheduler(&mut self, id: Box<str>, body: &str) {
        let Ok(stored) = serde_json::from_str::<Stored>(body) else {
            return;
        };
        let Ok(repeat) = Repeat::new(stored.repeat) else {
            return;
        };
        let job_opts = match stored.opts.as_deref() {
            Some(text) => match JobOptions::from_json(text) {
                Ok(o) => o,
                Err(_) => return,
            },
            None => JobOptions::default(),
        };
        let scheduler = Scheduler {
            repeat,
            name: Arc::from(stored.name),
            data: stored.data.into(),
            opts: stored.opts.map(Into::into),
            job_opts,
            iteration_count: stored.iteration_count,
            next: stored.next,
        };
        self.schedulers.by_id.insert(id, scheduler);
    }
}
