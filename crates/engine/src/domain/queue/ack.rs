//! Finishing an activation: completed, failed for good, or failed and retried (at once or after
//! a backoff), then the retention rule of the finished state.

use super::{id_of, AckResult, Effects, Outcome, QueueState};
use crate::domain::changes::{EXTRA, STATE};
use crate::domain::dlq::{push_attempt, Attempt, AttemptEnd};
use crate::domain::event::EventKind;
use crate::domain::flow::{ChildEnd, OnChildFailure};
use crate::domain::job::{JobKey, JobState};
use crate::domain::options::KeepJobs;

/// Stack traces kept per job, as BullMQ's default `stackTraceLimit`.
const STACKTRACE_LIMIT: usize = 10;

impl QueueState {
    /// Finishes an activation. `keep` is the worker's retention rule, used when the job has none
    /// of its own. O(log n).
    pub fn ack(
        &mut self,
        key: JobKey,
        lock: u64,
        outcome: Outcome,
        keep: Option<KeepJobs>,
        now: u64,
        fx: &mut Effects,
    ) -> AckResult {
        // A queue without deduplication keys (most) looks nothing up here.
        let dedup_id = if self.dedup.is_empty() {
            None
        } else {
            self.jobs
                .get(&key)
                .and_then(|j| j.dedup_id())
                .map(Box::<str>::from)
        };
        // Nor does a queue without groups.
        let group = if self.groups.is_unused() {
            None
        } else {
            self.jobs.get(&key).and_then(|j| j.group().cloned())
        };
        let result = self.finish(key, lock, outcome, keep, now, fx);
        if !matches!(result, AckResult::Stale | AckResult::StillActive) {
            self.slot_freed();
            if let Some(g) = group {
                self.group_slot_freed(&g);
            }
        }
        if let (Some(id), AckResult::Completed | AckResult::Failed) = (dedup_id, result) {
            self.dedup_finished(&id, key);
        }
        result
    }

    fn finish(
        &mut self,
        key: JobKey,
        lock: u64,
        outcome: Outcome,
        keep: Option<KeepJobs>,
        now: u64,
        fx: &mut Effects,
    ) -> AckResult {
        let Some(job) = self.jobs.get(&key) else {
            return AckResult::Stale;
        };
        if job.state != JobState::Active || job.lock != lock {
            return AckResult::Stale;
        }
        if matches!(outcome, Outcome::Delayed { .. } | Outcome::WaitingChildren) {
            return self.step(key, outcome, now, fx);
        }
        // A `null` return value over no earlier one (the common no-op processor) changes no
        // extra column: nothing is allocated for it and only the state columns are written.
        let extra_changes = match &outcome {
            Outcome::Released { .. } | Outcome::Delayed { .. } | Outcome::WaitingChildren => false,
            Outcome::Completed(v) => {
                &**v != "null" || job.extra.as_ref().is_some_and(|e| e.returnvalue.is_some())
            }
            Outcome::Failed { .. } => true,
        };
        let what = if extra_changes { STATE | EXTRA } else { STATE };
        let finish_at = self.finish_time(now);
        let Some(job) = self.jobs.change(&key, what) else {
            return AckResult::Stale;
        };
        let active_seq = job.state_seq;
        self.active.remove(&active_seq);
        match outcome {
            // Steps went to `step` above.
            Outcome::Delayed { .. } | Outcome::WaitingChildren => AckResult::Stale,
            Outcome::Released { started } => {
                if !started {
                    job.attempts_started = job.attempts_started.saturating_sub(1);
                }
                self.push_ready(key, true);
                if !self.paused {
                    self.waiters.notify(1);
                }
                self.emit(fx, || EventKind::Waiting {
                    job_id: id_of(key, &self.jobs),
                    prev: Some("active"),
                });
                AckResult::Released
            }
            Outcome::Completed(value) => {
                job.state = JobState::Completed;
                job.finished_on = finish_at;
                let started_at = job.processed_on;
                // BullMQ 6 counts every finished attempt, the successful one included.
                job.attempts_made += 1;
                let rule = job.policy().and_then(|p| p.remove_on_complete).or(keep);
                let listened = self.listeners > 0;
                let ev = listened.then(|| (job.id_string(), value.clone()));
                let for_parent = job.parent().is_some().then(|| value.clone());
                if extra_changes {
                    job.extra_mut().returnvalue = (&*value != "null").then_some(value);
                }
                let seq = self.next_state_seq();
                if let Some(job) = self.jobs.change(&key, STATE) {
                    job.state_seq = seq;
                }
                self.completed.insert(seq, key);
                self.metrics.finished(true, finish_at, started_at);
                if let Some(v) = for_parent {
                    self.notify_parent(key, || ChildEnd::Completed(v));
                }
                if let Some((job_id, returnvalue)) = ev {
                    self.emit(fx, || EventKind::Completed {
                        job_id,
                        returnvalue,
                    });
                }
                self.retain(JobState::Completed, key, rule, now);
                AckResult::Completed
            }
            Outcome::Failed {
                reason,
                stack,
                unrecoverable,
                timed_out,
                lost,
                delay: decided,
            } => {
                job.attempts_made += 1;
                let attempts_made = job.attempts_made;
                let exhausted = attempts_made >= job.attempts();
                let backoff = job.policy().and_then(|p| p.backoff);
                let rule = job.policy().and_then(|p| p.remove_on_fail).or(keep);
                let started_at = job.processed_on;
                let extra = job.extra_mut();
                extra.failed_reason = Some(reason.clone());
                let kind = AttemptEnd::of_failure(unrecoverable, timed_out, lost);
                let attempt = Attempt {
                    attempt: attempts_made,
                    started_at,
                    failed_at: now,
                    error: reason.clone(),
                    kind,
                    last: unrecoverable || exhausted,
                };
                push_attempt(&mut extra.history, attempt);
                if let Some(s) = stack {
                    extra.stacktrace.push(s);
                    if extra.stacktrace.len() > STACKTRACE_LIMIT {
                        extra.stacktrace.remove(0);
                    }
                }
                if !unrecoverable && !exhausted {
                    let unit = self.next_unit();
                    let delay = decided.unwrap_or_else(|| {
                        backoff.map_or(0, |b| b.delay_with_jitter(attempts_made, unit))
                    });
                    self.retry_after(key, delay, now, fx);
                    return AckResult::Retrying { delay };
                }
                if let Some(job) = self.jobs.change(&key, STATE) {
                    job.state = JobState::Failed;
                    job.finished_on = finish_at;
                }
                let seq = self.next_state_seq();
                if let Some(job) = self.jobs.change(&key, STATE) {
                    job.state_seq = seq;
                }
                self.failed.insert(seq, key);
                self.metrics.finished(false, finish_at, started_at);
                self.notify_parent(key, || {
                    ChildEnd::Failed(reason.clone(), OnChildFailure::Wait)
                });
                self.emit(fx, || EventKind::Failed {
                    job_id: id_of(key, &self.jobs),
                    failed_reason: reason,
                });
                if exhausted {
                    self.emit(fx, || EventKind::RetriesExhausted {
                        job_id: id_of(key, &self.jobs),
                        attempts_made,
                    });
                }
                self.retain(JobState::Failed, key, rule, now);
                self.bound_dlq(now);
                AckResult::Failed
            }
        }
    }

    /// Puts a failed attempt back: delayed by `delay` ms, or straight to ready.
    fn retry_after(&mut self, key: JobKey, delay: u64, now: u64, fx: &mut Effects) {
        if delay > 0 {
            let run_at = now.saturating_add(delay);
            if let Some(job) = self.jobs.change(&key, STATE) {
                job.state = JobState::Delayed;
                job.delay = delay;
            }
            self.schedule(key, run_at);
            fx.wake(run_at);
            self.emit(fx, || EventKind::Delayed {
                job_id: id_of(key, &self.jobs),
                delay: run_at,
            });
        } else {
            self.push_ready(key, false);
            if !self.paused {
                self.waiters.notify(1);
            }
            self.emit(fx, || EventKind::Waiting {
                job_id: id_of(key, &self.jobs),
                prev: Some("failed"),
            });
        }
    }

    /// Keeps the failed set (the DLQ) within the queue's `maxEntries`, dropping the oldest
    /// (memory and file alike); answers how many went. Its `maxAge` and automatic retries are
    /// kept by the DLQ keeper (`application/dlq.rs`).
    pub fn bound_dlq(&mut self, now: u64) -> usize {
        let max = self.dlq.max_entries;
        let total = self.failed.len() as u64 + self.evicted_count(JobState::Failed);
        if total <= max {
            return 0;
        }
        let rule = KeepJobs::Bounded {
            count: Some(max),
            age_secs: None,
        };
        // The key is only read by a rule of count 0, which `max_entries` (>= 1) never is.
        self.retain(JobState::Failed, 0, Some(rule), now);
        usize::try_from(total - max).unwrap_or(usize::MAX)
    }

    /// Applies a retention rule after job `key` entered the finished set of `state`: `true` (or a
    /// count of 0) removes just that job, as BullMQ does; a count keeps the newest N of the set;
    /// an age (seconds) drops older ones.
    fn retain(&mut self, state: JobState, key: JobKey, rule: Option<KeepJobs>, now: u64) {
        let Some(rule) = rule else { return };
        let (count, age_secs) = match rule {
            KeepJobs::All => return,
            KeepJobs::None => (Some(0), None),
            KeepJobs::Bounded { count, age_secs } => (count, age_secs),
        };
        if count == Some(0) {
            let seq = self.jobs.get(&key).map_or(0, |j| j.state_seq);
            self.finished_set(state).remove(&seq);
            self.forget(key);
            return;
        }
        if let Some(age) = age_secs {
            let cutoff = now.saturating_sub(age.saturating_mul(1_000));
            self.drop_evicted_older(state, cutoff);
            loop {
                let set = if state == JobState::Completed {
                    &self.completed
                } else {
                    &self.failed
                };
                let Some((&seq, &key)) = set.first_key_value() else {
                    break;
                };
                let old = self.jobs.get(&key).is_none_or(|j| j.finished_on < cutoff);
                if !old {
                    break;
                }
                self.finished_set(state).remove(&seq);
                self.forget(key);
            }
        }
        if let Some(count) = count {
            self.trim_evicted(state, count);
            while self.finished_set(state).len() as u64 > count {
                let Some((_, key)) = self.finished_set(state).pop_first() else {
                    break;
                };
                self.forget(key);
            }
        }
    }
}
