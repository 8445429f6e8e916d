//! A queue's limits: its own rate limit, its cap on active jobs across every worker, and a hold
//! (`rateLimit(ms)`). The worker's own `limiter` travels with each pull (`worker.rs`).

use ferroqueue_engine::domain::limits::{checked_concurrency, LimitChange, RateLimit};
use napi::Env;
use napi_derive::napi;

use crate::errors::{ms, run};
use crate::registry::with_queue;
use crate::reply::{answer, Answer};

/// A queue's limits as `getGlobalRateLimit`, `getGlobalConcurrency` and `getRateLimitTtl` show
/// them.
#[napi(object)]
pub struct QueueLimits {
    /// The queue's own rate limit: at most `rate_max` jobs per `rate_duration` ms.
    pub rate_max: Option<u32>,
    pub rate_duration: Option<f64>,
    /// Most jobs active at once across every worker.
    pub concurrency: Option<u32>,
    /// Ms until the queue takes jobs again by its own rate limit or a hold (0: it does now).
    pub ttl: f64,
}

fn change(
    env: &Env,
    h: u32,
    c: impl FnOnce() -> ferroqueue_engine::Result<LimitChange>,
) -> napi::Result<Answer<'_, ()>> {
    let reply = run(env, || {
        let c = c()?;
        with_queue(h, |b, q| b.limit(q, c))
    })?;
    answer(env, reply, |()| ())
}

/// Sets the queue's own rate limit (`max` jobs per `duration` ms), or removes it when both are
/// left out.
#[napi(catch_unwind, ts_return_type = "void | Promise<void>")]
pub fn set_rate_limit(
    env: &Env,
    h: u32,
    max: Option<f64>,
    duration: Option<f64>,
) -> napi::Result<Answer<'_, ()>> {
    change(env, h, || match (max, duration) {
        (None, None) => Ok(LimitChange::Rate(None)),
        (m, d) => RateLimit::checked("rateLimit", m.unwrap_or(f64::NAN), d.unwrap_or(f64::NAN))
            .map(|r| LimitChange::Rate(Some(r))),
    })
}

/// Caps the jobs active at once across every worker of the queue, or removes the cap (`None`).
#[napi(catch_unwind, ts_return_type = "void | Promise<void>")]
pub fn set_concurrency_limit(env: &Env, h: u32, n: Option<f64>) -> napi::Result<Answer<'_, ()>> {
    change(env, h, || match n {
        None => Ok(LimitChange::Concurrency(None)),
        Some(n) => checked_concurrency("concurrency", n).map(|n| LimitChange::Concurrency(Some(n))),
    })
}

/// No job of the queue starts for `for_ms` ms from now (0 lifts a hold).
#[napi(catch_unwind, ts_return_type = "void | Promise<void>")]
pub fn hold_queue(env: &Env, h: u32, for_ms: f64) -> napi::Result<Answer<'_, ()>> {
    change(env, h, || {
        ms("expireTimeMs", for_ms).map(LimitChange::HoldFor)
    })
}

/// The queue's limits.
#[napi(catch_unwind, ts_return_type = "QueueLimits | Promise<QueueLimits>")]
pub fn get_limits(env: &Env, h: u32) -> napi::Result<Answer<'_, QueueLimits>> {
    let reply = run(env, || with_queue(h, |b, q| b.limits(q)))?;
    answer(env, reply, |(s, ttl)| QueueLimits {
        rate_max: s.rate.map(|r| r.max),
        rate_duration: s.rate.map(|r| r.duration as f64),
        concurrency: s.concurrency,
        ttl: ttl as f64,
    })
}
