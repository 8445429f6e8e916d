//! Commit waits of durable engines: JS reads the sequence number of its latest change, and is
//! called back (once per batch of commits, by a weak threadsafe function) to compare it with the
//! committed one. No async call per change.

use napi::bindgen_prelude::Function;
use napi::Env;
use napi_derive::napi;

use crate::errors::run;
use crate::registry::{engine, with_queue};

/// Sequence number of the engine's latest change (0 in memory).
#[napi(catch_unwind)]
pub fn submitted_seq(env: &Env, id: u32) -> napi::Result<f64> {
    run(env, || Ok(engine(id)?.submitted() as f64))
}

/// Committed sequence number; also re-arms the commit callback.
#[napi(catch_unwind)]
pub fn take_commit_notice(env: &Env, id: u32) -> napi::Result<f64> {
    run(env, || Ok(engine(id)?.take_commit_notice() as f64))
}

/// Committed sequence number.
#[napi(catch_unwind)]
pub fn committed_seq(env: &Env, id: u32) -> napi::Result<f64> {
    run(env, || Ok(engine(id)?.committed() as f64))
}

/// Throws the storage failure that stopped writes, if there was one.
#[napi(catch_unwind)]
pub fn check_storage(env: &Env, id: u32) -> napi::Result<()> {
    run(env, || match engine(id)?.storage_failure() {
        Some(e) => Err(e),
        None => Ok(()),
    })
}

/// Sets the function called (with no arguments) after commits of engine `id`. It does not keep
/// the process alive.
#[napi(catch_unwind)]
pub fn set_commit_callback(env: &Env, id: u32, callback: Function<(), ()>) -> napi::Result<()> {
    let engine = run(env, || engine(id))?;
    engine.set_commit_notifier(Some(crate::events::weak_notifier(callback)?));
    Ok(())
}

/// Ids of jobs found active when the engine recovered its file, once.
#[napi(catch_unwind)]
pub fn take_stalled(env: &Env, h: u32) -> napi::Result<Vec<String>> {
    run(env, || with_queue(h, |e, q| e.take_stalled(q)))
}
