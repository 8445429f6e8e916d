//! Engine events to JS: one weak (unref'd) threadsafe function per engine is called once per
//! batch; JS then drains the batch with one sync call. Only queues with subscribers collect events.

use std::sync::Arc;

use ferroqueue_engine::application::events::Notifier;
use napi::bindgen_prelude::Function;
use napi::threadsafe_function::ThreadsafeFunctionCallMode;
use napi::{Env, JsString, Result};

use crate::errors::run;
use napi_derive::napi;

use crate::registry::{engine, with_queue};
use crate::text::js_text;

/// A notifier that calls the JS `callback` (no arguments) from any thread, without keeping the
/// process alive (a weak threadsafe function).
pub fn weak_notifier(callback: Function<(), ()>) -> Result<Notifier> {
    let tsfn = callback
        .build_threadsafe_function::<()>()
        .weak::<true>()
        .callee_handled::<false>()
        .build()?;
    Ok(Arc::new(move || {
        tsfn.call((), ThreadsafeFunctionCallMode::NonBlocking);
    }))
}

/// As [`weak_notifier`], answering whether the call was queued: false once the callback's JS
/// thread is gone (its environment torn down), so that a list of them can drop it.
pub fn weak_checked_notifier(
    callback: Function<(), ()>,
) -> Result<Arc<dyn Fn() -> bool + Send + Sync>> {
    let tsfn = callback
        .build_threadsafe_function::<()>()
        .weak::<true>()
        .callee_handled::<false>()
        .build()?;
    Ok(Arc::new(move || {
        tsfn.call((), ThreadsafeFunctionCallMode::NonBlocking) == napi::Status::Ok
    }))
}

/// Sets the function called (with no arguments) when events of engine `id` are ready to drain.
/// The callback does not keep the process alive.
#[napi(catch_unwind)]
pub fn set_event_callback(env: &Env, id: u32, callback: Function<(), ()>) -> Result<()> {
    let engine = run(env, || engine(id))?;
    engine.set_event_notifier(Some(weak_notifier(callback)?));
    Ok(())
}

/// Takes the buffered events of engine `id`: a JSON array of `["queue","event",{payload}]`.
#[napi(catch_unwind)]
pub fn drain_events(env: &Env, id: u32) -> Result<JsString<'_>> {
    let engine = run(env, || engine(id))?;
    js_text(env, &engine.drain_events_json())
}

/// Starts collecting events of a queue (one call per listener).
#[napi(catch_unwind)]
pub fn subscribe(env: &Env, h: u32) -> Result<()> {
    run(env, || with_queue(h, |b, q| b.subscribe(q))?)
}

/// Stops collecting for one listener.
#[napi(catch_unwind)]
pub fn unsubscribe(env: &Env, h: u32) -> Result<()> {
    run(env, || with_queue(h, |b, q| b.unsubscribe(q))?)
}
