//! Worker calls: the long-poll pull (the only async call a worker makes), the sync try-pull, and
//! batched acks.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use parking_lot::RwLock;

use ferroqueue_engine::domain::groups::GroupDefaults;
use ferroqueue_engine::domain::limits::{RateLimit, WorkerLimits};
use ferroqueue_engine::domain::options::{parse_keep, RawKeep};
use ferroqueue_engine::{Ack, AckResult, EngineError, Outcome, Reply};
use napi::bindgen_prelude::{Either, PromiseRaw};
use napi::{Env, JsString};
use napi_derive::napi;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::errors::{ms, run, settle};
use crate::registry::with_queue;
use crate::reply::{answer, Answer};
use crate::text::js_text;

/// Waits up to `timeout_ms` for ready jobs that may start (within the queue's limits, as
/// [`try_pull`]); resolves with a JSON array of up to `max` activated
/// job records (each with its `token`), empty on timeout or cancellation. The jobs are held by
/// lease holder `holder` (`lease.rs`; 0: none).
#[napi(catch_unwind, ts_return_type = "Promise<string>")]
pub fn pull(
    env: &Env,
    h: u32,
    puller: u32,
    max: u32,
    limits: u32,
    holder: u32,
    timeout_ms: u32,
) -> napi::Result<PromiseRaw<'_, String>> {
    let timeout = Duration::from_millis(timeout_ms as u64);
    let pending = run(env, || {
        let worker = WorkerLimits {
            holder,
            ..limits_of(limits)?
        };
        with_queue(h, |b, q| b.pull(q, puller, max as usize, worker, timeout))
    })?;
    settle(env, pending)
}

/// The limits a Worker brings to its pulls (0 for none): its `limiter` (`rateMax` jobs per
/// `rateDuration` ms) and its `group` option's defaults (`groupConcurrency`, `groupMax` jobs per
/// `groupDuration` ms), and its `name`. Registered once ([`pull_limits`]); pulls carry the id, so no object
/// crosses the boundary per pull (that cost ~1 µs, a fifth of a job here).
#[napi(object)]
pub struct PullLimits {
    pub rate_max: u32,
    pub rate_duration: f64,
    pub group_concurrency: u32,
    pub group_max: u32,
    pub group_duration: f64,
    /// BullMQ's Worker `name`, recorded as `processedBy` on the jobs it takes.
    pub name: Option<String>,
}

/// Registered limits by id; 0 is "none". Equal limits share an id, so the table grows only with
/// distinct settings.
fn registered() -> &'static RwLock<Vec<WorkerLimits>> {
    static R: OnceLock<RwLock<Vec<WorkerLimits>>> = OnceLock::new();
    R.get_or_init(|| RwLock::new(vec![WorkerLimits::default()]))
}

/// Validates and registers a Worker's limits; answers the id its pulls carry.
#[napi(catch_unwind)]
pub fn pull_limits(env: &Env, limits: PullLimits) -> napi::Result<u32> {
    run(env, || {
        let w = worker_limits(&limits)?;
        let mut r = registered().write();
        if let Some(i) = r.iter().position(|x| *x == w) {
            return Ok(i as u32);
        }
        r.push(w);
        Ok((r.len() - 1) as u32)
    })
}

fn limits_of(id: u32) -> Result<WorkerLimits, EngineError> {
    registered()
        .read()
        .get(id as usize)
        .cloned()
        .ok_or_else(|| EngineError::range("limits", format!("{id} is not registered")))
}

fn worker_limits(l: &PullLimits) -> Result<WorkerLimits, EngineError> {
    let rate = |option: &str, max: u32, duration: f64| {
        if max == 0 {
            return Ok(None);
        }
        RateLimit::checked(option, max as f64, duration).map(Some)
    };
    Ok(WorkerLimits {
        rate: rate("limiter", l.rate_max, l.rate_duration)?,
        group: GroupDefaults {
            concurrency: (l.group_concurrency > 0).then_some(l.group_concurrency),
            rate: rate("group.limit", l.group_max, l.group_duration)?,
        },
        holder: 0,
        name: l.name.as_deref().map(Arc::from),
    })
}

/// Activates up to `max` ready jobs now, within the queue's limits and the worker's (`limits`),
/// for lease holder `holder` (0: none), without waiting: a JSON array, maybe empty.
#[napi(catch_unwind, ts_return_type = "string | Promise<string>")]
pub fn try_pull(
    env: &Env,
    h: u32,
    max: u32,
    limits: u32,
    holder: u32,
) -> napi::Result<Either<JsString<'_>, PromiseRaw<'_, String>>> {
    let reply = run(env, || {
        let worker = WorkerLimits {
            holder,
            ..limits_of(limits)?
        };
        with_queue(h, |b, q| b.take(q, max as usize, worker))
    })?;
    match reply {
        Reply::Now(r) => js_text(env, &run(env, || r)?).map(Either::A),
        Reply::Later(p) => settle(env, p).map(Either::B),
    }
}

/// Whether the queue's ready jobs wait only for its limits (for a worker with `limits`): then
/// the queue is not drained.
#[napi(catch_unwind)]
pub fn held_back(env: &Env, h: u32, limits: u32) -> napi::Result<bool> {
    run(env, || {
        let worker = limits_of(limits)?;
        with_queue(h, |b, q| Ok(b.held_back(q, worker)))?
    })
}

/// Resolves every pending pull of `puller` on the queue with an empty array.
#[napi(catch_unwind)]
pub fn cancel_pulls(env: &Env, h: u32, puller: u32) -> napi::Result<()> {
    run(env, || with_queue(h, |b, q| b.cancel_pulls(q, puller))?)
}

/// What an ack did, per ack.
#[napi]
pub enum AckOutcome {
    /// The job completed.
    Completed = 0,
    /// The attempt failed and the job will be retried.
    Retrying = 1,
    /// The job failed for good.
    Failed = 2,
    /// The activation was no longer current (a stale token): nothing changed.
    Stale = 3,
    /// Given back unprocessed, to the head of waiting.
    Released = 4,
    /// Delayed by its processor (a step job's `moveToDelayed`).
    Delayed = 5,
    /// Waiting for its children (a step job's `moveToWaitingChildren`).
    WaitingChildren = 6,
    /// Still active: no pending children to wait for.
    StillActive = 7,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireAck<'a> {
    id: String,
    token: u64,
    #[serde(default)]
    ok: bool,
    #[serde(default)]
    release: bool,
    /// With `release`: the job's processor never ran (claimed ahead and given back).
    #[serde(default)]
    unstarted: bool,
    #[serde(borrow)]
    value: Option<&'a RawValue>,
    reason: Option<String>,
    stack: Option<String>,
    #[serde(default)]
    unrecoverable: bool,
    /// The attempt failed because the job's `timeout` ran out.
    #[serde(default)]
    timeout: bool,
    /// The attempt failed because its worker thread or child process died.
    #[serde(default)]
    lost: bool,
    /// The wait before a retry, computed by the worker's `settings.backoffStrategy`.
    delay: Option<f64>,
    /// A step: delayed until this time (ms since the epoch).
    delay_until: Option<f64>,
    /// A step: wait for the job's pending children.
    #[serde(default)]
    wait_children: bool,
    keep: Option<RawKeep>,
}

/// Finishes activations. `acks` is a JSON array of `{id, token, ok, value?, reason?, stack?,
/// unrecoverable?, timeout?, lost?, delay?, keep?}`, `{id, token, release: true, unstarted?}`, or a step:
/// `{id, token, delayUntil}` / `{id, token, waitChildren: true}`. Returns one [`AckOutcome`]
/// per ack, in order.
#[napi(
    catch_unwind,
    ts_return_type = "Array<AckOutcome> | Promise<Array<AckOutcome>>"
)]
pub fn ack(env: &Env, h: u32, acks: String) -> napi::Result<Answer<'_, Vec<AckOutcome>>> {
    let reply = run(env, || ack_all(h, &acks))?;
    answer(env, reply, move |results| {
        if results.contains(&AckResult::Failed) {
            crate::dlq::failed(h);
        }
        results
            .into_iter()
            .map(|r| match r {
                AckResult::Completed => AckOutcome::Completed,
                AckResult::Retrying { .. } => AckOutcome::Retrying,
                AckResult::Failed => AckOutcome::Failed,
                AckResult::Stale => AckOutcome::Stale,
                AckResult::Released => AckOutcome::Released,
                AckResult::Delayed => AckOutcome::Delayed,
                AckResult::WaitingChildren => AckOutcome::WaitingChildren,
                AckResult::StillActive => AckOutcome::StillActive,
            })
            .collect()
    })
}

fn ack_all(h: u32, acks: &str) -> Result<Reply<Vec<AckResult>>, EngineError> {
    let wire: Vec<WireAck> = serde_json::from_str(acks)
        .map_err(|e| EngineError::type_error("acks", format!("are malformed: {e}")))?;
    let mut batch = Vec::with_capacity(wire.len());
    for a in wire {
        let keep = match a.keep {
            Some(k) => Some(parse_keep(
                if a.ok {
                    "removeOnComplete"
                } else {
                    "removeOnFail"
                },
                k,
            )?),
            None => None,
        };
        let outcome = if let Some(at) = a.delay_until {
            Outcome::Delayed {
                run_at: ms("timestamp", at)?,
            }
        } else if a.wait_children {
            Outcome::WaitingChildren
        } else if a.release {
            Outcome::Released {
                started: !a.unstarted,
            }
        } else if a.ok {
            Outcome::Completed(a.value.map_or("null", RawValue::get).into())
        } else {
            Outcome::Failed {
                reason: a.reason.unwrap_or_default().into(),
                stack: a.stack.map(Into::into),
                unrecoverable: a.unrecoverable,
                timed_out: a.timeout,
                lost: a.lost,
                delay: a.delay.map(|d| ms("delay", d)).transpose()?,
            }
        };
        batch.push(Ack {
            id: a.id,
            token: a.token,
            outcome,
            keep,
        });
    }
    with_queue(h, |b, q| b.ack(q, batch))
}

/// Extends the lease of job `id`, active under `token`, to `ms` from now (PostgreSQL; in one
/// process a live Worker's leases never expire); answers whether the token still holds it.
#[napi(catch_unwind, ts_return_type = "boolean | Promise<boolean>")]
pub fn extend_lock(
    env: &Env,
    h: u32,
    id: String,
    token: f64,
    duration_ms: f64,
) -> napi::Result<Answer<'_, bool>> {
    let reply = run(env, || {
        let token = ms("token", token)?;
        let duration = ms("duration", duration_ms)?;
        with_queue(h, |b, q| b.extend_lock(q, &id, token, duration))
    })?;
    answer(env, reply, |held| held)
}
