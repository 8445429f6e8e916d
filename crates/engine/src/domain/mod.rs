//! The domain: jobs, options, one queue's state machine, waiters, events and the shard. No I/O
//! and no clock: every time-dependent call takes `now`.

pub mod event;
pub mod evicted;
pub mod job;
pub mod job_store;
pub mod job_table;
pub mod options;
pub mod persist;
pub mod queue;
mod queue_ack;
mod queue_admin;
pub mod queue_name;
pub mod queue_read;
pub mod ready;
mod restore;
pub use restore::{row_json, row_logs, STALLED_REASON};
pub mod shard;
pub mod waiters;

#[cfg(test)]
mod queue_tests;
