//! Job schedulers on PostgreSQL (schema version 10). The rules are the engine's
//! (`ferroqueue_engine::domain::job_scheduler`); a row of `schedulers` holds a scheduler as the
//! engine stores it, and `next`, the slot of its pending job `repeat:{id}:{slot}`.
//!
//! Upserts, removals and the making of each next job run in one transaction on the backend's
//! own connection, under the scheduler row's lock: processes that race wait for each other on
//! the row, and a slot's job is made once (its custom id is unique besides).
//!
//! The next job is made right after the claim that started the current one (`work.rs`), in a
//! transaction of its own. If the process dies in between, the elected process repairs it: every
//! few seconds it looks for schedulers whose pending job is no longer pending (it started,
//! finished or was removed) and makes the next one, for the first slot after now. Both check,
//! under the row lock, that `next` is still the slot they saw, so neither makes a second
//! pending job, and missed slots are skipped, never replayed.

use std::sync::Arc;

use ferroqueue_engine::backend::Page;
use ferroqueue_engine::domain::job_scheduler::{slot_job_id, Scheduler};
use ferroqueue_engine::domain::listing::page_bounds;
use ferroqueue_engine::domain::scheduler::Repeat;
use ferroqueue_engine::{Added, Result};

use crate::jobs::AddedRow;

use super::Shared;
use crate::connect::Target;
use crate::pool::Conn;

/// Schedulers repaired per look of the elected process.
const REPAIR_BATCH: i64 = 1_000;

/// A job template: name, data JSON, options JSON.
pub(super) type Template = (Option<String>, String, Option<String>);

/// Runs `work` in a transaction on `c` (the backend's own connection).
async fn in_transaction<T>(
    c: &Conn,
    t: &Target,
    work: impl std::future::Future<Output = Result<T>>,
) -> Result<T> {
    c.transaction(t, "cannot change a job scheduler", work)
        .await
}

/// Scheduler `id` of `queue`, its row locked until the transaction ends; `None` when there is
/// none (or only the placeholder of an upsert).
async fn locked(c: &Conn, t: &Target, queue: &str, id: &str) -> Result<Option<Scheduler>> {
    let sql = format!(
        "SELECT body FROM {}.schedulers WHERE queue = $1 AND id = $2 FOR UPDATE",
        t.schema()
    );
    let rows = c
        .query(t, "cannot read a job scheduler", &sql, &[&queue, &id])
        .await?;
    Ok(rows
        .first()
        .and_then(|r| Scheduler::from_stored(r.get::<_, &str>(0))))
}

/// Writes scheduler `id` (and the slot of its pending job).
async fn save(c: &Conn, t: &Target, queue: &str, id: &str, sch: &Scheduler) -> Result<()> {
    let sql = format!(
        "INSERT INTO {}.schedulers (queue, id, body, next) VALUES ($1, $2, $3, $4)
         ON CONFLICT (queue, id) DO UPDATE SET body = excluded.body, next = excluded.next",
        t.schema()
    );
    let next = sch.next.map(|n| n as i64);
    c.query(
        t,
        "cannot write a job scheduler",
        &sql,
        &[&queue, &id, &sch.stored_json(), &next],
    )
    .await?;
    Ok(())
}

async fn delete(c: &Conn, t: &Target, queue: &str, id: &str) -> Result<()> {
    let sql = format!(
        "DELETE FROM {}.schedulers WHERE queue = $1 AND id = $2",
        t.schema()
    );
    c.query(t, "cannot remove a job scheduler", &sql, &[&queue, &id])
        .await?;
    Ok(())
}

/// Removes job `job_id` if it has not started (waiting, prioritized or delayed), with its
/// `removed` event; answers whether it did.
async fn drop_pending(c: &Conn, t: &Target, queue: &str, job_id: &str) -> Result<bool> {
    let s = t.schema();
    let sql = format!(
        "WITH k AS (SELECT key FROM {s}.job_ids WHERE queue = $1 AND custom_id = $2),
        hot AS (
            DELETE FROM {s}.jobs WHERE queue = $1 AND key = (SELECT key FROM k)
                AND state IN (0, 1, 2)
            RETURNING state
        ), ids AS (
            DELETE FROM {s}.job_ids WHERE queue = $1 AND custom_id = $2
                AND EXISTS (SELECT 1 FROM hot)
        ), ev AS (
            INSERT INTO {s}.events (queue, event, payload)
            SELECT $1, 'removed', json_agg(json_build_object('id', $2::text, 'prev', state))::text
            FROM hot HAVING count(*) > 0
        )
        SELECT count(*) FROM hot"
    );
    let rows = c
        .query(
            t,
            "cannot remove a scheduler's job",
            &sql,
            &[&queue, &job_id],
        )
        .await?;
    Ok(rows.first().is_some_and(|r| r.get::<_, i64>(0) > 0))
}

/// Adds scheduler `id`'s job for `slot`, made at `now`, and counts it if it is new.
async fn add_slot_job(
    c: &Conn,
    t: &Target,
    queue: &str,
    (id, sch): (&str, &mut Scheduler),
    slot: u64,
    now: i64,
) -> Result<()> {
    let row = super::work::row_of(sch.slot_job(id, slot, now as u64), now);
    if matches!(
        crate::dedup::insert(c, t, queue, &row).await?,
        Added::New(_)
    ) {
        sch.iteration_count += 1;
    }
    sch.next = Some(slot);
    Ok(())
}

/// Creates or updates scheduler `id` and its pending job (an update replaces the job it had
/// pending unless that one runs already); answers the record of the pending job.
pub(super) async fn upsert(
    s: &Shared,
    queue: &Arc<str>,
    id: &str,
    repeat: &str,
    template: Template,
) -> Result<String> {
    let now = super::upkeep::now_ms();
    let (name, data, opts) = &template;
    let repeat = Repeat::from_json(repeat)?;
    let mut sch = Scheduler::new(id, repeat, (name.as_deref(), data, opts.as_deref()))?;
    let slot = sch.first_slot(now.max(0) as u64)?;
    let t = s.target();
    {
        let c = s.pool.exclusive().await?;
        in_transaction(&c, t, async {
            let placeholder = format!(
                "INSERT INTO {}.schedulers (queue, id, body) VALUES ($1, $2, '')
                 ON CONFLICT DO NOTHING",
                t.schema()
            );
            let q: &str = queue;
            c.query(t, "cannot write a job scheduler", &placeholder, &[&q, &id])
                .await?;
            if let Some(old) = locked(&c, t, queue, id).await? {
                // A pending job that never ran is replaced: it does not count.
                let dropped = match old.next {
                    Some(prev) => drop_pending(&c, t, queue, &slot_job_id(id, prev)).await?,
                    None => false,
                };
                sch.iteration_count =
                    old.iteration_count - u32::from(dropped && old.iteration_count > 0);
            }
            add_slot_job(&c, t, queue, (id, &mut sch), slot, now).await?;
            save(&c, t, queue, id, &sch).await
        })
        .await?;
    }
    s.upkeep.notify_one();
    s.wake(queue);
    Ok(super::read::record(s, queue, &slot_job_id(id, slot))
        .await?
        .unwrap_or_else(|| "null".into()))
}

/// Removes scheduler `id` and its pending job (unless it runs already); answers whether it
/// existed.
pub(super) async fn remove(s: &Shared, queue: &str, id: &str) -> Result<bool> {
    let t = s.target();
    let c = s.pool.exclusive().await?;
    in_transaction(&c, t, async {
        let Some(old) = locked(&c, t, queue, id).await? else {
            return Ok(false);
        };
        if let Some(prev) = old.next {
            drop_pending(&c, t, queue, &slot_job_id(id, prev)).await?;
        }
        delete(&c, t, queue, id).await?;
        Ok(true)
    })
    .await
}

/// Scheduler `id` as BullMQ's `JobSchedulerJson`.
pub(super) async fn get(s: &Shared, queue: &str, id: &str) -> Result<Option<String>> {
    let t = s.target();
    let sql = format!(
        "SELECT body FROM {}.schedulers WHERE queue = $1 AND id = $2",
        t.schema()
    );
    let c = s.pool.get().await?;
    let rows = c
        .query(t, "cannot read a job scheduler", &sql, &[&queue, &id])
        .await?;
    Ok(rows
        .first()
        .and_then(|r| Scheduler::from_stored(r.get::<_, &str>(0)))
        .map(|sch| sch.bullmq_json(id)))
}

/// How many schedulers the queue has.
pub(super) async fn count(s: &Shared, queue: &str) -> Result<usize> {
    let t = s.target();
    let sql = format!(
        "SELECT count(*) FROM {}.schedulers WHERE queue = $1 AND body <> ''",
        t.schema()
    );
    let c = s.pool.get().await?;
    let rows = c
        .query(t, "cannot count job schedulers", &sql, &[&queue])
        .await?;
    Ok(rows.first().map_or(0, |r| r.get::<_, i64>(0) as usize))
}

/// A page of the schedulers by next run (`asc`: soonest first, those without one last), then
/// id, as a JSON array.
pub(super) async fn page(s: &Shared, queue: &str, page: Page) -> Result<String> {
    let mut out = String::from("[");
    if let Some((from, to)) = page_bounds(count(s, queue).await?, page.start, page.end) {
        let t = s.target();
        let order = if page.asc {
            "next ASC NULLS LAST, id ASC"
        } else {
            "next DESC NULLS FIRST, id DESC"
        };
        let sql = format!(
            "SELECT id, body FROM {}.schedulers WHERE queue = $1 AND body <> ''
             ORDER BY {order} OFFSET $2 LIMIT $3",
            t.schema()
        );
        let c = s.pool.get().await?;
        let (skip, take) = (from as i64, (to - from + 1) as i64);
        let rows = c
            .query(
                t,
                "cannot list job schedulers",
                &sql,
                &[&queue, &skip, &take],
            )
            .await?;
        let mut first = true;
        for r in &rows {
            let id: &str = r.get(0);
            if let Some(sch) = Scheduler::from_stored(r.get::<_, &str>(1)) {
                if !first {
                    out.push(',');
                }
                first = false;
                out.push_str(&sch.bullmq_json(id));
            }
        }
    }
    out.push(']');
    Ok(out)
}

/// Makes the next jobs of `queue`'s schedulers whose pending jobs were `slots` (scheduler id,
/// slot): for each whose pending job is still that one (and, when `repair`, no longer waits),
/// the job of the first slot after now; a scheduler that is done (its `limit` or `endDate`) is
/// removed. Four statements whatever the number. Answers how many jobs it made.
async fn advance(
    c: &Conn,
    t: &Target,
    queue: &str,
    slots: &[(String, u64)],
    repair: bool,
) -> Result<usize> {
    let sch = t.schema();
    let ids: Vec<&str> = slots.iter().map(|(id, _)| id.as_str()).collect();
    // Locked in one order, so two processes never wait on each other in a cycle.
    let lock = format!(
        "SELECT id, body FROM {sch}.schedulers WHERE queue = $1 AND id = ANY($2)
         ORDER BY id FOR UPDATE"
    );
    let rows = c
        .query(t, "cannot read job schedulers", &lock, &[&queue, &ids])
        .await?;
    let mut due: Vec<(String, Scheduler, u64)> = Vec::new();
    for r in &rows {
        let id: String = r.get(0);
        let Some(scheduler) = Scheduler::from_stored(r.get::<_, &str>(1)) else {
            continue;
        };
        let started = slots
            .iter()
            .any(|(sid, slot)| *sid == id && scheduler.next == Some(*slot));
        if let (true, Some(slot)) = (started, scheduler.next) {
            due.push((id, scheduler, slot));
        }
    }
    if repair && !due.is_empty() {
        let jobs: Vec<String> = due
            .iter()
            .map(|(id, _, slot)| slot_job_id(id, *slot))
            .collect();
        let pending = format!(
            "SELECT i.custom_id FROM {sch}.job_ids i
             JOIN {sch}.jobs j ON j.queue = i.queue AND j.key = i.key
             WHERE i.queue = $1 AND i.custom_id = ANY($2) AND j.state IN (0, 1, 2)"
        );
        let waiting: Vec<String> = c
            .query(
                t,
                "cannot read schedulers' jobs",
                &pending,
                &[&queue, &jobs],
            )
            .await?
            .iter()
            .map(|r| r.get(0))
            .collect();
        due.retain(|(id, _, slot)| !waiting.contains(&slot_job_id(id, *slot)));
    }
    let now = super::upkeep::now_ms();
    let mut next_jobs = Vec::new();
    let mut going = Vec::new();
    let mut done: Vec<&str> = Vec::new();
    for (id, scheduler, slot) in &mut due {
        match scheduler.after(*slot, now.max(0) as u64) {
            Some(next) => {
                next_jobs.push(super::work::row_of(
                    scheduler.slot_job(id, next, now as u64),
                    now,
                ));
                scheduler.next = Some(next);
                going.push((id.as_str(), &mut *scheduler));
            }
            None => done.push(id.as_str()),
        }
    }
    let added = c.jobs.add_bulk(&c.client, t, queue, &next_jobs).await?;
    for ((_, scheduler), a) in going.iter_mut().zip(&added) {
        if matches!(a, AddedRow::New(_)) {
            scheduler.iteration_count += 1;
        }
    }
    if !going.is_empty() {
        let ids: Vec<&str> = going.iter().map(|(id, _)| *id).collect();
        let bodies: Vec<String> = going.iter().map(|(_, s)| s.stored_json()).collect();
        let nexts: Vec<Option<i64>> = going
            .iter()
            .map(|(_, s)| s.next.map(|n| n as i64))
            .collect();
        let update = format!(
            "UPDATE {sch}.schedulers s SET body = u.body, next = u.next
             FROM unnest($2::text[], $3::text[], $4::int8[]) AS u(id, body, next)
             WHERE s.queue = $1 AND s.id = u.id"
        );
        c.query(
            t,
            "cannot write job schedulers",
            &update,
            &[&queue, &ids, &bodies, &nexts],
        )
        .await?;
    }
    if !done.is_empty() {
        let delete = format!("DELETE FROM {sch}.schedulers WHERE queue = $1 AND id = ANY($2)");
        c.query(t, "cannot remove job schedulers", &delete, &[&queue, &done])
            .await?;
    }
    Ok(going.len())
}

/// Jobs of schedulers just started (scheduler id, slot): their next jobs are made, in one
/// transaction. A failure is left to the elected process's repair (the claim itself stands).
pub(super) async fn started(s: &Shared, queue: &Arc<str>, slots: Vec<(String, u64)>) {
    let t = s.target();
    let made = match s.pool.exclusive().await {
        Ok(c) => in_transaction(&c, t, advance(&c, t, queue, &slots, false)).await,
        Err(e) => Err(e),
    };
    if made.is_ok_and(|n| n > 0) {
        s.upkeep.notify_one();
        s.wake(queue);
    }
}

/// The elected process's repair: schedulers whose pending job no longer waits get their next
/// job.
pub(super) async fn repair(s: &Shared) -> Result<()> {
    let t = s.target();
    let sch = t.schema();
    let sql = format!(
        "SELECT sc.queue, sc.id, sc.next FROM {sch}.schedulers sc
         WHERE sc.next IS NOT NULL AND NOT EXISTS (
            SELECT 1 FROM {sch}.job_ids i JOIN {sch}.jobs j ON j.queue = i.queue AND j.key = i.key
            WHERE i.queue = sc.queue AND i.custom_id = 'repeat:' || sc.id || ':' || sc.next
              AND j.state IN (0, 1, 2))
         ORDER BY sc.queue
         LIMIT $1"
    );
    let stale: Vec<(String, String, i64)> = {
        let c = s.pool.get().await?;
        c.query(t, "cannot look for job schedulers", &sql, &[&REPAIR_BATCH])
            .await?
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect()
    };
    let mut by_queue: Vec<(String, Vec<(String, u64)>)> = Vec::new();
    for (queue, id, slot) in stale {
        let slot = (id, slot.max(0) as u64);
        match by_queue.last_mut() {
            Some((q, slots)) if *q == queue => slots.push(slot),
            _ => by_queue.push((queue, vec![slot])),
        }
    }
    for (queue, slots) in by_queue {
        let c = s.pool.exclusive().await?;
        let made = in_transaction(&c, t, advance(&c, t, &queue, &slots, true)).await?;
        drop(c);
        if made > 0 {
            s.wake(&queue);
            s.upkeep.notify_one();
        }
    }
    Ok(())
}
