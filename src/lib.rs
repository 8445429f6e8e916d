//! The napi-rs binding of ferroqueue: marshalling only.
//!
//! Every function is a free function taking a queue handle (`u32`) resolved once by
//! [`registry::open_queue`]; payloads cross as JSON text; engine errors become JS errors whose
//! message carries a stable code (see [`errors`]), which `lib/native.js` turns into
//! `TypeError`/`RangeError`/`QueueError` with `code`. Sync functions catch panics
//! (`catch_unwind`); napi-rs settles a panicking async call as a rejection.

// napi-derive compiles the JS registration of #[napi] functions out of test builds, so there
// they look unused.
#![cfg_attr(test, allow(dead_code))]

mod disk;
mod durability;
mod errors;
mod events;
mod jobs;
mod queue;
mod registry;
mod text;
mod worker;
