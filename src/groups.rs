//! Job groups: a group's own settings (concurrency, rate limit, paused) and the getters.

use ferroqueue_engine::domain::groups::option::checked_id;
use ferroqueue_engine::domain::groups::GroupChange;
use ferroqueue_engine::domain::limits::{checked_concurrency, RateLimit};
use napi::Env;
use napi_derive::napi;

use crate::errors::run;
use crate::registry::with_queue;
use crate::reply::{answer, Answer};

/// What a group holds and its own settings.
#[napi(object)]
pub struct GroupState {
    /// Ready jobs (waiting or prioritized) of the group.
    pub waiting: u32,
    /// Active jobs of the group.
    pub active: u32,
    pub paused: bool,
    /// The group's own concurrency, if set.
    pub concurrency: Option<u32>,
    /// The group's own rate limit: at most `rate_max` jobs per `rate_duration` ms.
    pub rate_max: Option<u32>,
    pub rate_duration: Option<f64>,
}

fn change(
    env: &Env,
    h: u32,
    group: String,
    c: impl FnOnce() -> ferroqueue_engine::Result<GroupChange>,
) -> napi::Result<Answer<'_, bool>> {
    let reply = run(env, || {
        checked_id("groupId", &group)?;
        let c = c()?;
        with_queue(h, |b, q| b.change_group(q, &group, c))
    })?;
    answer(env, reply, |changed| changed)
}

/// Sets a group's own concurrency (`None`: removes it, the workers' default applies); answers
/// whether it changed.
#[napi(catch_unwind, ts_return_type = "boolean | Promise<boolean>")]
pub fn set_group_concurrency(
    env: &Env,
    h: u32,
    group: String,
    n: Option<f64>,
) -> napi::Result<Answer<'_, bool>> {
    change(env, h, group, || match n {
        None => Ok(GroupChange::Concurrency(None)),
        Some(n) => checked_concurrency("concurrency", n).map(|n| GroupChange::Concurrency(Some(n))),
    })
}

/// Sets a group's own rate limit (`max` jobs per `duration` ms), or removes it when both are
/// left out; answers whether it changed.
#[napi(catch_unwind, ts_return_type = "boolean | Promise<boolean>")]
pub fn set_group_rate_limit(
    env: &Env,
    h: u32,
    group: String,
    max: Option<f64>,
    duration: Option<f64>,
) -> napi::Result<Answer<'_, bool>> {
    change(env, h, group, || match (max, duration) {
        (None, None) => Ok(GroupChange::Rate(None)),
        (m, d) => RateLimit::checked("rateLimit", m.unwrap_or(f64::NAN), d.unwrap_or(f64::NAN))
            .map(|r| GroupChange::Rate(Some(r))),
    })
}

/// Pauses (`true`) or resumes a group; answers whether that changed anything.
#[napi(catch_unwind, ts_return_type = "boolean | Promise<boolean>")]
pub fn pause_group(
    env: &Env,
    h: u32,
    group: String,
    paused: bool,
) -> napi::Result<Answer<'_, bool>> {
    change(env, h, group, || Ok(GroupChange::Paused(paused)))
}

/// What a group holds and its settings.
#[napi(catch_unwind, ts_return_type = "GroupState | Promise<GroupState>")]
pub fn get_group(env: &Env, h: u32, group: String) -> napi::Result<Answer<'_, GroupState>> {
    let reply = run(env, || {
        checked_id("groupId", &group)?;
        with_queue(h, |b, q| b.group_info(q, &group))
    })?;
    answer(env, reply, |g| GroupState {
        waiting: g.waiting.min(u32::MAX as usize) as u32,
        active: g.active,
        paused: g.settings.paused,
        concurrency: g.settings.concurrency,
        rate_max: g.settings.rate.map(|r| r.max),
        rate_duration: g.settings.rate.map(|r| r.duration as f64),
    })
}

/// A group's ready jobs `start..=end` (a negative `end` counts from the last) in the order the
/// group hands them out: a JSON array of records.
#[napi(catch_unwind, ts_return_type = "string | Promise<string>")]
pub fn get_group_jobs(
    env: &Env,
    h: u32,
    group: String,
    start: u32,
    end: i64,
) -> napi::Result<Answer<'_, String>> {
    let reply = run(env, || {
        checked_id("groupId", &group)?;
        with_queue(h, |b, q| b.group_jobs(q, &group, start as usize, end))
    })?;
    answer(env, reply, |s| s)
}

/// Ready jobs in every group of the queue.
#[napi(catch_unwind, ts_return_type = "number | Promise<number>")]
pub fn get_grouped_count(env: &Env, h: u32) -> napi::Result<Answer<'_, u32>> {
    let reply = run(env, || with_queue(h, |b, q| b.grouped_count(q)))?;
    answer(env, reply, |n| n.min(u32::MAX as usize) as u32)
}
