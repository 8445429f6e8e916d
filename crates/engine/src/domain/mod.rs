//! The domain: jobs, options, one queue's state machine, waiters, events and the shard. No I/O
//! and no clock: every time-dependent call takes `now`. What a durable queue changed is stated
//! as [`changes::Changes`]; how that is written is storage's business.

pub mod changes;
pub mod controls;
pub mod dedup;
pub mod dlq;
pub mod dlq_view;
pub mod event;
pub mod flow;
pub mod groups;
pub mod job;
pub mod job_scheduler;
pub mod job_store;
pub mod job_table;
pub mod lease;
pub mod limits;
pub mod listing;
pub mod metrics;
pub mod options;
mod options_raw;
#[cfg(test)]
mod options_tests;
pub mod queue;
pub mod queue_name;
pub mod ready;
pub mod scheduler;
pub mod shard;
pub mod waiters;

pub use queue::{MAX_STALLED_COUNT, STALLED_TOO_OFTEN};
