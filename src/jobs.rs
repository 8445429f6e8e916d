//! Calls on single jobs: remove, progress, logs, data, priority, delay, promote, retry. Each
//! answers at once, or with a promise when the job must first be read back from where it lives
//! (the backend decides).

use ferroqueue_engine::domain::job::JobState;
use ferroqueue_engine::{EngineError, JobChange, Page};
use napi::Env;
use napi_derive::napi;

use crate::errors::{count_arg, ms, run};
use crate::registry::with_queue;
use crate::reply::{answer, Answer};

/// Applies `change` to job `id` of handle `h`; answers the change's count (log rows) or 0.
fn change<'env>(
    env: &'env Env,
    h: u32,
    id: &str,
    change: impl FnOnce() -> Result<JobChange, EngineError>,
) -> napi::Result<Answer<'env, f64>> {
    let reply = run(env, || {
        let c = change()?;
        with_queue(h, |b, q| b.change(q, id, c))
    })?;
    answer(env, reply, |n| n as f64)
}

/// Removes a job unless it is active (`ERR_JOB_LOCKED`); `false` when absent.
#[napi(catch_unwind, ts_return_type = "boolean | Promise<boolean>")]
pub fn remove_job(env: &Env, h: u32, id: String) -> napi::Result<Answer<'_, bool>> {
    let reply = run(env, || with_queue(h, |b, q| b.remove(q, &id)))?;
    answer(env, reply, |b| b)
}

/// Stores progress (JSON text).
#[napi(catch_unwind, ts_return_type = "number | Promise<number>")]
pub fn update_progress(
    env: &Env,
    h: u32,
    id: String,
    progress: String,
) -> napi::Result<Answer<'_, f64>> {
    change(env, h, &id, || Ok(JobChange::Progress(progress.into())))
}

/// Appends a log row; keeps only the newest `keep` rows when `keep` > 0. Answers the row count.
#[napi(catch_unwind, ts_return_type = "number | Promise<number>")]
pub fn add_log(
    env: &Env,
    h: u32,
    id: String,
    row: String,
    keep: f64,
) -> napi::Result<Answer<'_, f64>> {
    change(env, h, &id, || {
        Ok(JobChange::Log {
            row: row.into(),
            keep: count_arg("keepLogs", keep)?,
        })
    })
}

/// A page of log rows as JSON `{ logs, count }`.
#[napi(catch_unwind, ts_return_type = "string | Promise<string>")]
pub fn get_logs(
    env: &Env,
    h: u32,
    id: String,
    start: i64,
    end: i64,
    asc: bool,
) -> napi::Result<Answer<'_, String>> {
    let page = Page { start, end, asc };
    let reply = run(env, || with_queue(h, |b, q| b.logs(q, &id, page)))?;
    answer(env, reply, |(logs, count)| {
        serde_json::json!({ "logs": logs, "count": count }).to_string()
    })
}

/// Replaces a job's data (JSON text).
#[napi(catch_unwind, ts_return_type = "number | Promise<number>")]
pub fn update_data(env: &Env, h: u32, id: String, data: String) -> napi::Result<Answer<'_, f64>> {
    change(env, h, &id, || Ok(JobChange::Data(data.into())))
}

/// Changes a job's priority.
#[napi(catch_unwind, ts_return_type = "number | Promise<number>")]
pub fn change_priority(
    env: &Env,
    h: u32,
    id: String,
    priority: f64,
    lifo: bool,
) -> napi::Result<Answer<'_, f64>> {
    change(env, h, &id, || {
        let priority = ferroqueue_engine::domain::options::priority("priority", priority)?;
        Ok(JobChange::Priority { priority, lifo })
    })
}

/// Reschedules a delayed job `delay` ms from now.
#[napi(catch_unwind, ts_return_type = "number | Promise<number>")]
pub fn change_delay(env: &Env, h: u32, id: String, delay: f64) -> napi::Result<Answer<'_, f64>> {
    change(env, h, &id, || Ok(JobChange::Delay(ms("delay", delay)?)))
}

/// Makes a delayed job ready now.
#[napi(catch_unwind, ts_return_type = "number | Promise<number>")]
pub fn promote(env: &Env, h: u32, id: String) -> napi::Result<Answer<'_, f64>> {
    change(env, h, &id, || Ok(JobChange::Promote))
}

/// Moves a failed (or completed) job back to waiting.
#[napi(catch_unwind, ts_return_type = "number | Promise<number>")]
pub fn retry_job(
    env: &Env,
    h: u32,
    id: String,
    state: String,
    reset_attempts: bool,
) -> napi::Result<Answer<'_, f64>> {
    change(env, h, &id, || {
        let from = match JobState::parse(&state) {
            Some(s @ (JobState::Failed | JobState::Completed)) => s,
            _ => {
                return Err(EngineError::range(
                    "state",
                    format!("must be 'failed' or 'completed', got '{state}'"),
                ))
            }
        };
        Ok(JobChange::Retry {
            from,
            reset_attempts,
        })
    })
}
