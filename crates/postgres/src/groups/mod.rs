//! Job groups on PostgreSQL (the embedded engine's `domain/groups`): each grouped job carries its
//! `group_id`; the `groups` table holds each group's own settings (concurrency, rate limit,
//! paused), its token bucket and its turn (`served`: groups are served in ascending order).
//!
//! A queue with groups is claimed within one transaction that holds its row's lock (`limits.rs`),
//! so claims of one queue never run at once and adds wait for them (an add locks the queue row
//! too). Within it, after the ungrouped jobs:
//! 1. the groups in turn order (not paused) are read with what they hold: ready jobs or not,
//!    active jobs (where a concurrency applies), and their bucket; a statement after the lock,
//!    so it sees every claim committed before;
//! 2. each group's allowance (its concurrency left, its whole tokens) is computed here, and the
//!    jobs wanted are dealt out round-robin over the groups that may start one;
//! 3. one statement claims each group's first jobs (`group_id, priority, ord`);
//! 4. every group whose turn came goes to the back of the turn order: one served, one blocked,
//!    one with nothing ready alike (a blocked group thus waits one turn of the others, as a
//!    parked group of the embedded engine does); the buckets spent are stored; the rows of
//!    groups that hold nothing and have no settings are dropped (an add re-creates one, after
//!    the queue row's lock).
//!
//! Looking further (another page of groups) goes on until the want is met or every group was
//! looked at once.

use std::collections::HashSet;
use std::time::Duration;

use ferroqueue_engine::domain::groups::{GroupDefaults, GroupSettings};
use ferroqueue_engine::domain::limits::RateLimit;
use ferroqueue_engine::Result;
use tokio_postgres::Row;

mod settings;

pub use settings::{change, info, jobs_sql, ready_count};

use crate::connect::Target;
use crate::jobs::{claimed_of, Claimed, NOW_MS};
use crate::pool::Conn;
use crate::record::hot_columns;

/// Groups read per page of a claim.
const PAGE: i64 = 256;

/// Tokens below one by less than this count as one (float error of many small refills).
const EPSILON: f64 = 1e-9;

/// What a claim of grouped jobs did.
#[derive(Debug, Default)]
pub struct GroupClaim {
    pub claimed: Vec<Claimed>,
    /// Some group had ready jobs but none could start one.
    pub held_back: bool,
    /// When a group held back by its rate gets its next token, if one is.
    pub retry: Option<Duration>,
}

/// One group as a claim reads it.
struct Turn {
    id: String,
    settings: GroupSettings,
    tokens: Option<f64>,
    since_ms: f64,
    ready: bool,
    /// Active jobs (counted only where a concurrency applies).
    active: i64,
}

fn turn_of(r: &Row) -> Turn {
    Turn {
        id: r.get(0),
        settings: GroupSettings {
            concurrency: r
                .get::<_, Option<i64>>(1)
                .map(|c| c.clamp(0, i64::from(u32::MAX)) as u32),
            rate: rate_of(r.get(2), r.get(3)),
            paused: false,
        },
        tokens: r.get(4),
        since_ms: r.get::<_, Option<f64>>(5).unwrap_or(0.0),
        ready: r.get(6),
        active: r.get::<_, Option<i64>>(7).unwrap_or(0),
    }
}

fn rate_of(max: Option<i64>, duration: Option<i64>) -> Option<RateLimit> {
    match (max, duration) {
        (Some(max), Some(duration)) => Some(RateLimit {
            max: max.clamp(1, i64::from(u32::MAX)) as u32,
            duration: duration.max(1) as u64,
        }),
        _ => None,
    }
}

impl Turn {
    /// Jobs the group may start now (`usize::MAX`: no limit), its tokens now (`None`: no rate)
    /// and the wait for its next token when it has none.
    fn allowance(&self, d: GroupDefaults) -> (usize, Option<f64>, Option<Duration>) {
        let mut n = usize::MAX;
        if let Some(c) = self.settings.concurrency.or(d.concurrency) {
            n = n.min((i64::from(c) - self.active).max(0) as usize);
        }
        let Some(r) = self.settings.rate.or(d.rate) else {
            return (n, None, None);
        };
        let max = r.max as f64;
        let tokens = match self.tokens {
            None => max,
            Some(t) => (t + self.since_ms.max(0.0) * max / r.duration as f64).min(max),
        };
        let whole = (tokens + EPSILON).floor().max(0.0) as usize;
        let wait = (whole == 0).then(|| {
            let ms = (1.0 - tokens) * r.duration as f64 / max;
            Duration::from_micros((ms * 1000.0).ceil().max(1.0) as u64)
        });
        (n.min(whole), Some(tokens), wait)
    }
}

/// Deals `want` jobs round-robin over groups allowed `allow[i]` each: one per group per round,
/// in order. Answers how many each gets.
pub fn deal(want: usize, allow: &[usize]) -> Vec<usize> {
    let mut got = vec![0; allow.len()];
    let mut left = want;
    while left > 0 {
        let mut dealt = false;
        for (g, a) in got.iter_mut().zip(allow) {
            if left == 0 {
                break;
            }
            if *g < *a {
                *g += 1;
                left -= 1;
                dealt = true;
            }
        }
        if !dealt {
            break;
        }
    }
    got
}

/// Claims up to `want` grouped jobs of `queue`, inside the caller's transaction that holds the
/// queue row's lock (see the module's comment). `d`: the worker's defaults for groups without
/// settings of their own.
pub async fn claim(
    c: &Conn,
    t: &Target,
    queue: &str,
    want: usize,
    lease_ms: i64,
    d: GroupDefaults,
) -> Result<GroupClaim> {
    let s = t.schema();
    let what = "cannot claim grouped jobs";
    // Active jobs are counted only where a concurrency applies ($3: the worker has a default).
    let read = format!(
        "SELECT g.id, g.concurrency, g.rate_max, g.rate_duration, g.tokens,
                (extract(epoch from clock_timestamp() - g.refilled_at) * 1000)::float8,
                EXISTS (SELECT 1 FROM {s}.jobs j WHERE j.queue = $1 AND j.group_id = g.id
                        AND j.group_id <> '' AND j.state IN (0, 1)),
                CASE WHEN g.concurrency IS NOT NULL OR $3 THEN
                    (SELECT count(*) FROM {s}.jobs j WHERE j.queue = $1 AND j.group_id = g.id
                            AND j.group_id <> '' AND j.state = 3)
                END
         FROM {s}.groups g
         WHERE g.queue = $1 AND NOT g.paused
         ORDER BY g.served, g.id
         LIMIT $2"
    );
    // Twice the want (groups found blocked are passed over), within bounds.
    let page = (want as i64 * 2).clamp(16, PAGE);
    let capped = d.concurrency.is_some();
    let mut out = GroupClaim::default();
    let mut seen: HashSet<String> = HashSet::new();
    loop {
        let rows = c.query(t, what, &read, &[&queue, &page, &capped]).await?;
        let turns: Vec<Turn> = rows.iter().map(turn_of).collect();
        let fresh = turns.iter().any(|g| seen.insert(g.id.clone()));
        let mut allow = Vec::with_capacity(turns.len());
        let mut spare = Vec::new();
        for g in &turns {
            let (n, _, wait) = g.allowance(d);
            if g.ready {
                if n == 0 {
                    out.held_back = true;
                    if let Some(w) = wait {
                        out.retry = Some(out.retry.map_or(w, |r| r.min(w)));
                    }
                }
                allow.push(n);
            } else {
                allow.push(0);
                // The delete checks that no job of the group is left, whatever its state.
                if g.settings == GroupSettings::default() {
                    spare.push(g.id.clone());
                }
            }
        }
        let want_now = want - out.claimed.len();
        let dealt = deal(want_now, &allow);
        // Independent statements of the transaction: sent together (one round trip).
        let drop = format!(
            "DELETE FROM {s}.groups g
             WHERE g.queue = $1 AND g.id = ANY($2) AND g.concurrency IS NULL
               AND g.rate_max IS NULL AND NOT g.paused
               AND NOT EXISTS (SELECT 1 FROM {s}.jobs j WHERE j.queue = $1
                               AND j.group_id = g.id AND j.group_id <> '')"
        );
        let dropped = async {
            if spare.is_empty() {
                return Ok(Vec::new());
            }
            c.query(t, what, &drop, &[&queue, &spare]).await
        };
        let (got, stored, dropped) = tokio::join!(
            claim_dealt(c, t, queue, &turns, &dealt, lease_ms),
            store_turns(c, t, queue, &turns, &dealt, d),
            dropped
        );
        let got = got?;
        stored?;
        dropped?;
        let taken = got.len();
        out.claimed.extend(got);
        if taken > 0 {
            out.held_back = false;
        }
        if out.claimed.len() >= want || (turns.len() as i64) < page || !fresh {
            break;
        }
    }
    if !out.claimed.is_empty() {
        out.retry = None;
    }
    Ok(out)
}

/// Claims `dealt[i]` first ready jobs of each group `turns[i]`; answers them in the order a
/// worker should start them: round by round, groups in turn order.
async fn claim_dealt(
    c: &Conn,
    t: &Target,
    queue: &str,
    turns: &[Turn],
    dealt: &[usize],
    lease_ms: i64,
) -> Result<Vec<Claimed>> {
    let (ids, counts): (Vec<&str>, Vec<i64>) = turns
        .iter()
        .zip(dealt)
        .filter(|(_, n)| **n > 0)
        .map(|(g, n)| (g.id.as_str(), *n as i64))
        .unzip();
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let s = t.schema();
    let cols = hot_columns("j.");
    let id = crate::record::id_expr("");
    let sql = format!(
        "WITH p AS (
            SELECT x.row, p.i FROM unnest($2::text[], $3::int8[]) WITH ORDINALITY AS p(gid, n, i)
            CROSS JOIN LATERAL (
                SELECT ctid AS row FROM {s}.jobs
                WHERE queue = $1 AND group_id = p.gid AND group_id <> '' AND state IN (0, 1)
                ORDER BY priority, ord
                LIMIT p.n
                FOR UPDATE SKIP LOCKED
            ) x
        ), c AS (
            UPDATE {s}.jobs j
            SET state = 3, token = nextval('{s}.tokens'),
                lease_until = clock_timestamp() + $4::int8 * interval '1 millisecond',
                processed_on = {NOW_MS}, attempts_started = j.attempts_started + 1
            WHERE j.ctid = ANY(ARRAY(SELECT row FROM p))
            RETURNING {cols}, j.token, j.ord, j.group_id
        ), ev AS (
            INSERT INTO {s}.events (queue, event, payload)
            SELECT $1, 'active', json_agg(json_build_object('id', {id}))::text
            FROM c HAVING count(*) > 0
        )
        SELECT * FROM c"
    );
    let rows = c
        .query(
            t,
            "cannot claim grouped jobs",
            &sql,
            &[&queue, &ids, &counts, &lease_ms],
        )
        .await?;
    let place: std::collections::HashMap<&str, usize> =
        ids.iter().enumerate().map(|(i, g)| (*g, i)).collect();
    let group_col = crate::record::COLUMNS + 2;
    let groups: Vec<usize> = rows
        .iter()
        .map(|r| place.get(r.get::<_, &str>(group_col)).copied().unwrap_or(0))
        .collect();
    let mut jobs: Vec<(usize, Claimed)> = groups.into_iter().zip(claimed_of(rows)).collect();
    // `claimed_of` sorts by (priority, ord); a stable sort by group gives each group's order.
    jobs.sort_by_key(|(g, _)| *g);
    let mut round = vec![0usize; ids.len()];
    let mut keyed: Vec<((usize, usize), Claimed)> = jobs
        .into_iter()
        .map(|(g, j)| {
            let r = round[g];
            round[g] += 1;
            ((r, g), j)
        })
        .collect();
    keyed.sort_by_key(|(k, _)| *k);
    Ok(keyed.into_iter().map(|(_, j)| j).collect())
}

/// Moves the groups whose turn came to the back of the turn order, and stores the buckets
/// spent. A group's turn came when it was dealt jobs, or could not start one (blocked, or
/// nothing ready); a group left undealt because the want ran out keeps its place. The order
/// at the back is the one round-robin leaves: fewest jobs dealt first, then turn order.
async fn store_turns(
    c: &Conn,
    t: &Target,
    queue: &str,
    turns: &[Turn],
    dealt: &[usize],
    d: GroupDefaults,
) -> Result<()> {
    let mut moved: Vec<(usize, usize)> = Vec::new();
    let mut rests: Vec<Option<f64>> = Vec::new();
    for (i, (g, n)) in turns.iter().zip(dealt).enumerate() {
        let (allow, tokens, _) = g.allowance(d);
        if *n > 0 || allow == 0 || !g.ready {
            moved.push((*n, i));
        }
        rests.push(tokens.filter(|_| *n > 0).map(|tk| tk - *n as f64));
    }
    if moved.is_empty() {
        return Ok(());
    }
    moved.sort_unstable();
    let ids: Vec<&str> = moved.iter().map(|(_, i)| turns[*i].id.as_str()).collect();
    let rest: Vec<Option<f64>> = moved.iter().map(|(_, i)| rests[*i]).collect();
    let s = t.schema();
    let sql = format!(
        "UPDATE {s}.groups g
         SET served = (extract(epoch from clock_timestamp()) * 1000000)::int8 * 1000 + u.i,
             tokens = CASE WHEN u.rest IS NULL THEN g.tokens ELSE u.rest END,
             refilled_at = CASE WHEN u.rest IS NULL THEN g.refilled_at
                                ELSE clock_timestamp() END
         FROM unnest($2::text[], $3::float8[]) WITH ORDINALITY AS u(id, rest, i)
         WHERE g.queue = $1 AND g.id = u.id"
    );
    c.query(t, "cannot claim grouped jobs", &sql, &[&queue, &ids, &rest])
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dealing_is_round_robin_within_allowances() {
        assert_eq!(deal(5, &[usize::MAX, usize::MAX]), vec![3, 2]);
        assert_eq!(deal(5, &[1, 0, usize::MAX]), vec![1, 0, 4]);
        assert_eq!(deal(10, &[1, 2]), vec![1, 2]);
        assert_eq!(deal(0, &[3]), vec![0]);
        assert_eq!(deal(3, &[]), Vec::<usize>::new());
    }

    #[test]
    fn an_allowance_is_the_tighter_of_concurrency_and_whole_tokens() {
        let g = Turn {
            id: "a".into(),
            settings: GroupSettings {
                concurrency: Some(3),
                rate: Some(RateLimit {
                    max: 2,
                    duration: 1_000,
                }),
                paused: false,
            },
            tokens: Some(0.5),
            since_ms: 0.0,
            ready: true,
            active: 1,
        };
        let (n, tokens, wait) = g.allowance(GroupDefaults::default());
        assert_eq!((n, tokens), (0, Some(0.5)));
        assert_eq!(wait, Some(Duration::from_millis(250)));
        let later = Turn {
            since_ms: 1_000.0,
            ..g
        };
        assert_eq!(later.allowance(GroupDefaults::default()).0, 2);
        let fresh = Turn {
            tokens: None,
            settings: GroupSettings::default(),
            ..later
        };
        let d = GroupDefaults {
            concurrency: Some(2),
            rate: None,
        };
        assert_eq!(
            fresh.allowance(d).0,
            1,
            "the worker's default cap, one active"
        );
    }
}
