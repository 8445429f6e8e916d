//! Adding jobs: the custom-id check, deduplication, a new record under a fresh key, and its
//! place (delayed or ready).

use super::{id_of, Added, Effects, NewJob, QueueState};
use crate::domain::dedup::Verdict;
use crate::domain::event::EventKind;
use crate::domain::job::{Job, JobKey, JobState, CUSTOM_KEY_BIT};
use crate::domain::options::JobOptions;

impl QueueState {
    /// Adds one job. O(log n).
    pub fn add(&mut self, job: NewJob, now: u64, fx: &mut Effects) -> Added {
        if let Some(id) = &job.opts.job_id {
            if let Some(&key) = self.custom_ids.get(id).or_else(|| self.evicted.ids.get(id)) {
                self.emit(fx, || EventKind::Duplicated {
                    job_id: id.to_string(),
                });
                return Added::Duplicate(key);
            }
        }
        let dedup = job.opts.deduplication.clone();
        let verdict = dedup.as_ref().map(|d| self.deduplicate(d, now));
        let mut replaced = None;
        match (verdict, &dedup) {
            (Some(Verdict::Duplicate(holder)), Some(d)) => {
                // The would-be job's id is used up, as in BullMQ, so the event can name it.
                let would_be = match &job.opts.job_id {
                    Some(id) => id.to_string(),
                    None => {
                        self.last_auto_id += 1;
                        self.last_auto_id.to_string()
                    }
                };
                self.deduplicated(d, holder, would_be, fx);
                return Added::Deduplicated(holder);
            }
            (Some(Verdict::Replace(old)), Some(d)) => {
                replaced = Some(id_of(old, &self.jobs));
                self.replace_holder(d, old, now, fx);
            }
            _ => {}
        }
        let (key, mut record) = self.new_record(
            job.name,
            job.data,
            &job.opts,
            job.opts_json,
            job.timestamp,
            fx,
        );
        let run_at = job.timestamp.saturating_add(job.opts.delay);
        let lifo = job.opts.lifo;
        if job.opts.delay > 0 && run_at > now {
            record.state = JobState::Delayed;
            self.emit(fx, || EventKind::Delayed {
                job_id: record.id_string(),
                delay: run_at,
            });
            self.jobs.insert(key, record);
            self.schedule(key, run_at);
            fx.wake(run_at);
        } else {
            self.emit(fx, || EventKind::Waiting {
                job_id: record.id_string(),
                prev: None,
            });
            self.jobs.insert(key, record);
            self.push_ready(key, lifo);
            if !self.paused {
                self.waiters.notify(1);
            }
        }
        if let (Some(d), Some(v)) = (&dedup, verdict) {
            self.hold_dedup(d, key, v, replaced, now, fx);
        }
        Added::New(key)
    }

    /// A new job's record under a fresh key (its custom id registered) and the `added` event;
    /// the caller places it. The id sequences are not written here: recovery takes them from the
    /// highest key in the file, and deletions write them (see `storage/rows.rs`). Inserting the
    /// record writes its row.
    fn new_record(
        &mut self,
        name: String,
        data: Box<str>,
        opts: &JobOptions,
        opts_json: Option<Box<str>>,
        timestamp: u64,
        fx: &mut Effects,
    ) -> (JobKey, Job) {
        let key = match &opts.job_id {
            Some(id) => {
                self.custom_seq += 1;
                let key = CUSTOM_KEY_BIT | self.custom_seq;
                self.custom_ids.insert(id.clone(), key);
                key
            }
            None => {
                self.last_auto_id += 1;
                self.last_auto_id
            }
        };
        let name = self.intern(&name);
        let mut record = Job::new(key, name, data, opts, timestamp);
        record.set_opts_json(opts_json);
        self.emit(fx, || EventKind::Added {
            job_id: record.id_string(),
            name: record.name.clone(),
        });
        (key, record)
    }

    /// Inserts a new job's record, not placed in any state structure yet (flow parents).
    pub(super) fn insert_new(&mut self, job: NewJob, fx: &mut Effects) -> JobKey {
        let (key, record) = self.new_record(
            job.name,
            job.data,
            &job.opts,
            job.opts_json,
            job.timestamp,
            fx,
        );
        self.jobs.insert(key, record);
        key
    }
}
