//! Reading a database back at open: every queue row, every unfinished job, and of the finished
//! ones only the newest `limit` per state and queue; of the others (evicted), their number and
//! custom ids.

use std::collections::BTreeMap;
use std::sync::Arc;

use rusqlite::{Connection, Row};

use super::apply::{state_code, state_of_code};
use super::rows::{ExtraCols, JobRow, QueueRow, StateCols};
use crate::domain::dedup::DedupKey;
use crate::domain::dlq::DlqConfig;
use crate::domain::groups::GroupSettings;
use crate::domain::job::{JobKey, JobState, CUSTOM_KEY_BIT};
use crate::domain::limits::{LimitSettings, RateLimit};

/// What is read back for one queue.
#[derive(Default)]
pub struct SavedQueue {
    pub meta: Option<QueueRow>,
    pub rows: Vec<JobRow>,
    /// Finished rows left on disk, per state (completed, failed).
    pub evicted_count: [u64; 2],
    /// Custom ids of those rows.
    pub evicted_ids: Vec<(Box<str>, JobKey)>,
    /// Deduplication keys by id.
    pub dedup: Vec<(Box<str>, DedupKey)>,
    /// Job groups' own settings.
    pub groups: Vec<(Arc<str>, GroupSettings)>,
    /// Job schedulers, as their JSON.
    pub schedulers: Vec<(Box<str>, String)>,
}

/// Everything needed to rebuild the engine, by queue name.
#[derive(Default)]
pub struct Snapshot {
    pub queues: BTreeMap<String, SavedQueue>,
}

/// Columns of a job row, in the order [`row_of`] reads them.
pub const JOB_SELECT: &str = "SELECT queue, key, custom_id, name, data, opts, state, priority, delay, \
     timestamp, run_at, ord, seq, processed_on, finished_on, attempts_made, attempts_started, progress, \
     returnvalue, failed_reason, stacktrace, logs, deps, stalled_counter, processed_by, history FROM jobs";

// Queries by state carry `state IN (4, 5)` so SQLite can use the partial index `jobs_finished`
// (checked by `schema_tests.rs`).
pub(crate) const NEWEST_FINISHED: &str =
    "WHERE queue = ?1 AND state IN (4, 5) AND state = ?2 ORDER BY seq DESC LIMIT ?3";
pub(crate) const OLD_CUSTOM_IDS: &str = "SELECT custom_id, key FROM jobs WHERE queue = ?1 \
     AND state IN (4, 5) AND state = ?2 AND seq < ?3 AND custom_id IS NOT NULL";
/// Finished rows of a state in `seq` order, paged (`{order}` is `ASC` or `DESC`).
pub(crate) fn finished_page(order: &str) -> String {
    format!(
        "{JOB_SELECT} WHERE queue = ?1 AND state IN (4, 5) AND state = ?2 \
         ORDER BY seq {order} LIMIT ?3 OFFSET ?4"
    )
}

/// Reads one job row (columns of [`JOB_SELECT`]).
pub fn row_of(r: &Row, names: &mut BTreeMap<String, Arc<str>>) -> rusqlite::Result<JobRow> {
    let name: String = r.get(3)?;
    let interned = match names.get(&name) {
        Some(n) => n.clone(),
        None => {
            let n: Arc<str> = Arc::from(name.as_str());
            if names.len() < 1_024 {
                names.insert(name, n.clone());
            }
            n
        }
    };
    let code: i64 = r.get(6)?;
    let Some(state) = state_of_code(code) else {
        return Err(rusqlite::Error::IntegralValueOutOfRange(6, code));
    };
    Ok(JobRow {
        key: r.get::<_, i64>(1)? as u64,
        custom_id: r.get::<_, Option<String>>(2)?.map(Into::into),
        name: interned,
        data: r.get::<_, String>(4)?.into(),
        opts: r.get::<_, Option<String>>(5)?.map(Into::into),
        timestamp: r.get::<_, i64>(9)? as u64,
        state: StateCols {
            state,
            priority: r.get::<_, i64>(7)? as u32,
            delay: r.get::<_, i64>(8)? as u64,
            run_at: r.get::<_, i64>(10)? as u64,
            ord: r.get(11)?,
            seq: r.get::<_, i64>(12)? as u64,
            processed_on: r.get::<_, i64>(13)? as u64,
            finished_on: r.get::<_, i64>(14)? as u64,
            attempts_made: r.get::<_, i64>(15)? as u32,
            attempts_started: r.get::<_, i64>(16)? as u32,
        },
        extra: ExtraCols {
            progress: r.get::<_, Option<String>>(17)?.map(Into::into),
            returnvalue: r.get::<_, Option<String>>(18)?.map(Into::into),
            failed_reason: r.get::<_, Option<String>>(19)?.map(Into::into),
            stacktrace: r.get(20)?,
            logs: r.get(21)?,
            deps: r.get(22)?,
            stalled_counter: r.get::<_, i64>(23)?.clamp(0, u32::MAX as i64) as u32,
            processed_by: r.get::<_, Option<String>>(24)?.map(Into::into),
            history: r.get(25)?,
        },
    })
}

/// A rate limit from its two columns (both or neither set).
fn rate_of(max: Option<u32>, duration: Option<i64>) -> Option<RateLimit> {
    match (max, duration) {
        (Some(max), Some(duration)) if max > 0 => Some(RateLimit {
            max,
            duration: duration.max(1) as u64,
        }),
        _ => None,
    }
}

/// Reads the database back, keeping at most `limit` finished jobs per state and queue.
pub fn load(conn: &Connection, limit: usize) -> rusqlite::Result<Snapshot> {
    let mut snap = Snapshot::default();
    let mut names = BTreeMap::new();
    let mut stmt = conn.prepare(
        "SELECT name, last_auto_id, custom_seq, paused, rate_max, rate_duration, concurrency, \
         dlq FROM queues",
    )?;
    let mut rows = stmt.query([])?;
    while let Some(r) = rows.next()? {
        let name: String = r.get(0)?;
        snap.queues.entry(name).or_default().meta = Some(QueueRow {
            last_auto_id: r.get::<_, i64>(1)? as u64,
            custom_seq: r.get::<_, i64>(2)? as u64,
            paused: r.get(3)?,
            limits: LimitSettings {
                rate: rate_of(r.get(4)?, r.get(5)?),
                concurrency: r.get(6)?,
            },
            dlq: DlqConfig::stored(r.get::<_, Option<String>>(7)?.as_deref()),
        });
    }
    let mut stmt = conn.prepare("SELECT queue, id, job_key, until FROM dedup")?;
    let mut rows = stmt.query([])?;
    while let Some(r) = rows.next()? {
        let queue: String = r.get(0)?;
        let id: String = r.get(1)?;
        let key = DedupKey {
            job: r.get::<_, i64>(2)? as JobKey,
            until: r.get::<_, Option<i64>>(3)?.map(|u| u.max(0) as u64),
        };
        snap.queues
            .entry(queue)
            .or_default()
            .dedup
            .push((id.into(), key));
    }
    let mut stmt =
        conn.prepare("SELECT queue, id, concurrency, rate_max, rate_duration, paused FROM groups")?;
    let mut rows = stmt.query([])?;
    while let Some(r) = rows.next()? {
        let queue: String = r.get(0)?;
        let id: String = r.get(1)?;
        let settings = GroupSettings {
            concurrency: r.get(2)?,
            rate: rate_of(r.get(3)?, r.get(4)?),
            paused: r.get(5)?,
        };
        snap.queues
            .entry(queue)
            .or_default()
            .groups
            .push((Arc::from(id), settings));
    }
    let mut stmt = conn.prepare("SELECT queue, id, body FROM schedulers")?;
    let mut rows = stmt.query([])?;
    while let Some(r) = rows.next()? {
        let queue: String = r.get(0)?;
        let id: String = r.get(1)?;
        snap.queues
            .entry(queue)
            .or_default()
            .schedulers
            .push((id.into(), r.get(2)?));
    }
    let mut stmt = conn.prepare(&format!(
        "{JOB_SELECT} WHERE state NOT IN (4, 5) ORDER BY queue, key"
    ))?;
    let mut rows = stmt.query([])?;
    while let Some(r) = rows.next()? {
        let queue: String = r.get(0)?;
        let row = row_of(r, &mut names)?;
        snap.queues.entry(queue).or_default().rows.push(row);
    }
    let mut stmt = conn.prepare(
        "SELECT queue, state, count(*) FROM jobs WHERE state IN (4, 5) GROUP BY queue, state",
    )?;
    let finished: Vec<(String, i64, u64)> = stmt
        .query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get::<_, i64>(2)? as u64))
        })?
        .collect::<rusqlite::Result<_>>()?;
    let mut newest = conn.prepare(&format!("{JOB_SELECT} {NEWEST_FINISHED}"))?;
    let mut old_ids = conn.prepare(OLD_CUSTOM_IDS)?;
    for (queue, code, total) in finished {
        let state = state_of_code(code).unwrap_or(JobState::Completed);
        let saved = snap.queues.entry(queue.clone()).or_default();
        let mut kept = Vec::new();
        let mut q = newest.query(rusqlite::params![queue, code, limit as i64])?;
        while let Some(r) = q.next()? {
            kept.push(row_of(r, &mut names)?);
        }
        let evicted = total.saturating_sub(kept.len() as u64);
        if evicted > 0 {
            let oldest_kept = kept.last().map_or(i64::MAX, |r| r.state.seq as i64);
            let ids = old_ids.query_map(
                rusqlite::params![queue, state_code(state), oldest_kept],
                |r| Ok((r.get::<_, String>(0)?.into(), r.get::<_, i64>(1)? as u64)),
            )?;
            for id in ids {
                saved.evicted_ids.push(id?);
            }
        }
        saved.evicted_count[usize::from(state == JobState::Failed)] = evicted;
        saved.rows.extend(kept);
    }
    restore_id_sequences(conn, &mut snap)?;
    Ok(snap)
}

/// Adds don't rewrite the queue's row (one page less per commit): its id sequences are only
/// written with deletions, and the rest comes from the highest key still in the file. So a
/// sequence is the larger of the stored one and the file's highest key; ids never repeat.
fn restore_id_sequences(conn: &Connection, snap: &mut Snapshot) -> rusqlite::Result<()> {
    // Keys are stored as i64: automatic ones are >= 0, custom-id ones (CUSTOM_KEY_BIT set) < 0.
    let mut auto = conn.prepare("SELECT max(key) FROM jobs WHERE queue = ?1 AND key >= 0")?;
    let mut custom = conn.prepare("SELECT max(key) FROM jobs WHERE queue = ?1 AND key < 0")?;
    for (name, saved) in snap.queues.iter_mut() {
        let max_auto: Option<i64> = auto.query_row([name], |r| r.get(0))?;
        let max_custom: Option<i64> = custom.query_row([name], |r| r.get(0))?;
        let meta = saved.meta.get_or_insert(QueueRow {
            last_auto_id: 0,
            custom_seq: 0,
            paused: false,
            limits: LimitSettings::default(),
            dlq: DlqConfig::default(),
        });
        if let Some(k) = max_auto {
            meta.last_auto_id = meta.last_auto_id.max(k as u64);
        }
        if let Some(k) = max_custom {
            meta.custom_seq = meta.custom_seq.max(k as u64 & !CUSTOM_KEY_BIT);
        }
    }
    Ok(())
}
