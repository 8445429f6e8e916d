//! How a queue's changes are written: the file's row types and the [`StorageOp`]s the writer
//! executes, and [`snapshot`], which turns the [`Changes`] a queue recorded into them. It runs at
//! the end of each engine call, under the shard lock, so every row is the job as that call left
//! it. Pure data, no I/O.

use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::domain::changes::{Changes, EvictedOp, DATA, EXTRA, NEW, STATE};
use crate::domain::dedup::DedupKey;
use crate::domain::dlq::{history_json, DlqConfig};
use crate::domain::groups::GroupSettings;
use crate::domain::job::{Job, JobKey, JobState};
use crate::domain::limits::LimitSettings;
use crate::domain::queue::QueueState;

/// A job's state columns.
#[derive(Debug, Clone, PartialEq)]
pub struct StateCols {
    pub state: JobState,
    pub priority: u32,
    pub delay: u64,
    /// Run-at of a delayed job, 0 otherwise.
    pub run_at: u64,
    /// Position key of a ready job in its priority (negative for lifo), 0 otherwise.
    pub ord: i64,
    /// Order within its state (active/completed/failed).
    pub seq: u64,
    pub processed_on: u64,
    pub finished_on: u64,
    pub attempts_made: u32,
    pub attempts_started: u32,
}

/// A job's rarely changing columns; texts are JSON.
#[derive(Debug, Clone, PartialEq)]
pub struct ExtraCols {
    pub progress: Option<Box<str>>,
    pub returnvalue: Option<Box<str>>,
    pub failed_reason: Option<Box<str>>,
    /// JSON array, `None` when empty.
    pub stacktrace: Option<String>,
    /// JSON array, `None` when empty.
    pub logs: Option<String>,
    /// A flow parent's dependencies as JSON (`domain/flow.rs`), `None` for other jobs.
    pub deps: Option<String>,
    pub stalled_counter: u32,
    /// The name of the Worker that last took the job (`processedBy`).
    pub processed_by: Option<Box<str>>,
    /// The failed attempts as JSON (`domain/dlq.rs`), `None` when there are none.
    pub history: Option<String>,
}

/// A whole job row.
#[derive(Debug, Clone, PartialEq)]
pub struct JobRow {
    pub key: JobKey,
    pub custom_id: Option<Box<str>>,
    pub name: Arc<str>,
    pub data: Box<str>,
    pub opts: Option<Box<str>>,
    pub timestamp: u64,
    pub state: StateCols,
    pub extra: ExtraCols,
}

/// The queue's own row.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueRow {
    pub last_auto_id: u64,
    pub custom_seq: u64,
    pub paused: bool,
    pub limits: LimitSettings,
    /// The DLQ's settings (stored as JSON).
    pub dlq: DlqConfig,
}

/// One write for the storage writer.
#[derive(Debug)]
pub enum StorageOp {
    Insert(Arc<str>, Box<JobRow>),
    State(Arc<str>, JobKey, StateCols),
    Extra(Arc<str>, JobKey, Box<ExtraCols>),
    Data(Arc<str>, JobKey, Box<str>),
    Delete(Arc<str>, JobKey),
    Queue(Arc<str>, QueueRow),
    /// Delete every job of the queue (obliterate).
    Wipe(Arc<str>),
    /// An operation on jobs only the file holds.
    Evicted(Arc<str>, EvictedOp),
    /// Sets (or with `None` drops) the queue's deduplication key of an id.
    Dedup(Arc<str>, Box<str>, Option<DedupKey>),
    /// Sets a group's own settings (the defaults: drops its row).
    Group(Arc<str>, Arc<str>, GroupSettings),
    /// Sets (or with `None` drops) a job scheduler, as its JSON.
    Scheduler(Arc<str>, Box<str>, Option<String>),
}

impl StorageOp {
    /// The queue an op belongs to.
    pub fn queue(&self) -> &Arc<str> {
        match self {
            StorageOp::Insert(q, _)
            | StorageOp::State(q, ..)
            | StorageOp::Extra(q, ..)
            | StorageOp::Data(q, ..)
            | StorageOp::Delete(q, _)
            | StorageOp::Queue(q, _)
            | StorageOp::Wipe(q)
            | StorageOp::Evicted(q, _)
            | StorageOp::Dedup(q, ..)
            | StorageOp::Group(q, ..)
            | StorageOp::Scheduler(q, ..) => q,
        }
    }
}

/// A JSON array of texts, `None` when empty.
fn json_array(items: &[Box<str>]) -> Option<String> {
    if items.is_empty() {
        return None;
    }
    serde_json::to_string(items).ok()
}

fn state_cols(q: &QueueState, job: &Job) -> StateCols {
    StateCols {
        state: job.state,
        priority: job.priority,
        delay: job.delay,
        run_at: q.run_at(job.key).unwrap_or(0),
        ord: q.ready_order(job.key).unwrap_or(0),
        seq: job.state_seq,
        processed_on: job.processed_on,
        finished_on: job.finished_on,
        attempts_made: job.attempts_made,
        attempts_started: job.attempts_started,
    }
}

fn extra_cols(job: &Job) -> ExtraCols {
    match job.extra.as_deref() {
        None => ExtraCols {
            progress: None,
            returnvalue: None,
            failed_reason: None,
            stacktrace: None,
            logs: None,
            deps: None,
            stalled_counter: 0,
            processed_by: None,
            history: None,
        },
        Some(e) => ExtraCols {
            progress: e.progress.clone(),
            returnvalue: e.returnvalue.clone(),
            failed_reason: e.failed_reason.clone(),
            stacktrace: json_array(&e.stacktrace),
            logs: json_array(&e.logs),
            deps: e.deps.as_ref().map(|d| d.to_json()),
            stalled_counter: e.stalled_counter,
            processed_by: e.processed_by.as_deref().map(Into::into),
            history: (!e.history.is_empty()).then(|| history_json(&e.history)),
        },
    }
}

/// The full row of a job of `q`.
pub fn job_row(q: &QueueState, job: &Job) -> JobRow {
    JobRow {
        key: job.key,
        custom_id: job.custom_id().map(Into::into),
        name: job.name.clone(),
        data: job.data.clone(),
        opts: job.opts_json().map(Into::into),
        timestamp: job.timestamp,
        state: state_cols(q, job),
        extra: extra_cols(job),
    }
}

/// Turns everything `q` changed since the last call into storage operations, appended to `out`
/// in order: the wipe, the operations on evicted jobs, one op per changed part of each job (a
/// new job: its whole row; a removed one: its deletion), then the queue's row if needed.
pub fn snapshot(q: &mut QueueState, out: &mut Vec<StorageOp>) {
    if !q.persists() {
        return;
    }
    let dedup = q.take_dedup_ops();
    let groups = q.take_group_changes();
    let schedulers = q.take_scheduler_ops();
    let changes = q.take_changes();
    push_changes(q, changes, out);
    let name = q.name();
    out.extend(
        dedup
            .into_iter()
            .map(|(id, k)| StorageOp::Dedup(name.clone(), id, k)),
    );
    out.extend(
        groups
            .into_iter()
            .map(|(id, s)| StorageOp::Group(name.clone(), id, s)),
    );
    out.extend(
        schedulers
            .into_iter()
            .map(|(id, body)| StorageOp::Scheduler(name.clone(), id, body)),
    );
}

/// The job and queue changes as ops.
fn push_changes(q: &QueueState, changes: Changes, out: &mut Vec<StorageOp>) {
    if changes.is_empty() {
        return;
    }
    let Changes {
        wiped,
        settings,
        evicted,
        jobs,
    } = changes;
    let name = q.name().clone();
    if wiped {
        out.push(StorageOp::Wipe(name.clone()));
    }
    // Any deletion also writes the queue's row: its id sequences must outlive the rows whose
    // keys recovery would otherwise take them from (see `recovery.rs`).
    let mut queue_row = settings || wiped || !evicted.is_empty();
    out.extend(
        evicted
            .into_iter()
            .map(|op| StorageOp::Evicted(name.clone(), op)),
    );
    queue_row |= push_job_ops(q, &name, jobs, out);
    if queue_row {
        let (last_auto_id, custom_seq) = q.id_sequences();
        out.push(StorageOp::Queue(
            name,
            QueueRow {
                last_auto_id,
                custom_seq,
                paused: q.is_paused(),
                limits: q.limit_settings(),
                dlq: q.dlq_config(),
            },
        ));
    }
}

/// The changed jobs as ops; returns whether any was a deletion.
fn push_job_ops(
    q: &QueueState,
    name: &Arc<str>,
    changed: Vec<(JobKey, u8)>,
    out: &mut Vec<StorageOp>,
) -> bool {
    let mut deleted = false;
    // Merge parts per job, keeping the order of the first change.
    let mut order: Vec<JobKey> = Vec::with_capacity(changed.len());
    let mut parts: FxHashMap<JobKey, u8> = FxHashMap::default();
    for (k, p) in changed {
        let e = parts.entry(k).or_insert_with(|| {
            order.push(k);
            0
        });
        *e |= p;
    }
    for k in order {
        let p = parts.get(&k).copied().unwrap_or(0);
        match q.job(k) {
            None => {
                if p & NEW == 0 {
                    out.push(StorageOp::Delete(name.clone(), k));
                    deleted = true;
                }
            }
            Some(job) if p & NEW != 0 => {
                out.push(StorageOp::Insert(name.clone(), Box::new(job_row(q, job))));
            }
            Some(job) => {
                if p & STATE != 0 {
                    out.push(StorageOp::State(name.clone(), k, state_cols(q, job)));
                }
                if p & EXTRA != 0 {
                    out.push(StorageOp::Extra(name.clone(), k, Box::new(extra_cols(job))));
                }
                if p & DATA != 0 {
                    out.push(StorageOp::Data(name.clone(), k, job.data.clone()));
                }
            }
        }
    }
    deleted
}
