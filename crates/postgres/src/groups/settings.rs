//! A group's own settings on PostgreSQL (concurrency, rate limit, paused) and the getters.

use ferroqueue_engine::domain::groups::{GroupChange, GroupInfo, GroupSettings};
use ferroqueue_engine::Result;
use tokio_postgres::Row;

use super::rate_of;
use crate::connect::Target;
use crate::pool::Conn;
use crate::record::hot_columns;

/// Changes a group's settings (a change to what it is already does nothing), then hints the
/// queue's workers in every process. Answers whether the settings changed.
pub async fn change(
    c: &Conn,
    t: &Target,
    queue: &str,
    group: &str,
    ch: GroupChange,
) -> Result<bool> {
    let s = t.schema();
    let what = "cannot change a group";
    let before = format!(
        "SELECT concurrency, rate_max, rate_duration, paused FROM {s}.groups
         WHERE queue = $1 AND id = $2"
    );
    let old = settings_of(c.query(t, what, &before, &[&queue, &group]).await?);
    let new = match ch {
        GroupChange::Concurrency(n) => GroupSettings {
            concurrency: n,
            ..old
        },
        GroupChange::Rate(r) => GroupSettings { rate: r, ..old },
        GroupChange::Paused(p) => GroupSettings { paused: p, ..old },
    };
    if new == old {
        return Ok(false);
    }
    // A changed rate starts a full bucket, as on the embedded engine.
    let sql = format!(
        "WITH up AS (
            INSERT INTO {s}.groups AS g (queue, id, concurrency, rate_max, rate_duration, paused)
            VALUES ($1, $2, $3, $4, $5, $6)
            ON CONFLICT (queue, id) DO UPDATE
            SET concurrency = EXCLUDED.concurrency, rate_max = EXCLUDED.rate_max,
                rate_duration = EXCLUDED.rate_duration, paused = EXCLUDED.paused,
                tokens = CASE WHEN (g.rate_max, g.rate_duration)
                                   IS NOT DISTINCT FROM (EXCLUDED.rate_max, EXCLUDED.rate_duration)
                              THEN g.tokens END,
                refilled_at = CASE WHEN (g.rate_max, g.rate_duration)
                                   IS NOT DISTINCT FROM (EXCLUDED.rate_max, EXCLUDED.rate_duration)
                              THEN g.refilled_at END
            RETURNING queue
        )
        SELECT pg_notify('{s}_ready', queue) FROM up"
    );
    let concurrency = new.concurrency.map(i64::from);
    let max = new.rate.map(|r| i64::from(r.max));
    let duration = new.rate.map(|r| r.duration.min(i64::MAX as u64) as i64);
    c.query(
        t,
        what,
        &sql,
        &[&queue, &group, &concurrency, &max, &duration, &new.paused],
    )
    .await?;
    Ok(true)
}

fn settings_of(rows: Vec<Row>) -> GroupSettings {
    rows.first()
        .map_or(GroupSettings::default(), |r| GroupSettings {
            concurrency: r
                .get::<_, Option<i64>>(0)
                .map(|c| c.clamp(0, i64::from(u32::MAX)) as u32),
            rate: rate_of(r.get(1), r.get(2)),
            paused: r.get(3),
        })
}

/// What a group holds and its settings.
pub async fn info(c: &Conn, t: &Target, queue: &str, group: &str) -> Result<GroupInfo> {
    let s = t.schema();
    let sql = format!(
        "SELECT count(*) FILTER (WHERE state IN (0, 1)), count(*) FILTER (WHERE state = 3)
         FROM {s}.jobs WHERE queue = $1 AND group_id = $2 AND group_id <> ''"
    );
    let what = "cannot read a group";
    let rows = c.query(t, what, &sql, &[&queue, &group]).await?;
    let (waiting, active) = rows.first().map_or((0, 0), |r| {
        (r.get::<_, i64>(0).max(0), r.get::<_, i64>(1).max(0))
    });
    let settings = format!(
        "SELECT concurrency, rate_max, rate_duration, paused FROM {s}.groups
         WHERE queue = $1 AND id = $2"
    );
    let settings = settings_of(c.query(t, what, &settings, &[&queue, &group]).await?);
    Ok(GroupInfo {
        waiting: waiting as usize,
        active: active.min(i64::from(u32::MAX)) as u32,
        settings,
    })
}

/// The SQL of a page of a group's ready jobs in the order it hands them out.
pub fn jobs_sql(s: &str) -> String {
    format!(
        "SELECT {cols} FROM {s}.jobs
         WHERE queue = $1 AND group_id = $2 AND group_id <> '' AND state IN (0, 1)
         ORDER BY priority, ord OFFSET $3 LIMIT $4",
        cols = hot_columns("")
    )
}

/// Ready jobs in every group of `queue`.
pub async fn ready_count(c: &Conn, t: &Target, queue: &str) -> Result<usize> {
    let sql = format!(
        "SELECT count(*) FROM {}.jobs WHERE queue = $1 AND group_id <> '' AND state IN (0, 1)",
        t.schema()
    );
    let rows = c
        .query(t, "cannot count grouped jobs", &sql, &[&queue])
        .await?;
    Ok(rows
        .first()
        .map_or(0, |r| r.get::<_, i64>(0).max(0) as usize))
}
