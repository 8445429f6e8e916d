//! What the PostgreSQL backend's tasks share: the pool, the activations this process holds, the
//! wake-ups of pulls, cancellations, listeners and buffered events.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ferroqueue_engine::application::events::Notifier;
use ferroqueue_engine::domain::event::Event;
use ferroqueue_engine::domain::job::JobPolicy;
use ferroqueue_engine::domain::lease::LeaseTerms;
use ferroqueue_engine::domain::metrics::Histogram;
use ferroqueue_engine::{Ack, AckResult, Added, EngineError, NewJob, Result, Wire};
use parking_lot::Mutex;
use tokio::sync::Notify;

use super::coalesce;
use crate::connect::Target;
use crate::pool::Pool;

/// Longest a change waits for a subscription made before it to take effect.
const SUBSCRIBE_WAIT: Duration = Duration::from_secs(5);

/// An activation this process holds: what its ack needs to decide a retry.
#[derive(Debug, Clone)]
pub(super) struct Held {
    pub(super) queue: Arc<str>,
    pub(super) key: i64,
    pub(super) attempts_made: u32,
    pub(super) policy: Option<JobPolicy>,
    /// A flow child's parent and its own id (its ack tells the parent, `flows.rs`).
    pub(super) link: Option<super::flows::Link>,
    /// The lease holder (a Worker) it was claimed for, 0 for none.
    pub(super) holder: u32,
    /// Its custom id (automatic ids are the key), for the Worker's lock events.
    pub(super) custom_id: Option<Box<str>>,
    /// An ack of it is in flight (see `upkeep::renew`).
    pub(super) acking: bool,
    /// When the claim started it (`processedOn`, ms), for its processing time.
    pub(super) processed_on: u64,
}

/// A puller's cancellation: pending pulls wake on `notify`; `armed` cancels the next pull when
/// none was pending.
#[derive(Default)]
pub(super) struct Cancel {
    pub(super) notify: Notify,
    pub(super) armed: AtomicBool,
}

/// A puller of a queue.
pub(super) type Puller = (Arc<str>, u32);

/// What the backend's tasks share.
pub(super) struct Shared {
    pub(super) pool: Pool,
    pub(super) wire: Arc<dyn Wire>,
    pub(super) lease_ms: i64,
    pub(super) upkeep_every: Duration,
    /// Adds and acks waiting for their statement (`coalesce.rs`).
    pub(super) adds: coalesce::Waiting<NewJob, Added>,
    pub(super) acks: coalesce::Waiting<Ack, AckResult>,
    /// Activations by token.
    pub(super) held: Mutex<HashMap<i64, Held>>,
    /// The terms of this process's live lease holders (Workers), by id.
    pub(super) holders: Mutex<HashMap<u32, LeaseTerms>>,
    /// Wakes the renewal and the holders' sweep when holders come or go.
    pub(super) holders_changed: Notify,
    /// Wakes the pulls of a queue (a `NOTIFY` hint, or a change made here).
    pub(super) ready: Mutex<HashMap<Arc<str>, Arc<Notify>>>,
    pub(super) cancels: Mutex<HashMap<Puller, Arc<Cancel>>>,
    /// Listeners per queue (QueueEvents, workers' event listeners).
    pub(super) listeners: Mutex<HashMap<Arc<str>, usize>>,
    /// Events read from the feed, not yet drained.
    pub(super) events: Mutex<Vec<Event>>,
    pub(super) notifier: Mutex<Option<Notifier>>,
    /// Wakes the feed reader (a `NOTIFY` hint, or a new listener).
    pub(super) feed: Notify,
    /// Wakes the periodic work (a delayed job was added).
    pub(super) upkeep: Notify,
    pub(super) closed: AtomicBool,
    /// Subscriptions made (each `subscribe` counts one) and those the feed reader has taken in
    /// (its cursor is placed): a change made after a subscribe waits for it, so that a
    /// QueueEvents hears every change its process makes after it was created.
    pub(super) subs_wanted: AtomicU64,
    pub(super) subs_ready: tokio::sync::watch::Sender<u64>,
    /// Draws the jitter of backoffs.
    pub(super) rng: Mutex<u64>,
    /// Queues found to have limits, and whether one is a cap on active jobs: their claims go
    /// through `limits::claim_within` (found by a plain claim that came back empty, cleared by
    /// a claim within that found none).
    pub(super) limited: Mutex<HashMap<Arc<str>, bool>>,
    /// Queues whose latest take here found ready jobs held back by their limits alone.
    pub(super) held_back: Mutex<HashSet<Arc<str>>>,
    /// This process among those sharing the database (its Workers' rows, `metrics.rs`).
    pub(super) process: String,
    /// Who this process's lease holders are, and a wake-up of their rows' renewal.
    pub(super) workers: Mutex<super::metrics::Workers>,
    pub(super) workers_changed: Notify,
    /// Per queue: the metrics its Workers asked for and what finished here (`metrics.rs`).
    pub(super) metrics: Mutex<HashMap<Arc<str>, super::metrics::LocalMetrics>>,
    /// How long the ack batches' statements took, µs.
    pub(super) ack_us: Mutex<Histogram>,
}

impl Shared {
    pub(super) fn target(&self) -> &Target {
        self.pool.target()
    }

    pub(super) fn ready_of(&self, queue: &Arc<str>) -> Arc<Notify> {
        self.ready.lock().entry(queue.clone()).or_default().clone()
    }

    pub(super) fn wake(&self, queue: &str) {
        if let Some(n) = self.ready.lock().get(queue) {
            n.notify_waiters();
        }
    }

    /// The lease length of a claim for `holder`: its `lockDuration`, or the backend's.
    pub(super) fn lease_of(&self, holder: u32) -> i64 {
        match self.holders.lock().get(&holder) {
            Some(t) => i64::from(t.lock_ms),
            None => self.lease_ms,
        }
    }

    /// Whether `queue` was found to have limits.
    pub(super) fn is_limited(&self, queue: &str) -> bool {
        self.limited.lock().contains_key(queue)
    }

    /// Whether `queue` was found to have a cap on active jobs (or may have: not known yet).
    pub(super) fn is_capped(&self, queue: &str) -> bool {
        self.limited.lock().get(queue).copied().unwrap_or(false)
    }

    /// Records that `queue` has limits (`Some(capped)`) or none.
    pub(super) fn set_limited(&self, queue: &Arc<str>, limits: Option<bool>) {
        let mut l = self.limited.lock();
        match limits {
            Some(capped) => {
                l.insert(queue.clone(), capped);
            }
            None => {
                l.remove(queue);
            }
        }
    }

    pub(super) fn wake_all(&self) {
        for n in self.ready.lock().values() {
            n.notify_waiters();
        }
    }

    pub(super) fn cancel_of(&self, queue: &Arc<str>, puller: u32) -> Arc<Cancel> {
        self.cancels
            .lock()
            .entry((queue.clone(), puller))
            .or_default()
            .clone()
    }

    /// What a change must wait for first: the subscriptions made before it (see `subs_ready`).
    pub(super) fn gate(&self) -> impl Future<Output = ()> + Send + 'static {
        let wanted = self.subs_wanted.load(Ordering::Acquire);
        let mut rx = (wanted > *self.subs_ready.borrow()).then(|| self.subs_ready.subscribe());
        async move {
            if let Some(rx) = rx.as_mut() {
                // Bounded: without a database the feed never starts, and the call itself will
                // say why.
                let _ = tokio::time::timeout(SUBSCRIBE_WAIT, rx.wait_for(|n| *n >= wanted)).await;
            }
        }
    }

    /// A number in [0, 1) (xorshift64*).
    pub(super) fn unit(&self) -> f64 {
        let mut s = self.rng.lock();
        *s ^= *s >> 12;
        *s ^= *s << 25;
        *s ^= *s >> 27;
        let v = s.wrapping_mul(0x2545_F491_4F6C_DD1D);
        (v >> 11) as f64 / (1u64 << 53) as f64
    }

    pub(super) fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(EngineError::QueueClosed("(PostgreSQL backend)".into()));
        }
        Ok(())
    }
}
