//! Administration of a queue: pause, drain, clean, obliterate, remove a job, limits; each one
//! statement that also writes its QueueEvents row (changes of one job: `job_changes.rs`).
//! Errors match the embedded engine's (`ERR_JOB_NOT_FOUND`, `ERR_JOB_LOCKED`,
//! `ERR_QUEUE_ACTIVE`).

use std::sync::Arc;

use ferroqueue_engine::domain::flow::ChildEnd;
use ferroqueue_engine::domain::job::JobState;
use ferroqueue_engine::domain::limits::LimitChange;
use ferroqueue_engine::domain::listing::StateFilter;
use ferroqueue_engine::{EngineError, Result};

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

/// Changes a queue's limits; pulls here claim again at once (other processes by the hint).
pub(super) async fn change_limits(s: &Shared, queue: &Arc<str>, change: LimitChange) -> Result<()> {
    let c = s.pool.get().await?;
    crate::limits::change(&c, s.target(), queue, change).await?;
    // Until a claim looks, assume a cap: a finished job then hints the others.
    s.set_limited(queue, Some(true));
    s.wake(queue);
    Ok(())
}
