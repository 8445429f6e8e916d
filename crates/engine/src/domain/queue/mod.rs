//! One queue's state machine: add, take (activate), ack (complete / fail / retry) and the delayed
//! promotion, with the structures that hold each state.
//!
//! - waiting + prioritized: one [`ReadyHeap`] keyed by `(priority, order)`: priority 0 sorts
//!   first, then lower numbers; `order` is an increasing admission counter (negated for `lifo`), so
//!   equal priorities are FIFO and `lifo` jumps the line within its priority. Jobs of a `group`
//!   wait in their group's lane instead, a heap of the same kind ([`Groups`], `lanes.rs`).
//! - delayed: a [`DelayedHeap`] by run-at (FIFO on ties).
//! - active / completed / failed: `BTreeMap<seq, key>` in the order jobs entered the state, which
//!   gives paging, oldest-first trimming for retention and O(log n) removal.
//!
//! Invariant: every job in `jobs` is in exactly one of those structures, the one its `state` names.
//!
//! The fields are private to this module and its children, one file per concern: adding
//! (`add.rs`), where ready jobs wait and groups (`lanes.rs`), taking within limits (`take.rs`),
//! finishing an activation (`ack.rs`), flows (`flow.rs`), deduplication (`dedup.rs`), reads
//! (`read.rs`), administrative operations (`admin.rs`), the books of jobs only the file holds
//! (`evicted.rs`) and rebuilding from storage (`rebuild.rs`). Every
//! change of a job goes through the [`JobStore`], which records it; [`QueueState::take_changes`]
//! hands what changed to storage (`storage/rows.rs` decides how it is written).

use std::collections::BTreeMap;
use std::sync::Arc;

use rustc_hash::{FxHashMap, FxHashSet};

use super::changes::{Changes, EvictedOp, STATE};
use super::dedup::{DedupKey, DedupKeys};
use super::dlq::DlqConfig;
use super::event::{Event, EventKind};
use super::groups::Groups;
use super::job::{Job, JobKey, JobState};
use super::job_store::JobStore;
use super::job_table::JobTable;
use super::limits::Limits;
use super::metrics::QueueMetrics;
use super::options::JobOptions;
use super::ready::ReadyHeap;
use super::waiters::WaiterQueue;
use crate::structures::DelayedHeap;

mod ack;
mod add;
mod admin;
mod bulk;
mod dedup;
pub mod evicted;
mod flow;
mod lanes;
mod read;
mod rebuild;
mod schedulers;
mod stall;
mod steps;
mod take;
#[cfg(test)]
mod tests;

pub use crate::domain::job_scheduler::{parse_slot_job_id, slot_job_id, Scheduler};
pub use rebuild::{Stored, StoredSettings};
pub use stall::{MAX_STALLED_COUNT, STALLED_TOO_OFTEN};

/// Side effects of an operation that the engine carries out after releasing the shard lock.
#[derive(Default, Debug)]
pub struct Effects {
    /// Events for listeners (only collected while the queue has listeners).
    pub events: Vec<Event>,
    /// Earliest run-at of a job that entered the delayed set.
    pub wake_at: Option<u64>,
}

impl Effects {
    fn wake(&mut self, at: u64) {
        self.wake_at = Some(self.wake_at.map_or(at, |w| w.min(at)));
    }
}

/// A job to add.
#[derive(Debug, Clone)]
pub struct NewJob {
    pub name: String,
    /// Payload as JSON text.
    pub data: Box<str>,
    pub opts: JobOptions,
    /// Options as the user gave them, echoed back in `opts`.
    pub opts_json: Option<Box<str>>,
    /// Creation time; `delay` counts from it.
    pub timestamp: u64,
}

/// What `add` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Added {
    /// A new job with this key.
    New(JobKey),
    /// A job with that custom id exists already; nothing was added.
    Duplicate(JobKey),
    /// A job holds the key of its deduplication id; nothing was added.
    Deduplicated(JobKey),
}

/// How a worker finished an activation.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Success, with the return value as JSON text.
    Completed(Box<str>),
    /// Failure.
    Failed {
        reason: Box<str>,
        stack: Option<Box<str>>,
        /// Fail now whatever attempts remain.
        unrecoverable: bool,
        /// The attempt ran past the job's `timeout` (its history says so, `dlq.rs`).
        timed_out: bool,
        /// The worker thread or child process that ran it died (its history says so).
        lost: bool,
        /// The wait before a retry as the worker's backoff strategy computed it; `None`: by the
        /// job's `backoff` option.
        delay: Option<u64>,
    },
    /// Given back unprocessed: back to the head of waiting, no attempt counted. `started`:
    /// its processor ran (a worker closed with force), which counts in `attemptsStarted`; a job
    /// a worker claimed ahead (prefetch) and gave back unstarted does not.
    Released { started: bool },
    /// A step of a step job (`job.moveToDelayed`): delayed until `run_at` (ms), no attempt
    /// spent.
    Delayed { run_at: u64 },
    /// A step of a step job (`job.moveToWaitingChildren`): waits for its pending children, no
    /// attempt spent; a job with none pending stays active.
    WaitingChildren,
}

/// What an ack did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckResult {
    Completed,
    /// Failed and will be retried after `delay` ms (0: back to waiting now).
    Retrying {
        delay: u64,
    },
    /// Failed for good.
    Failed,
    /// Back to waiting, unprocessed.
    Released,
    /// Delayed by its processor, a step of a step job.
    Delayed,
    /// Waiting for its children, a step of a step job.
    WaitingChildren,
    /// Still active: it has no pending children to wait for (its lock stays valid).
    StillActive,
    /// The job was not active under that token (removed, obliterated or already acked).
    Stale,
}

/// Most distinct job names interned per queue; beyond that names are allocated per job.
const MAX_INTERNED_NAMES: usize = 1_024;

/// One queue.
pub struct QueueState {
    name: Arc<str>,
    jobs: JobStore,
    custom_ids: FxHashMap<Box<str>, JobKey>,
    names: FxHashSet<Arc<str>>,
    last_auto_id: u64,
    /// The latest `finished_on` given: finish times never go back within a queue, so the
    /// finished sets (by `state_seq`) are ordered by `finished_on` too (see `finish_time`).
    last_finished: u64,
    custom_seq: u64,
    order_seq: i64,
    /// Ready jobs without a group; grouped ones wait in their group's lane (`lanes.rs`).
    ready: ReadyHeap,
    groups: Groups,
    /// Prioritized jobs among the ready ones, grouped or not.
    prioritized: usize,
    delayed: DelayedHeap<JobKey>,
    active: BTreeMap<u64, JobKey>,
    completed: BTreeMap<u64, JobKey>,
    failed: BTreeMap<u64, JobKey>,
    /// Flow parents waiting for their children (`flow.rs`), by `state_seq`.
    waiting_children: BTreeMap<u64, JobKey>,
    /// Notices for parents of this queue's jobs, until the engine takes them (`flow.rs`).
    notices: Vec<crate::domain::flow::Notice>,
    state_seq: u64,
    lock_seq: u64,
    paused: bool,
    /// Rate limit, cap on active jobs and hold (`take.rs`).
    limits: Limits,
    /// Deduplication keys (`dedup.rs`), and those set or dropped since the last
    /// [`QueueState::take_dedup_ops`] (durable queues).
    dedup: DedupKeys,
    dedup_ops: Vec<(Box<str>, Option<DedupKey>)>,
    /// Long-poll waiters of this queue.
    waiters: WaiterQueue,
    /// Number of event listeners; events are collected only while > 0.
    listeners: u32,
    /// Source of jitter for backoff (xorshift).
    rng: u64,
    /// Since the last [`QueueState::take_changes`] (durable queues only): the paused flag
    /// changed, the queue was wiped, operations on evicted jobs.
    settings_changed: bool,
    wiped: bool,
    evicted_ops: Vec<EvictedOp>,
    /// Ids of jobs found active at recovery and put back (reported as `stalled`).
    stalled: Vec<String>,
    /// Finished jobs that live only on disk.
    evicted: evicted::Evicted,
    /// Job schedulers (`schedulers.rs`).
    schedulers: schedulers::Schedulers,
    /// The DLQ's settings (`domain/dlq.rs`).
    dlq: DlqConfig,
    /// What its finished jobs add up to (`domain/metrics.rs`).
    metrics: QueueMetrics,
}

impl QueueState {
    /// An empty queue.
    pub fn new(name: Arc<str>) -> Self {
        let seed = crate::structures::fnv1a(name.as_bytes()) as u64 | 1;
        QueueState {
            name,
            jobs: JobStore::default(),
            custom_ids: FxHashMap::default(),
            names: FxHashSet::default(),
            last_auto_id: 0,
            last_finished: 0,
            custom_seq: 0,
            order_seq: 0,
            ready: ReadyHeap::default(),
            groups: Groups::default(),
            prioritized: 0,
            delayed: DelayedHeap::new(),
            active: BTreeMap::new(),
            completed: BTreeMap::new(),
            failed: BTreeMap::new(),
            waiting_children: BTreeMap::new(),
            notices: Vec::new(),
            state_seq: 0,
            lock_seq: 0,
            paused: false,
            limits: Limits::default(),
            dedup: DedupKeys::default(),
            dedup_ops: Vec::new(),
            waiters: WaiterQueue::default(),
            listeners: 0,
            rng: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
            settings_changed: false,
            wiped: false,
            evicted_ops: Vec::new(),
            stalled: Vec::new(),
            evicted: evicted::Evicted::default(),
            schedulers: schedulers::Schedulers::default(),
            dlq: DlqConfig::default(),
            metrics: QueueMetrics::default(),
        }
    }

    /// What its finished jobs add up to.
    pub fn metrics(&self) -> &QueueMetrics {
        &self.metrics
    }

    /// A Worker asks for BullMQ's per-minute counts, for `points` minutes.
    pub fn keep_metrics(&mut self, points: u32) {
        self.metrics.keep_points(points);
    }

    /// The queue's qualified name.
    pub fn name(&self) -> &Arc<str> {
        &self.name
    }

    /// The `finished_on` of a job finishing at `now`: `now`, or the latest one given if the
    /// clock went back. So a finished set, ordered by when jobs entered it, is ordered by
    /// `finished_on` as well, and `clean` walks it from the oldest instead of sorting it.
    fn finish_time(&mut self, now: u64) -> u64 {
        self.last_finished = self.last_finished.max(now);
        self.last_finished
    }

    /// How many jobs are active. O(1).
    pub fn active_len(&self) -> usize {
        self.active.len()
    }

    /// Whether this queue records its changes for storage (a durable queue).
    pub fn persists(&self) -> bool {
        self.jobs.persists()
    }

    /// Turns recording on (durable engines) or off.
    pub fn set_persist(&mut self, on: bool) {
        self.jobs.set_persist(on);
    }

    /// Pauses or resumes the queue; its settings changed.
    fn set_paused(&mut self, paused: bool) {
        self.paused = paused;
        self.settings_changed |= self.jobs.persists();
    }

    /// The DLQ's settings.
    pub fn dlq_config(&self) -> DlqConfig {
        self.dlq
    }

    /// Changes the DLQ's settings; a lower `maxEntries` applies at once. `now` stamps nothing.
    pub fn set_dlq_config(&mut self, config: DlqConfig, now: u64) {
        self.dlq = config;
        self.settings_changed |= self.jobs.persists();
        self.bound_dlq(now);
    }

    /// Takes what changed since the last call (nothing on an in-memory queue).
    pub fn take_changes(&mut self) -> Changes {
        Changes {
            wiped: std::mem::take(&mut self.wiped),
            settings: std::mem::take(&mut self.settings_changed),
            evicted: std::mem::take(&mut self.evicted_ops),
            jobs: self.jobs.take_touched(),
        }
    }

    /// The job `key` in memory.
    pub fn job(&self, key: JobKey) -> Option<&Job> {
        self.jobs.get(&key)
    }

    /// Run-at of the delayed job `key`.
    pub fn run_at(&self, key: JobKey) -> Option<u64> {
        self.delayed.get(&key)
    }

    /// Position key of the ready job `key` within its priority (negative for lifo).
    pub fn ready_order(&self, key: JobKey) -> Option<i64> {
        self.ready.get(&self.jobs, key).map(|(_, o)| o)
    }

    /// The id sequences: highest automatic id and custom-id key handed out so far.
    pub fn id_sequences(&self) -> (u64, u64) {
        (self.last_auto_id, self.custom_seq)
    }

    /// The queue's long-poll waiters.
    pub fn waiters(&mut self) -> &mut WaiterQueue {
        &mut self.waiters
    }

    /// One more event listener: events are collected while there is any.
    pub fn subscribe(&mut self) {
        self.listeners += 1;
    }

    /// One event listener less.
    pub fn unsubscribe(&mut self) {
        self.listeners = self.listeners.saturating_sub(1);
    }

    /// Takes the ids of jobs found active at recovery (each reported once).
    pub fn take_stalled(&mut self) -> Vec<String> {
        std::mem::take(&mut self.stalled)
    }

    /// Records an event if anyone listens.
    fn emit(&self, fx: &mut Effects, kind: impl FnOnce() -> EventKind) {
        if self.listeners > 0 {
            fx.events.push(Event {
                queue: self.name.clone(),
                kind: kind(),
            });
        }
    }

    fn intern(&mut self, name: &str) -> Arc<str> {
        if let Some(n) = self.names.get(name) {
            return n.clone();
        }
        let n: Arc<str> = Arc::from(name);
        if self.names.len() < MAX_INTERNED_NAMES {
            self.names.insert(n.clone());
        }
        n
    }

    fn next_state_seq(&mut self) -> u64 {
        self.state_seq += 1;
        self.state_seq
    }

    /// Puts a job (already in `jobs`) in the delayed heap to run at `run_at`. Its `seq` (written)
    /// orders it after the jobs scheduled before it for the same time, also after a restart.
    fn schedule(&mut self, key: JobKey, run_at: u64) {
        let seq = self.next_state_seq();
        if let Some(job) = self.jobs.change(&key, STATE) {
            job.state_seq = seq;
        }
        self.delayed.insert(key, run_at);
    }

    /// Moves due delayed jobs to the ready heap and wakes waiters. O(k log n).
    pub fn promote_due(&mut self, now: u64, fx: &mut Effects) -> usize {
        self.promote_from_delayed(now, usize::MAX, false, fx)
    }

    /// Moves up to `max` delayed jobs due by `now` to the ready heap, earliest first, and wakes
    /// waiters; `promoted`: they were promoted early (their `delay` becomes 0, as `promote`
    /// does). O(k log n).
    fn promote_from_delayed(
        &mut self,
        now: u64,
        max: usize,
        promoted: bool,
        fx: &mut Effects,
    ) -> usize {
        let mut n = 0;
        while n < max {
            let Some((key, _)) = self.delayed.pop_due(now) else {
                break;
            };
            if promoted {
                if let Some(job) = self.jobs.change(&key, STATE) {
                    job.delay = 0;
                }
            }
            self.push_ready(key, false);
            self.emit(fx, || EventKind::Waiting {
                job_id: id_of(key, &self.jobs),
                prev: Some("delayed"),
            });
            n += 1;
        }
        if n > 0 && !self.paused {
            self.waiters.notify(n);
        }
        n
    }

    /// Earliest run-at among delayed jobs.
    pub fn next_due(&mut self) -> Option<u64> {
        self.delayed.next_due()
    }

    fn finished_set(&mut self, state: JobState) -> &mut BTreeMap<u64, JobKey> {
        match state {
            JobState::Failed => &mut self.failed,
            JobState::Active => &mut self.active,
            _ => &mut self.completed,
        }
    }

    /// Drops a job that is already out of every state structure.
    fn forget(&mut self, key: JobKey) -> Option<Job> {
        // A child that goes before it finished no longer holds its parent back.
        if self
            .jobs
            .get(&key)
            .is_some_and(|j| !matches!(j.state, JobState::Completed | JobState::Failed))
        {
            self.notify_parent(key, || crate::domain::flow::ChildEnd::Removed);
        }
        // Removing the record deletes its row; a revival still under way for it is over.
        self.evicted.reviving.remove(&key);
        let job = self.jobs.remove(&key)?;
        if let Some(id) = job.custom_id() {
            self.custom_ids.remove(id);
        }
        if let Some(id) = job.dedup_id() {
            self.dedup_removed(id, key);
        }
        Some(job)
    }

    /// A draw in [0, 1) for backoff jitter (xorshift).
    fn next_unit(&mut self) -> f64 {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        (x >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Whether some jobs are delayed.
    pub fn has_delayed(&self) -> bool {
        !self.delayed.is_empty()
    }
}

/// The id string of a job that is known to exist (empty if not, which never happens).
fn id_of(key: JobKey, jobs: &JobTable) -> String {
    jobs.get(&key).map(Job::id_string).unwrap_or_default()
}
