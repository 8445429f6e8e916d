//! Reading a database back at open: every queue row and every job row, grouped by queue.

use std::collections::BTreeMap;
use std::sync::Arc;

use rusqlite::Connection;

use super::apply::state_of_code;
use crate::domain::persist::{ExtraCols, JobRow, QueueRow, StateCols};

/// Everything a database holds, by queue name.
#[derive(Default)]
pub struct Snapshot {
    pub queues: BTreeMap<String, (Option<QueueRow>, Vec<JobRow>)>,
}

/// Reads the whole database.
pub fn load(conn: &Connection) -> rusqlite::Result<Snapshot> {
    let mut snap = Snapshot::default();
    let mut stmt = conn.prepare("SELECT name, last_auto_id, custom_seq, paused FROM queues")?;
    let rows = stmt.query_map([], |r| {
        Ok((
            r.get::<_, String>(0)?,
            QueueRow {
                last_auto_id: r.get::<_, i64>(1)? as u64,
                custom_seq: r.get::<_, i64>(2)? as u64,
                paused: r.get(3)?,
            },
        ))
    })?;
    for row in rows {
        let (name, q) = row?;
        snap.queues.entry(name).or_default().0 = Some(q);
    }
    let mut stmt = conn.prepare(
        "SELECT queue, key, custom_id, name, data, opts, state, priority, delay, timestamp, run_at, ord, \
         seq, processed_on, finished_on, attempts_made, attempts_started, progress, returnvalue, \
         failed_reason, stacktrace, logs FROM jobs ORDER BY queue, key",
    )?;
    let mut names: BTreeMap<String, Arc<str>> = BTreeMap::new();
    let mut rows = stmt.query([])?;
    while let Some(r) = rows.next()? {
        let queue: String = r.get(0)?;
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
        let row = JobRow {
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
            },
        };
        snap.queues.entry(queue).or_default().1.push(row);
    }
    Ok(snap)
}
