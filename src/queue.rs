//! Queue-level calls: adding jobs, reads, pause/resume, drain, clean, obliterate.

use ferroqueue_engine::domain::queue::{Added, NewJob};
use ferroqueue_engine::{EngineError, JobOptions};
use napi::bindgen_prelude::Float64ArraySlice;
use napi::{Env, JsString};
use napi_derive::napi;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::errors::{count_arg, ms, run};

type Result<T> = std::result::Result<T, EngineError>;
use crate::registry::with_queue;
use crate::text::js_text;

/// `add`'s answer as a number: the automatic id (> 0), 0 for a new job with a custom id, -1
/// when a job with that custom id existed already (nothing added).
fn added_code(a: Added, custom: bool) -> f64 {
    match a {
        Added::New(key) if !custom => key as f64,
        Added::New(_) => 0.0,
        Added::Duplicate(_) => -1.0,
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

/// Adds one job. `data` and `opts` are JSON text.
#[napi(catch_unwind)]
pub fn add(
    env: &Env,
    h: u32,
    name: String,
    data: String,
    opts: Option<String>,
    timestamp: f64,
) -> napi::Result<f64> {
    run(env, || add_one(h, name, data, opts, timestamp))
}

fn add_one(
    h: u32,
    name: String,
    data: String,
    opts: Option<String>,
    timestamp: f64,
) -> Result<f64> {
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
    with_queue(h, |e, q| added_code(e.add(q, job), custom))
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

/// Adds many jobs under one lock (see [`parse_bulk`] for `jobs`); all are validated before any is
/// added. Returns one code per job as for [`add`].
///
/// The codes are copied into memory V8 owns: napi-rs 3.16's `Float64Array::new(vec)` never
/// frees the `Vec` behind the external buffer (its finalizer drops a copy that skips the free),
/// which leaked 8 bytes per added job.
#[napi(catch_unwind)]
pub fn add_bulk<'env>(
    env: &'env Env,
    h: u32,
    jobs: String,
    timestamp: f64,
) -> napi::Result<Float64ArraySlice<'env>> {
    let codes = run(env, || {
        let (batch, custom) = parse_bulk(&jobs, ms("timestamp", timestamp)?)?;
        let added = with_queue(h, |e, q| e.add_bulk(q, batch))?;
        Ok(added
            .into_iter()
            .zip(custom)
            .map(|(a, c)| added_code(a, c))
            .collect::<Vec<f64>>())
    })?;
    Float64ArraySlice::copy_from(env, codes)
}

/// Validates a batch as [`add_bulk`] would, without adding anything (a slice of a large
/// `addBulk`, checked before any slice is added).
#[napi(catch_unwind)]
pub fn check_bulk(env: &Env, jobs: String) -> napi::Result<()> {
    run(env, || parse_bulk(&jobs, 0).map(|_| ()))
}

/// A job's JSON record, or `null`.
#[napi(catch_unwind)]
pub fn get_job(env: &Env, h: u32, id: String) -> napi::Result<Option<String>> {
    run(env, || with_queue(h, |e, q| e.job_json(q, &id)))
}

/// A job's state name (`unknown` when absent).
#[napi(catch_unwind)]
pub fn get_state(env: &Env, h: u32, id: String) -> napi::Result<String> {
    run(env, || with_queue(h, |e, q| e.state(q, &id).to_string()))
}

/// A JSON array of job records in the given states, paged.
#[napi(catch_unwind)]
pub fn get_jobs(
    env: &Env,
    h: u32,
    types: Vec<String>,
    start: i64,
    end: i64,
    asc: bool,
) -> napi::Result<JsString<'_>> {
    let text = run(env, || {
        with_queue(h, |e, q| e.jobs_json(q, &types, start, end, asc))?
    })?;
    js_text(env, &text)
}

/// Counts per state as a JSON object; all states when `types` is empty.
#[napi(catch_unwind)]
pub fn get_counts(env: &Env, h: u32, types: Vec<String>) -> napi::Result<String> {
    let counts = run(env, || with_queue(h, |e, q| e.counts(q, &types))?)?;
    let map: serde_json::Map<String, serde_json::Value> = counts
        .into_iter()
        .map(|(k, v)| (k, serde_json::Value::from(v)))
        .collect();
    Ok(serde_json::Value::Object(map).to_string())
}

/// Waiting + prioritized + delayed.
#[napi(catch_unwind)]
pub fn count(env: &Env, h: u32) -> napi::Result<f64> {
    run(env, || with_queue(h, |e, q| e.count(q) as f64))
}

/// Pauses the queue.
#[napi(catch_unwind)]
pub fn pause(env: &Env, h: u32) -> napi::Result<()> {
    run(env, || with_queue(h, |e, q| e.pause(q)))
}

/// Resumes the queue.
#[napi(catch_unwind)]
pub fn resume(env: &Env, h: u32) -> napi::Result<()> {
    run(env, || with_queue(h, |e, q| e.resume(q)))
}

/// Whether the queue is paused.
#[napi(catch_unwind)]
pub fn is_paused(env: &Env, h: u32) -> napi::Result<bool> {
    run(env, || with_queue(h, |e, q| e.is_paused(q)))
}

/// Removes waiting/prioritized (and delayed) jobs; returns how many.
#[napi(catch_unwind)]
pub fn drain(env: &Env, h: u32, delayed: bool) -> napi::Result<f64> {
    run(env, || with_queue(h, |e, q| e.drain(q, delayed) as f64))
}

/// Removes jobs of `state` older than `grace` ms, at most `limit` (0: all); returns their ids.
#[napi(catch_unwind)]
pub fn clean(
    env: &Env,
    h: u32,
    grace: f64,
    limit: f64,
    state: String,
) -> napi::Result<Vec<String>> {
    run(env, || {
        let grace = ms("grace", grace)?;
        let limit = count_arg("limit", limit)?;
        with_queue(h, |e, q| e.clean(q, grace, limit, &state))?
    })
}

/// Removes everything of the queue.
#[napi(catch_unwind)]
pub fn obliterate(env: &Env, h: u32, force: bool) -> napi::Result<()> {
    run(env, || with_queue(h, |e, q| e.obliterate(q, force))?)
}
