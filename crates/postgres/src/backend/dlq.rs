//! A queue's DLQ settings in its row (`queues.dlq`, JSON; NULL: the defaults). Everything else
//! of the DLQ is built over the backend's other calls (`ferroqueue_engine::application::dlq`);
//! the histories it reads are written by the failure statements (`acks.rs`, `leases.rs`).

use ferroqueue_engine::domain::dlq::DlqConfig;
use ferroqueue_engine::Result;

use super::shared::Shared;

/// The queue's DLQ settings.
pub(super) async fn config(s: &Shared, queue: &str) -> Result<DlqConfig> {
    let sch = s.target().schema();
    let sql = format!("SELECT dlq FROM {sch}.queues WHERE name = $1");
    let c = s.pool.get().await?;
    let rows = c
        .query(s.target(), "cannot read the DLQ settings", &sql, &[&queue])
        .await?;
    let text: Option<String> = rows.first().and_then(|r| r.get(0));
    Ok(DlqConfig::stored(text.as_deref()))
}

/// Stores the queue's DLQ settings.
pub(super) async fn set_config(s: &Shared, queue: &str, config: DlqConfig) -> Result<()> {
    let sch = s.target().schema();
    let sql = format!(
        "INSERT INTO {sch}.queues (name, dlq) VALUES ($1, $2)
         ON CONFLICT (name) DO UPDATE SET dlq = EXCLUDED.dlq"
    );
    let c = s.pool.get().await?;
    c.query(
        s.target(),
        "cannot store the DLQ settings",
        &sql,
        &[&queue, &config.to_json()],
    )
    .await?;
    Ok(())
}

/// Keeps the queue's failed jobs (its DLQ) within its `maxEntries`, dropping the oldest; answers
/// how many went. Run after acks that failed jobs for good (the walk to the cut is at most
/// `maxEntries` index entries) and by the DLQ keeper. Its `maxAge` and automatic retries are
/// kept by the DLQ keeper of each process that opened the queue.
pub(super) async fn bound(s: &Shared, queue: &str) -> Result<usize> {
    let sch = s.target().schema();
    let sql = format!(
        "WITH lim AS (
            SELECT (dlq::jsonb ->> 'maxEntries')::int8 AS n FROM {sch}.queues WHERE name = $1
        ), cut AS (
            SELECT seq FROM {sch}.finished WHERE queue = $1 AND state = 5
            ORDER BY seq DESC OFFSET COALESCE((SELECT n FROM lim), $2) LIMIT 1
        ), gone AS (
            DELETE FROM {sch}.finished f
            WHERE f.queue = $1 AND f.state = 5 AND f.seq <= (SELECT seq FROM cut)
            RETURNING f.custom_id
        ), ids AS (
            DELETE FROM {sch}.job_ids i USING gone
            WHERE i.queue = $1 AND i.custom_id = gone.custom_id
        )
        SELECT count(*) FROM gone"
    );
    let default = DlqConfig::default().max_entries as i64;
    let c = s.pool.get().await?;
    let rows = c
        .query(
            s.target(),
            "cannot bound the DLQ",
            &sql,
            &[&queue, &default],
        )
        .await?;
    Ok(rows.first().map_or(0, |r| r.get::<_, i64>(0)) as usize)
}
