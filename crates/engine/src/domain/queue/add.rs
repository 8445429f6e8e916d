//! Adding jobs: the custom-id check, deduplication, a new record under a fresh key, and its
//! place (delayed or ready).

use super::{id_of, Added, Effects, NewJob, QueueState};
use crate::domain::dedup::{Deduplication, Verdict};
use crate::domain::event::EventKind;
use crate::domain::job::{Job, JobKey, JobState, CUSTOM_KEY_BIT};
use crate::domain::options::JobOptions;

/// The deduplication key a job being added will hold (see [`QueueState::admit`]).
struct Held {
    dedup: Deduplication,
    verdict: Verdict,
    /// The id of the delayed holder it replaced.
    replaced: Option<String>,
}

impl QueueState {
    /// Adds one job. O(log n).
    pub fn add(&mut self, job: NewJob, now: u64, fx: &mut Effects) -> Added {
        let mut held = None;
        if job.opts.job_id.is_some() || job.opts.controls.is_some() {
            match self.admit(&job.opts, now, fx) {
                Ok(h) => held = h,
                Err(refused) => return refused,
            }
        }
        let run_at = job.timestamp.saturating_add(job.opts.delay);
        let delayed = job.opts.delay > 0 && run_at > now;
        let lifo = job.opts.lifo;
        let state = if delayed {
            JobState::Delayed
        } else {
            JobState::Waiting
        };
        let key = self.new_record(job, state, fx);
        if delayed {
            self.emit(fx, || EventKind::Delayed {
                job_id: id_of(key, &self.jobs),
                delay: run_at,
            });
            self.schedule(key, run_at);
            fx.wake(run_at);
        } else {
            self.emit(fx, || EventKind::Waiting {
                job_id: id_of(key, &self.jobs),
                prev: None,
            });
            self.push_ready(key, lifo);
            if !self.paused {
                self.waiters.notify(1);
            }
        }
        if let Some(h) = held {
            self.hold_dedup(&h.dedup, key, h.verdict, h.replaced, now, fx);
        }
        Added::New(key)
    }

    /// The checks of a job with a custom id or flow-control options, apart from a plain add's
    /// path (which then moves less): `Err` with the answer when the job is not added (its id
    /// exists, or another job holds its deduplication key), else the deduplication key it will
    /// hold, if any (a delayed holder it replaces is gone already).
    #[inline(never)]
    fn admit(
        &mut self,
        opts: &JobOptions,
        now: u64,
        fx: &mut Effects,
    ) -> std::result::Result<Option<Held>, Added> {
        if let Some(id) = &opts.job_id {
            if let Some(&key) = self.custom_ids.get(id).or_else(|| self.evicted.ids.get(id)) {
                self.emit(fx, || EventKind::Duplicated {
                    job_id: id.to_string(),
                });
                return Err(Added::Duplicate(key));
            }
        }
        let Some(d) = opts.deduplication() else {
            return Ok(None);
        };
        let verdict = self.deduplicate(d, now);
        let mut replaced = None;
        match verdict {
            Verdict::Duplicate(holder) => {
                // The would-be job's id is used up, as in BullMQ, so the event can name it.
                let would_be = match &opts.job_id {
                    Some(id) => id.to_string(),
                    None => {
                        self.last_auto_id += 1;
                        self.last_auto_id.to_string()
                    }
                };
                self.deduplicated(d, holder, would_be, fx);
                return Err(Added::Deduplicated(holder));
            }
            Verdict::Replace(old) => {
                replaced = Some(id_of(old, &self.jobs));
                self.replace_holder(d, old, now, fx);
            }
            Verdict::Add => {}
        }
        Ok(Some(Held {
            dedup: d.clone(),
            verdict,
            replaced,
        }))
    }

    /// Inserts a new job's record under a fresh key, in `state` (its custom id registered), and
    /// emits `added`; the caller places it. The id sequences are not written here: recovery takes
    /// them from the highest key in the file, and deletions write them (see `storage/rows.rs`).
    /// Inserting the record writes its row.
    pub(super) fn new_record(&mut self, job: NewJob, state: JobState, fx: &mut Effects) -> JobKey {
        let key = match &job.opts.job_id {
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
        let name = self.intern(&job.name);
        let mut record = Job::new(key, name, job.data, &job.opts, job.timestamp);
        record.set_opts_json(job.opts_json);
        record.state = state;
        self.emit(fx, || EventKind::Added {
            job_id: record.id_string(),
            name: record.name.clone(),
        });
        self.jobs.insert(key, record);
        key
    }
}
