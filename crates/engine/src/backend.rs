//! The operations facade: every queue operation the binding needs, as one trait, [`Backend`].
//! The binding holds an `Arc<dyn Backend>` per engine and calls nothing else; the embedded engine
//! (memory, or memory + SQLite) is its first implementation, in `application/embedded.rs`.
//!
//! Shaped for a backend whose truth is a shared database (see `docs/backends.md`):
//! - Calls are batch-shaped (`add_bulk`, `take`/`pull` of many jobs, `ack` of many).
//! - Every call answers a [`Reply`]: `Now` when the answer is at hand without waiting (the
//!   embedded engine's memory), `Later` when it needs a round trip (a file read, a database
//!   query). The binding turns `Now` into a plain JS value and `Later` into a promise, so the
//!   common case costs no async call.
//! - Nothing assumes the backend owns the only copy of a job: a job is found, listed, counted,
//!   changed and removed by the backend, wherever it lives.
//! - Durability is a commit ticket: a change made on the calling thread (answered `Now`, or
//!   answered `Later` only because the backend holds producers back) may not be committed yet;
//!   its ticket is read with [`Backend::ticket`] and is committed once [`Backend::committed`]
//!   reaches it. A change made elsewhere (after a round trip, on another thread) resolves only
//!   once committed. Callers wait for both: the answer, then the ticket.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crate::application::engine::Ack;
use crate::application::engine_flows::FlowNode;
use crate::application::events::Notifier;
use crate::domain::dlq::DlqConfig;
use crate::domain::flow::Deps;
use crate::domain::groups::{GroupChange, GroupInfo};
use crate::domain::job::JobState;
use crate::domain::lease::{HolderInfo, LeaseTerms, WorkerInfo};
use crate::domain::limits::{LimitChange, LimitSettings, WorkerLimits};
use crate::domain::listing::StateFilter;
use crate::domain::metrics::{FinishStats, Histogram, MetricsPage};
use crate::domain::queue::{AckResult, Added, NewJob};
use crate::error::{EngineError, Result};

/// An answer that needs a round trip (or a wait), resolved off the JS thread.
pub type Pending<T> = Pin<Box<dyn Future<Output = Result<T>> + Send + 'static>>;

/// A backend's answer: at hand, or pending.
pub enum Reply<T> {
    /// Answered without waiting.
    Now(Result<T>),
    /// Answered after a round trip or a commit.
    Later(Pending<T>),
}

impl<T: Send + 'static> Reply<T> {
    /// A pending answer from a future.
    pub fn later(f: impl Future<Output = Result<T>> + Send + 'static) -> Reply<T> {
        Reply::Later(Box::pin(f))
    }

    /// Waits for the answer (for tests and callers that are async anyway).
    pub async fn wait(self) -> Result<T> {
        match self {
            Reply::Now(r) => r,
            Reply::Later(f) => f.await,
        }
    }

    /// The answer if it is at hand; `None` for a pending one.
    pub fn now(self) -> Option<Result<T>> {
        match self {
            Reply::Now(r) => Some(r),
            Reply::Later(_) => None,
        }
    }

    /// Maps the value, now or later.
    pub fn map<U: Send + 'static>(self, f: impl FnOnce(T) -> U + Send + 'static) -> Reply<U> {
        match self {
            Reply::Now(r) => Reply::Now(r.map(f)),
            Reply::Later(p) => Reply::later(async move { p.await.map(f) }),
        }
    }
}

impl<T> From<Result<T>> for Reply<T> {
    fn from(r: Result<T>) -> Reply<T> {
        Reply::Now(r)
    }
}

/// A handle on one queue of a backend: its qualified name and a routing slot of the backend's
/// choosing (the embedded engine's shard), resolved once by [`Backend::queue`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueRef {
    name: Arc<str>,
    slot: usize,
}

impl QueueRef {
    /// A handle; backends build them in [`Backend::queue`].
    pub fn new(name: Arc<str>, slot: usize) -> QueueRef {
        QueueRef { name, slot }
    }

    /// The queue's qualified name (as events carry it).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The queue's name, shared.
    pub fn name_arc(&self) -> &Arc<str> {
        &self.name
    }

    /// The backend's routing slot.
    pub fn slot(&self) -> usize {
        self.slot
    }
}

/// A page of a list: `start..=end` (negative counts from the end), oldest first when `asc`.
#[derive(Debug, Clone, Copy)]
pub struct Page {
    pub start: i64,
    pub end: i64,
    pub asc: bool,
}

/// A change of one job.
#[derive(Debug, Clone)]
pub enum JobChange {
    /// Progress (JSON text).
    Progress(Box<str>),
    /// Appends a log row, keeping the newest `keep` rows (0: all).
    Log { row: Box<str>, keep: usize },
    /// Replaces the payload (JSON text).
    Data(Box<str>),
    /// A new priority (`lifo`: first of its priority).
    Priority { priority: u32, lifo: bool },
    /// A delayed job runs `delay` ms from now.
    Delay(u64),
    /// A delayed job runs now.
    Promote,
    /// A finished job (in state `from`) runs again.
    Retry {
        from: JobState,
        reset_attempts: bool,
    },
}

/// Every queue operation the binding needs. Ids are job id strings; records and pages of records
/// are JSON text, each record written by the [`crate::Wire`] the backend was opened with.
pub trait Backend: Send + Sync + 'static {
    /// Resolves (and validates) the queue `name` under BullMQ's `prefix`.
    fn queue(&self, prefix: Option<&str>, name: &str) -> Result<QueueRef>;

    /// Adds one job.
    fn add(&self, q: &QueueRef, job: NewJob) -> Reply<Added>;
    /// Adds jobs, all or none, in order.
    fn add_bulk(&self, q: &QueueRef, jobs: Vec<NewJob>) -> Reply<Vec<Added>>;
    /// Adds a flow (parents first, see [`FlowNode`]), all or none; answers the ids in order.
    fn add_flow(&self, nodes: Vec<FlowNode>) -> Reply<Vec<String>>;
    /// A flow parent's dependencies (`None`: no such job, or no children).
    fn dependencies(&self, q: &QueueRef, id: &str) -> Reply<Option<Deps>>;

    /// Activates up to `max` ready jobs now, within the queue's limits (`worker.rate`: the
    /// taking worker's own rate limit, one budget for the queue; the queue's own overrides it)
    /// and, for grouped jobs, their groups' (`worker.group`: defaults for groups without their
    /// own): a JSON array of records, each with its `token`.
    fn take(&self, q: &QueueRef, max: usize, worker: WorkerLimits) -> Reply<String>;
    /// Like [`Backend::take`], waiting up to `timeout` for a job that may start; empty on timeout
    /// or when [`Backend::cancel_pulls`] cancels `puller`.
    fn pull(
        &self,
        q: &QueueRef,
        puller: u32,
        max: usize,
        worker: WorkerLimits,
        timeout: Duration,
    ) -> Pending<String>;
    /// Whether the queue's ready jobs wait only for its limits (for a worker with `worker`), as
    /// the latest take of this process found: such a queue is not drained.
    fn held_back(&self, q: &QueueRef, worker: WorkerLimits) -> bool;
    /// Resolves every pending pull of `puller` empty (and the next one, if none is pending).
    fn cancel_pulls(&self, q: &QueueRef, puller: u32) -> Result<()>;
    /// Finishes activations; results in input order.
    fn ack(&self, q: &QueueRef, acks: Vec<Ack>) -> Reply<Vec<AckResult>>;
    /// Registers lease holder `holder` (an id unique in the process: one per Worker) with its
    /// terms and, if `getWorkers` lists it, who it is; the jobs it takes carry its id
    /// (`WorkerLimits::holder`).
    fn hold(&self, holder: u32, terms: LeaseTerms, who: Option<HolderInfo>) -> Result<()>;
    /// Holder `holder` is gone (closed, garbage-collected, its thread terminated): the jobs it
    /// still holds stall, at once where the backend knows its holders (the embedded engine) or
    /// when their leases expire (PostgreSQL). Answers how many stalled now.
    fn let_go(&self, holder: u32) -> usize;
    /// The active jobs of a queue that holder `holder` (of this process) holds, as `(id,
    /// token)`: what a Worker must settle when the thread that processed for that holder died.
    fn held(&self, q: &QueueRef, holder: u32) -> Vec<(String, u64)>;
    /// Extends the lease of job `id`, active under `token`, to `ms` from now where leases have a
    /// length (PostgreSQL); answers whether the job is still active under that token.
    fn extend_lock(&self, q: &QueueRef, id: &str, token: u64, ms: u64) -> Reply<bool>;
    /// Ids of jobs found active when the backend recovered (each reported once).
    fn take_stalled(&self, q: &QueueRef) -> Reply<Vec<String>>;

    /// A job's record, `None` when there is no such job.
    fn job(&self, q: &QueueRef, id: &str) -> Reply<Option<String>>;
    /// A job's state, `None` when there is no such job.
    fn state(&self, q: &QueueRef, id: &str) -> Reply<Option<JobState>>;
    /// A page of the jobs in `states` (listed state after state) as a JSON array of records.
    fn jobs(&self, q: &QueueRef, states: Vec<StateFilter>, page: Page) -> Reply<String>;
    /// Counts per state, in the order asked.
    fn counts(&self, q: &QueueRef, states: Vec<StateFilter>) -> Reply<Vec<usize>>;
    /// Jobs that will run: waiting + prioritized + delayed.
    fn count(&self, q: &QueueRef) -> Reply<usize>;
    /// Whether the queue is paused.
    fn is_paused(&self, q: &QueueRef) -> Reply<bool>;
    /// A page of a job's log rows and their total (none for an unknown job).
    fn logs(&self, q: &QueueRef, id: &str, page: Page) -> Reply<(Vec<String>, usize)>;

    /// Changes the queue's limits (its rate limit, its cap on active jobs, a hold).
    fn limit(&self, q: &QueueRef, change: LimitChange) -> Reply<()>;
    /// The queue's limit settings, and the ms until it takes jobs again by its own rate limit or
    /// a hold (0: it does now).
    fn limits(&self, q: &QueueRef) -> Reply<(LimitSettings, u64)>;

    /// Changes a group's settings; answers whether they changed (`pauseGroup` of a paused
    /// group does not).
    fn change_group(&self, q: &QueueRef, group: &str, change: GroupChange) -> Reply<bool>;
    /// What a group holds and its settings.
    fn group_info(&self, q: &QueueRef, group: &str) -> Reply<GroupInfo>;
    /// A group's ready jobs `start..=end` (negative `end`: from the last) in the order it hands
    /// them out, as a JSON array of records.
    fn group_jobs(&self, q: &QueueRef, group: &str, start: usize, end: i64) -> Reply<String>;
    /// Ready jobs in every group of the queue.
    fn grouped_count(&self, q: &QueueRef) -> Reply<usize>;

    /// The id of the job holding the deduplication key of `id` (`getDeduplicationJobId`).
    fn dedup_holder(&self, q: &QueueRef, id: &str) -> Reply<Option<String>>;
    /// Removes the deduplication key of `id`; with `holder`, only if that job holds it. Answers
    /// whether a live key was removed.
    fn remove_dedup_key(&self, q: &QueueRef, id: &str, holder: Option<&str>) -> Reply<bool>;

    /// Stops workers from taking jobs.
    fn pause(&self, q: &QueueRef) -> Reply<()>;
    /// Lets workers take jobs again.
    fn resume(&self, q: &QueueRef) -> Reply<()>;
    /// Removes ready (and, with `delayed`, delayed) jobs; answers how many.
    fn drain(&self, q: &QueueRef, delayed: bool) -> Reply<usize>;
    /// Removes jobs of `state` older than `grace` ms, oldest first, at most `limit` (0: all);
    /// answers their ids.
    fn clean(
        &self,
        q: &QueueRef,
        grace: u64,
        limit: usize,
        state: StateFilter,
    ) -> Reply<Vec<String>>;
    /// Moves up to `count` jobs of finished state `from` that finished before `before` (ms)
    /// back to waiting, oldest first; answers how many (0: none left).
    fn retry_jobs(&self, q: &QueueRef, from: JobState, count: usize, before: u64) -> Reply<usize>;
    /// Moves up to `count` delayed jobs to waiting, earliest due first; answers how many.
    fn promote_jobs(&self, q: &QueueRef, count: usize) -> Reply<usize>;

    /// Moves the failed jobs `ids` back to waiting, their attempts counted from 0 again (a retry
    /// from the DLQ); answers how many (an id that is not a failed job is skipped).
    fn retry_failed(&self, q: &QueueRef, ids: Vec<String>) -> Reply<usize>;
    /// Removes the oldest failed jobs beyond the DLQ's `maxEntries`; answers how many.
    fn trim_dlq(&self, q: &QueueRef) -> Reply<usize>;
    /// The names of every queue the backend holds (`prefix:name`, or the name in the default
    /// namespace), sorted.
    fn queue_names(&self) -> Reply<Vec<String>>;
    /// The live Workers of a queue: of this process on the embedded engine, of every process
    /// on PostgreSQL.
    fn workers(&self, q: &QueueRef) -> Reply<Vec<WorkerInfo>>;
    /// Records BullMQ's per-minute counts of finished jobs of a queue, for the newest `points`
    /// minutes (a Worker's `metrics.maxDataPoints`; the most asked for wins).
    fn keep_metrics(&self, q: &QueueRef, points: u32) -> Reply<()>;
    /// BullMQ's `getMetrics`: the per-minute counts of completed (or, with `failed`, failed)
    /// jobs, data points `start..=end` (newest first, negative from the end).
    fn metrics(&self, q: &QueueRef, failed: bool, start: i64, end: i64) -> Reply<MetricsPage>;
    /// What this process saw finish on a queue since its engine opened: totals and processing
    /// times (Prometheus's counters).
    fn finish_stats(&self, q: &QueueRef) -> FinishStats;
    /// How long commits took, µs: the durable writer's (SQLite) or the acks' transactions
    /// (PostgreSQL); `None` for an engine in memory.
    fn commit_latency(&self) -> Option<Histogram>;
    /// The queue's DLQ settings (`domain/dlq.rs`; the defaults until set).
    fn dlq_config(&self, q: &QueueRef) -> Reply<DlqConfig>;
    /// Replaces the queue's DLQ settings; a lower `max_entries` may apply at once.
    fn set_dlq_config(&self, q: &QueueRef, config: DlqConfig) -> Reply<()>;
    /// Creates or updates job scheduler `id`: `repeat` (the JSON of
    /// [`crate::domain::scheduler::RepeatOptions`]) and its job template (name, data JSON,
    /// options JSON); answers the record of its pending job.
    fn upsert_scheduler(
        &self,
        q: &QueueRef,
        id: &str,
        repeat: &str,
        template: (Option<&str>, &str, Option<&str>),
    ) -> Reply<String>;
    /// Scheduler `id` as BullMQ's `JobSchedulerJson`, `None` when there is none.
    fn scheduler(&self, q: &QueueRef, id: &str) -> Reply<Option<String>>;
    /// A page of the schedulers by next run, as a JSON array.
    fn schedulers(&self, q: &QueueRef, page: Page) -> Reply<String>;
    /// How many schedulers the queue has.
    fn scheduler_count(&self, q: &QueueRef) -> Reply<usize>;
    /// Removes scheduler `id` and its pending job; answers whether it existed.
    fn remove_scheduler(&self, q: &QueueRef, id: &str) -> Reply<bool>;
    /// Removes everything of the queue (refused while jobs are active unless `force`).
    fn obliterate(&self, q: &QueueRef, force: bool) -> Reply<()>;
    /// Removes a job unless it is active (`ERR_JOB_LOCKED`); answers whether it existed.
    fn remove(&self, q: &QueueRef, id: &str) -> Reply<bool>;
    /// Changes one job; answers its log row count for [`JobChange::Log`], else 0.
    fn change(&self, q: &QueueRef, id: &str, change: JobChange) -> Reply<usize>;

    /// Counts one more event listener on a queue (only queues with listeners collect events).
    fn subscribe(&self, q: &QueueRef) -> Result<()>;
    /// Counts one listener less.
    fn unsubscribe(&self, q: &QueueRef) -> Result<()>;
    /// Sets the function called (from any thread, coalesced) when events can be drained.
    fn set_event_notifier(&self, n: Option<Notifier>);
    /// Takes the buffered events: a JSON array of `["queue","event",{payload}]`.
    fn drain_events_json(&self) -> String;

    /// The commit ticket of the latest change the calling thread made through this backend
    /// (0: nothing to wait for). Changes of one thread get increasing tickets.
    fn ticket(&self) -> u64;
    /// Every change with a ticket up to this one is committed.
    fn committed(&self) -> u64;
    /// Sets the function called (from any thread, coalesced) after commits; the callee re-arms
    /// it with [`Backend::take_commit_notice`].
    fn set_commit_notifier(&self, n: Option<Notifier>);
    /// Re-arms the commit notifier; answers [`Backend::committed`].
    fn take_commit_notice(&self) -> u64;
    /// The failure that stopped writes, if any: nothing after it is committed.
    fn failure(&self) -> Option<EngineError>;
    /// Makes later commits survive power loss, not only a crash (durability `'fsync'`).
    fn require_fsync(&self);
    /// Whether changes are written anywhere (tickets matter).
    fn is_durable(&self) -> bool;

    /// Test hook: commit nothing for `for_ms` (a stalled disk). Only in `test-hooks` builds.
    #[cfg(feature = "test-hooks")]
    fn stall_writer(&self, _for_ms: u64) {}

    /// Whether [`Backend::close`] was called.
    fn is_closed(&self) -> bool;
    /// Commits what is queued and lets go of the storage; later calls fail with
    /// `ERR_QUEUE_CLOSED`. Idempotent.
    fn close(&self) -> Pending<()>;
}
