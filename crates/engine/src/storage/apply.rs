//! Applies [`StorageOp`]s inside one transaction with cached prepared statements. Consecutive
//! inserts go in multi-row `INSERT` statements of up to [`INSERT_CHUNK`] rows.

use std::sync::Arc;

use rusqlite::{params, Connection, ToSql};

use crate::domain::job::{JobKey, JobState};
use crate::domain::persist::{DeletedReply, JobRow, StorageOp};

/// A row of an evicted job the writer deleted: queue, state, key, custom id.
pub type Deleted = (Arc<str>, JobState, JobKey, Option<String>);

/// What a transaction did besides writing: evicted rows it deleted, and replies to send once it
/// is committed.
#[derive(Default)]
pub struct Applied {
    pub deleted: Vec<Deleted>,
    pub replies: Vec<(DeletedReply, Vec<String>)>,
}

/// Rows per multi-row insert (22 parameters each, well under SQLite's limit).
pub const INSERT_CHUNK: usize = 32;
const JOB_COLUMNS: usize = 22;

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

fn insert_sql(rows: usize) -> String {
    let mut sql = String::from(
        "INSERT OR REPLACE INTO jobs (queue, key, custom_id, name, data, opts, state, priority, delay, \
         timestamp, run_at, ord, seq, processed_on, finished_on, attempts_made, attempts_started, \
         progress, returnvalue, failed_reason, stacktrace, logs) VALUES ",
    );
    for r in 0..rows {
        if r > 0 {
            sql.push(',');
        }
        sql.push('(');
        for c in 0..JOB_COLUMNS {
            if c > 0 {
                sql.push(',');
            }
            sql.push('?');
        }
        sql.push(')');
    }
    sql
}

fn push_row<'a>(p: &mut Vec<Box<dyn ToSql + 'a>>, q: &'a str, r: &'a JobRow) {
    let s = &r.state;
    p.push(Box::new(q));
    p.push(Box::new(r.key as i64));
    p.push(Box::new(r.custom_id.as_deref()));
    p.push(Box::new(&*r.name));
    p.push(Box::new(&*r.data));
    p.push(Box::new(r.opts.as_deref()));
    p.push(Box::new(state_code(s.state)));
    p.push(Box::new(s.priority as i64));
    p.push(Box::new(s.delay as i64));
    p.push(Box::new(r.timestamp as i64));
    p.push(Box::new(s.run_at as i64));
    p.push(Box::new(s.ord));
    p.push(Box::new(s.seq as i64));
    p.push(Box::new(s.processed_on as i64));
    p.push(Box::new(s.finished_on as i64));
    p.push(Box::new(s.attempts_made as i64));
    p.push(Box::new(s.attempts_started as i64));
    p.push(Box::new(r.extra.progress.as_deref()));
    p.push(Box::new(r.extra.returnvalue.as_deref()));
    p.push(Box::new(r.extra.failed_reason.as_deref()));
    p.push(Box::new(r.extra.stacktrace.as_deref()));
    p.push(Box::new(r.extra.logs.as_deref()));
}

/// Applies `ops` in order. The caller wraps the call in a transaction.
pub fn apply(conn: &Connection, ops: Vec<StorageOp>) -> rusqlite::Result<Applied> {
    let mut done = Applied::default();
    let mut ops = ops;
    let mut i = 0;
    while i < ops.len() {
        if let StorageOp::Insert(..) = &ops[i] {
            let mut j = i;
            while j < ops.len() && j - i < INSERT_CHUNK && matches!(ops[j], StorageOp::Insert(..)) {
                j += 1;
            }
            let mut p: Vec<Box<dyn ToSql>> = Vec::with_capacity((j - i) * JOB_COLUMNS);
            for op in &ops[i..j] {
                if let StorageOp::Insert(q, row) = op {
                    push_row(&mut p, q, row);
                }
            }
            let mut stmt = conn.prepare_cached(&insert_sql(j - i))?;
            stmt.execute(rusqlite::params_from_iter(p.iter()))?;
            i = j;
            continue;
        }
        match &mut ops[i] {
            StorageOp::TrimEvicted { .. }
            | StorageOp::DropEvicted { .. }
            | StorageOp::DeleteEvicted { .. } => delete_evicted(conn, &mut ops[i], &mut done)?,
            op => apply_one(conn, op)?,
        }
        i += 1;
    }
    Ok(done)
}

fn id_of(key: JobKey, custom: &Option<String>) -> String {
    custom.clone().unwrap_or_else(|| key.to_string())
}

fn delete_evicted(
    conn: &Connection,
    op: &mut StorageOp,
    done: &mut Applied,
) -> rusqlite::Result<()> {
    let mut rows: Vec<(JobState, JobKey, Option<String>)> = Vec::new();
    let reply = match op {
        StorageOp::TrimEvicted {
            queue,
            state,
            keep,
            below_seq,
        } => {
            let mut stmt = conn.prepare_cached(
                "DELETE FROM jobs WHERE queue = ?1 AND state = ?2 AND seq < ?3 AND seq NOT IN \
                 (SELECT seq FROM jobs WHERE queue = ?1 AND state = ?2 AND seq < ?3 ORDER BY seq DESC LIMIT ?4) \
                 RETURNING key, custom_id",
            )?;
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
        StorageOp::DropEvicted {
            queue,
            state,
            finished_before,
            below_seq,
            limit,
            reply,
        } => {
            let mut stmt = conn.prepare_cached(
                "DELETE FROM jobs WHERE queue = ?1 AND key IN (SELECT key FROM jobs WHERE queue = ?1 \
                 AND state = ?2 AND seq < ?3 AND finished_on < ?4 ORDER BY seq LIMIT ?5) RETURNING key, custom_id",
            )?;
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
        StorageOp::DeleteEvicted { queue, key, reply } => {
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
        _ => None,
    };
    let queue = op.queue().clone();
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
        StorageOp::Insert(..)
        | StorageOp::TrimEvicted { .. }
        | StorageOp::DropEvicted { .. }
        | StorageOp::DeleteEvicted { .. } => Ok(()),
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
                "UPDATE jobs SET progress = ?3, returnvalue = ?4, failed_reason = ?5, stacktrace = ?6, logs = ?7 \
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
                "INSERT INTO queues (name, last_auto_id, custom_seq, paused) VALUES (?1, ?2, ?3, ?4) \
                 ON CONFLICT (name) DO UPDATE SET last_auto_id = excluded.last_auto_id, \
                 custom_seq = excluded.custom_seq, paused = excluded.paused",
            )?;
            stmt.execute(params![
                &**q,
                row.last_auto_id as i64,
                row.custom_seq as i64,
                row.paused
            ])?;
            Ok(())
        }
        StorageOp::Wipe(q) => {
            let mut stmt = conn.prepare_cached("DELETE FROM jobs WHERE queue = ?1")?;
            stmt.execute(params![&**q])?;
            Ok(())
        }
    }
}
