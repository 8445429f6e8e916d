//! A queue's limits on PostgreSQL: its own rate limit, its cap on active jobs, a hold
//! (`rateLimit(ms)`), and the token bucket they share with the workers' `limiter`, all in the
//! queue's row. Limits are enforced inside the claim: a claim of a queue with limits (or by a
//! worker with a `limiter`) runs in one transaction that locks the queue row, counts the queue's
//! active jobs (a statement after the lock, so it sees every claim committed before), computes
//! the budget, claims at most that (`Statements::claim_within`) and stores what is left of the
//! bucket. The plain claim takes nothing from a queue with limits, so queues without limits
//! never take that lock.
//!
//! The bucket follows the embedded engine's (`ferroqueue_engine::domain::limits`): it starts
//! full, holds at most `max` tokens and gains `max` per `duration`, continuously, by the
//! database's clock; here its tokens are a float.

use std::time::Duration;

use ferroqueue_engine::domain::limits::{LimitChange, LimitSettings, RateLimit, WorkerLimits};
use ferroqueue_engine::Result;
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;

use crate::connect::Target;
use crate::jobs::{Claimed, LIMITED};
use crate::pool::Conn;

/// A queue row's limits, read under its lock (or without, for `limits()`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stored {
    pub settings: LimitSettings,
    /// Ms until a hold ends (0 or less: none).
    pub hold_ms: f64,
    /// The bucket's tokens when last counted (`None`: never counted: full).
    pub tokens: Option<f64>,
    /// Ms since the bucket was last counted.
    pub since_ms: f64,
}

/// What the limits allow now.
#[derive(Debug, Clone, PartialEq)]
pub struct Budget {
    /// Jobs that may start.
    pub n: usize,
    /// The bucket's tokens now, before spending (`None`: no rate applies).
    pub tokens: Option<f64>,
    /// The rate that applies.
    pub rate: Option<RateLimit>,
}

/// Tokens below one by less than this count as one (float error of many small refills).
const EPSILON: f64 = 1e-9;

impl Stored {
    /// The rate for a worker whose own limiter is `worker`: the queue's own first.
    fn rate(&self, worker: Option<RateLimit>) -> Option<RateLimit> {
        self.settings.rate.or(worker)
    }

    /// The bucket's tokens now under `rate` (a new bucket is full; a smaller `max` caps it).
    fn tokens_now(&self, rate: RateLimit) -> f64 {
        let max = rate.max as f64;
        match self.tokens {
            None => max,
            Some(t) => (t + self.since_ms.max(0.0) * max / rate.duration as f64).min(max),
        }
    }

    /// How many of `want` jobs may start with `active` jobs running.
    pub fn budget(&self, want: usize, active: usize, worker: Option<RateLimit>) -> Budget {
        let rate = self.rate(worker);
        let tokens = rate.map(|r| self.tokens_now(r));
        if self.hold_ms > 0.0 {
            return Budget { n: 0, tokens, rate };
        }
        let mut n = want;
        if let Some(c) = self.settings.concurrency {
            n = n.min((c as usize).saturating_sub(active));
        }
        if let Some(t) = tokens {
            n = n.min((t + EPSILON).floor().max(0.0) as usize);
        }
        Budget { n, tokens, rate }
    }

    /// When waiting alone lets a take that got nothing succeed: the end of a hold or the next
    /// token, as a wait from now. `None` when the cap on active jobs is what holds it back (a
    /// finished job frees a slot) or nothing does.
    pub fn retry_in(&self, b: &Budget, active: usize) -> Option<Duration> {
        if self.hold_ms > 0.0 {
            return Some(Duration::from_micros((self.hold_ms * 1000.0).ceil() as u64));
        }
        if let Some(c) = self.settings.concurrency {
            if active >= c as usize {
                return None;
            }
        }
        let (r, t) = (b.rate?, b.tokens?);
        let missing = 1.0 - (t - b.n as f64);
        (missing > EPSILON).then(|| {
            let ms = missing * r.duration as f64 / r.max as f64;
            Duration::from_micros((ms * 1000.0).ceil().min(u64::MAX as f64 / 2.0) as u64)
        })
    }

    /// Ms until the queue takes jobs again by a hold or its own rate limit (0: it does now).
    pub fn ttl_ms(&self) -> u64 {
        let hold = self.hold_ms.max(0.0);
        let wait = match self.settings.rate {
            Some(r) => {
                let t = self.tokens_now(r);
                if t + EPSILON >= 1.0 {
                    0.0
                } else {
                    (1.0 - t) * r.duration as f64 / r.max as f64
                }
            }
            None => 0.0,
        };
        hold.max(wait).ceil() as u64
    }
}

fn stored_of(r: &Row) -> Stored {
    let rate = match (r.get::<_, Option<i64>>(0), r.get::<_, Option<i64>>(1)) {
        (Some(max), Some(duration)) => Some(RateLimit {
            max: max.clamp(1, i64::from(u32::MAX)) as u32,
            duration: duration.max(1) as u64,
        }),
        _ => None,
    };
    Stored {
        settings: LimitSettings {
            rate,
            concurrency: r
                .get::<_, Option<i64>>(2)
                .map(|c| c.clamp(0, i64::from(u32::MAX)) as u32),
        },
        hold_ms: r.get::<_, Option<f64>>(3).unwrap_or(0.0),
        tokens: r.get(4),
        since_ms: r.get::<_, Option<f64>>(5).unwrap_or(0.0),
    }
}

/// The columns [`stored_of`] reads, whether the queue is paused, and the time the bucket was
/// counted at (ms since the epoch, the database's clock).
fn select_limits(s: &str, lock: &str) -> String {
    format!(
        "SELECT rate_max, rate_duration, concurrency,
                (extract(epoch from hold_until - clock_timestamp()) * 1000)::float8,
                tokens,
                (extract(epoch from clock_timestamp() - refilled_at) * 1000)::float8,
                paused,
                (extract(epoch from clock_timestamp()) * 1000)::float8,
                grouped
         FROM {s}.queues WHERE name = $1 {lock}"
    )
}

/// What a claim within limits did.
#[derive(Debug, Default)]
pub struct Within {
    pub claimed: Vec<Claimed>,
    /// Wait this long and try again (a token comes, a hold ends), if jobs are ready.
    pub retry: Option<Duration>,
    /// The queue has limits or groups, or the worker a limiter (else plain claims will do).
    pub limited: bool,
    /// The queue has a cap on active jobs, or groups (a finished job must hint the others).
    pub capped: bool,
    /// The limits allowed nothing while jobs were ready: the queue is not drained.
    pub held_back: bool,
}

/// Claims up to `want` ready jobs of `queue` within its limits and the worker's (`worker`: its
/// `limiter` and its defaults for groups), ungrouped jobs first, then grouped ones by
/// `groups::claim`, in one transaction on `c`, a connection no other call uses meanwhile
/// (`Pool::exclusive`; see the module's comment).
pub async fn claim_within(
    c: &Conn,
    t: &Target,
    queue: &str,
    want: usize,
    lease_ms: i64,
    worker: &WorkerLimits,
) -> Result<Within> {
    let s = t.schema();
    let what = "cannot claim jobs";
    let io = |e| t.error(what, e);
    // A claim cut off midway (its future dropped) leaves its transaction open: end it first.
    // The lock goes in the same round trip (tokio-postgres pipelines what is sent together).
    // Prepared first, so that the lock is sent after BEGIN (see the commit below).
    let lock = c.statement(t, &select_limits(s, "FOR UPDATE")).await?;
    let params: [&(dyn ToSql + Sync); 1] = [&queue];
    let (begun, locked) = tokio::join!(
        c.client.batch_execute("ROLLBACK; BEGIN"),
        c.client.query(&lock, &params)
    );
    let r = match (begun.map_err(io), locked.map_err(io)) {
        (Ok(()), Ok(rows)) => within(c, t, queue, want, lease_ms, worker, rows).await,
        (Err(e), _) | (_, Err(e)) => Err(e),
    };
    match r {
        Ok((w, Some(left))) => {
            // What is left of the bucket, as of the time it was counted (a refill while the
            // claim ran belongs to the next), and the commit, in one round trip.
            let (left, at) = left;
            let spend = format!(
                "UPDATE {s}.queues SET tokens = $2, refilled_at = to_timestamp($3::float8 / 1000),
                        hold_until = CASE WHEN hold_until <= clock_timestamp() THEN NULL
                                          ELSE hold_until END
                 WHERE name = $1"
            );
            let params: [&(dyn ToSql + Sync); 3] = [&queue, &left, &at];
            // Prepared first: a statement still being prepared when COMMIT is sent would run
            // after it, outside the transaction, with the row's lock gone (seen: two processes
            // each took a full bucket).
            let st = c.statement(t, &spend).await?;
            let (spent, done) = tokio::join!(
                c.client.query(&st, &params),
                c.client.batch_execute("COMMIT")
            );
            spent.map_err(io)?;
            done.map_err(io)?;
            Ok(w)
        }
        Ok((w, None)) => {
            c.client.batch_execute("COMMIT").await.map_err(io)?;
            Ok(w)
        }
        Err(e) => {
            let _ = c.client.batch_execute("ROLLBACK").await;
            Err(e)
        }
    }
}

/// The claim within the transaction that locked the queue row (`rows`); answers it and what
/// to store of the bucket: its tokens and when they were counted (`None`: nothing to store: no
/// queue row, or paused).
async fn within(
    c: &Conn,
    t: &Target,
    queue: &str,
    want: usize,
    lease_ms: i64,
    worker: &WorkerLimits,
    rows: Vec<Row>,
) -> Result<(Within, Option<(Option<f64>, f64)>)> {
    let limiter = worker.rate;
    let s = t.schema();
    let what = "cannot claim jobs";
    let Some(row) = rows.first() else {
        // No queue row: no job was ever added, and no limit set.
        let w = Within {
            limited: limiter.is_some(),
            ..Within::default()
        };
        return Ok((w, None));
    };
    let stored = stored_of(row);
    let grouped: bool = row.get(8);
    let limited = limiter.is_some()
        || grouped
        || stored.settings != LimitSettings::default()
        || stored.hold_ms > 0.0;
    if row.get::<_, bool>(6) {
        let w = Within {
            limited,
            ..Within::default()
        };
        return Ok((w, None));
    }
    let active = match stored.settings.concurrency {
        // A statement of its own, after the lock: it sees every claim committed before.
        Some(_) => {
            let sql = format!(
                "SELECT count(*) FILTER (WHERE queue = $1) FROM {s}.jobs WHERE token IS NOT NULL"
            );
            let rows = c.query(t, what, &sql, &[&queue]).await?;
            rows.first()
                .map_or(0, |r| r.get::<_, i64>(0).max(0) as usize)
        }
        None => 0,
    };
    let budget = stored.budget(want.min(10_000), active, limiter);
    let (mut claimed, mut held_back) = if budget.n > 0 {
        let got = c
            .jobs
            .claim_within(&c.client, t, queue, budget.n as i64, lease_ms)
            .await?;
        (got, false)
    } else {
        // Nothing may start: is anything ready (held back), or is the queue drained?
        let sql = format!(
            "SELECT EXISTS (SELECT 1 FROM {s}.jobs WHERE queue = $1 AND state IN (0, 1)
                            AND group_id = '')
                 OR EXISTS (SELECT 1 FROM {s}.jobs WHERE queue = $1 AND state IN (0, 1)
                            AND group_id <> '')"
        );
        let rows = c.query(t, what, &sql, &[&queue]).await?;
        (
            Vec::new(),
            rows.first().is_some_and(|r| r.get::<_, bool>(0)),
        )
    };
    let mut group_retry = None;
    if grouped && claimed.len() < budget.n {
        let g = crate::groups::claim(
            c,
            t,
            queue,
            budget.n - claimed.len(),
            lease_ms,
            worker.group,
        )
        .await?;
        held_back = claimed.is_empty() && g.claimed.is_empty() && g.held_back;
        group_retry = g.retry;
        claimed.extend(g.claimed);
    }
    let left = budget.tokens.map(|tk| tk - claimed.len() as f64);
    // Held back (it took all the budget, less than it wanted): try again when waiting helps.
    // If no job was ready after all, that claim finds none and waits for a hint.
    let retry = if claimed.len() < want && claimed.len() == budget.n {
        let spent = Budget {
            n: claimed.len(),
            ..budget
        };
        stored.retry_in(&spent, active + claimed.len())
    } else {
        None
    };
    let retry = match (retry, group_retry) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let capped = stored.settings.concurrency.is_some() || grouped;
    let w = Within {
        claimed,
        retry,
        limited,
        capped,
        held_back,
    };
    Ok((w, Some((left, row.get::<_, f64>(7)))))
}

/// Whether `queue` has limits (its claims must go through [`claim_within`]).
pub async fn has_limits(c: &Conn, t: &Target, queue: &str) -> Result<bool> {
    let sql = format!(
        "SELECT EXISTS (SELECT 1 FROM {}.queues WHERE name = $1 AND ({LIMITED}))",
        t.schema()
    );
    let rows = c
        .query(t, "cannot read queue limits", &sql, &[&queue])
        .await?;
    Ok(rows.first().is_some_and(|r| r.get(0)))
}

/// Changes `queue`'s limits (creating its row), then hints its workers in every process to
/// claim again (a limit may have been lifted).
pub async fn change(c: &Conn, t: &Target, queue: &str, change: LimitChange) -> Result<()> {
    let s = t.schema();
    let big = |v: u64| v.min(i64::MAX as u64) as i64;
    let (columns, values, a, b): (&str, &str, Option<i64>, Option<i64>) = match change {
        LimitChange::Rate(r) => (
            "rate_max, rate_duration",
            "$2::int8, $3::int8",
            r.map(|r| i64::from(r.max)),
            r.map(|r| big(r.duration)),
        ),
        LimitChange::Concurrency(n) => ("concurrency", "$2::int8", n.map(i64::from), None),
        LimitChange::HoldFor(ms) => (
            "hold_until",
            "CASE WHEN $2::int8 > 0 THEN clock_timestamp() + \
             LEAST($2::int8, 9007199254740992) * interval '1 millisecond' END",
            Some(big(ms)),
            None,
        ),
    };
    let set = columns
        .split(", ")
        .map(|col| format!("{col} = EXCLUDED.{col}"))
        .collect::<Vec<_>>()
        .join(", ");
    let sql = format!(
        "WITH up AS (
            INSERT INTO {s}.queues AS q (name, {columns}) VALUES ($1, {values})
            ON CONFLICT (name) DO UPDATE SET {set}
            RETURNING name
        )
        SELECT pg_notify('{s}_ready', name) FROM up"
    );
    let what = "cannot change queue limits";
    match change {
        LimitChange::Rate(_) => c.query(t, what, &sql, &[&queue, &a, &b]).await?,
        _ => c.query(t, what, &sql, &[&queue, &a]).await?,
    };
    Ok(())
}

/// `queue`'s limit settings and the ms until it takes jobs again by its own rate limit or a
/// hold.
pub async fn read(c: &Conn, t: &Target, queue: &str) -> Result<(LimitSettings, u64)> {
    let rows = c
        .query(
            t,
            "cannot read queue limits",
            &select_limits(t.schema(), ""),
            &[&queue],
        )
        .await?;
    Ok(rows.first().map_or((LimitSettings::default(), 0), |r| {
        let st = stored_of(r);
        (st.settings, st.ttl_ms())
    }))
}

/// Sends the hint that a job of `queue` left active: workers held back by its cap on active
/// jobs claim again.
pub async fn slot_freed(c: &Conn, t: &Target, queue: &str) -> Result<()> {
    let sql = format!("SELECT pg_notify('{}_ready', $1)", t.schema());
    c.query(t, "cannot send a hint", &sql, &[&queue]).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIVE_PER_500: RateLimit = RateLimit {
        max: 5,
        duration: 500,
    };

    fn stored(
        rate: Option<RateLimit>,
        concurrency: Option<u32>,
        tokens: Option<f64>,
        since_ms: f64,
    ) -> Stored {
        Stored {
            settings: LimitSettings { rate, concurrency },
            hold_ms: 0.0,
            tokens,
            since_ms,
        }
    }

    #[test]
    fn a_new_bucket_is_full_and_refills_at_its_rate() {
        let s = stored(Some(FIVE_PER_500), None, None, 0.0);
        assert_eq!(s.budget(10, 0, None).n, 5);
        let s = stored(Some(FIVE_PER_500), None, Some(0.0), 100.0);
        let b = s.budget(10, 0, None);
        assert_eq!(b.n, 1);
        // After spending it, the next token is 100 ms away.
        assert_eq!(
            s.retry_in(&Budget { n: 1, ..b }, 0),
            Some(Duration::from_millis(100))
        );
        let s = stored(Some(FIVE_PER_500), None, Some(0.5), 0.0);
        assert_eq!(s.budget(10, 0, None).n, 0);
        assert_eq!(s.ttl_ms(), 50);
    }

    #[test]
    fn the_queues_rate_overrides_the_workers_and_the_cap_bounds_both() {
        let s = stored(None, Some(3), None, 0.0);
        assert_eq!(s.budget(10, 1, Some(FIVE_PER_500)).n, 2);
        assert_eq!(s.budget(10, 3, Some(FIVE_PER_500)).n, 0);
        let capped = s.budget(10, 3, Some(FIVE_PER_500));
        assert_eq!(s.retry_in(&capped, 3), None);
        let s = stored(
            Some(RateLimit {
                max: 1,
                duration: 1000,
            }),
            None,
            None,
            0.0,
        );
        assert_eq!(s.budget(10, 0, Some(FIVE_PER_500)).n, 1);
    }

    #[test]
    fn a_hold_stops_everything_until_it_ends() {
        let mut s = stored(None, None, None, 0.0);
        s.hold_ms = 120.5;
        let b = s.budget(10, 0, None);
        assert_eq!(b.n, 0);
        assert_eq!(s.retry_in(&b, 0), Some(Duration::from_micros(120_500)));
        assert_eq!(s.ttl_ms(), 121);
    }
}
