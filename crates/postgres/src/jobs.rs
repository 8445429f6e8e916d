//! The batched statements of the hot path, prepared once per connection ([`Statements`]):
//! adding many jobs in one statement over arrays, claiming up to `n` ready jobs in one round trip
//! (`… ORDER BY priority, ord LIMIT n FOR UPDATE SKIP LOCKED`, then one `UPDATE … RETURNING`),
//! and promoting due delayed jobs in bounded batches (acks are in `acks.rs`). Each statement
//! writes its batch's QueueEvents row in the same statement, so in the same transaction. Times
//! of leases and run-at are the database's clock, so machines with skewed clocks agree.
//!
//! States in the `state` column follow the SQLite file: 0 waiting, 1 prioritized, 2 delayed,
//! 3 active, 4 completed, 5 failed.

use ferroqueue_engine::domain::job::Job;
use ferroqueue_engine::EngineError;
use std::borrow::Cow;

use tokio_postgres::{Client, Statement};

pub use crate::acks::{AckStatements, Completion, Failed, Failure};
use crate::connect::{prepare, Target};
use crate::record::{hot_columns, id_expr, job_of, COLUMNS};
use crate::text;

/// A job to add.
#[derive(Debug, Clone, PartialEq)]
pub struct NewRow {
    pub name: String,
    /// Payload as JSON text.
    pub data: String,
    /// Options as the user gave them (JSON text).
    pub opts: Option<String>,
    pub priority: i32,
    /// The job's `delay` option (ms), as BullMQ shows it.
    pub delay: i64,
    /// Milliseconds from now (the database's now) before it may run; 0 or less: ready. The
    /// caller counts it from the job's `timestamp` (`timestamp + delay - now`, as the embedded
    /// engine and BullMQ do), so jobs added with one timestamp run in the order of their
    /// delays however long their adds took.
    pub due_in: i64,
    /// First of its priority instead of last.
    pub lifo: bool,
    /// Creation time (ms since the epoch, the producer's clock, as BullMQ's `timestamp`).
    pub timestamp: i64,
    /// The custom id (`jobId`), unique in its queue.
    pub custom_id: Option<String>,
    /// The job's `group` id.
    pub group: Option<String>,
}

/// What adding one job did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddedRow {
    /// A new job with this key.
    New(i64),
    /// A job with that custom id exists (its key; `None` when it came earlier in the same
    /// batch); nothing was added.
    Duplicate(Option<i64>),
}

/// A job a worker claimed.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub key: i64,
    /// The lease token an ack must carry.
    pub token: i64,
    /// The whole job as the claim left it (active, `processed_on` by the database's clock).
    pub job: Job,
    ord: i64,
}

impl Claimed {
    /// The completion of this activation with `returnvalue` (JSON text).
    pub fn completed(&self, returnvalue: &str) -> Completion {
        Completion {
            key: self.key,
            token: self.token,
            returnvalue: returnvalue.into(),
            keep: true,
        }
    }
}

/// Milliseconds since the epoch of a `timestamptz` expression, truncated as JS's `Date.now()`
/// is (a cast alone rounds: a job finished at x.6 ms would read as finished after a `Date.now()`
/// of the same millisecond).
pub(crate) fn ms(expr: &str) -> String {
    format!("floor(extract(epoch from {expr}) * 1000)::bigint")
}

/// The time `ms_expr` milliseconds from now, as a `timestamptz` expression. Waits are capped at
/// 2^53 ms (285,000 years: about the most a `timestamptz` holds from now), so a huge delay is a
/// job that never comes due, as on the embedded engine, not an "interval out of range" error.
pub(crate) fn after_ms(ms_expr: &str) -> String {
    format!("clock_timestamp() + LEAST({ms_expr}, 9007199254740992) * interval '1 millisecond'")
}

/// The state of a new job (columns of prefix `p`): delayed while its delay, counted from its
/// timestamp, has not passed (`due_in > 0`), else prioritized or waiting, as in the engine.
fn first_state(p: &str) -> String {
    format!(
        "CASE WHEN {p}delay > 0 AND {p}due_in > 0 THEN 2 \
         WHEN {p}priority > 0 THEN 1 ELSE 0 END"
    )
}

/// The run-at of a new job (columns of prefix `p`): `due_in` from now, when it is delayed.
fn first_run_at(p: &str) -> String {
    let wait = after_ms(&format!("{p}due_in"));
    format!("CASE WHEN {p}delay > 0 AND {p}due_in > 0 THEN {wait} END")
}

/// The hot path's statements, prepared on one connection.
pub struct Statements {
    add: Statement,
    /// `add` for a batch without custom ids: no id arbitration, no row per job back.
    add_plain: Statement,
    claim: Statement,
    /// `claim` for a queue with limits, within the budget they leave (`limits.rs`).
    claim_within: Statement,
    promote: Statement,
    /// Completions, failures and releases (`acks.rs`).
    pub acks: AckStatements,
}

/// The columns of a `finished` row as jobs move there (`seq` is the table's own).
pub(crate) const FINISHED_COLUMNS: &str = "queue, key, custom_id, name, data, opts, state, \
    priority, delay, timestamp, processed_on, finished_on, attempts_made, attempts_started, \
    stalled_counter, progress, returnvalue, failed_reason, stacktrace, logs, processed_by, \
    history";

/// A queue row's condition for "has limits or groups" (`limits.rs`, `groups.rs`): claims of
/// such a queue go through its row lock.
pub(crate) const LIMITED: &str =
    "rate_max IS NOT NULL OR concurrency IS NOT NULL OR hold_until IS NOT NULL OR grouped";

pub(crate) const NOW_MS: &str = "floor(extract(epoch from clock_timestamp()) * 1000)::bigint";

/// The smallest bigint: a custom-id key is this plus its sequence number (the engine's
/// `CUSTOM_KEY_BIT` read as a signed number).
pub(crate) const CUSTOM_KEY_BASE: &str = "(-9223372036854775807 - 1)";

impl Statements {
    /// Prepares every statement for the schema of `t` (already migrated).
    pub async fn prepare(client: &Client, t: &Target) -> Result<Statements, EngineError> {
        let s = t.schema();
        let prep = |sql: String| async move { prepare(client, t, &sql).await };
        let id = id_expr("");
        let run_at = ms("run_at");
        // Ids, custom-id numbers and admission orders are reserved for the whole batch with one
        // update of the queue's row (which also creates it); that row lock orders producers of
        // one queue. A custom id already taken (or taken earlier in the batch) adds nothing:
        // `job_ids` is the arbiter. The batch's events are one row.
        let add = prep(format!(
            "WITH a AS (
                SELECT j.*,
                       count(*) FILTER (WHERE j.cid IS NULL) OVER (ORDER BY j.i) AS auto_i,
                       count(*) FILTER (WHERE j.cid IS NOT NULL) OVER (ORDER BY j.i) AS cus_i
                FROM unnest($2::text[], $3::text[], $4::text[], $5::int4[], $6::int8[],
                            $7::bool[], $8::int8[], $9::text[], $10::int8[], $11::text[])
                        WITH ORDINALITY
                        AS j(name, data, opts, priority, delay, lifo, ts, cid, due_in, grp, i)
            ), n AS (
                SELECT count(*) FILTER (WHERE cid IS NULL) AS autos,
                       count(*) FILTER (WHERE cid IS NOT NULL) AS customs,
                       count(*) AS total,
                       bool_or(grp IS NOT NULL) AS grouped
                FROM a
            ), q AS (
                INSERT INTO {s}.queues AS q (name, last_auto_id, order_seq, custom_seq, grouped)
                SELECT $1, autos, total, customs, grouped FROM n
                ON CONFLICT (name) DO UPDATE
                SET last_auto_id = q.last_auto_id + EXCLUDED.last_auto_id,
                    order_seq = q.order_seq + EXCLUDED.order_seq,
                    custom_seq = q.custom_seq + EXCLUDED.custom_seq,
                    grouped = q.grouped OR EXCLUDED.grouped
                RETURNING last_auto_id - (SELECT autos FROM n) AS id0,
                          order_seq - (SELECT total FROM n) AS ord0,
                          custom_seq - (SELECT customs FROM n) AS cus0
            ), g AS (
                -- After the queue row's lock (it reads `q`): a claim that drops the rows of
                -- empty groups holds that lock (`groups.rs`), so it never drops this one.
                INSERT INTO {s}.groups (queue, id)
                SELECT DISTINCT $1, a.grp FROM a, q WHERE a.grp IS NOT NULL
                ON CONFLICT DO NOTHING
            ), k AS (
                SELECT a.*,
                       CASE WHEN a.cid IS NULL THEN q.id0 + a.auto_i
                            ELSE {CUSTOM_KEY_BASE} + q.cus0 + a.cus_i END AS key,
                       q.ord0 + a.i AS o
                FROM a, q
            ), ids AS (
                INSERT INTO {s}.job_ids (queue, custom_id, key)
                SELECT $1, cid, key FROM k WHERE cid IS NOT NULL
                ON CONFLICT DO NOTHING
                RETURNING key
            ), ins AS (
                INSERT INTO {s}.jobs (queue, key, custom_id, name, data, opts, state, priority,
                                      ord, delay, run_at, timestamp, group_id)
                SELECT $1, k.key, k.cid, k.name, k.data, k.opts,
                       {state},
                       k.priority,
                       CASE WHEN k.lifo THEN -k.o ELSE k.o END,
                       k.delay,
                       {run_at_new},
                       k.ts,
                       COALESCE(k.grp, '')
                FROM k
                WHERE k.cid IS NULL OR k.key IN (SELECT key FROM ids)
                RETURNING key, custom_id, name, run_at
            ), added AS (
                INSERT INTO {s}.events (queue, event, payload)
                SELECT $1, 'added', json_agg(json_build_object(
                    'id', {id}, 'name', name, 'at', COALESCE({run_at}, 0)))::text
                FROM ins HAVING count(*) > 0
            ), dup AS (
                INSERT INTO {s}.events (queue, event, payload)
                SELECT $1, 'duplicated', json_agg(json_build_object('id', cid))::text
                FROM k WHERE cid IS NOT NULL AND key NOT IN (SELECT key FROM ids)
                HAVING count(*) > 0
            )
            SELECT k.i, k.key, k.cid IS NOT NULL AND k.key NOT IN (SELECT key FROM ids),
                   e.key
            FROM k LEFT JOIN {s}.job_ids e ON e.queue = $1 AND e.custom_id = k.cid
            ORDER BY k.i",
            state = first_state("k."),
            run_at_new = first_run_at("k."),
        ))
        .await?;
        // Without custom ids every job of the batch is new and its key is known from the
        // queue's reserved range alone (`id0 + i`), so nothing is looked up, sorted or sent back
        // per job (addBulk of 1,000: 55-58k -> 62-85k jobs/s here).
        let add_plain = prep(format!(
            "WITH a AS (
                SELECT * FROM unnest($2::text[], $3::text[], $4::text[], $5::int4[], $6::int8[],
                                     $7::bool[], $8::int8[], $9::int8[])
                    WITH ORDINALITY AS j(name, data, opts, priority, delay, lifo, ts, due_in, i)
            ), q AS (
                INSERT INTO {s}.queues AS q (name, last_auto_id, order_seq)
                VALUES ($1, cardinality($2::text[]), cardinality($2::text[]))
                ON CONFLICT (name) DO UPDATE
                SET last_auto_id = q.last_auto_id + EXCLUDED.last_auto_id,
                    order_seq = q.order_seq + EXCLUDED.order_seq
                RETURNING last_auto_id - cardinality($2::text[]) AS id0,
                          order_seq - cardinality($2::text[]) AS ord0
            ), ins AS (
                INSERT INTO {s}.jobs (queue, key, name, data, opts, state, priority, ord, delay,
                                      run_at, timestamp)
                SELECT $1, q.id0 + a.i, a.name, a.data, a.opts,
                       {state},
                       a.priority,
                       CASE WHEN a.lifo THEN -(q.ord0 + a.i) ELSE q.ord0 + a.i END,
                       a.delay,
                       {run_at_new},
                       a.ts
                FROM a, q
                RETURNING key, name, run_at
            ), added AS (
                INSERT INTO {s}.events (queue, event, payload)
                SELECT $1, 'added', json_agg(json_build_object(
                    'id', key::text, 'name', name, 'at', COALESCE({run_at}, 0)))::text
                FROM ins HAVING count(*) > 0
            )
            SELECT id0 FROM q",
            state = first_state("a."),
            run_at_new = first_run_at("a."),
        ))
        .await?;
        // The claimed rows are updated by their `ctid` (a TID scan), whatever the planner guesses
        // of `LIMIT $2` or of the table: a join on the claimed keys chose a scan of the whole
        // table, and `key = ANY(ARRAY(…))`, once ANALYZE had seen the table empty, an index scan
        // on `queue` alone that filtered every job of the queue (28 ms a claim at 50,000 jobs).
        //
        // `drained` (this claim took the last ready jobs) probes the ready index once, just after
        // the last claimed job: a scan for any ready job other than the claimed ones walked every
        // claimed one again (7 µs a job, a third of the claim).
        let claimed_cols = hot_columns("j.");
        //
        // The plain claim takes nothing from a queue with limits (a rate limit, a cap on active
        // jobs or a hold): those are claimed by `claim_within`, under the queue row's lock, for
        // at most the budget the limits leave (`limits.rs`). So unlimited queues never take
        // that lock.
        let claim_sql = |held_back: &str| {
            format!(
                "WITH c AS (
                UPDATE {s}.jobs j
                SET state = 3, token = nextval('{s}.tokens'),
                    lease_until = clock_timestamp() + $3::int8 * interval '1 millisecond',
                    processed_on = {NOW_MS}, attempts_started = j.attempts_started + 1
                WHERE j.ctid = ANY(ARRAY(
                    SELECT ctid FROM {s}.jobs
                    WHERE queue = $1 AND state IN (0, 1) AND group_id = ''
                      AND NOT EXISTS (SELECT 1 FROM {s}.queues WHERE name = $1 AND ({held_back}))
                    ORDER BY priority, ord
                    LIMIT $2
                    FOR UPDATE SKIP LOCKED
                ))
                RETURNING {claimed_cols}, j.token, j.ord
            ), ev AS (
                INSERT INTO {s}.events (queue, event, payload)
                SELECT $1, 'active', json_agg(json_build_object('id', {id}))::text
                FROM c HAVING count(*) > 0
            ), drained AS (
                INSERT INTO {s}.events (queue, event, payload)
                SELECT $1, 'drained', '[]'
                FROM (SELECT priority, ord FROM c ORDER BY priority DESC, ord DESC LIMIT 1) last
                WHERE NOT EXISTS (
                    SELECT 1 FROM {s}.jobs
                    WHERE queue = $1 AND state IN (0, 1) AND group_id = ''
                      AND (priority, ord) > (last.priority, last.ord)
                ) AND NOT EXISTS (
                    SELECT 1 FROM {s}.jobs
                    WHERE queue = $1 AND state IN (0, 1) AND group_id <> ''
                )
            )
            SELECT * FROM c"
            )
        };
        let claim = prep(claim_sql(&format!("paused OR {LIMITED}"))).await?;
        let claim_within = prep(claim_sql("paused")).await?;
        // A promoted job goes to the back of its priority, as in the engine and BullMQ: it gets
        // a fresh admission order from its queue's sequence (reserved per queue for the batch).
        // `(SELECT clock_timestamp())` is computed once, so the delayed index applies; the rows
        // are updated by their `ctid` (a TID scan), or the generic plan joins against a
        // sequential scan of the table (39 ms against 13 ms for 1,000 of 100,000 jobs).
        let id_j = format!("{} AS id", id_expr("j."));
        let promote = prep(format!(
            "WITH due AS (
                SELECT ctid AS row, queue, key, run_at FROM {s}.jobs
                WHERE state = 2 AND run_at <= (SELECT clock_timestamp())
                ORDER BY run_at, key
                LIMIT $1
                FOR UPDATE SKIP LOCKED
            ), numbered AS (
                SELECT row, queue, key,
                       row_number() OVER (PARTITION BY queue ORDER BY run_at, key) AS i,
                       count(*) OVER (PARTITION BY queue) AS n
                FROM due
            ), q AS (
                UPDATE {s}.queues SET order_seq = order_seq + c.n
                FROM (SELECT DISTINCT queue, n FROM numbered) c
                WHERE name = c.queue
                RETURNING name, order_seq - c.n AS ord0
            ), moved AS (
                UPDATE {s}.jobs j
                SET state = CASE WHEN j.priority > 0 THEN 1 ELSE 0 END, run_at = NULL,
                    ord = q.ord0 + numbered.i
                FROM numbered JOIN q ON q.name = numbered.queue
                WHERE j.ctid = ANY(ARRAY(SELECT row FROM numbered))
                  AND j.queue = numbered.queue AND j.key = numbered.key
                RETURNING j.queue, j.key, {id_j}
            ), ev AS (
                INSERT INTO {s}.events (queue, event, payload)
                SELECT queue, 'waiting',
                       json_agg(json_build_object('id', id, 'prev', 'delayed'))::text
                FROM moved GROUP BY queue
            )
            SELECT queue, key FROM moved"
        ))
        .await?;
        Ok(Statements {
            add,
            add_plain,
            claim,
            claim_within,
            promote,
            acks: AckStatements::prepare(client, t).await?,
        })
    }

    /// Adds `jobs` to `queue` in one statement, all or none; answers what happened to each, in
    /// order (new keys are increasing: automatic ids, or custom-id keys).
    pub async fn add_bulk(
        &self,
        client: &Client,
        t: &Target,
        queue: &str,
        jobs: &[NewRow],
    ) -> Result<Vec<AddedRow>, EngineError> {
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        let names: Vec<Cow<str>> = jobs.iter().map(|j| text::store(&j.name)).collect();
        let data: Vec<&str> = jobs.iter().map(|j| j.data.as_str()).collect();
        let opts: Vec<Option<&str>> = jobs.iter().map(|j| j.opts.as_deref()).collect();
        let prio: Vec<i32> = jobs.iter().map(|j| j.priority).collect();
        let delay: Vec<i64> = jobs.iter().map(|j| j.delay).collect();
        let due: Vec<i64> = jobs.iter().map(|j| j.due_in).collect();
        let lifo: Vec<bool> = jobs.iter().map(|j| j.lifo).collect();
        let ts: Vec<i64> = jobs.iter().map(|j| j.timestamp).collect();
        if jobs
            .iter()
            .all(|j| j.custom_id.is_none() && j.group.is_none())
        {
            let rows = crate::connect::query_retrying(
                client,
                &self.add_plain,
                &[
                    &queue, &names, &data, &opts, &prio, &delay, &lifo, &ts, &due,
                ],
            )
            .await
            .map_err(|e| t.error("cannot add jobs", e))?;
            let id0: i64 = rows
                .first()
                .map(|r| r.get(0))
                .ok_or_else(|| EngineError::Internal("an add without its queue row".into()))?;
            return Ok((1..=jobs.len() as i64)
                .map(|i| AddedRow::New(id0 + i))
                .collect());
        }
        let ids: Vec<Option<&str>> = jobs.iter().map(|j| j.custom_id.as_deref()).collect();
        let groups: Vec<Option<&str>> = jobs.iter().map(|j| j.group.as_deref()).collect();
        let rows = crate::connect::query_retrying(
            client,
            &self.add,
            &[
                &queue, &names, &data, &opts, &prio, &delay, &lifo, &ts, &ids, &due, &groups,
            ],
        )
        .await
        .map_err(|e| t.error("cannot add jobs", e))?;
        Ok(rows
            .iter()
            .map(|r| match r.get::<_, bool>(2) {
                false => AddedRow::New(r.get(1)),
                true => AddedRow::Duplicate(r.get(3)),
            })
            .collect())
    }

    /// Claims up to `max` ready jobs of `queue` (none while it is paused or has limits) with a
    /// lease of `lease_ms`; answers them in the order they are due (priority, then admission).
    pub async fn claim(
        &self,
        client: &Client,
        t: &Target,
        queue: &str,
        max: i64,
        lease_ms: i64,
    ) -> Result<Vec<Claimed>, EngineError> {
        let rows = crate::connect::query_retrying(client, &self.claim, &[&queue, &max, &lease_ms])
            .await
            .map_err(|e| t.error("cannot claim jobs", e))?;
        Ok(claimed_of(rows))
    }

    /// [`Statements::claim`] for a queue with limits: `max` is the budget they leave, computed
    /// under the queue row's lock by the caller's transaction (`limits.rs`).
    pub async fn claim_within(
        &self,
        client: &Client,
        t: &Target,
        queue: &str,
        max: i64,
        lease_ms: i64,
    ) -> Result<Vec<Claimed>, EngineError> {
        // Not run again on a deadlock: it is one statement of the caller's transaction.
        let rows = client
            .query(&self.claim_within, &[&queue, &max, &lease_ms])
            .await
            .map_err(|e| t.error("cannot claim jobs", e))?;
        Ok(claimed_of(rows))
    }
}

/// Claimed rows as jobs, in the order they are due (priority, then admission).
pub(crate) fn claimed_of(rows: Vec<tokio_postgres::Row>) -> Vec<Claimed> {
    let mut jobs: Vec<Claimed> = rows
        .iter()
        .map(|r| {
            let token: i64 = r.get(COLUMNS);
            let mut job = job_of(r, 0);
            job.lock = token as u64;
            Claimed {
                key: r.get(0),
                token,
                job,
                ord: r.get(COLUMNS + 1),
            }
        })
        .collect();
    jobs.sort_unstable_by_key(|j| (j.job.priority, j.ord));
    jobs
}

impl Statements {
    /// Completes activations (see [`AckStatements::complete`]).
    pub async fn complete(
        &self,
        client: &Client,
        t: &Target,
        queue: &str,
        done: &[Completion],
    ) -> Result<Vec<i64>, EngineError> {
        self.acks.complete(client, t, queue, done).await
    }

    /// Records failed attempts (see [`AckStatements::fail`]).
    pub async fn fail(
        &self,
        client: &Client,
        t: &Target,
        queue: &str,
        failures: &[Failure],
    ) -> Result<Vec<Failed>, EngineError> {
        self.acks.fail(client, t, queue, failures).await
    }

    /// Makes up to `limit` due delayed jobs (of any queue, earliest first) ready, each at the back
    /// of its priority; answers `(queue, key)` of each.
    pub async fn promote_due(
        &self,
        client: &Client,
        t: &Target,
        limit: i64,
    ) -> Result<Vec<(String, i64)>, EngineError> {
        let rows = crate::connect::query_retrying(client, &self.promote, &[&limit])
            .await
            .map_err(|e| t.error("cannot promote delayed jobs", e))?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    }
}
