//! Queue-level calls: adding jobs, reads, pause/resume, drain, clean, obliterate. Each answers
//! at once, or with a promise where the backend needs a round trip (see `reply.rs`).

use ferroqueue_engine::domain::listing::parse_states;
use ferroqueue_engine::domain::queue::{Added, NewJob};
use ferroqueue_engine::{EngineError, JobOptions, JobState, Page, Reply};
use napi::bindgen_prelude::{Either, Float64ArraySlice, PromiseRaw};
use napi::{Env, JsString};
use napi_derive::napi;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::errors::{count_arg, ms, range, run, settle};
use crate::registry::with_queue;
use crate::reply::{answer, Answer};
use crate::text::js_text;

type Result<T> = std::result::Result<T, EngineError>;

/// What `add` did when it did not assign an automatic id (an automatic id is answered as the
/// number itself, > 0).
#[napi]
pub enum AddOutcome {
    /// A new job under the custom id it was given.
    CustomId = 0,
    /// A job with that custom id existed already: nothing was added.
    Duplicate = -1,
    /// A job holds the key of its deduplication id: nothing was added
    /// (`getDeduplicationJobId` names it).
    Deduplicated = -2,
}

/// `add`'s answer as a number: the automatic id (> 0), or an [`AddOutcome`] value.
fn added_code(a: Added, custom: bool) -> f64 {
    match a {
        Added::New(key) if !custom => key as f64,
        Added::New(_) => AddOutcome::CustomId as i32 as f64,
        Added::Duplicate(_) => AddOutcome::Duplicate as i32 as f64,
        Added::Deduplicated(_) => AddOutcome::Deduplicated as i32 as f64,
    }
}

fn options(opts: Option<&str>) -> Result<JobOptions> {
    match opts {
        Some(text) => JobOptions::from_json(text),
        None => Ok(JobOptions::defaults()),
    }
}

/// Validates job options (JSON text) without adding anything, e.g. a queue's defaults.
#[napi(catch_unwind)]
pub fn check_job_options(env: &Env, opts: String) -> napi::Result<()> {
    run(env, || options(Some(&opts)).map(|_| ()))
}

/// Adds one job. `data` and `opts` are JSON text. Answers the automatic id (> 0) or an
/// [`AddOutcome`].
#[napi(
    catch_unwind,
    ts_return_type = "number | AddOutcome | Promise<number | AddOutcome>"
)]
pub fn add(
    env: &Env,
    h: u32,
    name: String,
    data: String,
    opts: Option<String>,
    timestamp: f64,
) -> napi::Result<Answer<'_, f64>> {
    let (reply, custom) = run(env, || {
        let parsed = options(opts.as_deref())?;
        let timestamp = ms("timestamp", timestamp)?;
        let custom = parsed.job_id.is_some();
        let job = NewJob {
            name,
            data: data.into(),
            opts: parsed,
            opts_json: opts.map(Into::into),
            timestamp,
        };
        Ok((with_queue(h, |b, q| b.add(q, job))?, custom))
    })?;
    answer(env, reply, move |a| added_code(a, custom))
}

#[derive(Deserialize)]
struct BulkJob<'a> {
    name: String,
    #[serde(borrow)]
    data: Option<&'a RawValue>,
    #[serde(borrow)]
    opts: Option<&'a RawValue>,
    timestamp: Option<f64>,
}

/// Parses and validates a batch: `jobs` is a JSON array of `{name, data, opts?, timestamp?}`.
/// Returns the jobs and, per job, whether it has a custom id.
fn parse_bulk(jobs: &str, now: u64) -> Result<(Vec<NewJob>, Vec<bool>)> {
    let items: Vec<BulkJob> = serde_json::from_str(jobs).map_err(|e| {
        EngineError::type_error(
            "jobs",
            format!("must be an array of {{ name, data, opts }}: {e}"),
        )
    })?;
    let mut custom = Vec::with_capacity(items.len());
    let mut batch = Vec::with_capacity(items.len());
    for item in items {
        // `{}` (what the JS layer sends for a job without options) is no options: it is neither
        // parsed nor stored (a record echoes `{}` for it anyway).
        let opts_text = item
            .opts
            .map(RawValue::get)
            .filter(|t| *t != "null" && *t != "{}");
        let parsed = options(opts_text)?;
        custom.push(parsed.job_id.is_some());
        batch.push(NewJob {
            name: item.name,
            data: item.data.map_or("{}", RawValue::get).into(),
            opts: parsed,
            opts_json: opts_text.map(Into::into),
            timestamp: match item.timestamp {
                Some(t) => ms("timestamp", t)?,
                None => now,
            },
        });
    }
    Ok((batch, custom))
}

fn codes(added: Vec<Added>, custom: Vec<bool>) -> Vec<f64> {
    added
        .into_iter()
        .zip(custom)
        .map(|(a, c)| added_code(a, c))
        .collect()
}

/// Adds many jobs, all or none, in order (see [`parse_bulk`] for `jobs`); all are validated
/// before any is added. Answers one code per job as for [`add`] (an id, or an [`AddOutcome`]).
///
/// Codes at hand are copied into memory V8 owns: napi-rs 3.16's `Float64Array::new(vec)` never
/// frees the `Vec` behind the external buffer (its finalizer drops a copy that skips the free),
/// which leaked 8 bytes per added job.
#[napi(catch_unwind, ts_return_type = "Float64Array | Promise<Array<number>>")]
pub fn add_bulk<'env>(
    env: &'env Env,
    h: u32,
    jobs: String,
    timestamp: f64,
) -> napi::Result<Either<Float64ArraySlice<'env>, PromiseRaw<'env, Vec<f64>>>> {
    let (reply, custom) = run(env, || {
        let (batch, custom) = parse_bulk(&jobs, ms("timestamp", timestamp)?)?;
        Ok((with_queue(h, |b, q| b.add_bulk(q, batch))?, custom))
    })?;
    match reply {
        Reply::Now(r) => {
            let added = run(env, || r)?;
            Float64ArraySlice::copy_from(env, codes(added, custom)).map(Either::A)
        }
        Reply::Later(p) => settle(env, async move { Ok(codes(p.await?, custom)) }).map(Either::B),
    }
}

/// Validates a batch as [`add_bulk`] would, without adding anything (a slice of a large
/// `addBulk`, checked before any slice is added).
#[napi(catch_unwind)]
pub fn check_bulk(env: &Env, jobs: String) -> napi::Result<()> {
    run(env, || parse_bulk(&jobs, 0).map(|_| ()))
}

/// A job's JSON record, or `null`.
#[napi(
    catch_unwind,
    ts_return_type = "string | null | Promise<string | null>"
)]
pub fn get_job(env: &Env, h: u32, id: String) -> napi::Result<Answer<'_, Option<String>>> {
    let reply = run(env, || with_queue(h, |b, q| b.job(q, &id)))?;
    answer(env, reply, |j| j)
}

/// A job's state name (`unknown` when absent).
#[napi(catch_unwind, ts_return_type = "string | Promise<string>")]
pub fn get_state(env: &Env, h: u32, id: String) -> napi::Result<Answer<'_, &'static str>> {
    let reply = run(env, || with_queue(h, |b, q| b.state(q, &id)))?;
    answer(env, reply, |s| s.map_or("unknown", |s| s.as_str()))
}

/// A JSON array of job records in the given states, paged.
#[napi(catch_unwind, ts_return_type = "string | Promise<string>")]
pub fn get_jobs(
    env: &Env,
    h: u32,
    types: Vec<String>,
    start: i64,
    end: i64,
    asc: bool,
) -> napi::Result<Either<JsString<'_>, PromiseRaw<'_, String>>> {
    let reply = run(env, || {
        let states = parse_states("types", &types)?;
        with_queue(h, |b, q| b.jobs(q, states, Page { start, end, asc }))
    })?;
    match reply {
        Reply::Now(r) => js_text(env, &run(env, || r)?).map(Either::A),
        Reply::Later(p) => settle(env, p).map(Either::B),
    }
}

/// Counts per state as a JSON object; all states when `types` is empty.
#[napi(catch_unwind, ts_return_type = "string | Promise<string>")]
pub fn get_counts(env: &Env, h: u32, types: Vec<String>) -> napi::Result<Answer<'_, String>> {
    let names: Vec<String> = if types.is_empty() {
        ferroqueue_engine::domain::listing::StateFilter::ALL
            .iter()
            .map(|s| s.to_string())
            .collect()
    } else {
        types
    };
    let reply = run(env, || {
        let states = parse_states("types", &names)?;
        with_queue(h, |b, q| b.counts(q, states))
    })?;
    answer(env, reply, move |counts| {
        let map: serde_json::Map<String, serde_json::Value> = names
            .into_iter()
            .zip(counts)
            .map(|(k, v)| (k, serde_json::Value::from(v)))
            .collect();
        serde_json::Value::Object(map).to_string()
    })
}

/// Waiting + prioritized + delayed.
#[napi(catch_unwind, ts_return_type = "number | Promise<number>")]
pub fn count(env: &Env, h: u32) -> napi::Result<Answer<'_, f64>> {
    let reply = run(env, || with_queue(h, |b, q| b.count(q)))?;
    answer(env, reply, |n| n as f64)
}

/// The id of the job holding the deduplication key of `id`, or null.
#[napi(
    catch_unwind,
    ts_return_type = "string | null | Promise<string | null>"
)]
pub fn get_deduplication_job_id(
    env: &Env,
    h: u32,
    id: String,
) -> napi::Result<Answer<'_, Option<String>>> {
    let reply = run(env, || with_queue(h, |b, q| b.dedup_holder(q, &id)))?;
    answer(env, reply, |j| j)
}

/// Removes the deduplication key of `id` (with `holder`, only if that job holds it); answers
/// whether a live key was removed.
#[napi(catch_unwind, ts_return_type = "boolean | Promise<boolean>")]
pub fn remove_deduplication_key(
    env: &Env,
    h: u32,
    id: String,
    holder: Option<String>,
) -> napi::Result<Answer<'_, bool>> {
    let reply = run(env, || {
        with_queue(h, |b, q| b.remove_dedup_key(q, &id, holder.as_deref()))
    })?;
    answer(env, reply, |r| r)
}

/// Pauses the queue.
#[napi(catch_unwind, ts_return_type = "void | Promise<void>")]
pub fn pause(env: &Env, h: u32) -> napi::Result<Answer<'_, ()>> {
    let reply = run(env, || with_queue(h, |b, q| b.pause(q)))?;
    answer(env, reply, |()| ())
}

/// Resumes the queue.
#[napi(catch_unwind, ts_return_type = "void | Promise<void>")]
pub fn resume(env: &Env, h: u32) -> napi::Result<Answer<'_, ()>> {
    let reply = run(env, || with_queue(h, |b, q| b.resume(q)))?;
    answer(env, reply, |()| ())
}

/// Whether the queue is paused.
#[napi(catch_unwind, ts_return_type = "boolean | Promise<boolean>")]
pub fn is_paused(env: &Env, h: u32) -> napi::Result<Answer<'_, bool>> {
    let reply = run(env, || with_queue(h, |b, q| b.is_paused(q)))?;
    answer(env, reply, |p| p)
}

/// Removes waiting/prioritized (and delayed) jobs; answers how many.
#[napi(catch_unwind, ts_return_type = "number | Promise<number>")]
pub fn drain(env: &Env, h: u32, delayed: bool) -> napi::Result<Answer<'_, f64>> {
    let reply = run(env, || with_queue(h, |b, q| b.drain(q, delayed)))?;
    answer(env, reply, |n| n as f64)
}

/// Removes jobs of `state` older than `grace` ms, at most `limit` (0: all); answers their ids.
#[napi(
    catch_unwind,
    ts_return_type = "Array<string> | Promise<Array<string>>"
)]
pub fn clean(
    env: &Env,
    h: u32,
    grace: f64,
    limit: f64,
    state: String,
) -> napi::Result<Answer<'_, Vec<String>>> {
    let reply = run(env, || {
        let grace = ms("grace", grace)?;
        let limit = count_arg("limit", limit)?;
        let state = parse_states("type", std::slice::from_ref(&state))?[0];
        with_queue(h, |b, q| b.clean(q, grace, limit, state))
    })?;
    answer(env, reply, |ids| ids)
}

/// Moves up to `count` jobs of finished `state` ('failed' or 'completed') that finished before
/// `before` (ms) back to waiting, oldest first; answers how many.
#[napi(catch_unwind, ts_return_type = "number | Promise<number>")]
pub fn retry_jobs(
    env: &Env,
    h: u32,
    state: String,
    count: f64,
    before: f64,
) -> napi::Result<Answer<'_, u32>> {
    let reply = run(env, || {
        let count = count_arg("count", count)?;
        let before = ms("timestamp", before)?;
        let from = match JobState::parse(&state) {
            Some(s @ (JobState::Failed | JobState::Completed)) => s,
            _ => {
                return Err(range(
                    "state",
                    format!("must be 'failed' or 'completed', got {state:?}"),
                ))
            }
        };
        with_queue(h, |b, q| b.retry_jobs(q, from, count, before))
    })?;
    answer(env, reply, |n| n.min(u32::MAX as usize) as u32)
}

/// Moves up to `count` delayed jobs to waiting, earliest due first; answers how many.
#[napi(catch_unwind, ts_return_type = "number | Promise<number>")]
pub fn promote_jobs(env: &Env, h: u32, count: f64) -> napi::Result<Answer<'_, u32>> {
    let reply = run(env, || {
        let count = count_arg("count", count)?;
        with_queue(h, |b, q| b.promote_jobs(q, count))
    })?;
    answer(env, reply, |n| n.min(u32::MAX as usize) as u32)
}

/// Removes everything of the queue.
#[napi(catch_unwind, ts_return_type = "void | Promise<void>")]
pub fn obliterate(env: &Env, h: u32, force: bool) -> napi::Result<Answer<'_, ()>> {
    let reply = run(env, || with_queue(h, |b, q| b.obliterate(q, force)))?;
    answer(env, reply, |()| ())
}
