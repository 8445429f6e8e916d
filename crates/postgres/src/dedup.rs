//! Deduplication on PostgreSQL (schema version 7): one row per key in `dedup`, naming the job
//! that holds it and until when (NULL: until it finishes). The rules are the embedded engine's
//! (`ferroqueue_engine::domain::dedup`), applied to the key row under its lock.
//!
//! Keys are given up lazily, so the hot path never touches this table: a key without a window
//! is live while its job is unfinished (in `jobs`), one with a window while the window lasts and
//! its job exists (in `jobs` or `finished`): a job that finished or was removed gives its key up
//! without a statement. Obliterate drops the queue's keys (its ids start again).
//!
//! Adds with a deduplication id run in one transaction on the backend's own connection
//! (`Pool::exclusive`), job after job, in order, all or none, each against its key row (taken
//! with `FOR UPDATE`, inserted first as an expired placeholder if missing, so two adds of one id
//! at once wait for each other).

use ferroqueue_engine::domain::dedup::{DedupKey, DedupKeys, Deduplication, Verdict};
use ferroqueue_engine::{Added, EngineError, Result};
use tokio_postgres::types::ToSql;

use crate::connect::Target;
use crate::jobs::{AddedRow, NewRow};
use crate::pool::Conn;

/// A key as read, with what the rules need of its holder.
struct Read {
    key: DedupKey,
    /// The holder's id as users see it.
    holder: String,
    /// The holder is delayed.
    delayed: bool,
}

/// The key row of `id` in `queue` (`lock`: `FOR UPDATE OF d` or nothing); `None` when there is
/// no live key.
async fn read(c: &Conn, t: &Target, queue: &str, id: &str, lock: &str) -> Result<Option<Read>> {
    let s = t.schema();
    let sql = format!(
        "SELECT d.job_key,
                d.until IS NULL,
                (extract(epoch from d.until - clock_timestamp()) * 1000)::float8,
                j.state::int4, f.key IS NOT NULL,
                COALESCE(j.custom_id, f.custom_id, d.job_key::text)
         FROM {s}.dedup d
         LEFT JOIN {s}.jobs j ON j.queue = d.queue AND j.key = d.job_key
         LEFT JOIN {s}.finished f ON f.queue = d.queue AND f.key = d.job_key
         WHERE d.queue = $1 AND d.id = $2 {lock}"
    );
    let rows = c
        .query(t, "cannot read a deduplication key", &sql, &[&queue, &id])
        .await?;
    let Some(r) = rows.first() else {
        return Ok(None);
    };
    let (job, forever): (i64, bool) = (r.get(0), r.get(1));
    let left: Option<f64> = r.get(2);
    let state: Option<i32> = r.get(3);
    let finished: bool = r.get(4);
    let live = if forever {
        state.is_some()
    } else {
        left.is_some_and(|ms| ms > 0.0) && (state.is_some() || finished)
    };
    if !live {
        return Ok(None);
    }
    let until = (!forever).then(|| left.map_or(0, |ms| ms.ceil().max(1.0) as u64));
    Ok(Some(Read {
        key: DedupKey {
            job: job as u64,
            until,
        },
        holder: crate::text::load(r.get(5)),
        delayed: state == Some(2),
    }))
}

/// Adds `jobs` to `queue`, all or none, in order, each with its deduplication (if any); answers
/// each as the embedded engine does.
pub async fn add(
    c: &Conn,
    t: &Target,
    queue: &str,
    jobs: &[(NewRow, Option<Deduplication>)],
) -> Result<Vec<Added>> {
    let work = async {
        let mut out = Vec::with_capacity(jobs.len());
        for (row, d) in jobs {
            out.push(add_one(c, t, queue, row, d.as_ref()).await?);
        }
        Ok(out)
    };
    c.transaction(t, "cannot add jobs", work).await
}

async fn add_one(
    c: &Conn,
    t: &Target,
    queue: &str,
    row: &NewRow,
    d: Option<&Deduplication>,
) -> Result<Added> {
    let s = t.schema();
    let what = "cannot add jobs";
    let Some(d) = d else {
        return insert(c, t, queue, row).await;
    };
    if let Some(cid) = &row.custom_id {
        // A custom id that exists comes first, as on the embedded engine.
        let sql = format!("SELECT key FROM {s}.job_ids WHERE queue = $1 AND custom_id = $2");
        let stored = crate::text::store(cid);
        let found = c.query(t, what, &sql, &[&queue, &stored.as_ref()]).await?;
        if !found.is_empty() {
            return insert(c, t, queue, row).await;
        }
    }
    let placeholder = format!(
        "INSERT INTO {s}.dedup (queue, id, job_key, until) VALUES ($1, $2, 0, 'epoch')
         ON CONFLICT DO NOTHING"
    );
    let id: &str = &d.id;
    c.query(t, what, &placeholder, &[&queue, &id]).await?;
    let current = read(c, t, queue, id, "FOR UPDATE OF d").await?;
    let mut keys = DedupKeys::default();
    let delayed_holder = current.as_ref().is_some_and(|k| k.delayed);
    if let Some(k) = &current {
        keys.restore(d.id.clone(), k.key);
    }
    let verdict = keys.decide(d, 0, |_| delayed_holder);
    let ttl = d.ttl.map(|t| t.min(i64::MAX as u64) as i64);
    match verdict {
        Verdict::Duplicate(holder) => {
            if let (true, Some(ms)) = (d.extend, ttl) {
                set_key(c, t, queue, id, None, Window::For(ms)).await?;
            }
            // The would-be job's id is used up, as on the embedded engine.
            let would_be = match &row.custom_id {
                Some(cid) => cid.clone(),
                None => {
                    let sql = format!(
                        "UPDATE {s}.queues SET last_auto_id = last_auto_id + 1 WHERE name = $1
                         RETURNING last_auto_id"
                    );
                    let rows = c.query(t, what, &sql, &[&queue]).await?;
                    rows.first().map_or(0, |r| r.get::<_, i64>(0)).to_string()
                }
            };
            let holder_id = current.map(|k| k.holder).unwrap_or_default();
            event(c, t, queue, &holder_id, id, &would_be).await?;
            Ok(Added::Deduplicated(holder))
        }
        Verdict::Replace(old) => {
            let gone = format!(
                "WITH gone AS (
                    DELETE FROM {s}.jobs WHERE queue = $1 AND key = $2 AND state = 2
                    RETURNING custom_id, key
                 ), ids AS (
                    DELETE FROM {s}.job_ids i USING gone
                    WHERE i.queue = $1 AND i.custom_id = gone.custom_id
                 ), ev AS (
                    INSERT INTO {s}.events (queue, event, payload)
                    SELECT $1, 'removed', json_agg(json_build_object(
                        'id', COALESCE(custom_id, key::text), 'prev', 'delayed'))::text
                    FROM gone HAVING count(*) > 0
                 )
                 SELECT COALESCE(custom_id, key::text) FROM gone"
            );
            let old_key = old as i64;
            let rows = c.query(t, what, &gone, &[&queue, &old_key]).await?;
            let old_id = rows
                .first()
                .map(|r| crate::text::load(r.get(0)))
                .ok_or_else(|| EngineError::Internal("a replaced job was not delayed".into()))?;
            let added = insert(c, t, queue, row).await?;
            if let Added::New(key) = added {
                // A fresh window with `extend`, else what is left of the old one.
                let window = match ttl {
                    Some(ms) if d.extend => Window::For(ms),
                    _ => Window::Keep,
                };
                set_key(c, t, queue, id, Some(key as i64), window).await?;
                event(c, t, queue, &id_of(row, key), id, &old_id).await?;
            }
            Ok(added)
        }
        Verdict::Add => {
            let added = insert(c, t, queue, row).await?;
            if let Added::New(key) = added {
                let window = ttl.map_or(Window::Forever, Window::For);
                set_key(c, t, queue, id, Some(key as i64), window).await?;
            }
            Ok(added)
        }
    }
}

/// The id users see of the job just added with key `key`.
fn id_of(row: &NewRow, key: u64) -> String {
    row.custom_id.clone().unwrap_or_else(|| key.to_string())
}

/// One job through the plain add statement.
/// Adds one job on `c` (inside the caller's transaction, if any).
pub(crate) async fn insert(c: &Conn, t: &Target, queue: &str, row: &NewRow) -> Result<Added> {
    let got = c
        .jobs
        .add_bulk(&c.client, t, queue, std::slice::from_ref(row))
        .await?;
    match got.first() {
        Some(AddedRow::New(k)) => Ok(Added::New(*k as u64)),
        Some(AddedRow::Duplicate(Some(k))) => Ok(Added::Duplicate(*k as u64)),
        _ => Err(EngineError::Internal("an add answered nothing".into())),
    }
}

/// How long a key lives from now.
enum Window {
    /// As it was.
    Keep,
    /// Until its job finishes.
    Forever,
    /// This many ms.
    For(i64),
}

/// Sets the key's holder (`job`, unchanged when `None`) and its window.
async fn set_key(
    c: &Conn,
    t: &Target,
    queue: &str,
    id: &str,
    job: Option<i64>,
    window: Window,
) -> Result<()> {
    let s = t.schema();
    let (mode, ms): (i32, i64) = match window {
        Window::Keep => (0, 0),
        Window::Forever => (1, 0),
        Window::For(ms) => (2, ms),
    };
    let sql = format!(
        "UPDATE {s}.dedup SET job_key = COALESCE($3, job_key),
                until = CASE $4::int4 WHEN 0 THEN until WHEN 1 THEN NULL
                        ELSE clock_timestamp() + LEAST($5::int8, 9007199254740992)
                             * interval '1 millisecond' END
         WHERE queue = $1 AND id = $2"
    );
    let params: [&(dyn ToSql + Sync); 5] = [&queue, &id, &job, &mode, &ms];
    c.query(t, "cannot add jobs", &sql, &params).await?;
    Ok(())
}

/// The `deduplicated` event: `kept` holds the key of `id`, `dropped` is the job not kept.
async fn event(
    c: &Conn,
    t: &Target,
    queue: &str,
    kept: &str,
    id: &str,
    dropped: &str,
) -> Result<()> {
    let payload = serde_json::json!([{ "id": kept, "dedup": id, "dropped": dropped }]).to_string();
    let sql = format!(
        "INSERT INTO {}.events (queue, event, payload) VALUES ($1, 'deduplicated', $2)",
        t.schema()
    );
    c.query(t, "cannot add jobs", &sql, &[&queue, &payload])
        .await?;
    Ok(())
}

/// The id of the job holding the key of `id`, if a key lives.
pub async fn holder(c: &Conn, t: &Target, queue: &str, id: &str) -> Result<Option<String>> {
    Ok(read(c, t, queue, id, "").await?.map(|k| k.holder))
}

/// Removes the key of `id` (with `holder`, only if that job holds it), in one transaction on a
/// connection of its own; answers whether a live key was removed.
pub async fn remove(
    c: &Conn,
    t: &Target,
    queue: &str,
    id: &str,
    holder: Option<&str>,
) -> Result<bool> {
    let work = async {
        let current = read(c, t, queue, id, "FOR UPDATE OF d").await?;
        let Some(k) = current else {
            return Ok(false);
        };
        if holder.is_some_and(|h| h != k.holder) {
            return Ok(false);
        }
        let sql = format!(
            "DELETE FROM {}.dedup WHERE queue = $1 AND id = $2",
            t.schema()
        );
        c.query(t, "cannot remove a deduplication key", &sql, &[&queue, &id])
            .await?;
        Ok(true)
    };
    c.transaction(t, "cannot remove a deduplication key", work)
        .await
}
