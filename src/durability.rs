//! Commit waits of durable backends: JS reads its thread's commit ticket once per tick (the
//! latest change it made), and is called back (once per batch of commits, by a weak threadsafe
//! function) to compare it with the committed one. No async call per change.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use napi::bindgen_prelude::Function;
use napi::Env;
use napi_derive::napi;
use parking_lot::Mutex;

use crate::errors::run;
use crate::registry::{engine, with_queue};
use crate::reply::{answer, Answer};

/// The commit ticket of the latest change this thread made on backend `id` (0: nothing to
/// wait for).
#[napi(catch_unwind)]
pub fn ticket(env: &Env, id: u32) -> napi::Result<f64> {
    run(env, || Ok(engine(id)?.ticket() as f64))
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
    run(env, || match engine(id)?.failure() {
        Some(e) => Err(e),
        None => Ok(()),
    })
}

/// The commit callbacks of each engine: one per JS thread that waits for its commits (the
/// main thread, and worker threads of a threaded Worker on the same file).
type Callbacks = Mutex<HashMap<u32, Vec<Arc<dyn Fn() -> bool + Send + Sync>>>>;

fn callbacks() -> &'static Callbacks {
    static C: OnceLock<Callbacks> = OnceLock::new();
    C.get_or_init(Callbacks::default)
}

/// Adds the function called (with no arguments) after commits of engine `id`, for this JS
/// thread; every thread's is called, and those of threads that are gone are dropped. It does
/// not keep the process alive.
#[napi(catch_unwind)]
pub fn set_commit_callback(env: &Env, id: u32, callback: Function<(), ()>) -> napi::Result<()> {
    let engine = run(env, || engine(id))?;
    let notify = crate::events::weak_checked_notifier(callback)?;
    callbacks().lock().entry(id).or_default().push(notify);
    engine.set_commit_notifier(Some(Arc::new(move || {
        if let Some(list) = callbacks().lock().get_mut(&id) {
            list.retain(|call| call());
        }
    })));
    Ok(())
}

/// Ids of jobs found active when the backend recovered, once.
#[napi(
    catch_unwind,
    ts_return_type = "Array<string> | Promise<Array<string>>"
)]
pub fn take_stalled(env: &Env, h: u32) -> napi::Result<Answer<'_, Vec<String>>> {
    let reply = run(env, || with_queue(h, |b, q| b.take_stalled(q)))?;
    answer(env, reply, |ids| ids)
}
