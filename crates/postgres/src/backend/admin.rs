//! Administration of a queue and changes of one job, each one statement that also writes its
//! QueueEvents row. Errors match the embedded engine's (`ERR_JOB_NOT_FOUND`, `ERR_JOB_LOCKED`,
//! `ERR_INVALID_STATE`, `ERR_QUEUE_ACTIVE`).

use std::sync::Arc;

use ferroqueue_engine::backend::JobChange;
use ferroqueue_engine::domain::flow::ChildEnd;
use ferroqueue_engine::domain::job::JobState;
use ferroqueue_engine::domain::limits::LimitChange;
use ferroqueue_engine::domain::listing::StateFilter;
use ferroqueue_engine::{EngineError, Result};
use tokio_postgres::types::ToSql;

use super::read::{id_params, id_text, key_cte};
use super::Shared;
use crate::jobs::NOW_MS;
use crate::record::{id_expr, state_number};

/// Pauses or resumes; only a change writes its event.
pub(super) async fn set_paused(s: &Shared, queue: &Arc<str>, paused: bool) -> Result<()> {
    let sch = s.target().schema();
    let event = if paused { "paused" } else { "resumed" };
    let sql = format!(
        "WITH old AS (SELECT paused FROM {sch}.queues WHERE name = $1),
        up AS (
            INSERT INTO {sch}.queues AS q (name, paused) VALUES ($1, $2)
            ON CONFLICT (name) DO UPDATE SET paused = EXCLUDED.paused
            RETURNING 1
        ), ev AS (
            INSERT INTO {sch}.events (queue, event, payload)
            SELECT $1, '{event}', '[]'
            WHERE COALESCE((SELECT paused FROM old), false) <> $2
        )
        SELECT count(*) FROM up"
    );
    let c = s.pool.get().await?;
    c.query(
        s.target(),
        "cannot pause or resume",
        &sql,
        &[&queue.as_ref(), &paused],
    )
    .await?;
    if !paused {
        s.wake(queue);
    }
    Ok(())
}

/// Removes ready (and, with `delayed`, delayed) jobs; answers how many.
pub(super) async fn drain(s: &Shared, queue: &str, delayed: bool) -> Result<usize> {
    let sch = s.target().schema();
    let sql = format!(
        "WITH gone AS (
            DELETE FROM {sch}.jobs WHERE queue = $1 AND (state IN (0, 1) OR ($2 AND state = 2))
            RETURNING custom_id, {id} AS id, opts
        ), ids AS (
            DELETE FROM {sch}.job_ids i USING gone
            WHERE i.queue = $1 AND i.custom_id = gone.custom_id
        )
        SELECT count(*), array_agg(id) FILTER (WHERE opts LIKE '%\"parent\"%'),
               array_agg(opts) FILTER (WHERE opts LIKE '%\"parent\"%')
        FROM gone",
        id = id_expr("")
    );
    let c = s.pool.get().await?;
    let rows = c
        .query(
            s.target(),
            "cannot drain the queue",
            &sql,
            &[&queue, &delayed],
        )
        .await?;
    let Some(r) = rows.first() else {
        return Ok(0);
    };
    // Flow children drained before they finished no longer hold their parents back.
    let ids: Option<Vec<String>> = r.get(1);
    let opts: Option<Vec<Option<String>>> = r.get(2);
    let gone: Vec<(String, Option<String>)> = ids
        .unwrap_or_default()
        .into_iter()
        .zip(opts.unwrap_or_default())
        .collect();
    drop(c);
    super::flows::ended(s, queue, &gone, ChildEnd::Removed).await?;
    Ok(r.get::<_, i64>(0).max(0) as usize)
}

/// Removes jobs of `state` older than `grace` ms (finished time for completed and failed,
/// creation time otherwise), oldest first, at most `limit` (0: all); answers their ids. Active
/// jobs are held by workers and never cleaned.
pub(super) async fn clean(
    s: &Shared,
    queue: &str,
    grace: u64,
    limit: usize,
    state: StateFilter,
) -> Result<Vec<String>> {
    let StateFilter::State(st) = state else {
        return Ok(Vec::new());
    };
    let (table, time) = match st {
        JobState::Active | JobState::WaitingChildren => return Ok(Vec::new()),
        JobState::Completed | JobState::Failed => ("finished", "finished_on"),
        _ => ("jobs", "timestamp"),
    };
    let sch = s.target().schema();
    let id = id_expr("t.");
    let sql = format!(
        "WITH doomed AS (
            SELECT ctid AS row FROM {sch}.{table}
            WHERE queue = $1 AND state = $2 AND {time} < {NOW_MS} - $3::int8
            ORDER BY {time}, key
            LIMIT $4
        ), gone AS (
            DELETE FROM {sch}.{table} t WHERE t.ctid = ANY(ARRAY(SELECT row FROM doomed))
            RETURNING t.custom_id, {id} AS id, t.{time} AS at, t.opts
        ), ids AS (
            DELETE FROM {sch}.job_ids i USING gone
            WHERE i.queue = $1 AND i.custom_id = gone.custom_id
        ), ev AS (
            INSERT INTO {sch}.events (queue, event, payload)
            SELECT $1, 'cleaned', json_build_array(count(*))::text FROM gone
            HAVING count(*) > 0
        )
        SELECT id, opts FROM gone ORDER BY at"
    );
    let grace = grace.min(i64::MAX as u64) as i64;
    let limit: Option<i64> = (limit > 0).then_some(limit.min(i64::MAX as usize) as i64);
    let c = s.pool.get().await?;
    let rows = c
        .query(
            s.target(),
            "cannot clean the queue",
            &sql,
            &[&queue, &state_number(st), &grace, &limit],
        )
        .await?;
    drop(c);
    let gone: Vec<(String, Option<String>)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    // Flow children cleaned before they finished no longer hold their parents back.
    if table == "jobs" {
        let children: Vec<_> = gone
            .iter()
            .filter(|(_, o)| super::flows::may_have_parent(o.as_deref()))
            .cloned()
            .collect();
        super::flows::ended(s, queue, &children, ChildEnd::Removed).await?;
    }
    Ok(gone.into_iter().map(|(id, _)| id).collect())
}

/// Removes everything of the queue, its ids and paused flag; refused while jobs are active
/// unless `force`.
///
/// One transaction on a connection of its own (the shared ones carry other calls), that first
/// takes the queue row's lock, which every add takes too: each later statement then sees every
/// add that committed before it, so no job of a concurrent add survives without its queue row
/// (one statement would delete only what its snapshot saw), and the active check holds until the
/// commit (a claim does not take the queue row, so a job claimed after it is obliterated with the
/// rest, and its ack is stale).
///
/// A deadlock's victim (a failure being recorded holds a job row and waits for the queue row)
/// runs again, as statements do (`connect::query_retrying`).
pub(super) async fn obliterate(s: &Shared, queue: &str, force: bool) -> Result<()> {
    let t = s.target();
    // Its own connection: the schema may not have been migrated yet (a first call).
    s.pool.migrated().await?;
    let mut own = crate::connect::connect(t).await?;
    let mut tries = 0;
    loop {
        match obliterate_once(&mut own, t.schema(), queue, force).await {
            Ok(Ok(children)) => {
                // Flow children obliterated before they finished no longer hold their parents.
                return super::flows::ended(s, queue, &children, ChildEnd::Removed).await;
            }
            Ok(Err(active)) => {
                return Err(EngineError::QueueActive {
                    queue: queue.to_string(),
                    active: active as usize,
                })
            }
            Err(e) if crate::connect::transient(&e) && tries < crate::connect::RETRIES => {
                tries += 1;
            }
            Err(e) => return Err(t.error("cannot obliterate", e)),
        }
    }
}

/// One try of [`obliterate`]: the flow children it removed (id, options), or `Err(n)` when `n`
/// jobs are active and not `force` (nothing done).
async fn obliterate_once(
    own: &mut tokio_postgres::Client,
    sch: &str,
    queue: &str,
    force: bool,
) -> std::result::Result<Gone, tokio_postgres::Error> {
    let tx = own.transaction().await?;
    tx.execute(
        &format!(
            "INSERT INTO {sch}.queues AS q (name) VALUES ($1)
            ON CONFLICT (name) DO UPDATE SET paused = q.paused"
        ),
        &[&queue],
    )
    .await?;
    if !force {
        let sql = format!("SELECT count(*) FROM {sch}.jobs WHERE queue = $1 AND state = 3");
        let active: i64 = tx.query_one(&sql, &[&queue]).await?.get(0);
        if active > 0 {
            // Dropping the transaction rolls it back.
            return Ok(Err(active));
        }
    }
    let id = id_expr("");
    let children: Vec<(String, Option<String>)> = tx
        .query(
            &format!(
                "SELECT {id}, opts FROM {sch}.jobs WHERE queue = $1 AND opts LIKE '%\"parent\"%'"
            ),
            &[&queue],
        )
        .await?
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    for table in crate::schema::QUEUE_TABLES {
        tx.execute(
            &format!("DELETE FROM {sch}.{table} WHERE queue = $1"),
            &[&queue],
        )
        .await?;
    }
    tx.execute(
        &format!("DELETE FROM {sch}.queues WHERE name = $1"),
        &[&queue],
    )
    .await?;
    tx.commit().await?;
    Ok(Ok(children))
}

/// What a try of [`obliterate`] did: the flow children it removed, or the active jobs that
/// stopped it.
type Gone = std::result::Result<Vec<(String, Option<String>)>, i64>;

/// Removes a job unless it is active; answers whether it existed.
pub(super) async fn remove(s: &Shared, queue: &str, id: &str) -> Result<bool> {
    let sch = s.target().schema();
    let sql = format!(
        "WITH {k}, locked AS (
            SELECT 1 FROM {sch}.jobs WHERE queue = $1 AND key = (SELECT key FROM k) AND state = 3
        ), hot AS (
            DELETE FROM {sch}.jobs WHERE queue = $1 AND key = (SELECT key FROM k) AND state <> 3
            RETURNING custom_id, state, opts
        ), done AS (
            DELETE FROM {sch}.finished WHERE queue = $1 AND key = (SELECT key FROM k)
            RETURNING custom_id, state
        ), gone AS (SELECT custom_id, state FROM hot UNION ALL SELECT * FROM done),
        ids AS (
            DELETE FROM {sch}.job_ids i USING gone
            WHERE i.queue = $1 AND i.custom_id = gone.custom_id
        ), ev AS (
            INSERT INTO {sch}.events (queue, event, payload)
            SELECT $1, 'removed', json_agg(json_build_object('id', $4::text, 'prev', state))::text
            FROM gone HAVING count(*) > 0
        )
        SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM locked),
               (SELECT opts FROM hot)",
        k = key_cte(sch),
    );
    let (auto, custom) = id_params(id);
    let shown = id_text(id);
    let c = s.pool.get().await?;
    let rows = c
        .query(
            s.target(),
            "cannot remove a job",
            &sql,
            &[&queue, &auto, &custom, &shown],
        )
        .await?;
    let (gone, locked, opts) = rows.first().map_or((0, 0, None), |r| {
        (
            r.get::<_, i64>(0),
            r.get::<_, i64>(1),
            r.get::<_, Option<String>>(2),
        )
    });
    if locked > 0 {
        return Err(EngineError::JobLocked(id.to_string()));
    }
    // A flow child removed before it finished no longer holds its parent back (a transaction
    // of its own, after the removal).
    if super::flows::may_have_parent(opts.as_deref()) {
        let gone = [(id.to_string(), opts)];
        super::flows::ended(s, queue, &gone, ChildEnd::Removed).await?;
    }
    Ok(gone > 0)
}

/// The state of job `id` (`None`: no such job), for the errors of a change that did nothing.
async fn state_for_error(s: &Shared, queue: &str, id: &str) -> Result<Option<JobState>> {
    super::read::state(s, queue, id).await
}

/// Changes one job; answers its log row count for a log, else 0.
pub(super) async fn change(s: &Shared, queue: &str, id: &str, change: JobChange) -> Result<usize> {
    let sch = s.target().schema();
    // `$4` (the id as events carry it) is typed here for the statements that do not use it.
    let k = format!("{}, id_text AS (SELECT $4::text)", key_cte(sch));
    let (auto, custom) = id_params(id);
    // Each arm: the statement, its parameters after ($1 queue, $2 auto key, $3 custom id,
    // $4 id), and the state the job must be in (for the error when nothing changed).
    let both = |set: &str, ev: &str| {
        format!(
            "WITH {k}, a AS (
                UPDATE {sch}.jobs SET {set} WHERE queue = $1 AND key = (SELECT key FROM k)
                RETURNING logs
            ), b AS (
                UPDATE {sch}.finished SET {set} WHERE queue = $1 AND key = (SELECT key FROM k)
                RETURNING logs
            ), changed AS (SELECT * FROM a UNION ALL SELECT * FROM b){ev}
            SELECT COALESCE(jsonb_array_length(logs::jsonb), 0) FROM changed"
        )
    };
    type Want = Option<(&'static str, JobState)>;
    let (sql, extra, want): (String, Vec<Box<dyn ToSql + Sync + Send>>, Want) = match change {
        JobChange::Progress(p) => (
            both(
                "progress = $5",
                &format!(
                    ", ev AS (INSERT INTO {sch}.events (queue, event, payload)
                        SELECT $1, 'progress', json_build_array(json_build_object(
                            'id', $4::text, 'data', $5::json))::text
                        FROM changed)"
                ),
            ),
            vec![Box::new(String::from(p))],
            None,
        ),
        JobChange::Log { row, keep } => (
            both(
                "logs = (SELECT jsonb_agg(x ORDER BY n)::text FROM (
                        SELECT x, n FROM jsonb_array_elements(
                            COALESCE(logs, '[]')::jsonb || jsonb_build_array($5::text)
                        ) WITH ORDINALITY AS e(x, n)
                        ORDER BY n DESC LIMIT $6) newest)",
                "",
            ),
            vec![
                Box::new(crate::text::store(&row).into_owned()),
                Box::new((keep > 0).then_some(keep.min(i64::MAX as usize) as i64)),
            ],
            None,
        ),
        JobChange::Data(d) => (both("data = $5", ""), vec![Box::new(String::from(d))], None),
        JobChange::Priority { priority, lifo } => (
            format!(
                "WITH {k}, o AS (
                        UPDATE {sch}.queues SET order_seq = order_seq + 1 WHERE name = $1
                        RETURNING order_seq
                    ), changed AS (
                        UPDATE {sch}.jobs j
                        SET priority = $5,
                            state = CASE WHEN j.state IN (0, 1)
                                         THEN CASE WHEN $5 > 0 THEN 1 ELSE 0 END
                                         ELSE j.state END,
                            ord = CASE WHEN j.state IN (0, 1)
                                       THEN CASE WHEN $6 THEN -o.order_seq ELSE o.order_seq END
                                       ELSE j.ord END
                        FROM o WHERE j.queue = $1 AND j.key = (SELECT key FROM k)
                        RETURNING logs
                    ), b AS (
                        UPDATE {sch}.finished SET priority = $5
                        WHERE queue = $1 AND key = (SELECT key FROM k)
                        RETURNING logs
                    )
                    SELECT 0 FROM changed UNION ALL SELECT 0 FROM b"
            ),
            vec![
                Box::new(priority.min(i32::MAX as u32) as i32),
                Box::new(lifo),
            ],
            None,
        ),
        JobChange::Delay(d) => (
            format!(
                "WITH {k}, changed AS (
                        UPDATE {sch}.jobs
                        SET run_at = {wait},
                            delay = $5
                        WHERE queue = $1 AND key = (SELECT key FROM k) AND state = 2
                        RETURNING run_at
                    ), ev AS (
                        INSERT INTO {sch}.events (queue, event, payload)
                        SELECT $1, 'delayed', json_build_array(json_build_object(
                            'id', $4::text, 'at', {at}))::text
                        FROM changed
                    )
                    SELECT 0 FROM changed",
                at = crate::jobs::ms("run_at"),
                wait = crate::jobs::after_ms("$5::int8"),
            ),
            vec![Box::new(d.min(i64::MAX as u64) as i64)],
            Some(("changeDelay", JobState::Delayed)),
        ),
        JobChange::Promote => (
            format!(
                "WITH {k}, o AS (
                        UPDATE {sch}.queues SET order_seq = order_seq + 1 WHERE name = $1
                        RETURNING order_seq
                    ), changed AS (
                        UPDATE {sch}.jobs j
                        SET state = CASE WHEN j.priority > 0 THEN 1 ELSE 0 END, run_at = NULL,
                            delay = 0, ord = o.order_seq
                        FROM o WHERE j.queue = $1 AND j.key = (SELECT key FROM k) AND j.state = 2
                        RETURNING j.key
                    ), ev AS (
                        INSERT INTO {sch}.events (queue, event, payload)
                        SELECT $1, 'waiting', json_build_array(json_build_object(
                            'id', $4::text, 'prev', 'delayed'))::text
                        FROM changed
                    )
                    SELECT 0 FROM changed"
            ),
            Vec::new(),
            Some(("promote", JobState::Delayed)),
        ),
        JobChange::Retry {
            from,
            reset_attempts,
        } => {
            if !matches!(from, JobState::Failed | JobState::Completed) {
                return Err(EngineError::range(
                    "state",
                    format!("must be 'failed' or 'completed', got '{}'", from.as_str()),
                ));
            }
            (
                format!(
                    "WITH {k}, back AS (
                            DELETE FROM {sch}.finished
                            WHERE queue = $1 AND key = (SELECT key FROM k) AND state = $5
                            RETURNING *
                        ), o AS (
                            UPDATE {sch}.queues SET order_seq = order_seq + 1 WHERE name = $1
                            RETURNING order_seq
                        ), ins AS (
                            INSERT INTO {sch}.jobs (queue, key, custom_id, name, data, opts, state,
                                priority, ord, delay, timestamp, attempts_made, attempts_started,
                                stalled_counter, progress, stacktrace, logs, group_id,
                                processed_by)
                            SELECT queue, key, custom_id, name, data, opts,
                                   CASE WHEN priority > 0 THEN 1 ELSE 0 END, priority,
                                   o.order_seq, delay, timestamp,
                                   CASE WHEN $6 THEN 0 ELSE attempts_made END,
                                   CASE WHEN $6 THEN 0 ELSE attempts_started END,
                                   stalled_counter, progress, stacktrace, logs,
                                   COALESCE(opts::json -> 'group' ->> 'id', ''), processed_by
                            FROM back, o
                            RETURNING key, group_id
                        ), grp AS (
                            -- Its group's row, after the queue row's lock (see groups.rs).
                            INSERT INTO {sch}.groups (queue, id)
                            SELECT $1, group_id FROM ins, o WHERE group_id <> ''
                            ON CONFLICT DO NOTHING
                        ), ev AS (
                            INSERT INTO {sch}.events (queue, event, payload)
                            SELECT $1, 'waiting', json_build_array(json_build_object(
                                'id', $4::text, 'prev', $7::text))::text
                            FROM ins
                        )
                        SELECT 0 FROM ins"
                ),
                vec![
                    Box::new(state_number(from)),
                    Box::new(reset_attempts),
                    Box::new(from.as_str().to_string()),
                ],
                Some(("retry", from)),
            )
        }
    };
    let shown = id_text(id);
    let mut params: Vec<&(dyn ToSql + Sync)> = vec![&queue, &auto, &custom, &shown];
    for p in &extra {
        params.push(p.as_ref() as &(dyn ToSql + Sync));
    }
    let c = s.pool.get().await?;
    let rows = c
        .query(s.target(), "cannot change a job", &sql, &params)
        .await?;
    if let Some(r) = rows.first() {
        s.wake(queue);
        return Ok(r.get::<_, i32>(0).max(0) as usize);
    }
    match (state_for_error(s, queue, id).await?, want) {
        (Some(state), Some((operation, expected))) => Err(EngineError::InvalidState {
            id: id.to_string(),
            state: state.as_str(),
            operation,
            expected: expected.as_str(),
        }),
        _ => Err(EngineError::JobNotFound(id.to_string())),
    }
}

/// Changes a queue's limits; pulls here claim again at once (other processes by the hint).
pub(super) async fn change_limits(s: &Shared, queue: &Arc<str>, change: LimitChange) -> Result<()> {
    let c = s.pool.get().await?;
    crate::limits::change(&c, s.target(), queue, change).await?;
    // Until a claim looks, assume a cap: a finished job then hints the others.
    s.set_limited(queue, Some(true));
    s.wake(queue);
    Ok(())
}
