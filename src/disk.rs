//! Reads and changes of evicted jobs (finished jobs that only the file holds). Each runs the
//! engine's blocking SQLite read on a blocking thread, so the JS thread never waits on disk.

use ferroqueue_engine::{Engine, EngineError, QueueRef};
use napi::bindgen_prelude::PromiseRaw;
use napi::Env;
use napi_derive::napi;

use crate::errors::{count_arg, ms, run, settle};
use crate::registry::{queue_owned, with_queue};

type Result<T> = std::result::Result<T, EngineError>;

/// A promise of `f` run on a blocking thread with the engine and queue of handle `h`.
fn blocking<T: Send + 'static + napi::bindgen_prelude::ToNapiValue>(
    env: &Env,
    h: u32,
    f: impl FnOnce(&Engine, &QueueRef) -> Result<T> + Send + 'static,
) -> napi::Result<PromiseRaw<'_, T>> {
    let (e, q) = run(env, || queue_owned(h))?;
    settle(env, async move {
        tokio::task::spawn_blocking(move || f(&e, &q))
            .await
            .map_err(|e| EngineError::Internal(e.to_string()))?
    })
}

/// Whether some finished jobs of the queue live only in its file.
#[napi(catch_unwind)]
pub fn has_evicted(env: &Env, h: u32) -> napi::Result<bool> {
    run(env, || with_queue(h, |e, q| e.has_evicted(q)))
}

/// Whether `id` may name a job that lives only in the file.
#[napi(catch_unwind)]
pub fn maybe_evicted(env: &Env, h: u32, id: String) -> napi::Result<bool> {
    run(env, || {
        with_queue(h, |e, q| e.evicted_key(q, &id).is_some())
    })
}

/// The JSON record of an evicted job, or null.
#[napi(catch_unwind, ts_return_type = "Promise<string | null>")]
pub fn get_job_from_disk(
    env: &Env,
    h: u32,
    id: String,
) -> napi::Result<PromiseRaw<'_, Option<String>>> {
    blocking(env, h, move |e, q| match e.evicted_key(q, &id) {
        Some(key) => e.disk_job_json(q, key),
        None => Ok(None),
    })
}

/// The state of an evicted job (`unknown` when absent).
#[napi(catch_unwind, ts_return_type = "Promise<string>")]
pub fn get_state_from_disk(env: &Env, h: u32, id: String) -> napi::Result<PromiseRaw<'_, String>> {
    blocking(env, h, move |e, q| match e.evicted_key(q, &id) {
        Some(key) => Ok(e
            .disk_row(q, key)?
            .map_or("unknown", |r| r.state.state.as_str())
            .to_string()),
        None => Ok("unknown".to_string()),
    })
}

/// A page of an evicted job's logs as JSON `{ logs, count }`.
#[napi(catch_unwind, ts_return_type = "Promise<string>")]
pub fn get_logs_from_disk(
    env: &Env,
    h: u32,
    id: String,
    start: i64,
    end: i64,
    asc: bool,
) -> napi::Result<PromiseRaw<'_, String>> {
    blocking(env, h, move |e, q| {
        let (logs, count) = match e.evicted_key(q, &id) {
            Some(key) => e.disk_logs(q, key, start, end, asc)?,
            None => (Vec::new(), 0),
        };
        Ok(serde_json::json!({ "logs": logs, "count": count }).to_string())
    })
}

/// Like `getJobs`, with finished states read from the file (complete there).
#[napi(catch_unwind, ts_return_type = "Promise<string>")]
pub fn get_jobs_with_disk(
    env: &Env,
    h: u32,
    types: Vec<String>,
    start: i64,
    end: i64,
    asc: bool,
) -> napi::Result<PromiseRaw<'_, String>> {
    blocking(env, h, move |e, q| {
        e.jobs_json_with_disk(q, &types, start, end, asc)
    })
}

/// `clean` over the file and memory for a finished state; resolves the removed ids.
#[napi(catch_unwind, ts_return_type = "Promise<Array<string>>")]
pub fn clean_with_disk(
    env: &Env,
    h: u32,
    grace: f64,
    limit: f64,
    state: String,
) -> napi::Result<PromiseRaw<'_, Vec<String>>> {
    let (grace, limit, (e, q)) = run(env, || {
        Ok((
            ms("grace", grace)?,
            count_arg("limit", limit)?,
            queue_owned(h)?,
        ))
    })?;
    settle(env, async move {
        e.clean_with_disk(&q, grace, limit, &state).await
    })
}

/// Removes an evicted job; resolves whether it existed.
#[napi(catch_unwind, ts_return_type = "Promise<boolean>")]
pub fn remove_evicted(env: &Env, h: u32, id: String) -> napi::Result<PromiseRaw<'_, bool>> {
    let (e, q) = run(env, || queue_owned(h))?;
    settle(env, async move {
        match e.evicted_key(&q, &id) {
            Some(key) => e.remove_evicted(&q, key).await,
            None => Ok(false),
        }
    })
}

/// Brings an evicted job back into memory so it can be changed; resolves whether it did.
#[napi(catch_unwind, ts_return_type = "Promise<boolean>")]
pub fn revive_job(env: &Env, h: u32, id: String) -> napi::Result<PromiseRaw<'_, bool>> {
    blocking(env, h, move |e, q| match e.evicted_key(q, &id) {
        Some(key) => e.revive(q, key),
        None => Ok(false),
    })
}
