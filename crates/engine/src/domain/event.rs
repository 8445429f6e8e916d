//! Events a queue emits on its transitions (BullMQ's QueueEvents names and payloads). How they
//! are written for JS is the binding's wire (`crate::wire`).

use std::sync::Arc;

/// What happened.
#[derive(Debug, Clone, PartialEq)]
pub enum EventKind {
    Added {
        job_id: String,
        name: Arc<str>,
    },
    Waiting {
        job_id: String,
        prev: Option<&'static str>,
    },
    /// `delay` is the timestamp (ms) at which the job becomes ready, as in BullMQ.
    Delayed {
        job_id: String,
        delay: u64,
    },
    Active {
        job_id: String,
        prev: &'static str,
    },
    Progress {
        job_id: String,
        data: Box<str>,
    },
    Completed {
        job_id: String,
        returnvalue: Box<str>,
    },
    Failed {
        job_id: String,
        failed_reason: Box<str>,
    },
    RetriesExhausted {
        job_id: String,
        attempts_made: u32,
    },
    Removed {
        job_id: String,
        prev: &'static str,
    },
    Duplicated {
        job_id: String,
    },
    /// An add found the key of its deduplication id held by `job_id` (or, replacing a delayed
    /// holder, `job_id` is the new job); `deduplicated_job_id` is the job not kept.
    Deduplicated {
        job_id: String,
        deduplication_id: String,
        deduplicated_job_id: String,
    },
    /// A flow parent was added waiting for its children.
    WaitingChildren {
        job_id: String,
    },
    /// An active job's lease holder was lost (a Worker gone, a process dead): it went back to
    /// waiting, or failed for stalling too often.
    Stalled {
        job_id: String,
    },
    Cleaned {
        count: usize,
    },
    /// The leases of these jobs of lease holder `holder` (a Worker) were renewed (PostgreSQL;
    /// for that Worker only, not QueueEvents).
    LocksRenewed {
        holder: u32,
        job_ids: Vec<String>,
    },
    /// The leases of these jobs of lease holder `holder` could not be renewed: they expired and
    /// were taken back (PostgreSQL; for that Worker only).
    LockRenewalFailed {
        holder: u32,
        job_ids: Vec<String>,
    },
    Drained,
    Paused,
    Resumed,
}

/// An event of one queue.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub queue: Arc<str>,
    pub kind: EventKind,
}

impl EventKind {
    /// BullMQ's event name.
    pub fn name(&self) -> &'static str {
        match self {
            EventKind::Added { .. } => "added",
            EventKind::Waiting { .. } => "waiting",
            EventKind::Delayed { .. } => "delayed",
            EventKind::Active { .. } => "active",
            EventKind::Progress { .. } => "progress",
            EventKind::Completed { .. } => "completed",
            EventKind::Failed { .. } => "failed",
            EventKind::RetriesExhausted { .. } => "retries-exhausted",
            EventKind::Removed { .. } => "removed",
            EventKind::Duplicated { .. } => "duplicated",
            EventKind::Deduplicated { .. } => "deduplicated",
            EventKind::WaitingChildren { .. } => "waiting-children",
            EventKind::Stalled { .. } => "stalled",
            EventKind::Cleaned { .. } => "cleaned",
            EventKind::LocksRenewed { .. } => "locksRenewed",
            EventKind::LockRenewalFailed { .. } => "lockRenewalFailed",
            EventKind::Drained => "drained",
            EventKind::Paused => "paused",
            EventKind::Resumed => "resumed",
        }
    }
}
