//! Reading: one job (by id, wherever it lives: `jobs` or `finished`), counts, pages by state
//! and a job's logs. Each is one or two statements; none changes anything.

use ferroqueue_engine::backend::Page;
use ferroqueue_engine::domain::job::{parse_auto_id, JobState};
use ferroqueue_engine::domain::listing::{page_bounds, StateFilter};
use ferroqueue_engine::wire::{self, push_record};
use ferroqueue_engine::Result;
use tokio_postgres::Row;

use super::Shared;
use crate::record::{finished_columns, hot_columns, job_of, state_number, LOGS_COLUMN};

/// The key parameters of an id: an automatic id's key, or a custom id to look up (neither for an
/// id with U+0000, which no job has: custom ids refuse it, and `text` could not be compared).
pub(super) fn id_params(id: &str) -> (Option<i64>, Option<&str>) {
    match parse_auto_id(id) {
        Some(n) => (Some(n as i64), None),
        None if id.as_bytes().contains(&0) => (None, None),
        None => (None, Some(id)),
    }
}

/// An id as a `text` parameter: empty for an id with U+0000 (see [`id_params`]: it matches no
/// job, and `text` could not carry it).
pub(super) fn id_text(id: &str) -> &str {
    if id.as_bytes().contains(&0) {
        ""
    } else {
        id
    }
}

/// `WITH k AS (…)`: the key of job `$2` (automatic) or `$3` (custom) of queue `$1`.
pub(super) fn key_cte(schema: &str) -> String {
    format!(
        "k AS (SELECT $2::int8 AS key WHERE $2::int8 IS NOT NULL
               UNION ALL
               SELECT key FROM {schema}.job_ids WHERE queue = $1 AND custom_id = $3::text)"
    )
}

/// The row of job `id` (the columns of `record.rs`, then its state), if it exists.
async fn find(s: &Shared, queue: &str, id: &str) -> Result<Option<Row>> {
    let sch = s.target().schema();
    let sql = format!(
        "WITH {k}
        SELECT {hot} FROM {sch}.jobs WHERE queue = $1 AND key = (SELECT key FROM k)
        UNION ALL
        SELECT {done} FROM {sch}.finished WHERE queue = $1 AND key = (SELECT key FROM k)",
        k = key_cte(sch),
        hot = hot_columns(""),
        done = finished_columns(""),
    );
    let (auto, custom) = id_params(id);
    let c = s.pool.get().await?;
    let mut rows = c
        .query(
            s.target(),
            "cannot read a job",
            &sql,
            &[&queue, &auto, &custom],
        )
        .await?;
    Ok(rows.pop())
}

/// A job's record.
pub(super) async fn record(s: &Shared, queue: &str, id: &str) -> Result<Option<String>> {
    Ok(find(s, queue, id)
        .await?
        .map(|r| wire::record(&*s.wire, &job_of(&r, 0))))
}

/// A job's state.
pub(super) async fn state(s: &Shared, queue: &str, id: &str) -> Result<Option<JobState>> {
    Ok(find(s, queue, id).await?.map(|r| job_of(&r, 0).state))
}

/// The table, order and count expression of a state's list.
fn list_of(state: JobState) -> Option<(&'static str, &'static str)> {
    Some(match state {
        JobState::Waiting | JobState::Prioritized => ("jobs", "priority, ord"),
        JobState::Delayed => ("jobs", "run_at, key"),
        JobState::Active => ("jobs", "processed_on, key"),
        JobState::Completed | JobState::Failed => ("finished", "seq"),
        JobState::WaitingChildren => ("jobs", "key"),
    })
}

/// Counts per state, in the order asked.
pub(super) async fn counts(s: &Shared, queue: &str, states: &[StateFilter]) -> Result<Vec<usize>> {
    let sch = s.target().schema();
    let sql = format!(
        "SELECT state, count(*) FROM {sch}.jobs WHERE queue = $1 GROUP BY state
        UNION ALL
        SELECT state, count(*) FROM {sch}.finished WHERE queue = $1 GROUP BY state"
    );
    let c = s.pool.get().await?;
    let rows = c
        .query(s.target(), "cannot count jobs", &sql, &[&queue])
        .await?;
    let of = |st: JobState| -> usize {
        rows.iter()
            .filter(|r| r.get::<_, i16>(0) == state_number(st))
            .map(|r| r.get::<_, i64>(1).max(0) as usize)
            .sum()
    };
    Ok(states
        .iter()
        .map(|f| match f {
            StateFilter::State(st) => of(*st),
            StateFilter::Paused => 0,
        })
        .collect())
}

/// Tries of a page whose counts and lists disagreed (a job moved between the two statements).
const PAGE_TRIES: usize = 5;

/// A page of the jobs in `states` (listed state after state) as a JSON array of records. The
/// counts and the lists are separate statements: when a job moved between them (the elected
/// process promoted it, a worker took it) the page is read again, so that it agrees with itself.
pub(super) async fn page(
    s: &Shared,
    queue: &str,
    states: &[StateFilter],
    page: Page,
) -> Result<String> {
    let mut tries = 0;
    loop {
        tries += 1;
        let (text, consistent) = page_once(s, queue, states, page).await?;
        if consistent || tries >= PAGE_TRIES {
            return Ok(text);
        }
    }
}

/// One read of a page; `true` when every list held as many jobs as its count said.
async fn page_once(
    s: &Shared,
    queue: &str,
    states: &[StateFilter],
    page: Page,
) -> Result<(String, bool)> {
    let counts = counts(s, queue, states).await?;
    let total: usize = counts.iter().sum();
    let mut out = String::from("[");
    let Some((from, to)) = page_bounds(total, page.start, page.end) else {
        out.push(']');
        return Ok((out, true));
    };
    let mut consistent = true;
    let sch = s.target().schema();
    let c = s.pool.get().await?;
    // The states in the order listed; each state's own order flips with `asc`.
    let mut base = 0usize;
    for (f, n) in states.iter().zip(counts) {
        let (lo, hi) = (base, base + n);
        base = hi;
        let StateFilter::State(st) = f else { continue };
        if n == 0 || hi <= from || lo > to {
            continue;
        }
        let Some((table, order)) = list_of(*st) else {
            continue;
        };
        let skip = from.saturating_sub(lo);
        let take = (to.min(hi - 1) + 1 - lo) - skip;
        let dir = if page.asc { "ASC" } else { "DESC" };
        let order = order
            .split(", ")
            .map(|c| format!("{c} {dir}"))
            .collect::<Vec<_>>()
            .join(", ");
        let cols = if table == "jobs" {
            hot_columns("")
        } else {
            finished_columns("")
        };
        let sql = if matches!(st, JobState::Waiting | JobState::Prioritized) {
            // Ungrouped jobs in the order they are taken, then grouped ones by priority and
            // age, as the embedded engine lists them; each part by its own index (`jobs_ready`,
            // `jobs_group_ready`: the grouped part is sorted).
            let part = |which: &str| {
                format!(
                    "(SELECT {cols}, {which} AS part, ord AS part_ord FROM {sch}.jobs
                      WHERE queue = $1 AND state = $2 AND group_id {op} ''
                      ORDER BY {order} LIMIT $3::int8 + $4::int8)",
                    op = if which == "0" { "=" } else { "<>" }
                )
            };
            format!(
                "SELECT * FROM ({} UNION ALL {}) r
                 ORDER BY part {dir}, priority {dir}, part_ord {dir} OFFSET $3 LIMIT $4",
                part("0"),
                part("1")
            )
        } else {
            format!(
                "SELECT {cols} FROM {sch}.{table} WHERE queue = $1 AND state = $2
                ORDER BY {order} OFFSET $3 LIMIT $4"
            )
        };
        let rows = c
            .query(
                s.target(),
                "cannot list jobs",
                &sql,
                &[&queue, &state_number(*st), &(skip as i64), &(take as i64)],
            )
            .await?;
        consistent &= rows.len() == take;
        for r in &rows {
            push_record(&*s.wire, &job_of(r, 0), false, &mut out);
        }
    }
    out.push(']');
    Ok((out, consistent))
}

/// Whether the queue is paused.
pub(super) async fn is_paused(s: &Shared, queue: &str) -> Result<bool> {
    let sch = s.target().schema();
    let sql = format!("SELECT paused FROM {sch}.queues WHERE name = $1");
    let c = s.pool.get().await?;
    let rows = c
        .query(s.target(), "cannot read the queue", &sql, &[&queue])
        .await?;
    Ok(rows.first().is_some_and(|r| r.get(0)))
}

/// A page of a job's log rows and their total (none for an unknown job).
pub(super) async fn logs(
    s: &Shared,
    queue: &str,
    id: &str,
    page: Page,
) -> Result<(Vec<String>, usize)> {
    let Some(row) = find(s, queue, id).await? else {
        return Ok((Vec::new(), 0));
    };
    let text: Option<String> = row.get(LOGS_COLUMN);
    let mut rows: Vec<String> = text
        .and_then(|t| serde_json::from_str::<Vec<String>>(&t).ok())
        .unwrap_or_default()
        .into_iter()
        .map(crate::text::load)
        .collect();
    let total = rows.len();
    if !page.asc {
        rows.reverse();
    }
    let page = match page_bounds(total, page.start, page.end) {
        Some((a, b)) => rows.drain(a..=b).collect(),
        None => Vec::new(),
    };
    Ok((page, total))
}

/// A group's ready jobs `start..=end` (a negative `end` counts from the last) in the order the
/// group hands them out, as a JSON array of records.
pub(super) async fn group_page(
    s: &Shared,
    queue: &str,
    group: &str,
    start: usize,
    end: i64,
) -> Result<String> {
    let c = s.pool.get().await?;
    let t = s.target();
    let total = if end < 0 {
        crate::groups::info(&c, t, queue, group).await?.waiting as i64
    } else {
        0
    };
    let last = if end < 0 { total + end } else { end };
    let mut out = String::from("[");
    if last >= start as i64 {
        let (offset, limit) = (start as i64, last - start as i64 + 1);
        let rows = c
            .query(
                t,
                "cannot list a group's jobs",
                &crate::groups::jobs_sql(t.schema()),
                &[&queue, &group, &offset, &limit],
            )
            .await?;
        for r in &rows {
            push_record(&*s.wire, &job_of(r, 0), false, &mut out);
        }
    }
    out.push(']');
    Ok(out)
}

/// The names of every queue in the schema, sorted.
pub(super) async fn queue_names(s: &Shared) -> Result<Vec<String>> {
    let sql = format!(
        "SELECT name FROM {}.queues ORDER BY name",
        s.target().schema()
    );
    let c = s.pool.get().await?;
    let rows = c
        .query(s.target(), "cannot list the queues", &sql, &[])
        .await?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}
