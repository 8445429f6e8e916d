//! Moves of many jobs on PostgreSQL (`retryJobs`, `promoteJobs`): one statement per batch, the
//! batch's jobs in order (oldest finished, earliest due), at the back of waiting in that order.

use ferroqueue_engine::domain::job::{parse_auto_id, JobState};
use ferroqueue_engine::{EngineError, Result};

use super::Shared;
use crate::record::state_number;

/// Moves up to `count` jobs of finished state `from` that finished before `before` (ms) back to
/// waiting, oldest first; answers how many.
pub(super) async fn retry_jobs(
    s: &Shared,
    queue: &str,
    from: JobState,
    count: usize,
    before: u64,
) -> Result<usize> {
    if !matches!(from, JobState::Failed | JobState::Completed) {
        return Err(EngineError::range(
            "state",
            format!("must be 'failed' or 'completed', got '{}'", from.as_str()),
        ));
    }
    let sch = s.target().schema();
    let picked = format!(
        "SELECT ctid AS row FROM {sch}.finished
         WHERE queue = $1 AND state = $2 AND finished_on < $3
         ORDER BY seq LIMIT $4
         FOR UPDATE SKIP LOCKED"
    );
    let sql = back_to_waiting(sch, &picked, "b.attempts_made", "b.attempts_started", "$5");
    let before = before.min(i64::MAX as u64) as i64;
    let count = count.min(i64::MAX as usize) as i64;
    let c = s.pool.get().await?;
    let rows = c
        .query(
            s.target(),
            "cannot retry jobs",
            &sql,
            &[&queue, &state_number(from), &before, &count, &from.as_str()],
        )
        .await?;
    let n = rows.first().map_or(0, |r| r.get::<_, i64>(0)) as usize;
    if n > 0 {
        s.wake(queue);
    }
    Ok(n)
}

/// Moves the failed jobs `ids` back to waiting, their attempts counted from 0 again (a retry
/// from the DLQ), in the order they failed; answers how many (other ids are skipped).
pub(super) async fn retry_failed(s: &Shared, queue: &str, ids: &[String]) -> Result<usize> {
    let sch = s.target().schema();
    // By key (custom ids through `job_ids`).
    let picked = format!(
        "SELECT ctid AS row FROM {sch}.finished
         WHERE queue = $1 AND state = 5 AND (key = ANY($2::int8[]) OR key = ANY(ARRAY(
             SELECT key FROM {sch}.job_ids WHERE queue = $1 AND custom_id = ANY($3::text[]))))
         ORDER BY seq
         FOR UPDATE SKIP LOCKED"
    );
    let sql = back_to_waiting(sch, &picked, "0", "0", "'failed'");
    let mut keys: Vec<i64> = Vec::new();
    let mut custom: Vec<&str> = Vec::new();
    for id in ids {
        match parse_auto_id(id) {
            Some(k) => keys.push(k as i64),
            None => custom.push(id),
        }
    }
    let c = s.pool.get().await?;
    let rows = c
        .query(
            s.target(),
            "cannot retry jobs",
            &sql,
            &[&queue, &keys, &custom],
        )
        .await?;
    let n = rows.first().map_or(0, |r| r.get::<_, i64>(0)) as usize;
    if n > 0 {
        s.wake(queue);
    }
    Ok(n)
}

/// The statement that moves the finished rows `picked` (a query of their `ctid`s as `row`,
/// `$1` the queue) back to the end of waiting in the order they finished, with the attempts
/// given (expressions over `b`, the row), each heard as `waiting` from `prev`; it answers how
/// many moved.
fn back_to_waiting(sch: &str, picked: &str, made: &str, started: &str, prev: &str) -> String {
    format!(
        "WITH picked AS ({picked}
        ), back AS (
            DELETE FROM {sch}.finished f WHERE f.ctid = ANY(ARRAY(SELECT row FROM picked))
            RETURNING f.*
        ), n AS (
            SELECT count(*) AS n FROM back
        ), o AS (
            UPDATE {sch}.queues SET order_seq = order_seq + (SELECT n FROM n)
            WHERE name = $1 AND (SELECT n FROM n) > 0
            RETURNING order_seq - (SELECT n FROM n) AS ord0
        ), ins AS (
            INSERT INTO {sch}.jobs (queue, key, custom_id, name, data, opts, state, priority, ord,
                delay, timestamp, attempts_made, attempts_started, stalled_counter, progress,
                stacktrace, logs, group_id, processed_by, history)
            SELECT b.queue, b.key, b.custom_id, b.name, b.data, b.opts,
                   CASE WHEN b.priority > 0 THEN 1 ELSE 0 END, b.priority,
                   o.ord0 + row_number() OVER (ORDER BY b.seq), b.delay, b.timestamp,
                   {made}, {started}, b.stalled_counter, b.progress,
                   b.stacktrace, b.logs, COALESCE(b.opts::json -> 'group' ->> 'id', ''),
                   b.processed_by, b.history
            FROM back b, o
            RETURNING key, custom_id, group_id
        ), grp AS (
            -- Their groups' rows, after the queue row's lock (see groups.rs).
            INSERT INTO {sch}.groups (queue, id)
            SELECT DISTINCT $1, group_id FROM ins WHERE group_id <> ''
            ON CONFLICT DO NOTHING
        ), ev AS (
            INSERT INTO {sch}.events (queue, event, payload)
            SELECT $1, 'waiting', json_agg(json_build_object(
                'id', COALESCE(custom_id, key::text), 'prev', {prev}::text))::text
            FROM ins HAVING count(*) > 0
        )
        SELECT count(*) FROM ins"
    )
}

/// Moves up to `count` delayed jobs to waiting, earliest due first; answers how many.
pub(super) async fn promote_jobs(s: &Shared, queue: &str, count: usize) -> Result<usize> {
    let sch = s.target().schema();
    let sql = format!(
        "WITH picked AS (
            SELECT ctid AS row, row_number() OVER (ORDER BY run_at, key) AS i
            FROM (SELECT ctid, run_at, key FROM {sch}.jobs
                  WHERE queue = $1 AND state = 2 ORDER BY run_at, key LIMIT $2
                  FOR UPDATE SKIP LOCKED) d
        ), o AS (
            UPDATE {sch}.queues SET order_seq = order_seq + (SELECT count(*) FROM picked)
            WHERE name = $1 AND EXISTS (SELECT 1 FROM picked)
            RETURNING order_seq - (SELECT count(*) FROM picked) AS ord0
        ), changed AS (
            UPDATE {sch}.jobs j
            SET state = CASE WHEN j.priority > 0 THEN 1 ELSE 0 END, run_at = NULL, delay = 0,
                ord = o.ord0 + p.i
            FROM o, picked p
            WHERE j.ctid = p.row AND j.queue = $1 AND j.state = 2
            RETURNING j.key, j.custom_id
        ), ev AS (
            INSERT INTO {sch}.events (queue, event, payload)
            SELECT $1, 'waiting', json_agg(json_build_object(
                'id', COALESCE(custom_id, key::text), 'prev', 'delayed'))::text
            FROM changed HAVING count(*) > 0
        )
        SELECT count(*) FROM changed"
    );
    let count = count.min(i64::MAX as usize) as i64;
    let c = s.pool.get().await?;
    let rows = c
        .query(s.target(), "cannot promote jobs", &sql, &[&queue, &count])
        .await?;
    let n = rows.first().map_or(0, |r| r.get::<_, i64>(0)) as usize;
    if n > 0 {
        s.wake(queue);
    }
    Ok(n)
}
