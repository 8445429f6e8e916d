//! Flows on PostgreSQL (the embedded engine's `domain/flow.rs`): a child's parent is in its
//! options (`opts.parent`, and its failure rule); a parent waits in state 6 (`waiting-children`);
//! its dependencies are rows of `deps (queue, parent_id, child_queue, child_id, state, value)`,
//! state 0 pending, 1 processed (value: the return value), 2 failed, 3 ignored (value: the
//! reason); a dropped dependency is a deleted row.
//!
//! Every change that touches a parent runs inside a transaction (the caller's, on the backend's
//! own connection) that first takes a transaction-scoped advisory lock on the parent: two
//! children finishing at once in two processes are resolved one after the other, and the
//! second sees the first's row (a statement after the lock), so the last one moves the parent
//! on. The functions here are the statements of such transactions.

use ferroqueue_engine::domain::flow::{ChildEnd, ChildRef, Deps, Notice, OnChildFailure};
use ferroqueue_engine::domain::job::parse_auto_id;
use ferroqueue_engine::domain::options::JobOptions;
use ferroqueue_engine::{EngineError, Result};

use crate::connect::Target;
use crate::jobs::{after_ms, FINISHED_COLUMNS, NOW_MS};
use crate::pool::Conn;
use crate::record::id_expr;

const WHAT: &str = "cannot resolve a flow";

/// Takes the lock of parent `id` of `queue` until the transaction ends.
pub async fn lock_parent(c: &Conn, t: &Target, queue: &str, id: &str) -> Result<()> {
    let sql = "SELECT pg_advisory_xact_lock(hashtextextended($1 || ':' || $2, 0))";
    c.query(t, WHAT, sql, &[&queue, &id]).await?;
    Ok(())
}

/// The key of job `id` of `queue` if it is unfinished (in `jobs`), with its state; `Err` for a
/// finished one or none.
pub async fn check_parent(c: &Conn, t: &Target, queue: &str, id: &str) -> Result<(i64, i16)> {
    let s = t.schema();
    let sql = format!(
        "WITH k AS (SELECT $2::int8 AS key WHERE $2::int8 IS NOT NULL
                    UNION ALL
                    SELECT key FROM {s}.job_ids WHERE queue = $1 AND custom_id = $3::text)
         SELECT j.key, j.state, NULL::int2 FROM {s}.jobs j, k WHERE j.queue = $1 AND j.key = k.key
         UNION ALL
         SELECT f.key, f.state, f.state FROM {s}.finished f, k WHERE f.queue = $1 AND f.key = k.key"
    );
    let auto = parse_auto_id(id).map(|n| n as i64);
    let custom = auto.is_none().then_some(id);
    let rows = c.query(t, WHAT, &sql, &[&queue, &auto, &custom]).await?;
    match rows.first() {
        None => Err(EngineError::ParentNotFound {
            queue: queue.to_string(),
            id: id.to_string(),
        }),
        Some(r) if r.get::<_, Option<i16>>(2).is_some() => Err(EngineError::ParentFinished {
            queue: queue.to_string(),
            id: id.to_string(),
            state: crate::record::state_of(r.get(1)).as_str(),
        }),
        Some(r) => Ok((r.get(0), r.get(1))),
    }
}

/// Records `children` as pending dependencies of parent `id` of `queue`.
pub async fn add_edges(
    c: &Conn,
    t: &Target,
    queue: &str,
    id: &str,
    children: &[ChildRef],
) -> Result<()> {
    let s = t.schema();
    let sql = format!(
        "INSERT INTO {s}.deps (queue, parent_id, child_queue, child_id)
         SELECT $1, $2, q, i FROM unnest($3::text[], $4::text[]) AS u(q, i)
         ON CONFLICT DO NOTHING"
    );
    let queues: Vec<&str> = children.iter().map(|c| &*c.queue).collect();
    let ids: Vec<&str> = children.iter().map(|c| &*c.id).collect();
    c.query(t, WHAT, &sql, &[&queue, &id, &queues, &ids])
        .await?;
    Ok(())
}

/// Puts jobs `keys` of `queue` (just added) in `waiting-children`, with their events.
pub async fn wait_for_children(c: &Conn, t: &Target, queue: &str, keys: &[i64]) -> Result<()> {
    let s = t.schema();
    let id = id_expr("");
    let sql = format!(
        "WITH w AS (
            UPDATE {s}.jobs SET state = 6, run_at = NULL
            WHERE queue = $1 AND key = ANY($2::int8[])
            RETURNING key, custom_id
        )
        INSERT INTO {s}.events (queue, event, payload)
        SELECT $1, 'waiting-children', json_agg(json_build_object('id', {id}))::text
        FROM w HAVING count(*) > 0"
    );
    c.query(t, WHAT, &sql, &[&queue, &keys]).await?;
    Ok(())
}

/// The notice a finished or removed job raises for its parent, from its options text.
pub fn notice_of(queue: &str, id: &str, opts: Option<&str>, end: ChildEnd) -> Option<Notice> {
    let o = *JobOptions::from_stored_json(opts?).ok()?.controls?;
    let (pq, pid) = o.parent?;
    let end = match end {
        ChildEnd::Failed(reason, _) => ChildEnd::Failed(reason, o.on_child_failure),
        other => other,
    };
    Some(Notice {
        queue: pq,
        id: pid,
        child: ChildRef {
            queue: queue.into(),
            id: id.into(),
        },
        end,
    })
}

/// Delivers notices (and those they raise) inside the caller's transaction, a batch at a
/// time: the parents' locks in one statement (in a fixed order, so two processes never wait on
/// each other), the dependencies' rows in one, the parents' states and pending counts in one
/// (a statement after the locks: it sees every resolution committed before), then the parents
/// that go on, moved per queue in one statement each.
pub async fn resolve(c: &Conn, t: &Target, notices: Vec<Notice>) -> Result<()> {
    let mut batch = notices;
    while !batch.is_empty() {
        batch = resolve_batch(c, t, batch).await?;
    }
    Ok(())
}

/// Dependency rows as arrays: parent queue, parent id, child queue, child id.
#[derive(Default)]
struct Edges<'a>(Vec<&'a str>, Vec<&'a str>, Vec<&'a str>, Vec<&'a str>);

impl<'a> Edges<'a> {
    fn push(&mut self, n: &'a Notice) {
        self.0.push(&n.queue);
        self.1.push(&n.id);
        self.2.push(&n.child.queue);
        self.3.push(&n.child.id);
    }
}

/// One parent's news in a batch.
#[derive(Default)]
struct Verdict {
    fail: Option<String>,
    go_now: bool,
}

async fn resolve_batch(c: &Conn, t: &Target, notices: Vec<Notice>) -> Result<Vec<Notice>> {
    let s = t.schema();
    let mut parents: Vec<(String, String)> = notices
        .iter()
        .map(|n| (n.queue.to_string(), n.id.to_string()))
        .collect();
    parents.sort();
    parents.dedup();
    let (pq, pid): (Vec<&str>, Vec<&str>) = parents
        .iter()
        .map(|(q, i)| (q.as_str(), i.as_str()))
        .unzip();
    let lock = "SELECT pg_advisory_xact_lock(hashtextextended(q || ':' || i, 0))
                FROM unnest($1::text[], $2::text[]) AS u(q, i) ORDER BY q, i";
    c.query(t, WHAT, lock, &[&pq, &pid]).await?;
    // The dependencies' rows: a new state (and value), or gone.
    let mut set = Edges::default();
    let mut values: (Vec<i16>, Vec<Option<&str>>) = Default::default();
    let mut drop = Edges::default();
    let mut verdicts: std::collections::HashMap<(&str, &str), Verdict> = Default::default();
    for n in &notices {
        let key = (&*n.queue, &*n.id);
        let (state, value) = match &n.end {
            ChildEnd::Completed(v) => (Some(1i16), Some(&**v)),
            ChildEnd::Removed => (None, None),
            ChildEnd::Failed(reason, rule) => match rule {
                OnChildFailure::Wait => continue,
                OnChildFailure::Remove => (None, None),
                OnChildFailure::Ignore => (Some(3), Some(&**reason)),
                OnChildFailure::FailParent => {
                    let v = verdicts.entry(key).or_default();
                    v.fail
                        .get_or_insert_with(|| format!("child {} failed", n.child.key()));
                    (Some(2), Some(&**reason))
                }
                OnChildFailure::Continue => {
                    verdicts.entry(key).or_default().go_now = true;
                    (Some(2), Some(&**reason))
                }
            },
        };
        verdicts.entry(key).or_default();
        match state {
            Some(st) => {
                set.push(n);
                values.0.push(st);
                values.1.push(value);
            }
            None => {
                drop.push(n);
            }
        }
    }
    if !set.0.is_empty() {
        let sql = format!(
            "UPDATE {s}.deps d SET state = u.st, value = u.v
             FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int2[], $6::text[])
                  AS u(q, p, cq, ci, st, v)
             WHERE d.queue = u.q AND d.parent_id = u.p AND d.child_queue = u.cq
               AND d.child_id = u.ci"
        );
        c.query(
            t,
            WHAT,
            &sql,
            &[&set.0, &set.1, &set.2, &set.3, &values.0, &values.1],
        )
        .await?;
    }
    if !drop.0.is_empty() {
        let sql = format!(
            "DELETE FROM {s}.deps d
             USING unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS u(q, p, cq, ci)
             WHERE d.queue = u.q AND d.parent_id = u.p AND d.child_queue = u.cq
               AND d.child_id = u.ci"
        );
        c.query(t, WHAT, &sql, &[&drop.0, &drop.1, &drop.2, &drop.3])
            .await?;
    }
    let (vq, vi): (Vec<&str>, Vec<&str>) = verdicts.keys().copied().unzip();
    if vq.is_empty() {
        return Ok(Vec::new());
    }
    // Each parent still waiting for children: its key and how many are pending.
    let sql = format!(
        "SELECT u.q, u.i, j.key,
                (SELECT count(*) FROM {s}.deps d
                 WHERE d.queue = u.q AND d.parent_id = u.i AND d.state = 0)
         FROM unnest($1::text[], $2::text[]) AS u(q, i)
         JOIN {s}.jobs j ON j.queue = u.q AND j.state = 6
          AND j.key = COALESCE(
                CASE WHEN u.i ~ '^[1-9][0-9]{{0,17}}$' THEN u.i::int8 END,
                (SELECT key FROM {s}.job_ids x WHERE x.queue = u.q AND x.custom_id = u.i))"
    );
    let rows = c.query(t, WHAT, &sql, &[&vq, &vi]).await?;
    let mut next = Vec::new();
    let mut moving: Vec<(String, Vec<i64>)> = Vec::new();
    for r in &rows {
        let (q, i, key, pending): (&str, &str, i64, i64) = (r.get(0), r.get(1), r.get(2), r.get(3));
        let v = verdicts.get(&(q, i));
        if let Some(reason) = v.and_then(|v| v.fail.as_deref()) {
            next.extend(fail_parent(c, t, q, i, key, reason).await?);
        } else if pending == 0 || v.is_some_and(|v| v.go_now) {
            match moving.iter_mut().find(|(mq, _)| mq == q) {
                Some((_, keys)) => keys.push(key),
                None => moving.push((q.to_string(), vec![key])),
            }
        }
    }
    for (q, keys) in moving {
        move_on(c, t, &q, &keys).await?;
    }
    Ok(next)
}

/// A step of a step job: job `key` of `queue`, active under `token`, waits for its pending
/// children (`waiting-children`, its own delay spent) if it has any. Answers `None` when the
/// token no longer holds it, else whether it moved (`false`: nothing pending, still active).
/// Runs in the caller's transaction; takes the job's parent lock, so a child that ends at the
/// same time is counted either before or after.
pub async fn step_to_children(
    c: &Conn,
    t: &Target,
    queue: &str,
    key: i64,
    token: i64,
) -> Result<Option<bool>> {
    let s = t.schema();
    let id_sql = format!(
        "SELECT {id} FROM {s}.jobs j WHERE j.queue = $1 AND j.key = $2 AND j.token = $3 \
         AND j.state = 3",
        id = id_expr("j.")
    );
    let rows = c.query(t, WHAT, &id_sql, &[&queue, &key, &token]).await?;
    let Some(id) = rows.first().map(|r| r.get::<_, String>(0)) else {
        return Ok(None);
    };
    lock_parent(c, t, queue, &id).await?;
    let sql = format!(
        "WITH m AS (
            UPDATE {s}.jobs j SET state = 6, token = NULL, lease_until = NULL, run_at = NULL,
                                  delay = 0
            WHERE j.queue = $1 AND j.key = $2 AND j.token = $3 AND j.state = 3
              AND EXISTS (SELECT 1 FROM {s}.deps d
                          WHERE d.queue = $1 AND d.parent_id = $4 AND d.state = 0)
            RETURNING j.key
        ), ev AS (
            INSERT INTO {s}.events (queue, event, payload)
            SELECT $1, 'waiting-children', json_build_array(json_build_object('id', $4::text))::text
            FROM m
        )
        SELECT count(*) FROM m"
    );
    let rows = c.query(t, WHAT, &sql, &[&queue, &key, &token, &id]).await?;
    Ok(Some(rows.first().is_some_and(|r| r.get::<_, i64>(0) > 0)))
}

/// Moves parents `keys` of `queue` out of `waiting-children`: waiting (or prioritized) at the
/// back of their priority, or delayed by their own `delay`.
async fn move_on(c: &Conn, t: &Target, queue: &str, keys: &[i64]) -> Result<()> {
    let s = t.schema();
    let id = id_expr("j.");
    let run_at = after_ms("j.delay");
    let n = keys.len() as i64;
    let sql = format!(
        "WITH o AS (
            UPDATE {s}.queues SET order_seq = order_seq + $3 WHERE name = $1
            RETURNING order_seq - $3 AS ord0
        ), m AS (
            UPDATE {s}.jobs j
            SET state = CASE WHEN j.delay > 0 THEN 2 WHEN j.priority > 0 THEN 1 ELSE 0 END,
                run_at = CASE WHEN j.delay > 0 THEN {run_at} END,
                ord = o.ord0 + u.i
            FROM o, unnest($2::int8[]) WITH ORDINALITY AS u(key, i)
            WHERE j.queue = $1 AND j.key = u.key AND j.state = 6
            RETURNING {id} AS id, j.state
        )
        INSERT INTO {s}.events (queue, event, payload)
        SELECT $1, CASE WHEN state = 2 THEN 'delayed' ELSE 'waiting' END,
               json_agg(json_build_object('id', id, 'prev', 'waiting-children'))::text
        FROM m GROUP BY state = 2"
    );
    c.query(t, WHAT, &sql, &[&queue, &keys, &n]).await?;
    Ok(())
}

/// Fails a parent in `waiting-children` for good with `reason`; answers its own parent's notice.
async fn fail_parent(
    c: &Conn,
    t: &Target,
    queue: &str,
    id: &str,
    key: i64,
    reason: &str,
) -> Result<Option<Notice>> {
    let s = t.schema();
    let idx = id_expr("");
    let sql = format!(
        "WITH m AS (
            DELETE FROM {s}.jobs WHERE queue = $1 AND key = $2 AND state = 6 RETURNING *
        ), f AS (
            INSERT INTO {s}.finished ({FINISHED_COLUMNS})
            SELECT queue, key, custom_id, name, data, opts, 5, priority, delay, timestamp,
                   processed_on, {NOW_MS}, attempts_made, attempts_started, stalled_counter,
                   progress, returnvalue, $3, stacktrace, logs, processed_by, history
            FROM m
        ), ev AS (
            INSERT INTO {s}.events (queue, event, payload)
            SELECT $1, 'failed', json_build_array(json_build_object(
                'id', {idx}, 'failedReason', $3::text, 'prev', 'waiting-children'))::text
            FROM m
        )
        SELECT opts FROM m"
    );
    let rows = c.query(t, WHAT, &sql, &[&queue, &key, &reason]).await?;
    let Some(r) = rows.first() else {
        return Ok(None);
    };
    let opts: Option<String> = r.get(0);
    Ok(notice_of(
        queue,
        id,
        opts.as_deref(),
        ChildEnd::Failed(reason.into(), OnChildFailure::Wait),
    ))
}

/// The dependencies of parent `id` of `queue` (`None`: it has none).
pub async fn dependencies(c: &Conn, t: &Target, queue: &str, id: &str) -> Result<Option<Deps>> {
    let s = t.schema();
    let sql = format!(
        "SELECT child_queue, child_id, state, value FROM {s}.deps
         WHERE queue = $1 AND parent_id = $2 ORDER BY seq"
    );
    let rows = c
        .query(t, "cannot read dependencies", &sql, &[&queue, &id])
        .await?;
    if rows.is_empty() {
        return Ok(None);
    }
    let mut d = Deps::default();
    for r in &rows {
        let child = ChildRef {
            queue: r.get::<_, &str>(0).into(),
            id: r.get::<_, &str>(1).into(),
        };
        let value: Box<str> = r.get::<_, Option<&str>>(3).unwrap_or("null").into();
        match r.get::<_, i16>(2) {
            0 => d.pending.push(child),
            1 => d.processed.push((child, value)),
            2 => d.failed.push((child, value)),
            _ => d.ignored.push((child, value)),
        }
    }
    Ok(Some(d))
}
