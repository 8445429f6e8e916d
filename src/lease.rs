//! Lease holders: one per Worker, as a native object whose end the engine hears. While it lives
//! the backend keeps the leases of the jobs it took (the embedded engine never lets them expire;
//! PostgreSQL renews them); when the Worker closes ([`LeaseHolder::release`]), or is
//! garbage-collected, or its worker thread is terminated (napi finalizes the object then), the
//! backend lets go of it and the jobs it still held stall.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

use parking_lot::Mutex;

use ferroqueue_engine::domain::lease::{HolderInfo, LeaseTerms};
use napi::Env;
use napi_derive::napi;

use crate::errors::run;
use crate::registry::{queue_of, with_queue, Shared};

/// Holder ids: unique in the process, 0 is "none".
static NEXT_HOLDER: AtomicU32 = AtomicU32::new(1);

/// Puller ids (the long-poll pulls a Worker cancels): unique in the process, across threads.
static NEXT_PULLER: AtomicU32 = AtomicU32::new(1);

/// The latest puller id of each lease holder, so that a Worker can end the pull of a thread
/// that processed for one of its holders and died ([`cancel_holder_pulls`]).
fn pullers() -> &'static Mutex<HashMap<u32, u32>> {
    static P: OnceLock<Mutex<HashMap<u32, u32>>> = OnceLock::new();
    P.get_or_init(Mutex::default)
}

/// A new puller id for a Worker that pulls for lease holder `holder` (0: none). A cancelled
/// puller id is not used again, so a Worker takes a new one after each cancel.
#[napi]
pub fn new_puller(holder: u32) -> u32 {
    let id = NEXT_PULLER.fetch_add(1, Ordering::Relaxed);
    if holder != 0 {
        pullers().lock().insert(holder, id);
    }
    id
}

/// Ends the pending pull (or the next one) of the Worker that pulls for `holder` on queue
/// handle `h`: its thread is gone, and its pull must not take jobs.
#[napi(catch_unwind)]
pub fn cancel_holder_pulls(env: &Env, h: u32, holder: u32) -> napi::Result<()> {
    run(env, || {
        let Some(puller) = pullers().lock().remove(&holder) else {
            return Ok(());
        };
        with_queue(h, |b, q| b.cancel_pulls(q, puller))?
    })
}

/// A job a lease holder holds.
#[napi(object)]
pub struct HeldJob {
    pub id: String,
    pub token: f64,
}

/// The active jobs of queue handle `h` that lease holder `holder` holds, earliest first.
#[napi(catch_unwind)]
pub fn held_jobs(env: &Env, h: u32, holder: u32) -> napi::Result<Vec<HeldJob>> {
    run(env, || {
        with_queue(h, |b, q| {
            b.held(q, holder)
                .into_iter()
                .map(|(id, token)| HeldJob {
                    id,
                    token: token as f64,
                })
                .collect()
        })
    })
}

/// A Worker's lease options (BullMQ's names), checked by the engine.
#[napi(object)]
pub struct LeaseOptions {
    pub lock_duration: u32,
    pub lock_renew_time: u32,
    pub stalled_interval: u32,
    pub max_stalled_count: u32,
    pub skip_stalled_check: bool,
    /// The Worker's `name` (`getWorkers`).
    pub name: Option<String>,
    /// Whether `getWorkers` lists it (not the holders of a threaded Worker's threads: the
    /// Worker is listed once).
    pub listed: bool,
}

/// The lease holder of one Worker.
#[napi]
pub struct LeaseHolder {
    id: u32,
    backend: Option<Shared>,
}

/// Registers a lease holder on the backend of queue handle `h` with `terms`.
#[napi(catch_unwind)]
pub fn open_lease_holder(env: &Env, h: u32, terms: LeaseOptions) -> napi::Result<LeaseHolder> {
    run(env, || {
        let (_, backend, q) = queue_of(h)?;
        let id = NEXT_HOLDER.fetch_add(1, Ordering::Relaxed);
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        backend.hold(
            id,
            LeaseTerms {
                lock_ms: terms.lock_duration,
                renew_ms: terms.lock_renew_time,
                stalled_interval_ms: terms.stalled_interval,
                max_stalled: terms.max_stalled_count,
                skip_stalled_check: terms.skip_stalled_check,
            },
            terms.listed.then(|| HolderInfo {
                queue: q.name_arc().clone(),
                name: terms.name,
                started,
            }),
        )?;
        Ok(LeaseHolder {
            id,
            backend: Some(backend),
        })
    })
}

#[napi]
impl LeaseHolder {
    /// The id its pulls carry.
    #[napi(getter)]
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The Worker is done: the jobs it still holds stall (none after a graceful close). Answers
    /// how many stalled now. Later calls do nothing.
    #[napi(catch_unwind)]
    pub fn release(&mut self) -> u32 {
        self.let_go() as u32
    }
}

impl LeaseHolder {
    fn let_go(&mut self) -> usize {
        pullers().lock().remove(&self.id);
        match self.backend.take() {
            Some(b) if !b.is_closed() => b.let_go(self.id),
            _ => 0,
        }
    }
}

impl Drop for LeaseHolder {
    /// Garbage-collected, or finalized with its thread: let go, never panicking into the
    /// finalizer.
    fn drop(&mut self) {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.let_go()));
    }
}
