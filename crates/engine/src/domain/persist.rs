//! What a durable queue must write. Job changes are recorded by the queue's
//! [`super::job_store::JobStore`] as they are made (no change without naming its columns); the
//! queue's own row (the paused flag) by [`QueueState::set_paused`]; operations on rows only the
//! file holds are queued as they are. At the end of each engine call the recorded jobs are
//! snapshotted into [`StorageOp`]s, in order, for the storage writer. Pure data, no I/O. On an
//! in-memory engine nothing is recorded.

use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::job::{push_json_str, Job, JobKey, JobState};
use super::queue::QueueState;

/// The job row is new: insert every column.
pub const NEW: u8 = 1;
/// State columns changed (state, priority, delay, run-at, order, timestamps, attempts).
pub const STATE: u8 = 2;
/// Progress, return value, failure, stack trace or logs changed.
pub const EXTRA: u8 = 4;
/// The payload changed.
pub const DATA: u8 = 8;

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
}

/// Receives the ids deleted by a [`StorageOp::DropEvicted`] or [`StorageOp::DeleteEvicted`].
pub type DeletedReply = tokio::sync::oneshot::Sender<Vec<String>>;

/// Receives the row a [`StorageOp::Revive`] claimed, `None` when the file no longer had it.
pub type RevivedReply = tokio::sync::oneshot::Sender<Option<JobRow>>;

/// One write for the storage layer.
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
    /// Keep only the newest `keep` evicted rows of `state` (those with `seq < below_seq`).
    TrimEvicted {
        queue: Arc<str>,
        state: JobState,
        keep: u64,
        below_seq: u64,
    },
    /// Delete evicted rows of `state` (`seq < below_seq`) finished before `finished_before`,
    /// oldest first, at most `limit` (0: all); reply with their ids.
    DropEvicted {
        queue: Arc<str>,
        state: JobState,
        finished_before: u64,
        below_seq: u64,
        limit: u64,
        reply: Option<DeletedReply>,
    },
    /// Delete one evicted (finished, not in memory) job; reply with its id if it existed.
    DeleteEvicted {
        queue: Arc<str>,
        key: JobKey,
        reply: Option<DeletedReply>,
    },
    /// Claim an evicted job for memory: give its row the order `seq` (newer than every evicted
    /// row, so no deletion of evicted rows queued after this one touches it) and reply with the
    /// row, once committed.
    Revive {
        queue: Arc<str>,
        key: JobKey,
        seq: u64,
        reply: Option<RevivedReply>,
    },
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
            | StorageOp::TrimEvicted { queue: q, .. }
            | StorageOp::DropEvicted { queue: q, .. }
            | StorageOp::DeleteEvicted { queue: q, .. }
            | StorageOp::Revive { queue: q, .. } => q,
        }
    }
}

/// What changed in a queue besides its jobs (those are recorded by its
/// [`super::job_store::JobStore`]).
#[derive(Debug, Default)]
pub struct Dirty {
    /// Operations on evicted rows, in order.
    pub disk: Vec<StorageOp>,
    pub meta: bool,
    pub wipe: bool,
}

fn json_array(items: &[Box<str>]) -> Option<String> {
    if items.is_empty() {
        return None;
    }
    let mut s = String::from("[");
    for (i, it) in items.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        push_json_str(&mut s, it);
    }
    s.push(']');
    Some(s)
}

impl QueueState {
    /// Pauses or resumes the queue: its row is written.
    pub(super) fn set_paused(&mut self, paused: bool) {
        self.paused = paused;
        if self.jobs.persists() {
            self.dirty.meta = true;
        }
    }

    /// Whether this queue persists its changes.
    pub fn persists(&self) -> bool {
        self.jobs.persists()
    }

    /// Turns persistence on (durable engines) or off.
    pub fn set_persist(&mut self, on: bool) {
        self.jobs.set_persist(on);
    }

    fn state_cols(&self, job: &Job) -> StateCols {
        StateCols {
            state: job.state,
            priority: job.priority,
            delay: job.delay,
            run_at: self.delayed.get(&job.key).unwrap_or(0),
            ord: self.ready.get(&self.jobs, job.key).map_or(0, |(_, o)| o),
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
            },
            Some(e) => ExtraCols {
                progress: e.progress.clone(),
                returnvalue: e.returnvalue.clone(),
                failed_reason: e.failed_reason.clone(),
                stacktrace: json_array(&e.stacktrace),
                logs: json_array(&e.logs),
            },
        }
    }

    /// The full row of a job.
    pub fn job_row(&self, job: &Job) -> JobRow {
        JobRow {
            key: job.key,
            custom_id: job.custom_id().map(Into::into),
            name: job.name.clone(),
            data: job.data.clone(),
            opts: job.opts_json().map(Into::into),
            timestamp: job.timestamp,
            state: self.state_cols(job),
            extra: Self::extra_cols(job),
        }
    }

    /// Snapshots everything touched since the last call into storage operations, in order.
    pub fn take_storage_ops(&mut self, out: &mut Vec<StorageOp>) {
        if !self.jobs.persists() {
            return;
        }
        let q = self.name.clone();
        // Any deletion also writes the queue's row: its id sequences must outlive the rows
        // whose keys recovery would otherwise take them from (see `recovery.rs`).
        let mut meta = std::mem::take(&mut self.dirty.meta);
        if std::mem::take(&mut self.dirty.wipe) {
            out.push(StorageOp::Wipe(q.clone()));
            meta = true;
        }
        meta |= !self.dirty.disk.is_empty();
        out.append(&mut self.dirty.disk);
        let touched = self.jobs.take_touched();
        meta |= self.push_job_ops(&q, touched, out);
        if meta {
            out.push(StorageOp::Queue(
                q,
                QueueRow {
                    last_auto_id: self.last_auto_id,
                    custom_seq: self.custom_seq,
                    paused: self.paused,
                },
            ));
        }
    }

    /// Snapshots the touched jobs into ops; returns whether any was a deletion.
    fn push_job_ops(
        &self,
        q: &Arc<str>,
        touched: Vec<(JobKey, u8)>,
        out: &mut Vec<StorageOp>,
    ) -> bool {
        let mut deleted = false;
        if touched.is_empty() {
            return false;
        }
        // Merge flags per job, keeping the order of first touch.
        let mut order: Vec<JobKey> = Vec::with_capacity(touched.len());
        let mut flags: FxHashMap<JobKey, u8> = FxHashMap::default();
        for (k, f) in touched {
            let e = flags.entry(k).or_insert_with(|| {
                order.push(k);
                0
            });
            *e |= f;
        }
        for k in order {
            let f = flags.get(&k).copied().unwrap_or(0);
            match self.jobs.get(&k) {
                None => {
                    if f & NEW == 0 {
                        out.push(StorageOp::Delete(q.clone(), k));
                        deleted = true;
                    }
                }
                Some(job) if f & NEW != 0 => {
                    out.push(StorageOp::Insert(q.clone(), Box::new(self.job_row(job))));
                }
                Some(job) => {
                    if f & STATE != 0 {
                        out.push(StorageOp::State(q.clone(), k, self.state_cols(job)));
                    }
                    if f & EXTRA != 0 {
                        out.push(StorageOp::Extra(
                            q.clone(),
                            k,
                            Box::new(Self::extra_cols(job)),
                        ));
                    }
                    if f & DATA != 0 {
                        out.push(StorageOp::Data(q.clone(), k, job.data.clone()));
                    }
                }
            }
        }
        deleted
    }
}
