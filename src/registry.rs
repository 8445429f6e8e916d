//! Engines and queue handles. Handle `h` indexes a table of (engine, queue) pairs; the same
//! (engine, name) always gets the same handle, so the table is bounded by distinct queue names.

use std::sync::OnceLock;

use ferroqueue_engine::{Engine, EngineConfig, QueueRef};
use napi::Result;
use napi_derive::napi;
use parking_lot::RwLock;

use crate::errors::{range, to_napi};

struct Registry {
    engines: Vec<Engine>,
    queues: Vec<(usize, Engine, QueueRef)>,
}

fn registry() -> &'static RwLock<Registry> {
    static R: OnceLock<RwLock<Registry>> = OnceLock::new();
    R.get_or_init(|| {
        RwLock::new(Registry {
            engines: Vec::new(),
            queues: Vec::new(),
        })
    })
}

/// Returns the id of the process-wide in-memory engine, creating it on first use.
#[napi(catch_unwind)]
pub fn memory_engine() -> Result<u32> {
    let mut r = registry().write();
    if r.engines.is_empty() {
        let engine = Engine::new(EngineConfig::default()).map_err(to_napi)?;
        r.engines.push(engine);
    }
    Ok(0)
}

/// Resolves (engine, queue name) to a handle, validating the name.
#[napi(catch_unwind)]
pub fn open_queue(engine: u32, name: String) -> Result<u32> {
    let mut r = registry().write();
    let e = r
        .engines
        .get(engine as usize)
        .cloned()
        .ok_or_else(|| range("engine", format!("{engine} is not an open engine")))?;
    let q = e.queue_ref(&name).map_err(to_napi)?;
    if let Some(i) = r
        .queues
        .iter()
        .position(|(id, _, qr)| *id == engine as usize && qr == &q)
    {
        return Ok(i as u32);
    }
    r.queues.push((engine as usize, e, q));
    Ok((r.queues.len() - 1) as u32)
}

/// Runs `f` with the engine and queue of handle `h`.
pub fn with_queue<R>(h: u32, f: impl FnOnce(&Engine, &QueueRef) -> R) -> Result<R> {
    let r = registry().read();
    let (_, e, q) = r
        .queues
        .get(h as usize)
        .ok_or_else(|| range("queue", format!("handle {h} is not an open queue")))?;
    Ok(f(e, q))
}

/// Clones the engine and queue of handle `h` (for async calls).
pub fn queue_owned(h: u32) -> Result<(Engine, QueueRef)> {
    with_queue(h, |e, q| (e.clone(), q.clone()))
}

/// The engine with id `id`.
pub fn engine(id: u32) -> Result<Engine> {
    registry()
        .read()
        .engines
        .get(id as usize)
        .cloned()
        .ok_or_else(|| range("engine", format!("{id} is not an open engine")))
}

/// Panics on purpose, so tests can check that a Rust panic reaches JS as an error.
#[napi(catch_unwind)]
pub fn debug_panic(message: String) -> Result<()> {
    panic!("{message}");
}
