//! What a durable queue changed, as the domain states it: which jobs changed and which of their
//! parts ([`NEW`], [`STATE`], [`EXTRA`], [`DATA`]; recorded by the queue's
//! [`super::job_store::JobStore`] as the change is made), whether the queue's own settings
//! changed, whether it was wiped, and the operations on jobs that only the file holds
//! ([`EvictedOp`]). Storage turns these into rows and statements (`storage/rows.rs`); the domain
//! knows nothing of either. On an in-memory engine nothing is recorded.

use super::job::{Job, JobKey, JobState};

/// The job is new.
pub const NEW: u8 = 1;
/// Its state changed: state, priority, delay, run-at, ready order, order within its state,
/// timestamps, attempts.
pub const STATE: u8 = 2;
/// Its progress, return value, failure, stack trace or logs changed.
pub const EXTRA: u8 = 4;
/// Its payload changed.
pub const DATA: u8 = 8;

/// Receives the ids deleted by an [`EvictedOp::Drop`] or [`EvictedOp::Delete`].
pub type DeletedReply = tokio::sync::oneshot::Sender<Vec<String>>;

/// Receives the job an [`EvictedOp::Revive`] claimed, `None` when the file no longer had it.
pub type RevivedReply = tokio::sync::oneshot::Sender<Option<Job>>;

/// An operation on finished jobs that only the file holds (evicted from memory). Each is
/// idempotent; those with a reply are answered once committed.
#[derive(Debug)]
pub enum EvictedOp {
    /// Keep only the newest `keep` evicted jobs of `state` (those with `seq < below_seq`).
    Trim {
        state: JobState,
        keep: u64,
        below_seq: u64,
    },
    /// Delete evicted jobs of `state` (`seq < below_seq`) finished before `finished_before`,
    /// oldest first, at most `limit` (0: all); reply with their ids.
    Drop {
        state: JobState,
        finished_before: u64,
        below_seq: u64,
        limit: u64,
        reply: Option<DeletedReply>,
    },
    /// Delete one evicted job; reply with its id if it existed.
    Delete {
        key: JobKey,
        reply: Option<DeletedReply>,
    },
    /// Claim an evicted job for memory: give it the order `seq` (newer than every evicted job,
    /// so no deletion of evicted jobs queued after this one touches it) and reply with the job,
    /// once committed.
    Revive {
        key: JobKey,
        seq: u64,
        reply: Option<RevivedReply>,
    },
}

/// Everything a queue changed since the last [`super::queue::QueueState::take_changes`], in
/// the order it was changed.
#[derive(Debug, Default)]
pub struct Changes {
    /// Everything of the queue was removed (obliterate), before the changes below.
    pub wiped: bool,
    /// The queue's own settings changed (the paused flag).
    pub settings: bool,
    /// Operations on evicted jobs, in order, before the job changes below.
    pub evicted: Vec<EvictedOp>,
    /// `(key, parts)` of the jobs changed, in the order of their changes; parts 0: removed.
    pub jobs: Vec<(JobKey, u8)>,
}

impl Changes {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        !self.wiped && !self.settings && self.evicted.is_empty() && self.jobs.is_empty()
    }
}
