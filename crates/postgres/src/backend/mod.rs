//! PostgreSQL as a [`Backend`]: every answer is `Reply::Later` (a round trip), resolved only
//! once the change is committed, so commit tickets never matter (`is_durable` is false: nothing
//! waits for a ticket). The backend runs its own small tokio runtime: its connections, the
//! listener of wake-up hints, the event feed and the periodic work live there, whoever awaits
//! the answers.
//!
//! What lives where:
//! - `work.rs`: take, pull (woken by `NOTIFY`), acks (retry and backoff decided here, from each
//!   job's options, as the embedded engine decides them);
//! - `read.rs`: getters, counts, pages, logs;
//! - `admin.rs` / `job_changes.rs`: pause, resume, drain, clean, obliterate, remove; changes of
//!   one job;
//! - `feed.rs`: the listener connection and QueueEvents' feed;
//! - `upkeep.rs`: the elected process's periodic work (promotion, sweeps, trims), lease holders
//!   and lease renewal;
//! - `steps.rs` / `bulk.rs`: step jobs' moves and `extendLock`; `retryJobs` / `promoteJobs`;
//! - `schedulers.rs`: job schedulers, their next jobs and their repair;
//! - `open.rs`: the configuration and the runtime.

mod admin;
mod bulk;
mod coalesce;
mod dlq;
mod feed;
mod flows;
mod job_changes;
mod metrics;
mod open;
mod read;
mod schedulers;
mod shared;
mod steps;
mod upkeep;
mod work;

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use ferroqueue_engine::application::events::Notifier;
use ferroqueue_engine::backend::{Backend, JobChange, Page, Pending, QueueRef, Reply};
use ferroqueue_engine::domain::dlq::DlqConfig;
use ferroqueue_engine::domain::flow::Deps;
use ferroqueue_engine::domain::groups::{GroupChange, GroupInfo};
use ferroqueue_engine::domain::job::JobState;
use ferroqueue_engine::domain::lease::{HolderInfo, LeaseTerms, WorkerInfo};
use ferroqueue_engine::domain::limits::{LimitChange, LimitSettings, WorkerLimits};
use ferroqueue_engine::domain::listing::StateFilter;
use ferroqueue_engine::domain::metrics::{FinishStats, Histogram, MetricsPage};
use ferroqueue_engine::domain::queue_name::qualified_name;
use ferroqueue_engine::FlowNode;
use ferroqueue_engine::{Ack, AckResult, Added, EngineError, NewJob, Result};
use parking_lot::Mutex;

use shared::{Held, Shared};

pub use open::PgConfig;

/// The PostgreSQL backend.
pub struct PgBackend {
    shared: Arc<Shared>,
    rt: Mutex<Option<tokio::runtime::Runtime>>,
    handle: tokio::runtime::Handle,
}

impl PgBackend {
    /// Adds or acks through the queue's coalescer (`coalesce.rs`).
    fn coalesced<T: coalesce::Coalesced>(&self, q: &QueueRef, items: Vec<T>) -> Reply<Vec<T::Out>> {
        if let Err(e) = self.shared.check_open() {
            return Reply::Now(Err(e));
        }
        let q = q.name_arc().clone();
        let (rx, start) = T::waiting(&self.shared).enqueue(&q, items);
        if start {
            self.handle
                .spawn(coalesce::flush::<T>(self.shared.clone(), q));
        }
        Reply::later(async move { rx.await.map_err(|_| coalesce::dropped())? })
    }

    /// Runs `f` on the backend's runtime; the answer is pending until it is done.
    fn run<T, F>(&self, f: impl FnOnce(Arc<Shared>) -> F) -> Reply<T>
    where
        T: Send + 'static,
        F: Future<Output = Result<T>> + Send + 'static,
    {
        if let Err(e) = self.shared.check_open() {
            return Reply::Now(Err(e));
        }
        let gate = self.shared.gate();
        let work = f(self.shared.clone());
        let task = self.handle.spawn(async move {
            gate.await;
            work.await
        });
        Reply::later(async move {
            task.await.map_err(|e| {
                EngineError::Internal(format!("a PostgreSQL call did not finish: {e}"))
            })?
        })
    }
}

impl Drop for PgBackend {
    fn drop(&mut self) {
        self.shared.closed.store(true, Ordering::Release);
        if let Some(rt) = self.rt.lock().take() {
            rt.shutdown_background();
        }
    }
}

impl Backend for PgBackend {
    fn queue(&self, prefix: Option<&str>, name: &str) -> Result<QueueRef> {
        Ok(QueueRef::new(Arc::from(qualified_name(prefix, name)?), 0))
    }

    fn add(&self, q: &QueueRef, job: NewJob) -> Reply<Added> {
        let one = |mut added: Vec<Added>| {
            added
                .pop()
                .ok_or_else(|| EngineError::Internal("an add answered nothing".into()))
        };
        // A job linked to a parent is added with its parent's dependency, in one transaction
        // (`flows.rs`).
        if job.opts.linked() {
            let q = q.name_arc().clone();
            return self
                .run(move |s| async move { one(flows::add_linked(&s, &q, vec![job]).await?) });
        }
        if job.opts.deduplication().is_some() {
            let q = q.name_arc().clone();
            let add = move |s: Arc<Shared>| async move {
                one(work::add_deduplicated(&s, &q, vec![job]).await?)
            };
            return self.run(add);
        }
        match self.coalesced(q, vec![job]) {
            Reply::Now(r) => Reply::Now(r.and_then(one)),
            Reply::Later(p) => Reply::later(async move { one(p.await?) }),
        }
    }

    fn add_bulk(&self, q: &QueueRef, jobs: Vec<NewJob>) -> Reply<Vec<Added>> {
        if jobs.iter().any(|j| j.opts.linked()) {
            let q = q.name_arc().clone();
            return self.run(move |s| async move { flows::add_linked(&s, &q, jobs).await });
        }
        if jobs.iter().any(|j| j.opts.deduplication().is_some()) {
            let q = q.name_arc().clone();
            return self.run(move |s| async move { work::add_deduplicated(&s, &q, jobs).await });
        }
        self.coalesced(q, jobs)
    }

    fn add_flow(&self, nodes: Vec<FlowNode>) -> Reply<Vec<String>> {
        self.run(move |s| async move { flows::add_flow(&s, nodes).await })
    }

    fn dependencies(&self, q: &QueueRef, id: &str) -> Reply<Option<Deps>> {
        let (q, id) = (q.name_arc().clone(), id.to_string());
        self.run(move |s| async move {
            let c = s.pool.get().await?;
            crate::flows::dependencies(&c, s.target(), &q, &id).await
        })
    }

    fn take(&self, q: &QueueRef, max: usize, worker: WorkerLimits) -> Reply<String> {
        let q = q.name_arc().clone();
        self.run(move |s| async move { work::take(&s, &q, max, worker).await })
    }

    fn pull(
        &self,
        q: &QueueRef,
        puller: u32,
        max: usize,
        worker: WorkerLimits,
        timeout: Duration,
    ) -> Pending<String> {
        let q = q.name_arc().clone();
        let pull = move |s: Arc<Shared>| async move {
            work::pull(&s, &q, puller, max, worker, timeout).await
        };
        match self.run(pull) {
            Reply::Now(r) => Box::pin(async move { r }),
            Reply::Later(p) => p,
        }
    }

    fn held_back(&self, q: &QueueRef, _worker: WorkerLimits) -> bool {
        self.shared.held_back.lock().contains(q.name())
    }

    fn cancel_pulls(&self, q: &QueueRef, puller: u32) -> Result<()> {
        let c = self.shared.cancel_of(q.name_arc(), puller);
        c.armed.store(true, Ordering::Release);
        c.notify.notify_waiters();
        Ok(())
    }

    fn ack(&self, q: &QueueRef, acks: Vec<Ack>) -> Reply<Vec<AckResult>> {
        self.coalesced(q, acks)
    }

    fn hold(&self, holder: u32, terms: LeaseTerms, who: Option<HolderInfo>) -> Result<()> {
        upkeep::hold(&self.shared, holder, terms, who)
    }

    fn let_go(&self, holder: u32) -> usize {
        upkeep::let_go(&self.shared, &self.handle, holder);
        0
    }

    fn held(&self, q: &QueueRef, holder: u32) -> Vec<(String, u64)> {
        upkeep::held(&self.shared, q.name(), holder)
    }

    fn extend_lock(&self, q: &QueueRef, id: &str, token: u64, ms: u64) -> Reply<bool> {
        let (q, id) = (q.name_arc().clone(), id.to_string());
        self.run(move |s| async move { steps::extend_lock(&s, &q, &id, token, ms).await })
    }

    fn take_stalled(&self, _q: &QueueRef) -> Reply<Vec<String>> {
        // Expired leases are swept by the elected process (upkeep.rs); nothing is found
        // active at an open here.
        Reply::Now(Ok(Vec::new()))
    }

    fn job(&self, q: &QueueRef, id: &str) -> Reply<Option<String>> {
        let (q, id) = (q.name_arc().clone(), id.to_string());
        self.run(move |s| async move { read::record(&s, &q, &id).await })
    }

    fn state(&self, q: &QueueRef, id: &str) -> Reply<Option<JobState>> {
        let (q, id) = (q.name_arc().clone(), id.to_string());
        self.run(move |s| async move { read::state(&s, &q, &id).await })
    }

    fn jobs(&self, q: &QueueRef, states: Vec<StateFilter>, page: Page) -> Reply<String> {
        let q = q.name_arc().clone();
        self.run(move |s| async move { read::page(&s, &q, &states, page).await })
    }

    fn counts(&self, q: &QueueRef, states: Vec<StateFilter>) -> Reply<Vec<usize>> {
        let q = q.name_arc().clone();
        self.run(move |s| async move { read::counts(&s, &q, &states).await })
    }

    fn count(&self, q: &QueueRef) -> Reply<usize> {
        let q = q.name_arc().clone();
        self.run(move |s| async move {
            // BullMQ's count: flow parents waiting for their children count too.
            let states = [
                JobState::Waiting,
                JobState::Prioritized,
                JobState::Delayed,
                JobState::WaitingChildren,
            ]
            .map(StateFilter::State);
            Ok(read::counts(&s, &q, &states).await?.iter().sum())
        })
    }

    fn is_paused(&self, q: &QueueRef) -> Reply<bool> {
        let q = q.name_arc().clone();
        self.run(move |s| async move { read::is_paused(&s, &q).await })
    }

    fn logs(&self, q: &QueueRef, id: &str, page: Page) -> Reply<(Vec<String>, usize)> {
        let (q, id) = (q.name_arc().clone(), id.to_string());
        self.run(move |s| async move { read::logs(&s, &q, &id, page).await })
    }

    fn limit(&self, q: &QueueRef, change: LimitChange) -> Reply<()> {
        let q = q.name_arc().clone();
        self.run(move |s| async move { admin::change_limits(&s, &q, change).await })
    }

    fn limits(&self, q: &QueueRef) -> Reply<(LimitSettings, u64)> {
        let q = q.name_arc().clone();
        self.run(move |s| async move {
            let c = s.pool.get().await?;
            crate::limits::read(&c, s.target(), &q).await
        })
    }

    fn change_group(&self, q: &QueueRef, group: &str, change: GroupChange) -> Reply<bool> {
        let (q, g) = (q.name_arc().clone(), group.to_string());
        self.run(move |s| async move {
            let c = s.pool.get().await?;
            crate::groups::change(&c, s.target(), &q, &g, change).await
        })
    }

    fn group_info(&self, q: &QueueRef, group: &str) -> Reply<GroupInfo> {
        let (q, g) = (q.name_arc().clone(), group.to_string());
        self.run(move |s| async move {
            let c = s.pool.get().await?;
            crate::groups::info(&c, s.target(), &q, &g).await
        })
    }

    fn group_jobs(&self, q: &QueueRef, group: &str, start: usize, end: i64) -> Reply<String> {
        let (q, g) = (q.name_arc().clone(), group.to_string());
        self.run(move |s| async move { read::group_page(&s, &q, &g, start, end).await })
    }

    fn grouped_count(&self, q: &QueueRef) -> Reply<usize> {
        let q = q.name_arc().clone();
        self.run(move |s| async move {
            let c = s.pool.get().await?;
            crate::groups::ready_count(&c, s.target(), &q).await
        })
    }

    fn dedup_holder(&self, q: &QueueRef, id: &str) -> Reply<Option<String>> {
        let (q, id) = (q.name_arc().clone(), id.to_string());
        self.run(move |s| async move {
            let c = s.pool.get().await?;
            crate::dedup::holder(&c, s.target(), &q, &id).await
        })
    }

    fn remove_dedup_key(&self, q: &QueueRef, id: &str, holder: Option<&str>) -> Reply<bool> {
        let (q, id) = (q.name_arc().clone(), id.to_string());
        let holder = holder.map(str::to_string);
        self.run(move |s| async move {
            let c = s.pool.exclusive().await?;
            crate::dedup::remove(&c, s.target(), &q, &id, holder.as_deref()).await
        })
    }

    fn pause(&self, q: &QueueRef) -> Reply<()> {
        let q = q.name_arc().clone();
        self.run(move |s| async move { admin::set_paused(&s, &q, true).await })
    }

    fn resume(&self, q: &QueueRef) -> Reply<()> {
        let q = q.name_arc().clone();
        self.run(move |s| async move { admin::set_paused(&s, &q, false).await })
    }

    fn drain(&self, q: &QueueRef, delayed: bool) -> Reply<usize> {
        let q = q.name_arc().clone();
        self.run(move |s| async move { admin::drain(&s, &q, delayed).await })
    }

    fn clean(
        &self,
        q: &QueueRef,
        grace: u64,
        limit: usize,
        state: StateFilter,
    ) -> Reply<Vec<String>> {
        let q = q.name_arc().clone();
        self.run(move |s| async move { admin::clean(&s, &q, grace, limit, state).await })
    }

    fn retry_jobs(&self, q: &QueueRef, from: JobState, count: usize, before: u64) -> Reply<usize> {
        let q = q.name_arc().clone();
        self.run(move |s| async move { bulk::retry_jobs(&s, &q, from, count, before).await })
    }

    fn promote_jobs(&self, q: &QueueRef, count: usize) -> Reply<usize> {
        let q = q.name_arc().clone();
        self.run(move |s| async move { bulk::promote_jobs(&s, &q, count).await })
    }

    fn retry_failed(&self, q: &QueueRef, ids: Vec<String>) -> Reply<usize> {
        let q = q.name_arc().clone();
        self.run(move |s| async move { bulk::retry_failed(&s, &q, &ids).await })
    }

    fn trim_dlq(&self, q: &QueueRef) -> Reply<usize> {
        let q = q.name_arc().clone();
        self.run(move |s| async move { dlq::bound(&s, &q).await })
    }

    fn queue_names(&self) -> Reply<Vec<String>> {
        self.run(move |s| async move { read::queue_names(&s).await })
    }

    fn workers(&self, q: &QueueRef) -> Reply<Vec<WorkerInfo>> {
        let q = q.name_arc().clone();
        self.run(move |s| async move { metrics::workers(&s, &q).await })
    }

    fn keep_metrics(&self, q: &QueueRef, points: u32) -> Reply<()> {
        // This process records from its next ack on; the stored setting follows.
        metrics::keep_here(&self.shared, q.name_arc(), points);
        let q = q.name_arc().clone();
        self.run(move |s| async move { metrics::store_points(&s, &q, points).await })
    }

    fn metrics(&self, q: &QueueRef, failed: bool, start: i64, end: i64) -> Reply<MetricsPage> {
        let q = q.name_arc().clone();
        self.run(move |s| async move { metrics::page(&s, &q, failed, start, end).await })
    }

    fn finish_stats(&self, q: &QueueRef) -> FinishStats {
        metrics::stats(&self.shared, q.name())
    }

    fn commit_latency(&self) -> Option<Histogram> {
        Some(self.shared.ack_us.lock().clone())
    }

    fn dlq_config(&self, q: &QueueRef) -> Reply<DlqConfig> {
        let q = q.name_arc().clone();
        self.run(move |s| async move { dlq::config(&s, &q).await })
    }

    fn set_dlq_config(&self, q: &QueueRef, config: DlqConfig) -> Reply<()> {
        let q = q.name_arc().clone();
        self.run(move |s| async move { dlq::set_config(&s, &q, config).await })
    }

    fn upsert_scheduler(
        &self,
        q: &QueueRef,
        id: &str,
        repeat: &str,
        template: (Option<&str>, &str, Option<&str>),
    ) -> Reply<String> {
        let (q, id, repeat) = (q.name_arc().clone(), id.to_string(), repeat.to_string());
        let (name, data, opts) = template;
        let template = (
            name.map(String::from),
            data.to_string(),
            opts.map(String::from),
        );
        self.run(move |s| async move { schedulers::upsert(&s, &q, &id, &repeat, template).await })
    }

    fn scheduler(&self, q: &QueueRef, id: &str) -> Reply<Option<String>> {
        let (q, id) = (q.name_arc().clone(), id.to_string());
        self.run(move |s| async move { schedulers::get(&s, &q, &id).await })
    }

    fn schedulers(&self, q: &QueueRef, page: Page) -> Reply<String> {
        let q = q.name_arc().clone();
        self.run(move |s| async move { schedulers::page(&s, &q, page).await })
    }

    fn scheduler_count(&self, q: &QueueRef) -> Reply<usize> {
        let q = q.name_arc().clone();
        self.run(move |s| async move { schedulers::count(&s, &q).await })
    }

    fn remove_scheduler(&self, q: &QueueRef, id: &str) -> Reply<bool> {
        let (q, id) = (q.name_arc().clone(), id.to_string());
        self.run(move |s| async move { schedulers::remove(&s, &q, &id).await })
    }

    fn obliterate(&self, q: &QueueRef, force: bool) -> Reply<()> {
        let q = q.name_arc().clone();
        self.run(move |s| async move { admin::obliterate(&s, &q, force).await })
    }

    fn remove(&self, q: &QueueRef, id: &str) -> Reply<bool> {
        let (q, id) = (q.name_arc().clone(), id.to_string());
        self.run(move |s| async move { admin::remove(&s, &q, &id).await })
    }

    fn change(&self, q: &QueueRef, id: &str, change: JobChange) -> Reply<usize> {
        let (q, id) = (q.name_arc().clone(), id.to_string());
        self.run(move |s| async move { job_changes::change(&s, &q, &id, change).await })
    }

    fn subscribe(&self, q: &QueueRef) -> Result<()> {
        self.shared.check_open()?;
        *self
            .shared
            .listeners
            .lock()
            .entry(q.name_arc().clone())
            .or_default() += 1;
        self.shared.subs_wanted.fetch_add(1, Ordering::AcqRel);
        self.shared.feed.notify_one();
        Ok(())
    }

    fn unsubscribe(&self, q: &QueueRef) -> Result<()> {
        let mut l = self.shared.listeners.lock();
        if let Some(n) = l.get_mut(q.name()) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                l.remove(q.name());
            }
        }
        Ok(())
    }

    fn set_event_notifier(&self, n: Option<Notifier>) {
        *self.shared.notifier.lock() = n;
    }

    fn drain_events_json(&self) -> String {
        let events = std::mem::take(&mut *self.shared.events.lock());
        ferroqueue_engine::wire::events(&*self.shared.wire, &events)
    }

    fn ticket(&self) -> u64 {
        0
    }

    fn committed(&self) -> u64 {
        0
    }

    fn set_commit_notifier(&self, _n: Option<Notifier>) {}

    fn take_commit_notice(&self) -> u64 {
        0
    }

    fn failure(&self) -> Option<EngineError> {
        None
    }

    fn require_fsync(&self) {}

    fn is_durable(&self) -> bool {
        false
    }

    fn is_closed(&self) -> bool {
        self.shared.closed.load(Ordering::Acquire)
    }

    fn close(&self) -> Pending<()> {
        let was = self.shared.closed.swap(true, Ordering::AcqRel);
        let shared = self.shared.clone();
        let handle = self.handle.clone();
        Box::pin(async move {
            if was {
                return Ok(());
            }
            shared.wake_all();
            for c in shared.cancels.lock().values() {
                c.notify.notify_waiters();
            }
            shared.feed.notify_waiters();
            // A permit too: the elected process may be between waits, and must stop now.
            shared.upkeep.notify_waiters();
            shared.upkeep.notify_one();
            let s = shared.clone();
            // Connections close when dropped; the runtime itself stops when the backend is
            // dropped.
            let _ = handle.spawn(async move { s.pool.clear().await }).await;
            Ok(())
        })
    }
}
