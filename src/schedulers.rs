//! Job scheduler calls (BullMQ v5's `upsertJobScheduler` and its getters): JSON in, JSON out.

use ferroqueue_engine::Page;
use napi::Env;
use napi_derive::napi;

use crate::errors::run;
use crate::registry::with_queue;
use crate::reply::{answer, Answer};

/// Creates or updates job scheduler `id`: `repeat` is the JSON of its repeat options, `name`,
/// `data` (JSON) and `opts` (JSON) its job template. Answers its pending job's record (JSON).
#[napi(catch_unwind, ts_return_type = "string | Promise<string>")]
pub fn upsert_job_scheduler(
    env: &Env,
    h: u32,
    id: String,
    repeat: String,
    name: Option<String>,
    data: String,
    opts: Option<String>,
) -> napi::Result<Answer<'_, String>> {
    let reply = run(env, || {
        with_queue(h, |b, q| {
            b.upsert_scheduler(q, &id, &repeat, (name.as_deref(), &data, opts.as_deref()))
        })
    })?;
    answer(env, reply, |record| record)
}

/// Scheduler `id` as BullMQ's JobSchedulerJson (JSON), null when there is none.
#[napi(
    catch_unwind,
    ts_return_type = "string | null | Promise<string | null>"
)]
pub fn get_job_scheduler(
    env: &Env,
    h: u32,
    id: String,
) -> napi::Result<Answer<'_, Option<String>>> {
    let reply = run(env, || with_queue(h, |b, q| b.scheduler(q, &id)))?;
    answer(env, reply, |s| s)
}

/// A page of the schedulers by next run (`asc`: soonest first), as a JSON array.
#[napi(catch_unwind, ts_return_type = "string | Promise<string>")]
pub fn get_job_schedulers(
    env: &Env,
    h: u32,
    start: i64,
    end: i64,
    asc: bool,
) -> napi::Result<Answer<'_, String>> {
    let reply = run(env, || {
        with_queue(h, |b, q| b.schedulers(q, Page { start, end, asc }))
    })?;
    answer(env, reply, |page| page)
}

/// How many schedulers the queue has.
#[napi(catch_unwind, ts_return_type = "number | Promise<number>")]
pub fn get_job_schedulers_count(env: &Env, h: u32) -> napi::Result<Answer<'_, u32>> {
    let reply = run(env, || with_queue(h, |b, q| b.scheduler_count(q)))?;
    answer(env, reply, |n| n.min(u32::MAX as usize) as u32)
}

/// Removes scheduler `id` and its pending job; answers whether it existed.
#[napi(catch_unwind, ts_return_type = "boolean | Promise<boolean>")]
pub fn remove_job_scheduler(env: &Env, h: u32, id: String) -> napi::Result<Answer<'_, bool>> {
    let reply = run(env, || with_queue(h, |b, q| b.remove_scheduler(q, &id)))?;
    answer(env, reply, |removed| removed)
}
