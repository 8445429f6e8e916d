//! QueueEvents' feed across processes: rows of the `events` table, written in the transaction of
//! the change they describe, read by cursor in commit order.
//!
//! A reader that paged by the row id alone could pass over a row whose transaction commits after
//! a later one. So rows are ordered by `(xid, id)`, where `xid` is the writing transaction's id
//! (`pg_current_xact_id()`), and a reader only takes rows whose transaction is older than every
//! transaction still running when it reads (below its snapshot's `xmin`). A transaction that
//! commits late holds back every row after it until it commits; it is never skipped.

use ferroqueue_engine::EngineError;
use tokio_postgres::{Client, Statement};

use crate::connect::{prepare, Target};

/// Where a reader is: the `(xid, id)` of the last row it took; `(0, 0)` before the first.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Cursor {
    pub xid: i64,
    pub id: i64,
}

/// One event row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRow {
    pub at: Cursor,
    pub queue: String,
    pub event: String,
    /// Payload as JSON text.
    pub payload: String,
}

/// The feed's statements, prepared on one connection.
pub struct EventStatements {
    read: Statement,
    trim: Statement,
}

impl EventStatements {
    /// Prepares the statements for the schema of `t` (already migrated).
    pub async fn prepare(client: &Client, t: &Target) -> Result<EventStatements, EngineError> {
        let s = t.schema();
        // `xid8` has no cast to bigint; through text it is exact (xids stay below 2^63).
        let read = prepare(
            client,
            t,
            &format!(
                "SELECT xid::text::int8, id, queue, event, payload FROM {s}.events
                WHERE (xid, id) > ($1::text::xid8, $2)
                  AND xid < pg_snapshot_xmin(pg_current_snapshot())
                  AND queue = ANY($3::text[])
                ORDER BY xid, id
                LIMIT $4"
            ),
        )
        .await?;
        // `(SELECT clock_timestamp())` is computed once, so the index on `at` applies.
        let trim = prepare(
            client,
            t,
            &format!(
                "DELETE FROM {s}.events
                WHERE at < (SELECT clock_timestamp()) - $1::int8 * interval '1 millisecond'"
            ),
        )
        .await?;
        Ok(EventStatements { read, trim })
    }

    /// Up to `limit` events of `queues` after `from`, in commit order.
    pub async fn read(
        &self,
        client: &Client,
        t: &Target,
        from: Cursor,
        queues: &[&str],
        limit: i64,
    ) -> Result<Vec<EventRow>, EngineError> {
        let xid = from.xid.to_string();
        let rows =
            crate::connect::query_retrying(client, &self.read, &[&xid, &from.id, &queues, &limit])
                .await
                .map_err(|e| t.error("cannot read events", e))?;
        Ok(rows
            .iter()
            .map(|r| EventRow {
                at: Cursor {
                    xid: r.get(0),
                    id: r.get(1),
                },
                queue: r.get(2),
                event: r.get(3),
                payload: r.get(4),
            })
            .collect())
    }

    /// Deletes events older than `keep_ms`; answers how many.
    pub async fn trim(
        &self,
        client: &Client,
        t: &Target,
        keep_ms: i64,
    ) -> Result<u64, EngineError> {
        client
            .execute(&self.trim, &[&keep_ms])
            .await
            .map_err(|e| t.error("cannot trim events", e))
    }
}
