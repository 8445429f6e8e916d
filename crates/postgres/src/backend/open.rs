//! Opening the PostgreSQL backend: its configuration, its runtime and its background tasks.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use std::time::Duration;

use ferroqueue_engine::domain::metrics::{Histogram, COMMIT_BOUNDS_US};
use ferroqueue_engine::{EngineError, Result, Wire};
use parking_lot::Mutex;
use tokio::sync::Notify;

use super::{coalesce, feed, upkeep, PgBackend, Shared};
use crate::connect::Target;
use crate::pool::Pool;

/// How to open a PostgreSQL backend.
pub struct PgConfig {
    pub target: Target,
    /// Connections shared by the backend's calls (default 4).
    pub max_connections: usize,
    /// How records and events are written for the caller.
    pub wire: Arc<dyn Wire>,
    /// The lease of an activation, ms (BullMQ's `lockDuration` default, 30 s).
    pub lease_ms: i64,
    /// How often the elected process promotes, sweeps and trims when nothing wakes it.
    pub upkeep_every: Duration,
}

impl PgConfig {
    /// Defaults for `target`, writing with `wire`.
    pub fn new(target: Target, wire: Arc<dyn Wire>) -> PgConfig {
        PgConfig {
            target,
            max_connections: 4,
            wire,
            lease_ms: 30_000,
            upkeep_every: Duration::from_secs(1),
        }
    }
}

impl PgBackend {
    /// Opens the backend: starts its runtime and its background tasks. Connecting (and
    /// migrating) happens on the first call, whose answer carries any connection error.
    ///
    /// Errors: `ERR_INTERNAL` when the runtime's threads cannot be started.
    pub fn open(config: PgConfig) -> Result<PgBackend> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("ferroqueue-pg")
            .enable_all()
            .build()
            .map_err(|e| EngineError::Internal(format!("cannot start the runtime: {e}")))?;
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0x9E37_79B9, |d| d.as_nanos() as u64)
            | 1;
        let shared = Arc::new(Shared {
            pool: Pool::new(config.target, config.max_connections),
            wire: config.wire,
            lease_ms: config.lease_ms,
            upkeep_every: config.upkeep_every,
            adds: coalesce::Waiting::default(),
            acks: coalesce::Waiting::default(),
            held: Mutex::new(HashMap::new()),
            holders: Mutex::new(HashMap::new()),
            holders_changed: Notify::new(),
            ready: Mutex::new(HashMap::new()),
            cancels: Mutex::new(HashMap::new()),
            listeners: Mutex::new(HashMap::new()),
            events: Mutex::new(Vec::new()),
            notifier: Mutex::new(None),
            feed: Notify::new(),
            upkeep: Notify::new(),
            closed: AtomicBool::new(false),
            subs_wanted: AtomicU64::new(0),
            subs_ready: tokio::sync::watch::Sender::new(0),
            rng: Mutex::new(seed),
            limited: Mutex::new(Default::default()),
            held_back: Mutex::new(Default::default()),
            process: format!(
                "{:x}-{}",
                seed.wrapping_mul(0x9E37_79B9_7F4A_7C15),
                std::process::id()
            ),
            workers: Mutex::new(HashMap::new()),
            workers_changed: Notify::new(),
            metrics: Mutex::new(HashMap::new()),
            ack_us: Mutex::new(Histogram::new(COMMIT_BOUNDS_US)),
        });
        let handle = rt.handle().clone();
        handle.spawn(feed::listen(shared.clone()));
        handle.spawn(feed::read(shared.clone()));
        handle.spawn(upkeep::run(shared.clone()));
        handle.spawn(upkeep::renew(shared.clone()));
        handle.spawn(upkeep::sweep_for_holders(shared.clone()));
        handle.spawn(super::metrics::keep_workers_alive(shared.clone()));
        handle.spawn(super::metrics::write_counts(shared.clone()));
        Ok(PgBackend {
            shared,
            rt: Mutex::new(Some(rt)),
            handle,
        })
    }
}
