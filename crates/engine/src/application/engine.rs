//! The engine: shards behind `parking_lot` locks, the operations that route to them and the
//! hand-off of side effects (events, timer wake-ups) after each lock is released. Taking jobs
//! (long-poll pulls, limits) is in `engine_pull.rs`.
//!
//! Shard count: the next power of two >= available cores, capped at 64; a queue lives in shard
//! `fnv1a(name) & mask`. No lock is ever held across an `.await`.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;

use super::commit_notice::CommitNotice;
use super::events::{EventHub, Notifier};
use super::timer::Timer;
use crate::backend::QueueRef;
use crate::clock::{Clock, SystemClock};
use crate::domain::event::Event;
use crate::domain::job::{JobKey, JobState};
use crate::domain::lease::{HolderInfo, LeaseTerms};
use crate::domain::options::KeepJobs;
use crate::domain::queue::{AckResult, Added, Effects, NewJob, Outcome, QueueState};
use crate::domain::queue_name::qualified_name;
use crate::domain::shard::Shard;
use crate::error::{EngineError, Result};
use crate::storage::eviction::{Eviction, DEFAULT_FINISHED_IN_MEMORY};
use crate::storage::{read_only, restore, rows, Storage, StorageOp};
use crate::structures::fnv1a;
use crate::wire::{self, Wire};

/// Most shards an engine uses.
pub const MAX_SHARDS: usize = 64;

/// How to build an engine.
pub struct EngineConfig {
    /// Shard count (rounded up to a power of two, at most 64); default from available cores.
    pub shards: Option<usize>,
    /// Time source.
    pub clock: Arc<dyn Clock>,
    /// Whether to run the delayed-job timer thread (off for tests that drive the clock).
    pub timer: bool,
    /// The SQLite file that makes the engine durable; in memory when `None`.
    pub path: Option<PathBuf>,
    /// Fsync every commit (`synchronous=FULL`): survives power loss, not only a crash.
    pub sync_full: bool,
    /// Finished jobs per state and queue a durable engine keeps in memory (default 10,000);
    /// older ones are read from the file.
    pub finished_in_memory: Option<usize>,
    /// How records and events are written for the caller (the binding's wire format).
    pub wire: Arc<dyn Wire>,
    /// With `path`: a look at the file, not the file (`storage/read_only.rs`): its content as
    /// last committed, read without taking it, in an engine in memory that never writes it.
    pub read_only: bool,
}

impl EngineConfig {
    /// An in-memory engine on the system clock with its timer, writing with `wire`.
    pub fn new(wire: Arc<dyn Wire>) -> EngineConfig {
        EngineConfig {
            shards: None,
            clock: Arc::new(SystemClock),
            timer: true,
            path: None,
            sync_full: false,
            finished_in_memory: None,
            wire,
            read_only: false,
        }
    }
}

/// One acknowledgement of an activation.
#[derive(Debug, Clone)]
pub struct Ack {
    /// The job id string.
    pub id: String,
    /// The token the job was pulled with.
    pub token: u64,
    pub outcome: Outcome,
    /// The worker's retention rule, used when the job has none of its own.
    pub keep: Option<KeepJobs>,
}

pub(super) struct Inner {
    pub(super) shards: Box<[Mutex<Shard>]>,
    mask: usize,
    pub(super) clock: Arc<dyn Clock>,
    pub(super) hub: EventHub,
    pub(super) wire: Arc<dyn Wire>,
    timer: Arc<Timer>,
    closed: AtomicBool,
    pub(super) storage: Option<Storage>,
    pub(super) notice: CommitNotice,
    /// Wakes waits for a commit ([`Engine::commit_of`]) after each commit, failure or close.
    pub(super) commits: tokio::sync::watch::Sender<u64>,
    /// This engine among the process's engines, for commit tickets (see `tickets.rs`).
    pub(super) serial: u64,
    /// Set once the engine has a flow job: changing calls then take `flow_lock`
    /// (`engine_flows.rs`).
    pub(super) flows: AtomicBool,
    pub(super) flow_lock: Mutex<()>,
    /// The terms of live lease holders (`engine_leases.rs`).
    pub(super) holders: Mutex<rustc_hash::FxHashMap<u32, LeaseTerms>>,
    /// Who the live lease holders are (`getWorkers`; `engine_leases.rs`).
    pub(super) workers: Mutex<rustc_hash::FxHashMap<u32, HolderInfo>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        super::tickets::retire(self.serial);
        self.timer.stop();
        if let Some(s) = &self.storage {
            s.close();
        }
    }
}

/// The job queue engine. Cheap to clone (shared state).
#[derive(Clone)]
pub struct Engine {
    pub(super) inner: Arc<Inner>,
}

impl Engine {
    /// Builds an engine and, if configured, starts its timer thread.
    ///
    /// Errors: [`EngineError::Internal`] if the timer thread cannot be spawned.
    pub fn new(config: EngineConfig) -> Result<Engine> {
        let wanted = config
            .shards
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        let count = wanted
            .clamp(1, MAX_SHARDS)
            .next_power_of_two()
            .min(MAX_SHARDS);
        let mask = count - 1;
        let eviction = Eviction::new(
            config
                .finished_in_memory
                .unwrap_or(DEFAULT_FINISHED_IN_MEMORY),
        );
        let (storage, snapshot) = match &config.path {
            Some(p) if config.read_only => (None, Some(read_only::snapshot(p)?)),
            Some(p) => {
                let (s, snap) = Storage::open(p, config.sync_full, eviction)?;
                (Some(s), Some(snap))
            }
            None => (None, None),
        };
        let persist = storage.is_some();
        let mut shards: Vec<Shard> = (0..count).map(|_| Shard::new(persist)).collect();
        let mut recovery_ops: Vec<StorageOp> = Vec::new();
        let mut wake_at: Option<u64> = None;
        let mut flows = false;
        if let Some(snap) = snapshot {
            let now = config.clock.now_ms();
            for (name, saved) in snap.queues {
                let mut q = restore::queue_of(
                    Arc::from(name.as_str()),
                    saved.meta,
                    saved.rows,
                    now,
                    !persist,
                );
                q.set_evicted(saved.evicted_count, saved.evicted_ids);
                for (id, key) in saved.dedup {
                    q.restore_dedup(id, key);
                }
                for (id, settings) in saved.groups {
                    q.restore_group(id, settings);
                }
                for (id, body) in saved.schedulers {
                    q.restore_scheduler(id, &body);
                }
                flows |= q.uses_flows();
                if persist {
                    rows::snapshot(&mut q, &mut recovery_ops);
                    eviction.apply(&mut q);
                }
                if let Some(d) = q.next_due() {
                    wake_at = Some(wake_at.map_or(d, |w| w.min(d)));
                }
                shards[fnv1a(name.as_bytes()) as usize & mask].insert_restored(q);
            }
        }
        let inner = Arc::new(Inner {
            shards: shards.into_iter().map(Mutex::new).collect(),
            mask,
            clock: config.clock.clone(),
            hub: EventHub::default(),
            wire: config.wire.clone(),
            timer: Timer::new(),
            closed: AtomicBool::new(false),
            storage,
            notice: CommitNotice::default(),
            commits: tokio::sync::watch::Sender::new(0),
            serial: super::tickets::next_serial(),
            flows: AtomicBool::new(flows),
            flow_lock: Mutex::new(()),
            holders: Mutex::default(),
            workers: Mutex::default(),
        });
        if let Some(s) = &inner.storage {
            let weak: Weak<Inner> = Arc::downgrade(&inner);
            s.set_on_commit(Arc::new(move |seq, deleted| {
                if let Some(i) = weak.upgrade() {
                    i.forget_evicted(deleted);
                    i.committed(seq);
                }
            }));
            s.submit(&mut recovery_ops);
        }
        if config.timer {
            inner
                .timer
                .spawn(Arc::downgrade(&inner), config.clock, Inner::promote_all)
                .map_err(|e| {
                    EngineError::Internal(format!("cannot start the timer thread: {e}"))
                })?;
        }
        if let Some(at) = wake_at {
            inner.timer.schedule(at);
        }
        Ok(Engine { inner })
    }

    /// Number of shards.
    pub fn shard_count(&self) -> usize {
        self.inner.shards.len()
    }

    /// Current time by the engine's clock.
    pub fn now(&self) -> u64 {
        self.inner.clock.now_ms()
    }

    /// Validates a queue name and resolves its shard (in the default namespace).
    ///
    /// Errors: [`EngineError::InvalidOption`] for an empty name, one longer than 255 bytes, or
    /// one containing `:` or a control character.
    pub fn queue_ref(&self, name: &str) -> Result<QueueRef> {
        self.queue_ref_in(None, name)
    }

    /// Like [`Engine::queue_ref`], for the queue `name` under BullMQ's `prefix`: queues of the
    /// same name under different prefixes are different queues. [`DEFAULT_PREFIX`] (or `None`)
    /// is the namespace of plain names; any other prefix qualifies the name as `prefix:name`.
    ///
    /// Errors: [`EngineError::InvalidOption`] for a bad name (see [`Engine::queue_ref`]), or an
    /// empty prefix, one longer than 255 bytes or containing a control character.
    pub fn queue_ref_in(&self, prefix: Option<&str>, name: &str) -> Result<QueueRef> {
        let qualified = qualified_name(prefix, name)?;
        let shard = fnv1a(qualified.as_bytes()) as usize & self.inner.mask;
        Ok(QueueRef::new(Arc::from(qualified), shard))
    }

    /// Runs `f` on a queue under its shard lock, then publishes events and schedules the timer.
    /// The change's commit ticket becomes the calling thread's latest ([`Engine::ticket`]).
    pub(super) fn with<R>(
        &self,
        q: &QueueRef,
        f: impl FnOnce(&mut QueueState, u64, &mut Effects) -> R,
    ) -> R {
        self.with_seq(q, f).0
    }

    /// Like [`Engine::with`], answering the change's commit ticket too.
    pub(super) fn with_seq<R>(
        &self,
        q: &QueueRef,
        f: impl FnOnce(&mut QueueState, u64, &mut Effects) -> R,
    ) -> (R, u64) {
        if self.flows_used() {
            return self.with_flows(q, f);
        }
        let mut fx = Effects::default();
        let now = self.now();
        let mut shard = self.inner.shards[q.slot()].lock();
        let mut ops = Vec::new();
        let mut notices = Vec::new();
        let r = shard.with_queue(q.name_arc(), |qs| {
            let r = f(qs, now, &mut fx);
            notices = qs.take_notices();
            self.inner.record(qs, &mut ops);
            r
        });
        let changed = !ops.is_empty();
        // Submitted, and events handed to the hub, under the shard lock: storage and listeners
        // see a queue's changes in the order they were made.
        let seq = self.inner.submit(&mut ops);
        self.inner.after(fx, seq);
        drop(shard);
        // Only a change gets a ticket: a call that wrote nothing must not make this thread wait
        // for other threads' changes.
        if changed {
            super::tickets::note(self.inner.serial, seq);
        }
        // A child changed by a call that began before the engine had flows.
        if !notices.is_empty() {
            self.deliver_late(notices);
        }
        (r, seq)
    }

    /// Runs `f` on a queue for reading; `None` if the queue was never used.
    pub(super) fn read<R>(&self, q: &QueueRef, f: impl FnOnce(&QueueState) -> R) -> Option<R> {
        let shard = self.inner.shards[q.slot()].lock();
        shard.queue(q.name()).map(f)
    }

    /// Adds one job. O(log n).
    pub fn add(&self, q: &QueueRef, job: NewJob) -> Added {
        self.with(q, |qs, now, fx| qs.add(job, now, fx))
    }

    /// Adds jobs under one lock, in order.
    pub fn add_bulk(&self, q: &QueueRef, jobs: Vec<NewJob>) -> Vec<Added> {
        self.with(q, |qs, now, fx| {
            jobs.into_iter().map(|j| qs.add(j, now, fx)).collect()
        })
    }

    /// The id of the job holding the deduplication key of `id`, if a key lives.
    pub fn dedup_holder(&self, q: &QueueRef, id: &str) -> Option<String> {
        self.with(q, |qs, now, _| qs.dedup_holder(id, now))
    }

    /// Removes the deduplication key of `id` (with `holder`, only if that job holds it);
    /// answers whether a live key was removed.
    pub fn remove_dedup_key(&self, q: &QueueRef, id: &str, holder: Option<&str>) -> bool {
        self.with(q, |qs, now, _| qs.remove_dedup_key(id, holder, now))
    }

    /// Finishes activations in one lock. Results are in input order.
    pub fn ack_many(&self, q: &QueueRef, acks: Vec<Ack>) -> Vec<AckResult> {
        self.with(q, |qs, now, fx| {
            acks.into_iter()
                .map(|a| match qs.key_of(&a.id) {
                    Some(key) => qs.ack(key, a.token, a.outcome, a.keep, now, fx),
                    None => AckResult::Stale,
                })
                .collect()
        })
    }

    /// Promotes due delayed jobs of every queue; returns the earliest run-at left.
    pub fn promote_due(&self) -> Option<u64> {
        self.inner.promote_all()
    }

    /// Counts one more event listener on a queue.
    pub fn subscribe(&self, q: &QueueRef) {
        self.with(q, |qs, _, _| qs.subscribe());
    }

    /// Counts one listener less.
    pub fn unsubscribe(&self, q: &QueueRef) {
        self.with(q, |qs, _, _| qs.unsubscribe());
    }

    /// Sets the function called when events become available.
    pub fn set_event_notifier(&self, n: Option<Notifier>) {
        self.inner.hub.set_notifier(n);
    }

    /// Takes every buffered event.
    pub fn drain_events(&self) -> Vec<Event> {
        self.inner.hub.drain()
    }

    /// Takes every buffered event as a JSON array of `["queue","event",{payload}]`.
    pub fn drain_events_json(&self) -> String {
        wire::events(&*self.inner.wire, &self.drain_events())
    }

    /// Closes the engine: a durable one commits what is queued, checkpoints the WAL and releases
    /// the file. Idempotent.
    ///
    /// A call while another thread is closing waits until that close is done.
    pub fn close(&self) {
        self.inner.closed.store(true, Ordering::Release);
        if let Some(s) = &self.inner.storage {
            s.close();
        }
        self.inner.commits.send_modify(|_| {});
    }

    /// Whether two handles are the same engine.
    pub fn same(&self, other: &Engine) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Whether [`Engine::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.inner.closed.load(Ordering::Acquire)
    }

    /// Whether the engine writes to a database file.
    pub fn is_durable(&self) -> bool {
        self.inner.storage.is_some()
    }

    /// Takes the ids of jobs found active at recovery (reported once as `stalled`).
    pub fn take_stalled(&self, q: &QueueRef) -> Vec<String> {
        let mut shard = self.inner.shards[q.slot()].lock();
        shard.with_queue(q.name_arc(), |qs| qs.take_stalled())
    }

    /// Key of a job by id, for tests and callers that cache keys.
    pub fn key_of(&self, q: &QueueRef, id: &str) -> Option<JobKey> {
        self.read(q, |qs| qs.key_of(id)).flatten()
    }
}

impl Inner {
    /// Hands effects out after the shard lock is released; events wait for write `seq`.
    pub(super) fn after(&self, fx: Effects, seq: u64) {
        if let Some(at) = fx.wake_at {
            self.timer.schedule(at);
        }
        self.hub.publish_at(fx.events, seq);
    }

    /// Turns what `qs` changed into storage operations, then applies the eviction policy (a
    /// durable engine; nothing in memory).
    pub(super) fn record(&self, qs: &mut QueueState, ops: &mut Vec<StorageOp>) {
        if let Some(s) = &self.storage {
            rows::snapshot(qs, ops);
            s.eviction().apply(qs);
        }
    }

    /// Hands operations to storage (no-op in memory); returns their sequence number.
    pub(super) fn submit(&self, ops: &mut Vec<StorageOp>) -> u64 {
        match &self.storage {
            // With no ops this is the latest sequence number: events of this call then wait
            // behind those of earlier changes still being committed.
            Some(s) => s.submit(ops),
            None => 0,
        }
    }

    /// Settles the evicted counts of queues after the writer deleted evicted rows.
    fn forget_evicted(&self, deleted: Vec<crate::storage::Deleted>) {
        if deleted.is_empty() {
            return;
        }
        type Rows = Vec<(JobKey, Option<String>)>;
        let mut by_queue: Vec<(Arc<str>, JobState, Rows)> = Vec::new();
        for (q, state, key, id) in deleted {
            match by_queue.iter_mut().find(|(n, s, _)| *n == q && *s == state) {
                Some((_, _, v)) => v.push((key, id)),
                None => by_queue.push((q, state, vec![(key, id)])),
            }
        }
        for (q, state, rows) in by_queue {
            let shard = fnv1a(q.as_bytes()) as usize & self.mask;
            self.shards[shard]
                .lock()
                .with_queue(&q, |qs| qs.forget_evicted(state, &rows));
        }
    }

    /// Promotes due jobs in every shard; returns the earliest run-at left.
    fn promote_all(&self) -> Option<u64> {
        let mut next: Option<u64> = None;
        for shard in self.shards.iter() {
            let mut fx = Effects::default();
            let now = self.clock.now_ms();
            let mut ops = Vec::new();
            let n = {
                let mut guard = shard.lock();
                let n = guard.each_delayed(|q| {
                    q.promote_due(now, &mut fx);
                    self.record(q, &mut ops);
                });
                let seq = self.submit(&mut ops);
                self.hub.publish_at(std::mem::take(&mut fx.events), seq);
                n
            };
            if let Some(n) = n {
                next = Some(next.map_or(n, |m| m.min(n)));
            }
        }
        next
    }
}
