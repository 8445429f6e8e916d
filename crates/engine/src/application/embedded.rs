//! The embedded engine as a [`Backend`]: memory, or memory + one SQLite file. Answers come from
//! memory at once (`Reply::Now`); only a finished job that the file alone holds (evicted, see
//! `domain/queue/evicted.rs`) needs a file read or a revival first (`Reply::Later`). This file is
//! the whole of that routing: neither the binding nor JS knows where a job lives.

use std::time::Duration;

use tokio::sync::oneshot;

use super::engine::{Ack, Engine};
use super::engine_disk::stored_logs_page;
use super::engine_flows::FlowNode;
use super::events::Notifier;
use crate::backend::{Backend, JobChange, Page, Pending, QueueRef, Reply};
use crate::domain::dlq::DlqConfig;
use crate::domain::flow::Deps;
use crate::domain::groups::{GroupChange, GroupInfo};
use crate::domain::job::{Job, JobState};
use crate::domain::lease::{HolderInfo, LeaseTerms, WorkerInfo};
use crate::domain::limits::{LimitChange, LimitSettings, WorkerLimits};
use crate::domain::listing::StateFilter;
use crate::domain::metrics::{FinishStats, Histogram, MetricsPage};
use crate::domain::queue::{AckResult, Added, Effects, NewJob, QueueState};
use crate::error::{EngineError, Result};
use crate::wire;

/// Applies `change` to the job `id` in memory.
fn apply(
    qs: &mut QueueState,
    id: &str,
    change: &JobChange,
    now: u64,
    fx: &mut Effects,
) -> Result<usize> {
    match change {
        JobChange::Progress(p) => qs.update_progress(id, p.clone(), fx).map(|()| 0),
        JobChange::Log { row, keep } => qs.add_log(id, row.clone(), *keep),
        JobChange::Data(d) => qs.update_data(id, d.clone()).map(|()| 0),
        JobChange::Priority { priority, lifo } => {
            qs.change_priority(id, *priority, *lifo).map(|()| 0)
        }
        JobChange::Delay(d) => qs.change_delay(id, *d, now, fx).map(|()| 0),
        JobChange::Promote => qs.promote(id, fx).map(|()| 0),
        JobChange::Retry {
            from,
            reset_attempts,
        } => qs.retry(id, *from, *reset_attempts, fx).map(|()| 0),
    }
}

impl Engine {
    /// Job `id` as `f` reads it from memory, else, if only the file can hold it, as
    /// `from_stored` reads the job stored there (after a wait for the commit of everything
    /// submitted); `None` when there is no such job.
    fn find<T: Send + 'static>(
        &self,
        q: &QueueRef,
        id: &str,
        f: impl FnOnce(&QueueState) -> Option<T>,
        from_stored: impl FnOnce(Job) -> T + Send + 'static,
    ) -> Reply<Option<T>> {
        let found = self.read(q, |qs| match f(qs) {
            Some(v) => Ok(Some(v)),
            None => qs.evicted_key(id).map_or(Ok(None), Err),
        });
        match found {
            Some(Ok(v)) => Reply::Now(Ok(v)),
            None => Reply::Now(Ok(None)),
            Some(Err(key)) => {
                let (e, q) = (self.clone(), q.clone());
                Reply::later(async move {
                    e.read_file(move |e| Ok(e.stored_job(&q, key)?.map(from_stored)))
                        .await
                })
            }
        }
    }

    /// `value` now, or once the writer's backlog has room again: back-pressure on producers that
    /// outrun the disk (see [`crate::storage::BACKLOG_LIMIT`]). The change itself is made
    /// either way; only its answer waits.
    fn paced<T: Send + 'static>(&self, value: T) -> Reply<T> {
        if !self.backlogged() {
            return Reply::Now(Ok(value));
        }
        let e = self.clone();
        Reply::later(async move {
            e.backlog_room().await?;
            Ok(value)
        })
    }

    /// Like [`Engine::paced`], for an answer that may be an error (answered at once).
    fn paced_result<T: Send + 'static>(&self, r: Result<T>) -> Reply<T> {
        match r {
            Ok(v) => self.paced(v),
            Err(e) => Reply::Now(Err(e)),
        }
    }

    /// Whether a page of `states` must be read from the file (finished jobs beyond memory).
    fn pages_from_file(&self, q: &QueueRef, states: &[StateFilter]) -> bool {
        self.is_durable()
            && states.iter().any(|s| {
                matches!(
                    s,
                    StateFilter::State(JobState::Completed | JobState::Failed)
                )
            })
            && self.has_evicted(q)
    }
}

impl Backend for Engine {
    fn queue(&self, prefix: Option<&str>, name: &str) -> Result<QueueRef> {
        self.queue_ref_in(prefix, name)
    }

    fn add(&self, q: &QueueRef, job: NewJob) -> Reply<Added> {
        if job.opts.linked() {
            let added = self.add_linked(q, vec![job]).and_then(|mut v| {
                v.pop()
                    .ok_or_else(|| EngineError::Internal("an add answered nothing".into()))
            });
            return self.paced_result(added);
        }
        self.paced(Engine::add(self, q, job))
    }

    fn add_bulk(&self, q: &QueueRef, jobs: Vec<NewJob>) -> Reply<Vec<Added>> {
        if jobs.iter().any(|j| j.opts.linked()) {
            return self.paced_result(self.add_linked(q, jobs));
        }
        self.paced(Engine::add_bulk(self, q, jobs))
    }

    fn add_flow(&self, nodes: Vec<FlowNode>) -> Reply<Vec<String>> {
        self.paced_result(Engine::add_flow(self, nodes))
    }

    fn dependencies(&self, q: &QueueRef, id: &str) -> Reply<Option<Deps>> {
        Reply::Now(Ok(Engine::dependencies(self, q, id)))
    }

    fn take(&self, q: &QueueRef, max: usize, worker: WorkerLimits) -> Reply<String> {
        Reply::Now(Ok(Engine::take(self, q, max, worker).1))
    }

    fn pull(
        &self,
        q: &QueueRef,
        puller: u32,
        max: usize,
        worker: WorkerLimits,
        timeout: Duration,
    ) -> Pending<String> {
        let (e, q) = (self.clone(), q.clone());
        Box::pin(async move { Ok(e.pull(&q, puller, max, worker, timeout).await.1) })
    }

    fn held_back(&self, q: &QueueRef, worker: WorkerLimits) -> bool {
        Engine::held_back(self, q, worker)
    }

    fn cancel_pulls(&self, q: &QueueRef, puller: u32) -> Result<()> {
        Engine::cancel_pulls(self, q, puller);
        Ok(())
    }

    fn ack(&self, q: &QueueRef, acks: Vec<Ack>) -> Reply<Vec<AckResult>> {
        self.paced(self.ack_many(q, acks))
    }

    fn hold(&self, holder: u32, terms: LeaseTerms, who: Option<HolderInfo>) -> Result<()> {
        Engine::hold_as(self, holder, terms.checked()?, who);
        Ok(())
    }

    fn let_go(&self, holder: u32) -> usize {
        if self.is_closed() {
            return 0;
        }
        Engine::let_go(self, holder)
    }

    fn held(&self, q: &QueueRef, holder: u32) -> Vec<(String, u64)> {
        Engine::held(self, q, holder)
    }

    fn extend_lock(&self, q: &QueueRef, id: &str, token: u64, _ms: u64) -> Reply<bool> {
        Reply::Now(Ok(Engine::holds_lock(self, q, id, token)))
    }

    fn take_stalled(&self, q: &QueueRef) -> Reply<Vec<String>> {
        Reply::Now(Ok(Engine::take_stalled(self, q)))
    }

    fn job(&self, q: &QueueRef, id: &str) -> Reply<Option<String>> {
        let wire = self.inner.wire.clone();
        self.find(
            q,
            id,
            |qs| self.record_of(qs, id),
            move |job| wire::record(&*wire, &job),
        )
    }

    fn state(&self, q: &QueueRef, id: &str) -> Reply<Option<JobState>> {
        self.find(q, id, |qs| qs.state_of(id), |job| job.state)
    }

    fn jobs(&self, q: &QueueRef, states: Vec<StateFilter>, page: Page) -> Reply<String> {
        if !self.pages_from_file(q, &states) {
            let text = self
                .read(q, |qs| {
                    self.page_of(qs, &states, page.start, page.end, page.asc)
                })
                .unwrap_or_else(|| "[]".into());
            return Reply::Now(Ok(text));
        }
        let (e, q) = (self.clone(), q.clone());
        Reply::later(async move {
            e.read_file(move |e| e.jobs_json_with_disk(&q, &states, page.start, page.end, page.asc))
                .await
        })
    }

    fn counts(&self, q: &QueueRef, states: Vec<StateFilter>) -> Reply<Vec<usize>> {
        let counts = self
            .read(q, |qs| states.iter().map(|s| qs.count_of(*s)).collect())
            .unwrap_or_else(|| vec![0; states.len()]);
        Reply::Now(Ok(counts))
    }

    fn count(&self, q: &QueueRef) -> Reply<usize> {
        Reply::Now(Ok(Engine::count(self, q)))
    }

    fn is_paused(&self, q: &QueueRef) -> Reply<bool> {
        Reply::Now(Ok(Engine::is_paused(self, q)))
    }

    fn logs(&self, q: &QueueRef, id: &str, page: Page) -> Reply<(Vec<String>, usize)> {
        self.find(
            q,
            id,
            |qs| {
                qs.state_of(id)
                    .map(|_| qs.logs(id, page.start, page.end, page.asc))
            },
            move |job| stored_logs_page(job, page),
        )
        .map(Option::unwrap_or_default)
    }

    fn limit(&self, q: &QueueRef, change: LimitChange) -> Reply<()> {
        Engine::change_limits(self, q, change);
        Reply::Now(Ok(()))
    }

    fn limits(&self, q: &QueueRef) -> Reply<(LimitSettings, u64)> {
        Reply::Now(Ok(Engine::limits(self, q)))
    }

    fn change_group(&self, q: &QueueRef, group: &str, change: GroupChange) -> Reply<bool> {
        Reply::Now(Ok(Engine::change_group(self, q, group, change)))
    }

    fn group_info(&self, q: &QueueRef, group: &str) -> Reply<GroupInfo> {
        Reply::Now(Ok(Engine::group_info(self, q, group)))
    }

    fn group_jobs(&self, q: &QueueRef, group: &str, start: usize, end: i64) -> Reply<String> {
        Reply::Now(Ok(Engine::group_jobs(self, q, group, start, end)))
    }

    fn grouped_count(&self, q: &QueueRef) -> Reply<usize> {
        Reply::Now(Ok(Engine::grouped_count(self, q)))
    }

    fn dedup_holder(&self, q: &QueueRef, id: &str) -> Reply<Option<String>> {
        Reply::Now(Ok(Engine::dedup_holder(self, q, id)))
    }

    fn remove_dedup_key(&self, q: &QueueRef, id: &str, holder: Option<&str>) -> Reply<bool> {
        Reply::Now(Ok(Engine::remove_dedup_key(self, q, id, holder)))
    }

    fn retry_failed(&self, q: &QueueRef, ids: Vec<String>) -> Reply<usize> {
        // One job at a time, as `job.retry()` (an evicted one is read back from the file first):
        // about 15 µs a job in memory.
        let (e, q) = (self.clone(), q.clone());
        Reply::later(async move {
            let mut n = 0;
            for id in ids {
                let change = JobChange::Retry {
                    from: JobState::Failed,
                    reset_attempts: true,
                };
                match Backend::change(&e, &q, &id, change).wait().await {
                    Ok(_) => n += 1,
                    Err(EngineError::JobNotFound(_) | EngineError::InvalidState { .. }) => {}
                    Err(err) => return Err(err),
                }
            }
            Ok(n)
        })
    }

    fn trim_dlq(&self, q: &QueueRef) -> Reply<usize> {
        let n = self.with(q, |qs, now, _| qs.bound_dlq(now));
        self.paced(n)
    }

    fn queue_names(&self) -> Reply<Vec<String>> {
        Reply::Now(Ok(Engine::queue_names(self)))
    }

    fn workers(&self, q: &QueueRef) -> Reply<Vec<WorkerInfo>> {
        Reply::Now(Ok(Engine::workers(self, q)))
    }

    fn keep_metrics(&self, q: &QueueRef, points: u32) -> Reply<()> {
        Engine::keep_metrics(self, q, points);
        Reply::Now(Ok(()))
    }

    fn metrics(&self, q: &QueueRef, failed: bool, start: i64, end: i64) -> Reply<MetricsPage> {
        Reply::Now(Ok(Engine::metrics(self, q, failed, start, end)))
    }

    fn finish_stats(&self, q: &QueueRef) -> FinishStats {
        Engine::finish_stats(self, q)
    }

    fn commit_latency(&self) -> Option<Histogram> {
        Engine::commit_latency(self)
    }

    fn dlq_config(&self, q: &QueueRef) -> Reply<DlqConfig> {
        Reply::Now(Ok(self.read(q, |qs| qs.dlq_config()).unwrap_or_default()))
    }

    fn set_dlq_config(&self, q: &QueueRef, config: DlqConfig) -> Reply<()> {
        self.with(q, |qs, now, _| qs.set_dlq_config(config, now));
        self.paced(())
    }

    fn pause(&self, q: &QueueRef) -> Reply<()> {
        Engine::pause(self, q);
        Reply::Now(Ok(()))
    }

    fn resume(&self, q: &QueueRef) -> Reply<()> {
        Engine::resume(self, q);
        Reply::Now(Ok(()))
    }

    fn drain(&self, q: &QueueRef, delayed: bool) -> Reply<usize> {
        Reply::Now(Ok(Engine::drain(self, q, delayed)))
    }

    fn clean(
        &self,
        q: &QueueRef,
        grace: u64,
        limit: usize,
        state: StateFilter,
    ) -> Reply<Vec<String>> {
        match state {
            StateFilter::State(s @ (JobState::Completed | JobState::Failed))
                if self.pages_from_file(q, &[state]) =>
            {
                let (e, q) = (self.clone(), q.clone());
                Reply::later(async move { e.clean_with_disk(&q, grace, limit, s).await })
            }
            _ => Reply::Now(Ok(
                self.with(q, |qs, now, fx| qs.clean(grace, limit, state, now, fx))
            )),
        }
    }

    fn retry_jobs(&self, q: &QueueRef, from: JobState, count: usize, before: u64) -> Reply<usize> {
        if self.pages_from_file(q, &[StateFilter::State(from)]) {
            let (e, q) = (self.clone(), q.clone());
            return Reply::later(
                async move { e.retry_jobs_with_disk(&q, from, count, before).await },
            );
        }
        self.paced(Engine::retry_jobs(self, q, from, count, before))
    }

    fn promote_jobs(&self, q: &QueueRef, count: usize) -> Reply<usize> {
        self.paced(Engine::promote_jobs(self, q, count))
    }

    fn upsert_scheduler(
        &self,
        q: &QueueRef,
        id: &str,
        repeat: &str,
        template: (Option<&str>, &str, Option<&str>),
    ) -> Reply<String> {
        self.paced_result(Engine::upsert_scheduler(self, q, id, repeat, template))
    }

    fn scheduler(&self, q: &QueueRef, id: &str) -> Reply<Option<String>> {
        Reply::Now(Ok(self.scheduler_json(q, id)))
    }

    fn schedulers(&self, q: &QueueRef, page: Page) -> Reply<String> {
        Reply::Now(Ok(self.schedulers_json(q, page)))
    }

    fn scheduler_count(&self, q: &QueueRef) -> Reply<usize> {
        Reply::Now(Ok(Engine::scheduler_count(self, q)))
    }

    fn remove_scheduler(&self, q: &QueueRef, id: &str) -> Reply<bool> {
        self.paced(Engine::remove_scheduler(self, q, id))
    }

    fn obliterate(&self, q: &QueueRef, force: bool) -> Reply<()> {
        Reply::Now(Engine::obliterate(self, q, force))
    }

    fn remove(&self, q: &QueueRef, id: &str) -> Reply<bool> {
        let (tx, rx) = oneshot::channel();
        // Memory and file in one step under the queue's lock: the job cannot move between them.
        let removed = self.with(q, |qs, now, fx| match qs.remove(id, now, fx) {
            Ok(Some(_)) => Ok(Some(true)),
            Ok(None) => match qs.evicted_key(id) {
                Some(key) => {
                    qs.delete_evicted(key, tx);
                    Ok(None)
                }
                None => Ok(Some(false)),
            },
            Err(e) => Err(e),
        });
        match removed {
            Ok(Some(done)) => self.paced(done),
            Err(e) => Reply::Now(Err(e)),
            Ok(None) => {
                let e = self.clone();
                Reply::later(async move { e.replied(rx).await.map(|ids| !ids.is_empty()) })
            }
        }
    }

    fn change(&self, q: &QueueRef, id: &str, change: JobChange) -> Reply<usize> {
        let (tx, rx) = oneshot::channel();
        let first = self.with(q, |qs, now, fx| match apply(qs, id, &change, now, fx) {
            Err(EngineError::JobNotFound(m)) => match qs.evicted_key(id) {
                // Only the file has it: bring it back into memory first.
                Some(key) if qs.begin_revive(key, tx) => Err(key),
                _ => Ok(Err(EngineError::JobNotFound(m))),
            },
            r => Ok(r),
        });
        let key = match first {
            Ok(r) => return self.paced_result(r),
            Err(key) => key,
        };
        let (e, q, id) = (self.clone(), q.clone(), id.to_string());
        Reply::later(async move {
            let row = e.replied(rx).await?;
            let (r, seq) = e.with_seq(&q, |qs, now, fx| {
                if qs.finish_revive(key, row) {
                    apply(qs, &id, &change, now, fx)
                } else {
                    Err(EngineError::JobNotFound(id.clone()))
                }
            });
            let n = r?;
            // Answered off the caller's thread: its ticket is not the caller's, so wait here.
            e.commit_of(seq).await?;
            Ok(n)
        })
    }

    fn subscribe(&self, q: &QueueRef) -> Result<()> {
        Engine::subscribe(self, q);
        Ok(())
    }

    fn unsubscribe(&self, q: &QueueRef) -> Result<()> {
        Engine::unsubscribe(self, q);
        Ok(())
    }

    fn set_event_notifier(&self, n: Option<Notifier>) {
        Engine::set_event_notifier(self, n)
    }

    fn drain_events_json(&self) -> String {
        Engine::drain_events_json(self)
    }

    fn ticket(&self) -> u64 {
        Engine::ticket(self)
    }

    fn committed(&self) -> u64 {
        Engine::committed(self)
    }

    fn set_commit_notifier(&self, n: Option<Notifier>) {
        Engine::set_commit_notifier(self, n)
    }

    fn take_commit_notice(&self) -> u64 {
        Engine::take_commit_notice(self)
    }

    fn failure(&self) -> Option<EngineError> {
        self.storage_failure()
    }

    fn require_fsync(&self) {
        Engine::require_fsync(self)
    }

    fn is_durable(&self) -> bool {
        Engine::is_durable(self)
    }

    #[cfg(feature = "test-hooks")]
    fn stall_writer(&self, for_ms: u64) {
        Engine::stall_writer(self, for_ms)
    }

    fn is_closed(&self) -> bool {
        Engine::is_closed(self)
    }

    fn close(&self) -> Pending<()> {
        let e = self.clone();
        Box::pin(async move {
            let failure = tokio::task::spawn_blocking(move || {
                e.close();
                e.storage_failure()
            })
            .await
            .map_err(|e| EngineError::Internal(format!("closing did not finish: {e}")))?;
            match failure {
                Some(f) => Err(f),
                None => Ok(()),
            }
        })
    }
}
