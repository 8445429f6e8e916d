//! Finishing activations, many per statement over arrays, each fenced by its lease token (a
//! stale token changes nothing): completions ([`AckStatements::complete`]), failed attempts
//! ([`AckStatements::fail`]: retried now, later, or failed for good) and jobs given back
//! unprocessed ([`AckStatements::release`]). Each statement writes its batch's QueueEvents rows
//! in the same statement.
//!
//! The plan each needs is one primary-key lookup per array element (5.6 ms for 500 here):
//! `state::int4 = 3` keeps the planner off the lease index, whose scan walks every active job per
//! batch, and no `key = ANY(…)` tempts it into joining the batch against itself (500 × 500
//! comparisons, 72 ms).

use ferroqueue_engine::domain::dlq::{AttemptEnd, HISTORY_LIMIT};
use ferroqueue_engine::EngineError;
use std::borrow::Cow;

use tokio_postgres::{Client, Statement};

use crate::connect::{prepare, Target};
use crate::jobs::{after_ms, ms, FINISHED_COLUMNS, NOW_MS};
use crate::record::id_expr;
use crate::text;

/// The SQL of the history of a job row (`p`: its alias with the dot) with one attempt more
/// (`fields`: the `jsonb_build_object` arguments), as `domain/dlq.rs` keeps it: at most
/// [`HISTORY_LIMIT`] attempts, the final ones first, then the newest others.
pub(crate) fn history_appended(p: &str, fields: &str) -> String {
    format!(
        "(SELECT jsonb_agg(x ORDER BY n)::text FROM (
            SELECT x, n FROM jsonb_array_elements(
                COALESCE({p}history, '[]')::jsonb || jsonb_build_array(jsonb_build_object({fields}))
            ) WITH ORDINALITY AS e(x, n)
            ORDER BY COALESCE((x ->> 'final') = 'true', false) DESC, n DESC
            LIMIT {HISTORY_LIMIT}) kept)"
    )
}

/// A completion to record.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    pub key: i64,
    pub token: i64,
    /// Return value as JSON text.
    pub returnvalue: String,
    /// Whether the job is kept in `finished` (`false`: `removeOnComplete: true`, deleted).
    pub keep: bool,
}

/// A failed attempt to record.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    pub key: i64,
    pub token: i64,
    pub reason: String,
    /// The error's stack trace, appended to the job's (the newest 10 are kept, as BullMQ's
    /// default `stackTraceLimit`).
    pub stack: Option<String>,
    /// What the caller decided from the job's attempts and backoff: `None` fails the job for
    /// good; `Some(0)` puts it back at the end of waiting; `Some(ms)` delays it that long.
    pub retry_in: Option<i64>,
    /// A final failure because every attempt is spent (QueueEvents hear `retries-exhausted`).
    pub exhausted: bool,
    /// Whether a final failure is kept in `finished` (`false`: `removeOnFail: true`).
    pub keep: bool,
    /// How the attempt ended, as its history records it.
    pub kind: AttemptEnd,
}

/// What a failure did to one job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Failed {
    /// Will run again (waiting, or delayed).
    Retrying(i64),
    /// Failed for good (moved to `finished`, or deleted).
    Final(i64),
}

/// The ack statements, prepared on one connection.
pub struct AckStatements {
    complete: Statement,
    fail: Statement,
    release: Statement,
}

impl AckStatements {
    /// Prepares the statements for the schema of `t` (already migrated).
    pub async fn prepare(client: &Client, t: &Target) -> Result<AckStatements, EngineError> {
        let s = t.schema();
        let prep = |sql: String| async move { prepare(client, t, &sql).await };
        let id = id_expr("");
        // Completed jobs leave the hot table for `finished` (or go, under removeOnComplete);
        // only activations whose token still holds count (a job whose lease expired and went to
        // another worker is that worker's now).
        //
        // Every ack finds its row by token (unique, from one sequence: `jobs_token`), never by
        // `queue = $1`: once ANALYZE had seen the table empty, the planner read the primary key
        // on `queue` alone and filtered every job of the queue (5.8 ms an ack of 50 at 50,000
        // jobs, against 0.6 ms by token).
        let complete = prep(format!(
            "WITH done AS (
                DELETE FROM {s}.jobs j
                USING unnest($2::int8[], $3::int8[], $4::text[], $5::bool[])
                    AS a(key, token, rv, keep)
                WHERE j.token = a.token AND j.key = a.key AND j.state::int4 = 3
                RETURNING j.*, a.rv, a.keep
            ), moved AS (
                INSERT INTO {s}.finished ({FINISHED_COLUMNS})
                SELECT queue, key, custom_id, name, data, opts, 4, priority, delay, timestamp,
                       processed_on, {NOW_MS}, attempts_made + 1, attempts_started,
                       stalled_counter, progress, NULLIF(rv, 'null'), failed_reason, stacktrace,
                       logs, processed_by, history
                FROM done WHERE keep
            ), ids AS (
                DELETE FROM {s}.job_ids i USING done
                WHERE NOT done.keep AND done.custom_id IS NOT NULL
                  AND i.queue = $1 AND i.custom_id = done.custom_id
            ), ev AS (
                INSERT INTO {s}.events (queue, event, payload)
                SELECT $1, 'completed',
                       json_agg(json_build_object('id', {id}, 'rv', rv::json))::text
                FROM done HAVING count(*) > 0
            )
            SELECT key FROM done"
        ))
        .await?;
        // Retries stay in `jobs` (back of waiting with a fresh order, or delayed), final
        // failures move to `finished`; both append the stack trace, keeping the newest 10.
        let stack = "CASE WHEN a.stack IS NULL THEN j.stacktrace ELSE (
                SELECT jsonb_agg(x ORDER BY n)::text FROM (
                    SELECT x, n FROM jsonb_array_elements(
                        COALESCE(j.stacktrace, '[]')::jsonb || jsonb_build_array(a.stack)
                    ) WITH ORDINALITY AS e(x, n)
                    ORDER BY n DESC LIMIT 10) newest) END";
        // Both append the attempt to the job's history (`domain/dlq.rs`); `final` marks a
        // failure that no retry follows.
        let history = history_appended(
            "j.",
            &format!(
                "'attempt', j.attempts_made + 1, 'startedAt', COALESCE(j.processed_on, 0),
                 'failedAt', {NOW_MS}, 'error', a.reason, 'kind', a.kind,
                 'final', a.retry_in IS NULL"
            ),
        );
        let fail = prep(format!(
            "WITH a AS (
                SELECT * FROM unnest($2::int8[], $3::int8[], $4::text[], $5::text[], $6::int8[],
                                     $7::bool[], $8::bool[], $9::text[])
                    WITH ORDINALITY AS a(key, token, reason, stack, retry_in, exhausted, keep,
                                         kind, i)
            ), q AS (
                UPDATE {s}.queues SET order_seq = order_seq + cardinality($2::int8[])
                WHERE name = $1
                RETURNING order_seq - cardinality($2::int8[]) AS ord0
            ), retried AS (
                UPDATE {s}.jobs j
                SET state = CASE WHEN a.retry_in > 0 THEN 2 WHEN j.priority > 0 THEN 1 ELSE 0 END,
                    run_at = CASE WHEN a.retry_in > 0
                                  THEN {retry_at}
                             END,
                    delay = CASE WHEN a.retry_in > 0 THEN a.retry_in ELSE j.delay END,
                    ord = q.ord0 + a.i, token = NULL, lease_until = NULL,
                    attempts_made = j.attempts_made + 1, failed_reason = a.reason,
                    stacktrace = {stack}, history = {history}
                FROM a, q
                WHERE a.retry_in IS NOT NULL AND j.token = a.token AND j.key = a.key
                  AND j.state::int4 = 3
                RETURNING j.key, {id_j} AS id, j.state, {run_at_j} AS at
            ), gone AS (
                DELETE FROM {s}.jobs j USING a
                WHERE a.retry_in IS NULL AND j.token = a.token AND j.key = a.key
                  AND j.state::int4 = 3
                RETURNING j.*, a.reason, a.exhausted, a.keep, {stack} AS stack,
                          {history} AS tried
            ), moved AS (
                INSERT INTO {s}.finished ({FINISHED_COLUMNS})
                SELECT queue, key, custom_id, name, data, opts, 5, priority, delay, timestamp,
                       processed_on, {NOW_MS}, attempts_made + 1, attempts_started,
                       stalled_counter, progress, returnvalue, reason, stack, logs, processed_by,
                       tried
                FROM gone WHERE keep
            ), ids AS (
                DELETE FROM {s}.job_ids i USING gone
                WHERE NOT gone.keep AND gone.custom_id IS NOT NULL
                  AND i.queue = $1 AND i.custom_id = gone.custom_id
            ), ev_final AS (
                INSERT INTO {s}.events (queue, event, payload)
                SELECT $1, 'failed', json_agg(json_build_object(
                    'id', {id}, 'reason', reason,
                    'exhausted', CASE WHEN exhausted THEN attempts_made + 1 END))::text
                FROM gone HAVING count(*) > 0
            ), ev_retried AS (
                INSERT INTO {s}.events (queue, event, payload)
                SELECT $1, 'retried',
                       json_agg(json_build_object('id', id, 'at', COALESCE(at, 0)))::text
                FROM retried HAVING count(*) > 0
            )
            SELECT key, true FROM retried UNION ALL SELECT key, false FROM gone",
            id_j = id_expr("j."),
            run_at_j = ms("j.run_at"),
            retry_at = after_ms("a.retry_in"),
        ))
        .await?;
        // Given back unprocessed (a worker closed with force): to the head of waiting with a
        // fresh negative order, no attempt spent.
        let release = prep(format!(
            "WITH a AS (
                SELECT * FROM unnest($2::int8[], $3::int8[], $4::bool[])
                    WITH ORDINALITY AS a(key, token, started, i)
            ), q AS (
                UPDATE {s}.queues SET order_seq = order_seq + cardinality($2::int8[])
                WHERE name = $1
                RETURNING order_seq - cardinality($2::int8[]) AS ord0
            ), back AS (
                UPDATE {s}.jobs j
                SET state = CASE WHEN j.priority > 0 THEN 1 ELSE 0 END,
                    ord = -(q.ord0 + a.i), token = NULL, lease_until = NULL,
                    attempts_started = j.attempts_started - CASE WHEN a.started THEN 0 ELSE 1 END
                FROM a, q
                WHERE j.token = a.token AND j.key = a.key AND j.state::int4 = 3
                RETURNING j.key, {id_j} AS id
            ), ev AS (
                INSERT INTO {s}.events (queue, event, payload)
                SELECT $1, 'waiting',
                       json_agg(json_build_object('id', id, 'prev', 'active'))::text
                FROM back HAVING count(*) > 0
            )
            SELECT key FROM back",
            id_j = id_expr("j."),
        ))
        .await?;
        Ok(AckStatements {
            complete,
            fail,
            release,
        })
    }

    /// Completes activations of `queue`; answers the keys that completed (the others were
    /// stale: their lease had passed to another worker, or the job was removed).
    pub async fn complete(
        &self,
        client: &Client,
        t: &Target,
        queue: &str,
        done: &[Completion],
    ) -> Result<Vec<i64>, EngineError> {
        if done.is_empty() {
            return Ok(Vec::new());
        }
        let keys: Vec<i64> = done.iter().map(|d| d.key).collect();
        let tokens: Vec<i64> = done.iter().map(|d| d.token).collect();
        let values: Vec<&str> = done.iter().map(|d| d.returnvalue.as_str()).collect();
        let keep: Vec<bool> = done.iter().map(|d| d.keep).collect();
        let rows = crate::connect::query_retrying(
            client,
            &self.complete,
            &[&queue, &keys, &tokens, &values, &keep],
        )
        .await
        .map_err(|e| t.error("cannot complete jobs", e))?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    /// Records failed attempts of `queue`; answers what happened to each job whose token still
    /// held (the others were stale).
    pub async fn fail(
        &self,
        client: &Client,
        t: &Target,
        queue: &str,
        failures: &[Failure],
    ) -> Result<Vec<Failed>, EngineError> {
        if failures.is_empty() {
            return Ok(Vec::new());
        }
        let keys: Vec<i64> = failures.iter().map(|f| f.key).collect();
        let tokens: Vec<i64> = failures.iter().map(|f| f.token).collect();
        let reasons: Vec<Cow<str>> = failures.iter().map(|f| text::store(&f.reason)).collect();
        let stacks: Vec<Option<Cow<str>>> = failures
            .iter()
            .map(|f| f.stack.as_deref().map(text::store))
            .collect();
        let retry: Vec<Option<i64>> = failures.iter().map(|f| f.retry_in).collect();
        let exhausted: Vec<bool> = failures.iter().map(|f| f.exhausted).collect();
        let keep: Vec<bool> = failures.iter().map(|f| f.keep).collect();
        let kinds: Vec<&str> = failures.iter().map(|f| f.kind.as_str()).collect();
        let rows = crate::connect::query_retrying(
            client,
            &self.fail,
            &[
                &queue, &keys, &tokens, &reasons, &stacks, &retry, &exhausted, &keep, &kinds,
            ],
        )
        .await
        .map_err(|e| t.error("cannot record failures", e))?;
        Ok(rows
            .iter()
            .map(|r| match r.get::<_, bool>(1) {
                true => Failed::Retrying(r.get(0)),
                false => Failed::Final(r.get(0)),
            })
            .collect())
    }

    /// Gives activations back unprocessed, to the head of waiting; answers the keys given back.
    /// `(key, token, started)`: a job whose processor never ran does not count its start.
    pub async fn release(
        &self,
        client: &Client,
        t: &Target,
        queue: &str,
        given: &[(i64, i64, bool)],
    ) -> Result<Vec<i64>, EngineError> {
        if given.is_empty() {
            return Ok(Vec::new());
        }
        let keys: Vec<i64> = given.iter().map(|g| g.0).collect();
        let tokens: Vec<i64> = given.iter().map(|g| g.1).collect();
        let started: Vec<bool> = given.iter().map(|g| g.2).collect();
        let rows = crate::connect::query_retrying(
            client,
            &self.release,
            &[&queue, &keys, &tokens, &started],
        )
        .await
        .map_err(|e| t.error("cannot give jobs back", e))?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }
}
