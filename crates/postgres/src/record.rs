//! A job's row as the engine's [`Job`], so that the binding's wire writes PostgreSQL's jobs
//! exactly as it writes the embedded engine's. Both tables are read with the same column list
//! (`jobs` has no `finished_on`; `finished` has no token), in the order [`job_of`] reads them.

use std::sync::Arc;

use ferroqueue_engine::domain::job::{Job, JobState};
use ferroqueue_engine::storage::restore;
use ferroqueue_engine::storage::rows::{ExtraCols, JobRow, StateCols};
use tokio_postgres::Row;

use crate::text;

/// The columns [`job_of`] reads, for a `jobs` row (prefix `p`: a table alias with its dot, or
/// empty).
pub(crate) fn hot_columns(p: &str) -> String {
    columns(p, "0::int8")
}

/// The columns [`job_of`] reads, for a `finished` row.
pub(crate) fn finished_columns(p: &str) -> String {
    columns(p, &format!("{p}finished_on"))
}

fn columns(p: &str, finished_on: &str) -> String {
    format!(
        "{p}key, {p}custom_id, {p}name, {p}data, {p}opts, {p}state, {p}priority, {p}delay, \
         {p}timestamp, {p}processed_on, {finished_on}, {p}attempts_made, {p}attempts_started, \
         {p}stalled_counter, {p}processed_by, {p}progress, {p}returnvalue, {p}failed_reason, \
         {p}stacktrace, {p}logs, {p}history"
    )
}

/// How many columns [`job_of`] reads (`history` last).
pub(crate) const COLUMNS: usize = 21;

/// Where `logs` is among them.
pub(crate) const LOGS_COLUMN: usize = 19;

/// A state as the `state` column holds it (the SQLite file's numbers).
pub fn state_of(n: i16) -> JobState {
    match n {
        0 => JobState::Waiting,
        1 => JobState::Prioritized,
        2 => JobState::Delayed,
        3 => JobState::Active,
        4 => JobState::Completed,
        6 => JobState::WaitingChildren,
        _ => JobState::Failed,
    }
}

/// The `state` column's number of a state (waiting-children has none yet: never stored).
pub fn state_number(s: JobState) -> i16 {
    match s {
        JobState::Waiting => 0,
        JobState::Prioritized => 1,
        JobState::Delayed => 2,
        JobState::Active => 3,
        JobState::Completed => 4,
        JobState::Failed => 5,
        JobState::WaitingChildren => 6,
    }
}

/// A non-negative `bigint` as the engine's unsigned value (a NULL is 0).
fn unsigned(v: Option<i64>) -> u64 {
    v.map_or(0, |n| n.max(0) as u64)
}

/// The job in `row`, read from column `at` on (see [`hot_columns`]).
pub fn job_of(row: &Row, at: usize) -> Job {
    let key: i64 = row.get(at);
    let text = |i: usize| row.get::<_, Option<String>>(at + i);
    let boxed = |i: usize| text(i).map(String::into_boxed_str);
    let name = text::load(row.get(at + 2));
    let data: String = row.get(at + 3);
    restore::job_of(JobRow {
        // Custom-id keys have the top bit set: negative as a signed bigint.
        key: key as u64,
        custom_id: boxed(1),
        name: Arc::from(name),
        data: data.into(),
        opts: boxed(4),
        timestamp: unsigned(row.get(at + 8)),
        state: StateCols {
            state: state_of(row.get(at + 5)),
            priority: row.get::<_, i32>(at + 6).max(0) as u32,
            delay: unsigned(row.get(at + 7)),
            run_at: 0,
            ord: 0,
            seq: 0,
            processed_on: unsigned(row.get(at + 9)),
            finished_on: unsigned(row.get(at + 10)),
            attempts_made: row.get::<_, i32>(at + 11).max(0) as u32,
            attempts_started: row.get::<_, i32>(at + 12).max(0) as u32,
        },
        extra: ExtraCols {
            progress: boxed(15),
            returnvalue: boxed(16),
            failed_reason: text(17).map(|r| text::load(r).into_boxed_str()),
            stacktrace: text(18).map(text::load_json_array),
            logs: text(LOGS_COLUMN).map(text::load_json_array),
            // A parent's dependencies are read from the deps table when asked (`flows.rs`).
            deps: None,
            stalled_counter: row.get::<_, i32>(at + 13).max(0) as u32,
            processed_by: text(14).map(|n| text::load(n).into_boxed_str()),
            history: text(20).map(text::load_history),
        },
    })
}

/// The SQL expression of a job's id string (`p`: the table alias with its dot).
pub(crate) fn id_expr(p: &str) -> String {
    format!("COALESCE({p}custom_id, {p}key::text)")
}
