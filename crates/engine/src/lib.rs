//! ferroqueue's engine: sharded in-memory job queues with BullMQ semantics, no napi.
//!
//! Layers, innermost first (each uses only the ones above it):
//! - [`structures`]: 4-ary heaps with lazy deletion, the delayed-job heap, FNV-1a.
//! - [`domain`]: the job model, its options, one queue's state machine, long-poll waiters, events
//!   and the shard that owns a set of queues. No I/O and no clock of its own: time is passed in;
//!   changes are recorded as storage operations, not written.
//! - [`storage`]: optional SQLite persistence (one file per engine, group commit, recovery) of
//!   the domain's recorded changes.
//! - [`application`]: the [`Engine`]: shards behind locks, async pulls, the delayed-job timer,
//!   the event hub that fans transitions out to listeners, and the storage of a durable engine.
//! - [`backend`]: the [`Backend`] trait, every operation the binding needs; the engine is its
//!   first implementation (`application/embedded.rs`).
//! - [`wire`]: the [`Wire`] a backend is opened with, which writes job records and events as
//!   the caller's JSON (the binding's); the engine only frames the arrays.
//!
//! Job payloads, return values and progress stay opaque JSON text from end to end; the engine never
//! parses them.

pub mod application;
pub mod backend;
pub mod clock;
pub mod domain;
pub mod error;
pub mod storage;
pub mod structures;
pub mod sync;
pub mod wire;

#[cfg(all(test, loom))]
mod loom_models;

pub use application::engine::{Ack, Engine, EngineConfig};
pub use application::engine_flows::FlowNode;
pub use backend::{Backend, JobChange, Page, Pending, QueueRef, Reply};
pub use clock::{Clock, MockClock, SystemClock};
pub use domain::event::{Event, EventKind};
pub use domain::job::{JobId, JobState};
pub use domain::options::{Backoff, JobOptions, KeepJobs};
pub use domain::queue::{AckResult, Added, NewJob, Outcome};
pub use error::{EngineError, ErrorKind, Result};
pub use wire::Wire;
