//! Metrics on PostgreSQL. BullMQ's per-minute counts of finished jobs live in the `metrics`
//! table, shared by every process: one row per (queue, completed or failed, minute), plus two
//! rows per kind that are not minutes: `minute = -1` holds the total counted and `minute = -2`
//! the first minute counted. A process counts them in memory as its ack batches finish jobs,
//! for the queues its Workers asked (`metrics.maxDataPoints`; the most asked for is kept in
//! `queues.metrics_points`, which readers use), and writes what it counted every
//! [`WRITE_EVERY`] and before it answers a `getMetrics` itself: no ack waits for them, and a
//! failed write never fails an ack (a process that dies loses up to that much of its counts,
//! never a job). The totals and processing times Prometheus reports are this process's own (as
//! counters are), and so is the ack-commit latency.
//!
//! Live Workers are the `workers` table: each process keeps a row per lease holder alive
//! (`seen_until`, refreshed every [`KEEP_ALIVE`]) and deletes the rows of holders it let go.
//! A process that dies leaves rows that stop counting once `seen_until` passes.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use ferroqueue_engine::domain::lease::{HolderInfo, WorkerInfo};
use ferroqueue_engine::domain::metrics::{FinishStats, MetricsPage, MinuteSeries, MINUTE_MS};
use ferroqueue_engine::Result;

use super::shared::Shared;
use super::upkeep::now_ms;

/// How often a process renews its Workers' rows; a row counts for three times as long.
pub(super) const KEEP_ALIVE: Duration = Duration::from_secs(10);

/// How often a process writes the per-minute counts it made.
pub(super) const WRITE_EVERY: Duration = Duration::from_secs(1);

/// How long a Worker's row counts after its last renewal, ms.
const TTL_MS: i64 = 3 * KEEP_ALIVE.as_millis() as i64;

/// Per-minute counts by (failed, minute).
type Counts = BTreeMap<(bool, u64), u64>;

/// This process's view of one queue's metrics.
#[derive(Debug, Default)]
pub(super) struct LocalMetrics {
    /// `maxDataPoints` its Workers asked for (0: none asked, nothing is recorded).
    pub(super) points: u32,
    /// What finished here since the backend opened.
    pub(super) stats: FinishStats,
    /// The minute before which the table was last trimmed for this queue.
    trimmed_below: u64,
    /// Counts not written yet.
    unwritten: Counts,
}

/// A Worker of `queue` in this process asks for `points` minutes of per-minute counts: this
/// process records them from its next ack on.
pub(super) fn keep_here(s: &Shared, queue: &Arc<str>, points: u32) {
    let mut all = s.metrics.lock();
    let m = all.entry(queue.clone()).or_default();
    m.points = m.points.max(points);
}

/// Stores the most minutes a Worker asked to keep, which readers of every process use.
pub(super) async fn store_points(s: &Shared, queue: &Arc<str>, points: u32) -> Result<()> {
    let sch = s.target().schema();
    let sql = format!(
        "INSERT INTO {sch}.queues (name, metrics_points) VALUES ($1, $2)
         ON CONFLICT (name) DO UPDATE
         SET metrics_points = GREATEST({sch}.queues.metrics_points, EXCLUDED.metrics_points)"
    );
    let c = s.pool.get().await?;
    let points = i32::try_from(points).unwrap_or(i32::MAX);
    c.query(
        s.target(),
        "cannot store the metrics settings",
        &sql,
        &[&&**queue, &points],
    )
    .await?;
    Ok(())
}

/// Jobs of `queue` that finished in an ack batch here: `(completed, processed_on)`, the rest
/// failed for good. Counts them in this process's totals and, if its Workers asked, in the
/// per-minute counts to write ([`write`]). Memory only: the ack path waits for nothing.
pub(super) fn finished(s: &Shared, queue: &Arc<str>, jobs: &[(bool, u64)]) {
    let now = u64::try_from(now_ms()).unwrap_or(0);
    let mut all = s.metrics.lock();
    let m = all.entry(queue.clone()).or_default();
    for &(completed, processed_on) in jobs {
        m.stats.finished(completed, now, processed_on);
        if m.points > 0 {
            *m.unwritten
                .entry((!completed, now / MINUTE_MS))
                .or_default() += 1;
        }
    }
}

/// Writes the per-minute counts this process made and has not written, one statement per
/// queue (its minutes, totals and first minutes, and at most once a minute the trim of the
/// minutes it no longer keeps). Counts whose write failed are kept for the next one.
pub(super) async fn write(s: &Shared) -> Result<()> {
    let now_minute = u64::try_from(now_ms()).unwrap_or(0) / MINUTE_MS;
    let batches: Vec<(Arc<str>, Counts, i64)> = {
        let mut all = s.metrics.lock();
        all.iter_mut()
            .filter(|(_, m)| !m.unwritten.is_empty())
            .map(|(q, m)| {
                let below = now_minute.saturating_sub(u64::from(m.points));
                // -1: no trim this time (no minute is below it).
                let trim = if below > m.trimmed_below {
                    m.trimmed_below = below;
                    below as i64
                } else {
                    -1
                };
                (q.clone(), std::mem::take(&mut m.unwritten), trim)
            })
            .collect()
    };
    let sch = s.target().schema();
    let sql = format!(
        "WITH counted AS (
            INSERT INTO {sch}.metrics AS m (queue, failed, minute, count)
            SELECT $1, k, mi, n FROM unnest($2::bool[], $3::int8[], $4::int8[]) AS t(k, mi, n)
            ON CONFLICT (queue, failed, minute) DO UPDATE
            SET count = CASE WHEN m.minute = -2 THEN LEAST(m.count, EXCLUDED.count)
                             ELSE m.count + EXCLUDED.count END
        )
        DELETE FROM {sch}.metrics WHERE queue = $1 AND minute >= 0 AND minute < $5"
    );
    let mut result = Ok(());
    for (queue, counts, trim) in batches {
        let (mut kinds, mut minutes, mut values) = (Vec::new(), Vec::new(), Vec::new());
        for failed in [false, true] {
            let of_kind = counts.range((failed, 0)..=(failed, u64::MAX));
            let (mut total, mut first) = (0u64, None);
            for (&(_, minute), &n) in of_kind {
                kinds.push(failed);
                minutes.push(minute as i64);
                values.push(n as i64);
                total += n;
                first = Some(first.map_or(minute, |f: u64| f.min(minute)));
            }
            if let Some(first) = first {
                kinds.extend([failed, failed]);
                minutes.extend([-1, -2]);
                values.extend([total as i64, first as i64]);
            }
        }
        let written = async {
            let c = s.pool.get().await?;
            c.query(
                s.target(),
                "cannot record metrics",
                &sql,
                &[&&*queue, &kinds, &minutes, &values, &trim],
            )
            .await
        }
        .await;
        if let Err(e) = written {
            // Kept for the next write (added back to what was counted meanwhile).
            let mut all = s.metrics.lock();
            let m = all.entry(queue.clone()).or_default();
            for (k, n) in counts {
                *m.unwritten.entry(k).or_default() += n;
            }
            result = Err(e);
        }
    }
    result
}

/// Writes the counts every [`WRITE_EVERY`] until the backend closes.
pub(super) async fn write_counts(s: Arc<Shared>) {
    while !s.closed.load(Ordering::Acquire) {
        tokio::time::sleep(WRITE_EVERY).await;
        if s.metrics.lock().values().any(|m| !m.unwritten.is_empty()) {
            let _ = write(&s).await;
        }
    }
}

/// BullMQ's `getMetrics` of `queue`, from the table, after this process wrote its counts.
pub(super) async fn page(
    s: &Shared,
    queue: &str,
    failed: bool,
    start: i64,
    end: i64,
) -> Result<MetricsPage> {
    write(s).await?;
    let sch = s.target().schema();
    let sql = format!(
        "SELECT minute, count FROM {sch}.metrics WHERE queue = $1 AND failed = $2
         UNION ALL
         SELECT -3, metrics_points FROM {sch}.queues WHERE name = $1"
    );
    let c = s.pool.get().await?;
    let rows = c
        .query(s.target(), "cannot read metrics", &sql, &[&queue, &failed])
        .await?;
    let (mut total, mut first, mut points) = (0u64, None, 0u32);
    let mut minutes = Vec::new();
    for r in rows {
        let (minute, count): (i64, i64) = (r.get(0), r.get(1));
        let count = u64::try_from(count).unwrap_or(0);
        match minute {
            -1 => total = count,
            -2 => first = Some(count),
            -3 => points = u32::try_from(count).unwrap_or(u32::MAX),
            m => minutes.push((u64::try_from(m).unwrap_or(0), count)),
        }
    }
    let now = u64::try_from(now_ms()).unwrap_or(0);
    let series = MinuteSeries::from_parts(total, first, minutes, points);
    Ok(series.page(now, points, start, end))
}

/// What finished on `queue` in this process since the backend opened.
pub(super) fn stats(s: &Shared, queue: &str) -> FinishStats {
    s.metrics
        .lock()
        .get(queue)
        .map(|m| m.stats.clone())
        .unwrap_or_default()
}

/// Writes this process's Workers: a row per live holder, renewed, and none for those let go.
/// Also deletes rows of any process not renewed for a day.
pub(super) async fn sync_workers(s: &Shared) -> Result<()> {
    let live: Vec<(u32, HolderInfo)> = s
        .workers
        .lock()
        .iter()
        .map(|(h, w)| (*h, w.clone()))
        .collect();
    let holders: Vec<i32> = live.iter().map(|(h, _)| *h as i32).collect();
    let queues: Vec<&str> = live.iter().map(|(_, w)| &*w.queue).collect();
    let names: Vec<Option<&str>> = live.iter().map(|(_, w)| w.name.as_deref()).collect();
    let started: Vec<i64> = live.iter().map(|(_, w)| w.started as i64).collect();
    let pid = std::process::id() as i32;
    let ttl_ms = TTL_MS;
    let sch = s.target().schema();
    let sql = format!(
        "WITH live AS (
            INSERT INTO {sch}.workers AS w (process, holder, queue, name, started, pid, addr, seen_until)
            SELECT $1, h, q, n, st, $6, host(inet_client_addr()), clock_timestamp() + $7::int8 * interval '1 millisecond'
            FROM unnest($2::int4[], $3::text[], $4::text[], $5::int8[]) AS t(h, q, n, st)
            ON CONFLICT (process, holder) DO UPDATE SET seen_until = EXCLUDED.seen_until
        )
        DELETE FROM {sch}.workers
        WHERE (process = $1 AND NOT (holder = ANY($2)))
           OR seen_until < clock_timestamp() - interval '1 day'"
    );
    let c = s.pool.get().await?;
    c.query(
        s.target(),
        "cannot record the workers",
        &sql,
        &[
            &s.process, &holders, &queues, &names, &started, &pid, &ttl_ms,
        ],
    )
    .await?;
    Ok(())
}

/// Renews this process's Workers' rows every [`KEEP_ALIVE`], and at once when holders come or
/// go, until the backend closes.
pub(super) async fn keep_workers_alive(s: Arc<Shared>) {
    // Whether the table may hold rows of this process (written while it had Workers).
    let mut rows = false;
    while !s.closed.load(Ordering::Acquire) {
        let changed = s.workers_changed.notified();
        let any = !s.workers.lock().is_empty();
        if (any || rows) && s.pool.migrated().await.is_ok() && sync_workers(&s).await.is_ok() {
            rows = any;
        }
        tokio::select! {
            _ = tokio::time::sleep(KEEP_ALIVE) => {}
            _ = changed => {}
        }
    }
}

/// The live Workers of `queue`, in every process, oldest first. This process's rows are
/// written first, so a Worker just opened or closed here is seen so.
pub(super) async fn workers(s: &Shared, queue: &str) -> Result<Vec<WorkerInfo>> {
    sync_workers(s).await?;
    let sch = s.target().schema();
    let sql = format!(
        "SELECT process || ':' || holder, name, started, pid, addr,
                (extract(epoch FROM seen_until) * 1000)::int8 - $2::int8
         FROM {sch}.workers WHERE queue = $1 AND seen_until > clock_timestamp()
         ORDER BY started, process, holder"
    );
    let c = s.pool.get().await?;
    let rows = c
        .query(
            s.target(),
            "cannot read the workers",
            &sql,
            &[&queue, &TTL_MS],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| WorkerInfo {
            id: r.get(0),
            name: r.get(1),
            started: u64::try_from(r.get::<_, i64>(2)).unwrap_or(0),
            seen: u64::try_from(r.get::<_, i64>(5)).unwrap_or(0),
            pid: u32::try_from(r.get::<_, i32>(3)).unwrap_or(0),
            addr: r.get(4),
        })
        .collect())
}

/// A map of this process's holders' identities (for `Shared`).
pub(super) type Workers = HashMap<u32, HolderInfo>;
