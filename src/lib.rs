//! The napi-rs binding of ferroqueue: marshalling only.
//!
//! Every function is a free function taking a queue handle (`u32`) resolved once by
//! [`registry::open_queue`], and talks to the backend behind it only through the engine crate's
//! `Backend` trait; answers at hand return as values, pending ones as promises (`reply.rs`);
//! payloads cross as JSON text, job records and events in the JSON of [`wire`]; engine errors are built here as the JS
//! `TypeError` / `RangeError` / `QueueError` they stand for, with `code` (see [`errors`]).
//! Functions catch panics (`catch_unwind`), which reach JS as plain errors that the JS layer
//! reports as `ERR_INTERNAL`.

// napi-derive compiles the JS registration of #[napi] functions out of test builds, so there
// they look unused.
#![cfg_attr(test, allow(dead_code))]

mod dlq;
mod durability;
mod errors;
mod events;
mod flows;
mod groups;
mod jobs;
mod lease;
mod limits;
mod metrics;
mod queue;
mod registry;
mod reply;
mod schedulers;
mod text;
mod wire;
mod worker;
