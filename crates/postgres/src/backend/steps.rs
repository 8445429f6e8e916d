//! Steps of step jobs on PostgreSQL (the embedded engine's `domain/queue/steps.rs`): a
//! processor moves its own active job to delayed, or to waiting for its children; neither
//! spends an attempt. Rare, so one statement (or transaction) per step, after the batch of acks
//! they came with.

use std::sync::Arc;

use ferroqueue_engine::{AckResult, Result};

use super::Shared;
use crate::record::id_expr;

/// Moves job `key`, active under `token`, to delayed until `run_at` (ms since the epoch, the
/// caller's clock); answers `Delayed`, or `Stale` when the token no longer holds it.
pub(super) async fn delay(
    s: &Shared,
    queue: &Arc<str>,
    key: i64,
    token: i64,
    run_at: u64,
) -> Result<AckResult> {
    let sch = s.target().schema();
    let id = id_expr("j.");
    let at = crate::jobs::ms("run_at");
    // A time past runs it at the next promotion (`GREATEST`), as in the embedded engine.
    let sql = format!(
        "WITH m AS (
            UPDATE {sch}.jobs j
            SET state = 2, token = NULL, lease_until = NULL,
                run_at = GREATEST(to_timestamp($4::int8 / 1000.0), clock_timestamp()),
                delay = GREATEST($4::int8 - {now}, 0)
            WHERE j.queue = $1 AND j.key = $2 AND j.token = $3 AND j.state = 3
            RETURNING {id} AS id, run_at
        ), ev AS (
            INSERT INTO {sch}.events (queue, event, payload)
            SELECT $1, 'delayed', json_build_array(json_build_object('id', id, 'at', {at}))::text
            FROM m
        )
        SELECT count(*) FROM m",
        now = crate::jobs::NOW_MS,
    );
    let run_at = run_at.min(i64::MAX as u64) as i64;
    let c = s.pool.get().await?;
    let rows = c
        .query(
            s.target(),
            "cannot delay a job",
            &sql,
            &[&queue.as_ref(), &key, &token, &run_at],
        )
        .await?;
    let moved = rows.first().is_some_and(|r| r.get::<_, i64>(0) > 0);
    if moved {
        s.upkeep.notify_one();
    }
    Ok(if moved {
        AckResult::Delayed
    } else {
        AckResult::Stale
    })
}

/// Extends the lease of job `id`, held by this process under `token`, to `ms` from now (never
/// shortening it); answers whether the token still holds the job.
pub(super) async fn extend_lock(
    s: &Shared,
    queue: &Arc<str>,
    id: &str,
    token: u64,
    ms: u64,
) -> Result<bool> {
    let token = token.min(i64::MAX as u64) as i64;
    let key = {
        let held = s.held.lock();
        match held.get(&token).filter(|h| &h.queue == queue) {
            Some(h) => h.key,
            None => return Ok(false),
        }
    };
    let sch = s.target().schema();
    let id_of = id_expr("j.");
    let sql = format!(
        "UPDATE {sch}.jobs j
        SET lease_until = GREATEST(j.lease_until, {until})
        WHERE j.queue = $1 AND j.key = $2 AND j.token = $3 AND j.state = 3 AND {id_of} = $5
        RETURNING j.key",
        until = crate::jobs::after_ms("$4::int8"),
    );
    let ms = ms.min(i64::MAX as u64) as i64;
    let c = s.pool.get().await?;
    let rows = c
        .query(
            s.target(),
            "cannot extend a lock",
            &sql,
            &[&queue.as_ref(), &key, &token, &ms, &id],
        )
        .await?;
    Ok(!rows.is_empty())
}
