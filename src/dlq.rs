//! The dead-letter queue's calls (`getDlq`, `retryDlq`, `setDlqConfig`, …), each one of the
//! engine crate's DLQ operations over the queue's backend, and the process's [`DlqKeeper`],
//! which maintains every queue this process opened, on a thread of its own.

use std::sync::{Arc, OnceLock};

use ferroqueue_engine::application::dlq::{self, DlqKeeper};
use ferroqueue_engine::domain::dlq_view::DlqFilter;
use ferroqueue_engine::{Clock, EngineError, SystemClock};
use napi::bindgen_prelude::PromiseRaw;
use napi::Env;
use napi_derive::napi;

use crate::errors::{run, settle};
use crate::registry::{kept_queues, queue_of};

/// The process's keeper, started with the first queue opened.
fn keeper() -> &'static Arc<DlqKeeper> {
    static KEEPER: OnceLock<Arc<DlqKeeper>> = OnceLock::new();
    KEEPER.get_or_init(|| {
        let keeper = DlqKeeper::new(Arc::new(SystemClock));
        let k = keeper.clone();
        let started = std::thread::Builder::new()
            .name("ferroqueue-dlq".into())
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build();
                let Ok(rt) = rt else { return };
                // A panic of the keeper's own (each queue's pass is a task that keeps its own)
                // must not end the process's maintenance: it starts again a second later.
                loop {
                    let k = k.clone();
                    let run = std::panic::AssertUnwindSafe(|| rt.block_on(k.run(kept_queues)));
                    if std::panic::catch_unwind(run).is_ok() {
                        return;
                    }
                    std::thread::sleep(std::time::Duration::from_secs(1));
                }
            });
        // Without a thread (the system refused one) queues still work; only the DLQ's
        // expiry and automatic retries wait for the next process.
        drop(started);
        keeper
    })
}

/// Starts the keeper (once), for queues opened from now on.
pub fn start_keeper() {
    keeper();
}

/// Queue handle `h` failed jobs for good: the keeper looks at it when they can first expire or
/// fall due for a retry.
pub fn failed(h: u32) {
    keeper().failed(h);
}

fn now() -> u64 {
    SystemClock.now_ms()
}

fn filter_of(text: Option<String>) -> Result<DlqFilter, EngineError> {
    text.map_or(Ok(DlqFilter::default()), |t| DlqFilter::parse(&t))
}

/// `getDlq(filter?)`: the entries the filter (JSON) selects, as a JSON array.
#[napi(catch_unwind, ts_return_type = "Promise<string>")]
pub fn get_dlq(env: &Env, h: u32, filter: Option<String>) -> napi::Result<PromiseRaw<'_, String>> {
    let (b, q, f) = run(env, || {
        let (_, b, q) = queue_of(h)?;
        Ok((b, q, filter_of(filter)?))
    })?;
    settle(env, async move { dlq::entries(&*b, &q, &f, now()).await })
}

/// `getDlqStats()` as JSON.
#[napi(catch_unwind, ts_return_type = "Promise<string>")]
pub fn get_dlq_stats(env: &Env, h: u32) -> napi::Result<PromiseRaw<'_, String>> {
    let (_, b, q) = run(env, || queue_of(h))?;
    settle(env, async move { dlq::stats(&*b, &q).await })
}

/// Retries the entries the filter (JSON) selects, or the one job `id`; answers how many.
#[napi(catch_unwind, ts_return_type = "Promise<number>")]
pub fn retry_dlq(
    env: &Env,
    h: u32,
    filter: Option<String>,
    id: Option<String>,
) -> napi::Result<PromiseRaw<'_, u32>> {
    let (b, q, f) = run(env, || {
        let (_, b, q) = queue_of(h)?;
        let f = match id {
            Some(id) => DlqFilter::of_id(&id),
            None => filter_of(filter)?,
        };
        Ok((b, q, f))
    })?;
    settle(env, async move {
        let n = dlq::retry(&*b, &q, &f, now()).await?;
        Ok(u32::try_from(n).unwrap_or(u32::MAX))
    })
}

/// Removes every entry that entered before the call; answers how many.
#[napi(catch_unwind, ts_return_type = "Promise<number>")]
pub fn purge_dlq(env: &Env, h: u32) -> napi::Result<PromiseRaw<'_, u32>> {
    let (_, b, q) = run(env, || queue_of(h))?;
    settle(env, async move {
        let n = dlq::purge(&*b, &q).await?;
        Ok(u32::try_from(n).unwrap_or(u32::MAX))
    })
}

/// Removes job `id` if it is in the DLQ; answers whether it was.
#[napi(catch_unwind, ts_return_type = "Promise<boolean>")]
pub fn remove_dlq_job(env: &Env, h: u32, id: String) -> napi::Result<PromiseRaw<'_, bool>> {
    let (_, b, q) = run(env, || queue_of(h))?;
    settle(env, async move { dlq::remove(&*b, &q, &id).await })
}

/// `setDlqConfig(change)`: applies the fields of `change` (JSON); answers the settings (JSON).
#[napi(catch_unwind, ts_return_type = "Promise<string>")]
pub fn set_dlq_config(env: &Env, h: u32, change: String) -> napi::Result<PromiseRaw<'_, String>> {
    let (_, b, q) = run(env, || queue_of(h))?;
    settle(env, async move {
        let config = dlq::set_config(&*b, &q, &change).await?;
        keeper().nudge(h);
        Ok(config.to_json())
    })
}

/// `getDlqConfig()`: the settings as JSON.
#[napi(catch_unwind, ts_return_type = "Promise<string>")]
pub fn get_dlq_config(env: &Env, h: u32) -> napi::Result<PromiseRaw<'_, String>> {
    let (_, b, q) = run(env, || queue_of(h))?;
    settle(
        env,
        async move { Ok(b.dlq_config(&q).wait().await?.to_json()) },
    )
}
