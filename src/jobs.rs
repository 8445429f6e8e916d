//! Calls on single jobs: remove, progress, logs, data, priority, delay, promote, retry.

use napi::Result;
use napi_derive::napi;

use crate::errors::{count_arg, ms, to_napi};
use crate::registry::with_queue;

/// Removes a job unless it is active; `false` when absent.
#[napi(catch_unwind)]
pub fn remove_job(h: u32, id: String) -> Result<bool> {
    with_queue(h, |e, q| e.remove(q, &id))?.map_err(to_napi)
}

/// Stores progress (JSON text).
#[napi(catch_unwind)]
pub fn update_progress(h: u32, id: String, progress: String) -> Result<()> {
    with_queue(h, |e, q| e.update_progress(q, &id, &progress))?.map_err(to_napi)
}

/// Appends a log row; keeps only the newest `keep` rows when `keep` > 0. Returns the row count.
#[napi(catch_unwind)]
pub fn add_log(h: u32, id: String, row: String, keep: f64) -> Result<f64> {
    let keep = count_arg("keepLogs", keep)?;
    with_queue(h, |e, q| e.add_log(q, &id, &row, keep))?
        .map(|n| n as f64)
        .map_err(to_napi)
}

/// A page of log rows as JSON `{ logs, count }`.
#[napi(catch_unwind)]
pub fn get_logs(h: u32, id: String, start: i64, end: i64, asc: bool) -> Result<String> {
    let (logs, count) = with_queue(h, |e, q| e.logs(q, &id, start, end, asc))?;
    Ok(serde_json::json!({ "logs": logs, "count": count }).to_string())
}

/// Replaces a job's data (JSON text).
#[napi(catch_unwind)]
pub fn update_data(h: u32, id: String, data: String) -> Result<()> {
    with_queue(h, |e, q| e.update_data(q, &id, &data))?.map_err(to_napi)
}

/// Changes a job's priority.
#[napi(catch_unwind)]
pub fn change_priority(h: u32, id: String, priority: f64, lifo: bool) -> Result<()> {
    let p = ferroqueue_engine::domain::options::priority("priority", priority).map_err(to_napi)?;
    with_queue(h, |e, q| e.change_priority(q, &id, p, lifo))?.map_err(to_napi)
}

/// Reschedules a delayed job `delay` ms from now.
#[napi(catch_unwind)]
pub fn change_delay(h: u32, id: String, delay: f64) -> Result<()> {
    let d = ms("delay", delay)?;
    with_queue(h, |e, q| e.change_delay(q, &id, d))?.map_err(to_napi)
}

/// Makes a delayed job ready now.
#[napi(catch_unwind)]
pub fn promote(h: u32, id: String) -> Result<()> {
    with_queue(h, |e, q| e.promote(q, &id))?.map_err(to_napi)
}

/// Moves a failed (or completed) job back to waiting.
#[napi(catch_unwind)]
pub fn retry_job(h: u32, id: String, state: String, reset_attempts: bool) -> Result<()> {
    with_queue(h, |e, q| e.retry(q, &id, &state, reset_attempts))?.map_err(to_napi)
}
