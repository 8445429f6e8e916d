//! Reads and changes of evicted jobs (finished jobs that only the file holds). Each runs the
//! engine's blocking SQLite read on a blocking thread, so the JS thread never waits on disk.

use ferroqueue_engine::{Engine, EngineError, QueueRef};
use napi::Result;
use napi_derive::napi;

use crate::errors::{count_arg, ms, to_napi};
use crate::registry::{queue_owned, with_queue};

async fn blocking<T: Send + 'static>(
    h: u32,
    f: impl FnOnce(&Engine, &QueueRef) -> ferroqueue_engine::Result<T> + Send + 'static,
) -> Result<T> {
    let (e, q) = queue_owned(h)?;
    tokio::task::spawn_blocking(move || f(&e, &q))
        .await
        .map_err(|e| to_napi(EngineError::Internal(e.to_string())))?
        .map_err(to_napi)
}

/// Whether some finished jobs of the queue live only in its file.
#[napi(catch_unwind)]
pub fn has_evicted(h: u32) -> Result<bool> {
    with_queue(h, |e, q| e.has_evicted(q))
}

/// Whether `id` may name a job that lives only in the file.
#[napi(catch_unwind)]
pub fn maybe_evicted(h: u32, id: String) -> Result<bool> {
    with_queue(h, |e, q| e.evicted_key(q, &id).is_some())
}

/// The JSON record of an evicted job, or null.
#[napi]
pub async fn get_job_from_disk(h: u32, id: String) -> Result<Option<String>> {
    blocking(h, move |e, q| match e.evicted_key(q, &id) {
        Some(key) => e.disk_job_json(q, key),
        None => Ok(None),
    })
    .await
}

/// The state of an evicted job (`unknown` when absent).
#[napi]
pub async fn get_state_from_disk(h: u32, id: String) -> Result<String> {
    blocking(h, move |e, q| match e.evicted_key(q, &id) {
        Some(key) => Ok(e
            .disk_row(q, key)?
            .map_or("unknown", |r| r.state.state.as_str())
            .to_string()),
        None => Ok("unknown".to_string()),
    })
    .await
}

/// A page of an evicted job's logs as JSON `{ logs, count }`.
#[napi]
pub async fn get_logs_from_disk(
    h: u32,
    id: String,
    start: i64,
    end: i64,
    asc: bool,
) -> Result<String> {
    let (logs, count) = blocking(h, move |e, q| match e.evicted_key(q, &id) {
        Some(key) => e.disk_logs(q, key, start, end, asc),
        None => Ok((Vec::new(), 0)),
    })
    .await?;
    Ok(serde_json::json!({ "logs": logs, "count": count }).to_string())
}

/// Like `getJobs`, with finished states read from the file (complete there).
#[napi]
pub async fn get_jobs_with_disk(
    h: u32,
    types: Vec<String>,
    start: i64,
    end: i64,
    asc: bool,
) -> Result<String> {
    blocking(h, move |e, q| {
        e.jobs_json_with_disk(q, &types, start, end, asc)
    })
    .await
}

/// `clean` over the file and memory for a finished state; resolves the removed ids.
#[napi]
pub async fn clean_with_disk(h: u32, grace: f64, limit: f64, state: String) -> Result<Vec<String>> {
    let grace = ms("grace", grace)?;
    let limit = count_arg("limit", limit)?;
    let (e, q) = queue_owned(h)?;
    e.clean_with_disk(&q, grace, limit, &state)
        .await
        .map_err(to_napi)
}

/// Removes an evicted job; resolves whether it existed.
#[napi]
pub async fn remove_evicted(h: u32, id: String) -> Result<bool> {
    let (e, q) = queue_owned(h)?;
    match e.evicted_key(&q, &id) {
        Some(key) => e.remove_evicted(&q, key).await.map_err(to_napi),
        None => Ok(false),
    }
}

/// Brings an evicted job back into memory so it can be changed; resolves whether it did.
#[napi]
pub async fn revive_job(h: u32, id: String) -> Result<bool> {
    blocking(h, move |e, q| match e.evicted_key(q, &id) {
        Some(key) => e.revive(q, key),
        None => Ok(false),
    })
    .await
}
