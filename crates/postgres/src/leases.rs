//! Leases of active jobs: renewal and the stall sweep. Each claim gives a job a token and a
//! lease (`lease_until`, by the database clock). A process renews every lease it holds, in every
//! queue, with one statement; any process sweeps expired leases (`SKIP LOCKED`, so sweepers
//! share the work). A swept job is stalled: it goes back to the head of waiting with
//! `stalled_counter + 1` and no attempt spent, or, past `maxStalledCount`, fails with BullMQ's
//! reason. Either way its token is cleared, so an ack from the process that lost it changes
//! nothing, and QueueEvents hear `stalled` (then `waiting` or `failed`).

use ferroqueue_engine::EngineError;
use tokio_postgres::{Client, Statement};

use crate::acks::history_appended;
use crate::connect::{prepare, Target};
use crate::jobs::{FINISHED_COLUMNS, NOW_MS};

pub use ferroqueue_engine::domain::STALLED_TOO_OFTEN;

/// A lease a process holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub queue: String,
    pub key: i64,
    pub token: i64,
    /// Its length from now, ms (its holder's `lockDuration`).
    pub lease_ms: i64,
}

/// What the sweep did with one expired lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stalled {
    pub queue: String,
    pub key: i64,
    /// `false`: back to waiting; `true`: failed, stalled more than allowed.
    pub failed: bool,
    /// A failed job's id and options (its parent, if it is a flow's child, hears).
    pub id: Option<String>,
    pub opts: Option<String>,
}

/// The lease statements, prepared on one connection.
pub struct LeaseStatements {
    renew: Statement,
    sweep: Statement,
}

impl LeaseStatements {
    /// Prepares the statements for the schema of `t` (already migrated).
    pub async fn prepare(client: &Client, t: &Target) -> Result<LeaseStatements, EngineError> {
        let s = t.schema();
        let prep = |sql: String| async move { prepare(client, t, &sql).await };
        // One lookup of the token index per lease (see `acks.rs` for why by token).
        let renew = prep(format!(
            "UPDATE {s}.jobs j
            SET lease_until = GREATEST(j.lease_until, clock_timestamp() + l.ms * interval '1 millisecond')
            FROM unnest($1::text[], $2::int8[], $3::int8[], $4::int8[]) AS l(queue, key, token, ms)
            WHERE j.token = l.token AND j.key = l.key AND j.state::int4 = 3
            RETURNING j.queue, j.key"
        ))
        .await?;
        // Expired leases, oldest first, read through the token index (every active job has a
        // token; `lease_until` has no index, so renewals are HOT updates): those stalled too
        // often move to `finished` as failed, the others go back to the head of waiting (a fresh
        // negative order from their queue, as recovery does in the embedded engine and BullMQ's
        // stalled check does).
        // Those failed get a final attempt in their history (`domain/dlq.rs`).
        let history = history_appended(
            "",
            &format!(
                "'attempt', attempts_made + 1, 'startedAt', COALESCE(processed_on, 0),
                 'failedAt', {NOW_MS}, 'error', '{STALLED_TOO_OFTEN}', 'kind', 'stalled',
                 'final', true"
            ),
        );
        let sweep = prep(format!(
            "WITH expired AS (
                SELECT ctid AS row, queue, key, stalled_counter + 1 > $2 AS too_often,
                       lease_until
                FROM {s}.jobs
                WHERE token IS NOT NULL AND state = 3
                  AND lease_until < (SELECT clock_timestamp())
                ORDER BY lease_until
                LIMIT $1
                FOR UPDATE SKIP LOCKED
            ), failed AS (
                DELETE FROM {s}.jobs j
                WHERE j.ctid = ANY(ARRAY(SELECT row FROM expired WHERE too_often))
                RETURNING j.*
            ), moved AS (
                INSERT INTO {s}.finished ({FINISHED_COLUMNS})
                SELECT queue, key, custom_id, name, data, opts, 5, priority, delay, timestamp,
                       processed_on, {NOW_MS}, attempts_made + 1, attempts_started,
                       stalled_counter + 1, progress, NULL, '{STALLED_TOO_OFTEN}', stacktrace, logs,
                       processed_by, {history}
                FROM failed
                RETURNING queue, key, COALESCE(custom_id, key::text) AS id, opts
            ), back AS (
                SELECT row, queue, key,
                       row_number() OVER (PARTITION BY queue ORDER BY lease_until DESC, key DESC)
                           AS i,
                       count(*) OVER (PARTITION BY queue) AS n
                FROM expired WHERE NOT too_often
            ), q AS (
                UPDATE {s}.queues SET order_seq = order_seq + c.n
                FROM (SELECT DISTINCT queue, n FROM back) c
                WHERE name = c.queue
                RETURNING name, order_seq - c.n AS ord0
            ), waiting AS (
                UPDATE {s}.jobs j
                SET state = CASE WHEN j.priority > 0 THEN 1 ELSE 0 END,
                    stalled_counter = j.stalled_counter + 1, token = NULL, lease_until = NULL,
                    ord = -(q.ord0 + back.i)
                FROM back JOIN q ON q.name = back.queue
                WHERE j.ctid = ANY(ARRAY(SELECT row FROM back))
                  AND j.queue = back.queue AND j.key = back.key
                RETURNING j.queue, j.key, COALESCE(j.custom_id, j.key::text) AS id
            ), ev AS (
                -- `stalled` first, then where each went (ids are drawn in this order).
                INSERT INTO {s}.events (queue, event, payload)
                SELECT queue, event, payload FROM (
                    SELECT queue, 1 AS o, 'stalled' AS event,
                           json_agg(json_build_object('id', id))::text AS payload
                    FROM (SELECT queue, id FROM waiting UNION ALL SELECT queue, id FROM moved) st
                    GROUP BY queue
                    UNION ALL
                    SELECT queue, 2, 'waiting',
                           json_agg(json_build_object('id', id, 'prev', 'active'))::text
                    FROM waiting GROUP BY queue
                    UNION ALL
                    SELECT queue, 3, 'failed',
                           json_agg(json_build_object('id', id, 'reason', '{STALLED_TOO_OFTEN}'))::text
                    FROM moved GROUP BY queue
                ) e
                ORDER BY o
            )
            SELECT queue, key, false, NULL::text, NULL::text FROM waiting
            UNION ALL
            SELECT queue, key, true, id, opts FROM moved"
        ))
        .await?;
        Ok(LeaseStatements { renew, sweep })
    }

    /// Extends every lease in `leases` (of any queues) to its length from now; answers the
    /// `(queue, key)` of those still held (the others were swept or acked).
    pub async fn renew(
        &self,
        client: &Client,
        t: &Target,
        leases: &[Lease],
    ) -> Result<Vec<(String, i64)>, EngineError> {
        if leases.is_empty() {
            return Ok(Vec::new());
        }
        let queues: Vec<&str> = leases.iter().map(|l| l.queue.as_str()).collect();
        let keys: Vec<i64> = leases.iter().map(|l| l.key).collect();
        let tokens: Vec<i64> = leases.iter().map(|l| l.token).collect();
        let ms: Vec<i64> = leases.iter().map(|l| l.lease_ms).collect();
        let rows =
            crate::connect::query_retrying(client, &self.renew, &[&queues, &keys, &tokens, &ms])
                .await
                .map_err(|e| t.error("cannot renew leases", e))?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    }

    /// Handles up to `limit` expired leases (oldest first): back to waiting, or failed once a
    /// job has stalled more than `max_stalled` times.
    pub async fn sweep(
        &self,
        client: &Client,
        t: &Target,
        limit: i64,
        max_stalled: i32,
    ) -> Result<Vec<Stalled>, EngineError> {
        let rows = crate::connect::query_retrying(client, &self.sweep, &[&limit, &max_stalled])
            .await
            .map_err(|e| t.error("cannot sweep expired leases", e))?;
        Ok(rows
            .iter()
            .map(|r| Stalled {
                queue: r.get(0),
                key: r.get(1),
                failed: r.get(2),
                id: r.get(3),
                opts: r.get(4),
            })
            .collect())
    }
}
