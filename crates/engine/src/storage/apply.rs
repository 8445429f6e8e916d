//! Applies [`StorageOp`]s inside one transaction with cached prepared statements. Consecutive
//! inserts go in multi-row `INSERT` statements of up to [`INSERT_CHUNK`] rows.

use std::sync::Arc;

use rusqlite::{params, Connection, Statement};

use super::coalesce::{coalesce, Update, Write};
use super::rows::{JobRow, StorageOp};
use crate::domain::changes::{DeletedReply, EvictedOp, RevivedReply};
use crate::domain::groups::GroupSettings;
use crate::domain::job::{JobKey, JobState};

/// A row of an evicted job the writer deleted: queue, state, key, custom id.
pub type Deleted = (Arc<str>, JobState, JobKey, Option<String>);

/// What a transaction did besides writing: evicted rows it deleted, and replies to send once it
/// is committed.
#[derive(Default)]
pub struct Applied {
    pub deleted: Vec<Deleted>,
    pub replies: Vec<(DeletedReply, Vec<String>)>,
    pub revived: Vec<(RevivedReply, Option<JobRow>)>,
}

/// Rows per multi-row insert (24 parameters each at most, well under SQLite's limit).
pub const INSERT_CHUNK: usize = 32;
const JOB_COLUMNS: usize = 26;
/// The columns of a lean insert (see [`lean`]): `queue` to `attempts_started`.
const LEAN_COLUMNS: usize = 17;

/// Whether a row's rarely set columns (`progress` to `history`) are all at their
/// defaults, as a new job's are: it is inserted without them, 17 parameters instead of 26.
fn lean(r: &JobRow) -> bool {
    let e = &r.extra;
    e.progress.is_none()
        && e.returnvalue.is_none()
        && e.failed_reason.is_none()
        && e.stacktrace.is_none()
        && e.logs.is_none()
        && e.deps.is_none()
        && e.stalled_counter == 0
        && e.processed_by.is_none()
        && e.history.is_none()
}

/// Stable numeric codes of states in the `state` column.
pub fn state_code(s: JobState) -> i64 {
    match s {
        JobState::Waiting => 0,
        JobState::Prioritized => 1,
        JobState::Delayed => 2,
        JobState::Active => 3,
        JobState::Completed => 4,
        JobState::Failed => 5,
        JobState::WaitingChildren => 6,
    }
}

/// The state of a `state` code.
pub fn state_of_code(c: i64) -> Option<JobState> {
    Some(match c {
        0 => JobState::Waiting,
        1 => JobState::Prioritized,
        2 => JobState::Delayed,
        3 => JobState::Active,
        4 => JobState::Completed,
        5 => JobState::Failed,
        6 => JobState::WaitingChildren,
        _ => return None,
    })
}

fn insert_sql(rows: usize, lean: bool) -> String {
    let mut sql = String::from(
        "INSERT OR REPLACE INTO jobs (queue, key, custom_id, name, data, opts, state, priority, delay, \
         timestamp, run_at, ord, seq, processed_on, finished_on, attempts_made, attempts_started",
    );
    sql.push_str(if lean {
        ") VALUES "
    } else {
        ", progress, returnvalue, failed_reason, stacktrace, logs, deps, stalled_counter, \
         processed_by, history) VALUES "
    });
    let columns = if lean { LEAN_COLUMNS } else { JOB_COLUMNS };
    for r in 0..rows {
        if r > 0 {
            sql.push(',');
        }
        sql.push('(');
        for c in 0..columns {
            if c > 0 {
                sql.push(',');
            }
            sql.push('?');
        }
        sql.push(')');
    }
    sql
}

/// Binds row `r` of queue `q` to the parameters after `at` (0-based) of a multi-row insert
/// (`lean`: its first [`LEAN_COLUMNS`] only).
fn bind_row(
    stmt: &mut Statement,
    at: usize,
    q: &str,
    r: &JobRow,
    lean: bool,
) -> rusqlite::Result<()> {
    let s = &r.state;
    let p = |i: usize| at + i;
    stmt.raw_bind_parameter(p(1), q)?;
    stmt.raw_bind_parameter(p(2), r.key as i64)?;
    stmt.raw_bind_parameter(p(3), r.custom_id.as_deref())?;
    stmt.raw_bind_parameter(p(4), &*r.name)?;
    stmt.raw_bind_parameter(p(5), &*r.data)?;
    stmt.raw_bind_parameter(p(6), r.opts.as_deref())?;
    stmt.raw_bind_parameter(p(7), state_code(s.state))?;
    stmt.raw_bind_parameter(p(8), s.priority as i64)?;
    stmt.raw_bind_parameter(p(9), s.delay as i64)?;
    stmt.raw_bind_parameter(p(10), r.timestamp as i64)?;
    stmt.raw_bind_parameter(p(11), s.run_at as i64)?;
    stmt.raw_bind_parameter(p(12), s.ord)?;
    stmt.raw_bind_parameter(p(13), s.seq as i64)?;
    stmt.raw_bind_parameter(p(14), s.processed_on as i64)?;
    stmt.raw_bind_parameter(p(15), s.finished_on as i64)?;
    stmt.raw_bind_parameter(p(16), s.attempts_made as i64)?;
    stmt.raw_bind_parameter(p(17), s.attempts_started as i64)?;
    if lean {
        return Ok(());
    }
    stmt.raw_bind_parameter(p(18), r.extra.progress.as_deref())?;
    stmt.raw_bind_parameter(p(19), r.extra.returnvalue.as_deref())?;
    stmt.raw_bind_parameter(p(20), r.extra.failed_reason.as_deref())?;
    stmt.raw_bind_parameter(p(21), r.extra.stacktrace.as_deref())?;
    stmt.raw_bind_parameter(p(22), r.extra.logs.as_deref())?;
    stmt.raw_bind_parameter(p(23), r.extra.deps.as_deref())?;
    stmt.raw_bind_parameter(p(24), r.extra.stalled_counter as i64)?;
    stmt.raw_bind_parameter(p(25), r.extra.processed_by.as_deref())?;
    stmt.raw_bind_parameter(p(26), r.extra.history.as_deref())
}

/// Applies `ops` in order, after folding each job's writes (see `coalesce.rs`). The caller wraps
/// the call in a transaction.
pub fn apply(conn: &Connection, ops: Vec<StorageOp>) -> rusqlite::Result<Applied> {
    apply_writes(conn, coalesce(ops))
}

/// Executes `ops` in order.
pub(super) fn apply_writes(conn: &Connection, mut ops: Vec<Write>) -> rusqlite::Result<Applied> {
    let mut done = Applied::default();
    let mut i = 0;
    while i < ops.len() {
        if let Some(shape) = insert_shape(&ops[i]) {
            let mut j = i;
            while j < ops.len() && j - i < INSERT_CHUNK && insert_shape(&ops[j]) == Some(shape) {
                j += 1;
            }
            let mut stmt = conn.prepare_cached(&insert_sql(j - i, shape))?;
            let columns = if shape { LEAN_COLUMNS } else { JOB_COLUMNS };
            for (n, op) in ops[i..j].iter().enumerate() {
                if let Write::Op(StorageOp::Insert(q, row)) = op {
                    bind_row(&mut stmt, n * columns, q, row, shape)?;
                }
            }
            stmt.raw_execute()?;
            i = j;
            continue;
        }
        match &mut ops[i] {
            Write::Update(u) => apply_update(conn, u)?,
            Write::Op(StorageOp::Evicted(queue, EvictedOp::Revive { key, seq, reply })) => {
                let row = revive(conn, queue, *key, *seq)?;
                if let Some(tx) = reply.take() {
                    done.revived.push((tx, row));
                }
            }
            Write::Op(StorageOp::Evicted(queue, op)) => delete_evicted(conn, queue, op, &mut done)?,
            Write::Op(op) => apply_one(conn, op)?,
        }
        i += 1;
    }
    Ok(done)
}

/// For an insert, whether it is lean (see [`lean`]); `None` for any other write.
fn insert_shape(w: &Write) -> Option<bool> {
    match w {
        Write::Op(StorageOp::Insert(_, row)) => Some(lean(row)),
        _ => None,
    }
}

macro_rules! update_sql {
    ($($set:expr),+) => {
        concat!("UPDATE jobs SET ", $($set, )+ " WHERE queue = ?1 AND key = ?2")
    };
}
macro_rules! set_state {
    () => {
        "state = ?3, priority = ?4, delay = ?5, run_at = ?6, ord = ?7, seq = ?8, \
         processed_on = ?9, finished_on = ?10, attempts_made = ?11, attempts_started = ?12"
    };
}
macro_rules! set_extra {
    () => {
        "progress = ?13, returnvalue = ?14, failed_reason = ?15, stacktrace = ?16, logs = ?17, \
         deps = ?18, stalled_counter = ?19, processed_by = ?20, history = ?21"
    };
}

/// One `UPDATE` for a job's folded state and extra columns, one more for its payload.
fn apply_update(conn: &Connection, u: &Update) -> rusqlite::Result<()> {
    let sql = match (&u.state, &u.extra) {
        (Some(_), Some(_)) => Some(update_sql!(set_state!(), ", ", set_extra!())),
        (Some(_), None) => Some(update_sql!(set_state!())),
        (None, Some(_)) => Some(update_sql!(set_extra!())),
        (None, None) => None,
    };
    if let Some(sql) = sql {
        let mut stmt = conn.prepare_cached(sql)?;
        let q: &str = &u.queue;
        stmt.raw_bind_parameter(1, q)?;
        stmt.raw_bind_parameter(2, u.key as i64)?;
        if let Some(s) = &u.state {
            stmt.raw_bind_parameter(3, state_code(s.state))?;
            stmt.raw_bind_parameter(4, s.priority as i64)?;
            stmt.raw_bind_parameter(5, s.delay as i64)?;
            stmt.raw_bind_parameter(6, s.run_at as i64)?;
            stmt.raw_bind_parameter(7, s.ord)?;
            stmt.raw_bind_parameter(8, s.seq as i64)?;
            stmt.raw_bind_parameter(9, s.processed_on as i64)?;
            stmt.raw_bind_parameter(10, s.finished_on as i64)?;
            stmt.raw_bind_parameter(11, s.attempts_made as i64)?;
            stmt.raw_bind_parameter(12, s.attempts_started as i64)?;
        }
        if let Some(e) = &u.extra {
            stmt.raw_bind_parameter(13, e.progress.as_deref())?;
            stmt.raw_bind_parameter(14, e.returnvalue.as_deref())?;
            stmt.raw_bind_parameter(15, e.failed_reason.as_deref())?;
            stmt.raw_bind_parameter(16, e.stacktrace.as_deref())?;
            stmt.raw_bind_parameter(17, e.logs.as_deref())?;
            stmt.raw_bind_parameter(18, e.deps.as_deref())?;
            stmt.raw_bind_parameter(19, e.stalled_counter as i64)?;
            stmt.raw_bind_parameter(20, e.processed_by.as_deref())?;
            stmt.raw_bind_parameter(21, e.history.as_deref())?;
        }
        stmt.raw_execute()?;
    }
    if let Some(d) = &u.data {
        let mut stmt =
            conn.prepare_cached("UPDATE jobs SET data = ?3 WHERE queue = ?1 AND key = ?2")?;
        stmt.execute(params![&*u.queue, u.key as i64, &**d])?;
    }
    Ok(())
}

// Queries by state carry `state IN (4, 5)` so SQLite can use the partial index `jobs_finished`
// (checked by `schema_tests.rs`).
pub(super) const TRIM_EVICTED: &str =
    "DELETE FROM jobs WHERE queue = ?1 AND state IN (4, 5) AND state = ?2 AND seq < ?3 AND seq NOT IN \
     (SELECT seq FROM jobs WHERE queue = ?1 AND state IN (4, 5) AND state = ?2 AND seq < ?3 \
     ORDER BY seq DESC LIMIT ?4) RETURNING key, custom_id";
pub(super) const DROP_EVICTED: &str =
    "DELETE FROM jobs WHERE queue = ?1 AND key IN (SELECT key FROM jobs WHERE queue = ?1 \
     AND state IN (4, 5) AND state = ?2 AND seq < ?3 AND finished_on < ?4 ORDER BY seq LIMIT ?5) \
     RETURNING key, custom_id";

/// Gives an evicted row its new order and reads it back.
fn revive(
    conn: &Connection,
    queue: &str,
    key: JobKey,
    seq: u64,
) -> rusqlite::Result<Option<JobRow>> {
    let mut stmt = conn.prepare_cached(
        "UPDATE jobs SET seq = ?3 WHERE queue = ?1 AND key = ?2 AND state IN (4, 5)",
    )?;
    if stmt.execute(params![queue, key as i64, seq as i64])? == 0 {
        return Ok(None);
    }
    let mut stmt = conn.prepare_cached(&format!(
        "{} WHERE queue = ?1 AND key = ?2",
        super::recovery::JOB_SELECT
    ))?;
    let mut rows = stmt.query(params![queue, key as i64])?;
    match rows.next()? {
        Some(r) => super::recovery::row_of(r, &mut Default::default()).map(Some),
        None => Ok(None),
    }
}

fn id_of(key: JobKey, custom: &Option<String>) -> String {
    custom.clone().unwrap_or_else(|| key.to_string())
}

fn delete_evicted(
    conn: &Connection,
    queue: &Arc<str>,
    op: &mut EvictedOp,
    done: &mut Applied,
) -> rusqlite::Result<()> {
    let mut rows: Vec<(JobState, JobKey, Option<String>)> = Vec::new();
    let reply = match op {
        EvictedOp::Trim {
            state,
            keep,
            below_seq,
        } => {
            let mut stmt = conn.prepare_cached(TRIM_EVICTED)?;
            let mut q = stmt.query(params![
                &**queue,
                state_code(*state),
                *below_seq as i64,
                *keep as i64
            ])?;
            while let Some(r) = q.next()? {
                rows.push((*state, r.get::<_, i64>(0)? as u64, r.get(1)?));
            }
            None
        }
        EvictedOp::Drop {
            state,
            finished_before,
            below_seq,
            limit,
            reply,
        } => {
            let mut stmt = conn.prepare_cached(DROP_EVICTED)?;
            let lim: i64 = if *limit == 0 { -1 } else { *limit as i64 };
            let mut q = stmt.query(params![
                &**queue,
                state_code(*state),
                *below_seq as i64,
                *finished_before as i64,
                lim
            ])?;
            while let Some(r) = q.next()? {
                rows.push((*state, r.get::<_, i64>(0)? as u64, r.get(1)?));
            }
            reply.take()
        }
        EvictedOp::Delete { key, reply } => {
            let mut stmt = conn.prepare_cached(
                "DELETE FROM jobs WHERE queue = ?1 AND key = ?2 AND state IN (4, 5) RETURNING state, custom_id",
            )?;
            let mut q = stmt.query(params![&**queue, *key as i64])?;
            while let Some(r) = q.next()? {
                let st = state_of_code(r.get(0)?).unwrap_or(JobState::Completed);
                rows.push((st, *key, r.get(1)?));
            }
            reply.take()
        }
        EvictedOp::Revive { .. } => None,
    };
    if let Some(tx) = reply {
        done.replies
            .push((tx, rows.iter().map(|(_, k, c)| id_of(*k, c)).collect()));
    }
    done.deleted
        .extend(rows.into_iter().map(|(s, k, c)| (queue.clone(), s, k, c)));
    Ok(())
}

fn apply_one(conn: &Connection, op: &StorageOp) -> rusqlite::Result<()> {
    match op {
        StorageOp::Insert(..) | StorageOp::Evicted(..) => Ok(()),
        StorageOp::State(q, key, s) => {
            let mut stmt = conn.prepare_cached(
                "UPDATE jobs SET state = ?3, priority = ?4, delay = ?5, run_at = ?6, ord = ?7, seq = ?8, \
                 processed_on = ?9, finished_on = ?10, attempts_made = ?11, attempts_started = ?12 \
                 WHERE queue = ?1 AND key = ?2",
            )?;
            stmt.execute(params![
                &**q,
                *key as i64,
                state_code(s.state),
                s.priority as i64,
                s.delay as i64,
                s.run_at as i64,
                s.ord,
                s.seq as i64,
                s.processed_on as i64,
                s.finished_on as i64,
                s.attempts_made as i64,
                s.attempts_started as i64,
            ])?;
            Ok(())
        }
        StorageOp::Extra(q, key, e) => {
            let mut stmt = conn.prepare_cached(
                "UPDATE jobs SET progress = ?3, returnvalue = ?4, failed_reason = ?5, stacktrace = ?6, logs = ?7, \
                 deps = ?8, stalled_counter = ?9, processed_by = ?10, history = ?11 \
                 WHERE queue = ?1 AND key = ?2",
            )?;
            stmt.execute(params![
                &**q,
                *key as i64,
                e.progress.as_deref(),
                e.returnvalue.as_deref(),
                e.failed_reason.as_deref(),
                e.stacktrace.as_deref(),
                e.logs.as_deref(),
                e.deps.as_deref(),
                e.stalled_counter as i64,
                e.processed_by.as_deref(),
                e.history.as_deref(),
            ])?;
            Ok(())
        }
        StorageOp::Data(q, key, data) => {
            let mut stmt =
                conn.prepare_cached("UPDATE jobs SET data = ?3 WHERE queue = ?1 AND key = ?2")?;
            stmt.execute(params![&**q, *key as i64, &**data])?;
            Ok(())
        }
        StorageOp::Delete(q, key) => {
            let mut stmt = conn.prepare_cached("DELETE FROM jobs WHERE queue = ?1 AND key = ?2")?;
            stmt.execute(params![&**q, *key as i64])?;
            Ok(())
        }
        StorageOp::Queue(q, row) => {
            let mut stmt = conn.prepare_cached(
                "INSERT INTO queues (name, last_auto_id, custom_seq, paused, rate_max, rate_duration, \
                 concurrency, dlq) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) \
                 ON CONFLICT (name) DO UPDATE SET last_auto_id = excluded.last_auto_id, \
                 custom_seq = excluded.custom_seq, paused = excluded.paused, \
                 rate_max = excluded.rate_max, rate_duration = excluded.rate_duration, \
                 concurrency = excluded.concurrency, dlq = excluded.dlq",
            )?;
            let rate = row.limits.rate;
            stmt.execute(params![
                &**q,
                row.last_auto_id as i64,
                row.custom_seq as i64,
                row.paused,
                rate.map(|r| r.max),
                rate.map(|r| r.duration as i64),
                row.limits.concurrency,
                row.dlq.to_json(),
            ])?;
            Ok(())
        }
        StorageOp::Wipe(q) => {
            let mut stmt = conn.prepare_cached("DELETE FROM jobs WHERE queue = ?1")?;
            stmt.execute(params![&**q])?;
            let mut stmt = conn.prepare_cached("DELETE FROM dedup WHERE queue = ?1")?;
            stmt.execute(params![&**q])?;
            let mut stmt = conn.prepare_cached("DELETE FROM groups WHERE queue = ?1")?;
            stmt.execute(params![&**q])?;
            let mut stmt = conn.prepare_cached("DELETE FROM schedulers WHERE queue = ?1")?;
            stmt.execute(params![&**q])?;
            Ok(())
        }
        StorageOp::Scheduler(q, id, Some(body)) => {
            let mut stmt = conn.prepare_cached(
                "INSERT INTO schedulers (queue, id, body) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (queue, id) DO UPDATE SET body = excluded.body",
            )?;
            stmt.execute(params![&**q, &**id, body])?;
            Ok(())
        }
        StorageOp::Scheduler(q, id, None) => {
            let mut stmt =
                conn.prepare_cached("DELETE FROM schedulers WHERE queue = ?1 AND id = ?2")?;
            stmt.execute(params![&**q, &**id])?;
            Ok(())
        }
        StorageOp::Dedup(q, id, Some(k)) => {
            let mut stmt = conn.prepare_cached(
                "INSERT INTO dedup (queue, id, job_key, until) VALUES (?1, ?2, ?3, ?4) \
                 ON CONFLICT (queue, id) DO UPDATE SET job_key = excluded.job_key, \
                 until = excluded.until",
            )?;
            stmt.execute(params![
                &**q,
                &**id,
                k.job as i64,
                k.until.map(|u| u.min(i64::MAX as u64) as i64)
            ])?;
            Ok(())
        }
        StorageOp::Group(q, id, s) if *s == GroupSettings::default() => {
            let mut stmt =
                conn.prepare_cached("DELETE FROM groups WHERE queue = ?1 AND id = ?2")?;
            stmt.execute(params![&**q, &**id])?;
            Ok(())
        }
        StorageOp::Group(q, id, s) => {
            let mut stmt = conn.prepare_cached(
                "INSERT INTO groups (queue, id, concurrency, rate_max, rate_duration, paused) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (queue, id) DO UPDATE SET \
                 concurrency = excluded.concurrency, rate_max = excluded.rate_max, \
                 rate_duration = excluded.rate_duration, paused = excluded.paused",
            )?;
            stmt.execute(params![
                &**q,
                &**id,
                s.concurrency,
                s.rate.map(|r| r.max),
                s.rate.map(|r| r.duration.min(i64::MAX as u64) as i64),
                s.paused,
            ])?;
            Ok(())
        }
        StorageOp::Dedup(q, id, None) => {
            let mut stmt = conn.prepare_cached("DELETE FROM dedup WHERE queue = ?1 AND id = ?2")?;
            stmt.execute(params![&**q, &**id])?;
            Ok(())
        }
    }
}
