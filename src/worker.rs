//! Worker calls: the long-poll pull (the only async call a worker makes), the sync try-pull, and
//! batched acks.

use std::time::Duration;

use ferroqueue_engine::domain::options::{parse_keep, RawKeep};
use ferroqueue_engine::{Ack, AckResult, Outcome};
use napi::{Env, JsString, Result};
use napi_derive::napi;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::errors::{ms, to_napi};
use crate::registry::{queue_owned, with_queue};
use crate::text::js_text;

/// Waits up to `timeout_ms` for ready jobs; resolves with a JSON array of up to `max` activated
/// job records (each with its `token`), empty on timeout or cancellation.
#[napi]
pub async fn pull(h: u32, puller: u32, max: u32, timeout_ms: u32) -> Result<String> {
    let (engine, q) = queue_owned(h)?;
    let (_, jobs) = engine
        .pull(
            &q,
            puller,
            max as usize,
            Duration::from_millis(timeout_ms as u64),
        )
        .await;
    Ok(jobs)
}

/// Activates up to `max` ready jobs now, without waiting: a JSON array, maybe empty.
#[napi(catch_unwind)]
pub fn try_pull(env: &Env, h: u32, max: u32) -> Result<JsString<'_>> {
    let text = with_queue(h, |e, q| e.take(q, max as usize).1)?;
    js_text(env, &text)
}

/// Resolves every pending pull of `puller` on the queue with an empty array.
#[napi(catch_unwind)]
pub fn cancel_pulls(h: u32, puller: u32) -> Result<()> {
    with_queue(h, |e, q| e.cancel_pulls(q, puller))
}

#[derive(Deserialize)]
struct WireAck<'a> {
    id: String,
    token: u64,
    #[serde(default)]
    ok: bool,
    #[serde(default)]
    release: bool,
    #[serde(borrow)]
    value: Option<&'a RawValue>,
    reason: Option<String>,
    stack: Option<String>,
    #[serde(default)]
    unrecoverable: bool,
    /// The wait before a retry, computed by the worker's `settings.backoffStrategy`.
    delay: Option<f64>,
    keep: Option<RawKeep>,
}

/// Finishes activations. `acks` is a JSON array of `{id, token, ok, value?, reason?, stack?,
/// unrecoverable?, delay?, keep?}` or `{id, token, release: true}`. Returns per ack: 0 completed,
/// 1 retrying, 2 failed, 3 stale, 4 released.
#[napi(catch_unwind)]
pub fn ack(h: u32, acks: String) -> Result<Vec<u32>> {
    let wire: Vec<WireAck> = serde_json::from_str(&acks).map_err(|e| {
        to_napi(ferroqueue_engine::EngineError::type_error(
            "acks",
            format!("are malformed: {e}"),
        ))
    })?;
    let mut batch = Vec::with_capacity(wire.len());
    for a in wire {
        let keep = match a.keep {
            Some(k) => Some(
                parse_keep(
                    if a.ok {
                        "removeOnComplete"
                    } else {
                        "removeOnFail"
                    },
                    k,
                )
                .map_err(to_napi)?,
            ),
            None => None,
        };
        let outcome = if a.release {
            Outcome::Released
        } else if a.ok {
            Outcome::Completed(a.value.map_or("null", RawValue::get).into())
        } else {
            Outcome::Failed {
                reason: a.reason.unwrap_or_default().into(),
                stack: a.stack.map(Into::into),
                unrecoverable: a.unrecoverable,
                delay: a.delay.map(|d| ms("delay", d)).transpose()?,
            }
        };
        batch.push(Ack {
            id: a.id,
            token: a.token,
            outcome,
            keep,
        });
    }
    let results = with_queue(h, |e, q| e.ack_many(q, batch))?;
    Ok(results
        .into_iter()
        .map(|r| match r {
            AckResult::Completed => 0,
            AckResult::Retrying { .. } => 1,
            AckResult::Failed => 2,
            AckResult::Stale => 3,
            AckResult::Released => 4,
        })
        .collect())
}
