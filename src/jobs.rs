//! Calls on single jobs: remove, progress, logs, data, priority, delay, promote, retry.

use napi::Env;
use napi_derive::napi;

use crate::errors::{count_arg, ms, run};
use crate::registry::with_queue;

/// Removes a job unless it is active; `false` when absent.
#[napi(catch_unwind)]
pub fn remove_job(env: &Env, h: u32, id: String) -> napi::Result<bool> {
    run(env, || with_queue(h, |e, q| e.remove(q, &id))?)
}

/// Stores progress (JSON text).
#[napi(catch_unwind)]
pub fn update_progress(env: &Env, h: u32, id: String, progress: String) -> napi::Result<()> {
    run(env, || {
        with_queue(h, |e, q| e.update_progress(q, &id, &progress))?
    })
}

/// Appends a log row; keeps only the newest `keep` rows when `keep` > 0. Returns the row count.
#[napi(catch_unwind)]
pub fn add_log(env: &Env, h: u32, id: String, row: String, keep: f64) -> napi::Result<f64> {
    run(env, || {
        let keep = count_arg("keepLogs", keep)?;
        with_queue(h, |e, q| e.add_log(q, &id, &row, keep))?.map(|n| n as f64)
    })
}

/// A page of log rows as JSON `{ logs, count }`.
#[napi(catch_unwind)]
pub fn get_logs(
    env: &Env,
    h: u32,
    id: String,
    start: i64,
    end: i64,
    asc: bool,
) -> napi::Result<String> {
    let (logs, count) = run(env, || {
        with_queue(h, |e, q| e.logs(q, &id, start, end, asc))
    })?;
    Ok(serde_json::json!({ "logs": logs, "count": count }).to_string())
}

/// Replaces a job's data (JSON text).
#[napi(catch_unwind)]
pub fn update_data(env: &Env, h: u32, id: String, data: String) -> napi::Result<()> {
    run(env, || with_queue(h, |e, q| e.update_data(q, &id, &data))?)
}

/// Changes a job's priority.
#[napi(catch_unwind)]
pub fn change_priority(
    env: &Env,
    h: u32,
    id: String,
    priority: f64,
    lifo: bool,
) -> napi::Result<()> {
    run(env, || {
        let p = ferroqueue_engine::domain::options::priority("priority", priority)?;
        with_queue(h, |e, q| e.change_priority(q, &id, p, lifo))?
    })
}

/// Reschedules a delayed job `delay` ms from now.
#[napi(catch_unwind)]
pub fn change_delay(env: &Env, h: u32, id: String, delay: f64) -> napi::Result<()> {
    run(env, || {
        let d = ms("delay", delay)?;
        with_queue(h, |e, q| e.change_delay(q, &id, d))?
    })
}

/// Makes a delayed job ready now.
#[napi(catch_unwind)]
pub fn promote(env: &Env, h: u32, id: String) -> napi::Result<()> {
    run(env, || with_queue(h, |e, q| e.promote(q, &id))?)
}

/// Moves a failed (or completed) job back to waiting.
#[napi(catch_unwind)]
pub fn retry_job(
    env: &Env,
    h: u32,
    id: String,
    state: String,
    reset_attempts: bool,
) -> napi::Result<()> {
    run(env, || {
        with_queue(h, |e, q| e.retry(q, &id, &state, reset_attempts))?
    })
}
