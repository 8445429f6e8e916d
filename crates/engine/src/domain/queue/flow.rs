//! Flows in one queue (`domain/flow.rs`): a parent waits in `waiting-children` until its
//! dependencies resolve; news of its children arrive as [`Notice`]s, which this queue also
//! raises for its own jobs' parents (a child finished, failed for good, or went). The engine
//! takes the raised notices after each operation ([`QueueState::take_notices`]) and delivers
//! each to its parent's queue ([`QueueState::child_ended`]), in the same storage submission.

use super::{id_of, Effects, NewJob, QueueState};
use crate::domain::changes::{EXTRA, STATE};
use crate::domain::event::EventKind;
use crate::domain::flow::{ChildEnd, ChildRef, Deps, Notice, OnChildFailure};
use crate::domain::job::{JobKey, JobState};
use crate::error::{EngineError, Result};

impl QueueState {
    /// Whether the queue holds a flow job (a child or a parent): the engine then works in flow
    /// mode. O(n), at recovery.
    pub fn uses_flows(&self) -> bool {
        !self.waiting_children.is_empty()
            || self
                .jobs
                .iter()
                .any(|(_, j)| j.parent().is_some() || j.deps().is_some())
    }

    /// Notices raised since the last call, for the engine to deliver.
    pub fn take_notices(&mut self) -> Vec<Notice> {
        std::mem::take(&mut self.notices)
    }

    /// Raises the notice that job `key`, a child, ended as `end` (nothing for a job without a
    /// parent).
    pub(super) fn notify_parent(&mut self, key: JobKey, end: impl FnOnce() -> ChildEnd) {
        let Some(job) = self.jobs.get(&key) else {
            return;
        };
        let Some(link) = job.parent() else {
            return;
        };
        let end = match end() {
            ChildEnd::Failed(reason, _) => ChildEnd::Failed(reason, link.on_failure),
            other => other,
        };
        self.notices.push(Notice {
            queue: link.queue.clone(),
            id: link.id.clone(),
            child: ChildRef {
                queue: self.name.clone(),
                id: job.id_string().into(),
            },
            end,
        });
    }

    /// Checks that job `id` may take a child: it exists and has not finished. Errors:
    /// `ERR_PARENT_NOT_FOUND` / `ERR_PARENT_FINISHED`.
    pub fn check_parent(&self, id: &str) -> Result<()> {
        let Some(job) = self.job_by_id(id) else {
            return Err(EngineError::ParentNotFound {
                queue: self.name.to_string(),
                id: id.to_string(),
            });
        };
        match job.state {
            JobState::Completed | JobState::Failed => Err(EngineError::ParentFinished {
                queue: self.name.to_string(),
                id: id.to_string(),
                state: job.state.as_str(),
            }),
            _ => Ok(()),
        }
    }

    /// Adds a job that waits for children (`waiting-children`) until its dependencies resolve;
    /// its children are added next, each with [`QueueState::add_dependency`]. Answers its key,
    /// or the error of a `jobId` taken already.
    pub fn add_parent(&mut self, job: NewJob, fx: &mut Effects) -> Result<JobKey> {
        if let Some(id) = &job.opts.job_id {
            if self.custom_ids.contains_key(id) || self.evicted.ids.contains_key(id) {
                return Err(EngineError::FlowJobExists {
                    queue: self.name.to_string(),
                    id: id.to_string(),
                });
            }
        }
        let mut job = job;
        // Not delayed now: a parent's delay counts from when its children are done.
        let delay = std::mem::take(&mut job.opts.delay);
        let key = self.new_record(job, JobState::Waiting, fx);
        let seq = self.next_state_seq();
        if let Some(j) = self.jobs.change(&key, STATE | EXTRA) {
            j.state = JobState::WaitingChildren;
            j.delay = delay;
            j.state_seq = seq;
            j.extra_mut().deps = Some(Box::default());
        }
        self.waiting_children.insert(seq, key);
        self.emit(fx, || EventKind::WaitingChildren {
            job_id: id_of(key, &self.jobs),
        });
        Ok(key)
    }

    /// Records `child` as a pending dependency of job `parent_id` (checked by
    /// [`QueueState::check_parent`]).
    pub fn add_dependency(&mut self, parent_id: &str, child: ChildRef) -> Result<()> {
        self.check_parent(parent_id)?;
        let Some(key) = self.key_of(parent_id) else {
            return Ok(());
        };
        if let Some(j) = self.jobs.change(&key, EXTRA) {
            let deps = j.extra_mut().deps.get_or_insert_with(Box::default);
            if !deps.pending.contains(&child) {
                deps.pending.push(child);
            }
        }
        Ok(())
    }

    /// A child of job `parent_id` ended: its dependency resolves by the child's rule, and the
    /// parent moves on when nothing is pending (to waiting, or delayed by its own delay), or
    /// fails (`failParentOnFailure`), raising its own parent's notice in turn. A notice for a
    /// job that is gone or finished changes nothing but its record of the child.
    pub fn child_ended(
        &mut self,
        parent_id: &str,
        child: ChildRef,
        end: ChildEnd,
        now: u64,
        fx: &mut Effects,
    ) {
        let Some(key) = self.key_of(parent_id) else {
            return;
        };
        let child_key = child.key();
        let mut fail = false;
        let mut go_now = false;
        {
            let Some(j) = self.jobs.change(&key, EXTRA) else {
                return;
            };
            let deps = j.extra_mut().deps.get_or_insert_with(Box::default);
            match end {
                ChildEnd::Completed(value) => {
                    deps.resolve(&child);
                    if !deps.processed.iter().any(|(c, _)| *c == child) {
                        deps.processed.push((child, value));
                    }
                }
                ChildEnd::Removed => {
                    deps.resolve(&child);
                }
                ChildEnd::Failed(reason, rule) => match rule {
                    // The parent keeps waiting for it.
                    OnChildFailure::Wait => {}
                    OnChildFailure::Remove => {
                        deps.resolve(&child);
                    }
                    OnChildFailure::Ignore => {
                        deps.resolve(&child);
                        deps.ignored.push((child, reason));
                    }
                    OnChildFailure::FailParent => {
                        deps.resolve(&child);
                        deps.failed.push((child, reason));
                        fail = true;
                    }
                    OnChildFailure::Continue => {
                        deps.resolve(&child);
                        deps.failed.push((child, reason));
                        go_now = true;
                    }
                },
            }
            go_now |= deps.pending.is_empty();
        }
        if self.jobs.get(&key).map(|j| j.state) != Some(JobState::WaitingChildren) {
            return;
        }
        if fail {
            self.fail_parent(key, format!("child {child_key} failed"), now, fx);
        } else if go_now {
            self.children_done(key, now, fx);
        }
    }

    /// A parent's dependencies, if it has any.
    pub fn dependencies(&self, id: &str) -> Option<Deps> {
        self.job_by_id(id)?.deps().cloned()
    }

    /// Moves a parent out of `waiting-children` to waiting, or delayed by its own `delay`.
    fn children_done(&mut self, key: JobKey, now: u64, fx: &mut Effects) {
        self.leave_waiting_children(key);
        let delay = self.jobs.get(&key).map_or(0, |j| j.delay);
        if delay > 0 {
            let run_at = now.saturating_add(delay);
            if let Some(j) = self.jobs.change(&key, STATE) {
                j.state = JobState::Delayed;
            }
            self.schedule(key, run_at);
            fx.wake(run_at);
            self.emit(fx, || EventKind::Delayed {
                job_id: id_of(key, &self.jobs),
                delay: run_at,
            });
            return;
        }
        self.push_ready(key, false);
        if !self.paused {
            self.waiters.notify(1);
        }
        self.emit(fx, || EventKind::Waiting {
            job_id: id_of(key, &self.jobs),
            prev: Some("waiting-children"),
        });
    }

    /// Fails a parent in `waiting-children` for good, with `reason`; its own parent hears.
    fn fail_parent(&mut self, key: JobKey, reason: String, now: u64, fx: &mut Effects) {
        self.leave_waiting_children(key);
        let seq = self.next_state_seq();
        let reason: Box<str> = reason.into();
        let finish_at = self.finish_time(now);
        if let Some(j) = self.jobs.change(&key, STATE | EXTRA) {
            j.state = JobState::Failed;
            j.finished_on = finish_at;
            j.state_seq = seq;
            j.extra_mut().failed_reason = Some(reason.clone());
        }
        self.failed.insert(seq, key);
        self.emit(fx, || EventKind::Failed {
            job_id: id_of(key, &self.jobs),
            failed_reason: reason.clone(),
        });
        self.notify_parent(key, || ChildEnd::Failed(reason, OnChildFailure::Wait));
    }

    /// Takes a job out of the `waiting-children` set.
    pub(super) fn leave_waiting_children(&mut self, key: JobKey) {
        if let Some(seq) = self.jobs.get(&key).map(|j| j.state_seq) {
            self.waiting_children.remove(&seq);
        }
    }
}
