//! Backends and queue handles. Backend 0 is the process-wide in-memory engine; durable engines
//! are keyed by their resolved file path, so every object of a process on the same file shares
//! one. Handle `h` indexes a table of (backend, queue) pairs; the same (backend, name) always gets
//! the same handle, so the table is bounded by distinct queue names. Past opening, the binding
//! sees a backend only as `dyn Backend`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use ferroqueue_engine::application::dlq::Kept;
use ferroqueue_engine::{Backend, Engine, EngineConfig, EngineError, QueueRef};
use napi::bindgen_prelude::PromiseRaw;
use napi::Env;
use napi_derive::napi;
use parking_lot::RwLock;

use crate::errors::{range, run, settle};

/// What registry calls answer: engine errors, made JS errors by the call that exposes them.
type Result<T> = std::result::Result<T, EngineError>;

/// A backend as the binding holds it.
pub type Shared = Arc<dyn Backend>;

/// The end of a close, for an open of the same file to wait for.
#[derive(Default)]
struct Done {
    done: std::sync::Mutex<bool>,
    cv: std::sync::Condvar,
}

impl Done {
    fn set(&self) {
        *self.done.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.cv.notify_all();
    }

    fn is_set(&self) -> bool {
        *self.done.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn wait(&self) {
        let mut d = self.done.lock().unwrap_or_else(|p| p.into_inner());
        while !*d {
            d = self.cv.wait(d).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// An engine's configuration with the binding's JSON wire.
fn config() -> EngineConfig {
    EngineConfig::new(Arc::new(crate::wire::JsonWire))
}

/// Whether two handles are the same backend.
fn same(a: &Shared, b: &Shared) -> bool {
    std::ptr::addr_eq(Arc::as_ptr(a), Arc::as_ptr(b))
}

/// Closed engines and their queue handles become `None`, so that nothing keeps a closed engine's
/// memory alive; calls through their handles fail with ERR_QUEUE_CLOSED.
struct Registry {
    engines: Vec<Option<Shared>>,
    by_path: HashMap<PathBuf, u32>,
    /// PostgreSQL backends by (URL, schema): every object of a process on the same database
    /// shares one.
    by_url: HashMap<(String, String), u32>,
    /// Ids of the PostgreSQL backends and of views of files (closed when their last user lets
    /// go, like files).
    databases: std::collections::HashSet<u32>,
    /// Engines whose close is under way, by path, with the signal of its end.
    closing: HashMap<PathBuf, (Shared, Arc<Done>)>,
    queues: Vec<Option<(u32, Shared, QueueRef)>>,
}

fn registry() -> &'static RwLock<Registry> {
    static R: OnceLock<RwLock<Registry>> = OnceLock::new();
    R.get_or_init(|| {
        RwLock::new(Registry {
            engines: Vec::new(),
            by_path: HashMap::new(),
            by_url: HashMap::new(),
            databases: std::collections::HashSet::new(),
            closing: HashMap::new(),
            queues: Vec::new(),
        })
    })
}

/// The path a file is known by: absolute, with symlinks of its directory resolved.
fn resolve(path: &str) -> Result<PathBuf> {
    if path.is_empty() {
        return Err(range("dataPath", "must not be empty"));
    }
    let abs = std::path::absolute(Path::new(path))
        .map_err(|e| range("dataPath", format!("cannot be resolved: {e}")))?;
    if let Ok(c) = abs.canonicalize() {
        return Ok(c);
    }
    match (abs.parent(), abs.file_name()) {
        (Some(dir), Some(name)) => match dir.canonicalize() {
            Ok(d) => Ok(d.join(name)),
            Err(e) => Err(EngineError::StorageIo {
                path: path.to_string(),
                reason: format!("its directory cannot be opened: {e}"),
            }),
        },
        _ => Err(range("dataPath", format!("is not a file path: {path:?}"))),
    }
}

/// Opens an engine: in memory without `path` (always engine 0), else the durable engine of that
/// file, creating or recovering it on first use. `fsync` makes its commits fsync;
/// `finished_in_memory` bounds the finished jobs per state and queue kept in memory (default
/// 10,000; only used when the engine is created).
#[napi(catch_unwind)]
pub fn open_engine(
    env: &Env,
    path: Option<String>,
    fsync: bool,
    finished_in_memory: Option<u32>,
) -> napi::Result<u32> {
    run(env, || open(path, fsync, finished_in_memory))
}

fn open(path: Option<String>, fsync: bool, finished_in_memory: Option<u32>) -> Result<u32> {
    let resolved = match &path {
        Some(p) => Some(resolve(p)?),
        None => None,
    };
    loop {
        let mut r = registry().write();
        let done = resolved
            .as_ref()
            .and_then(|p| r.closing.get(p))
            .map(|(_, d)| d.clone());
        match done {
            Some(d) if d.is_set() => {
                if let Some(p) = &resolved {
                    r.closing.remove(p);
                }
            }
            Some(d) => {
                // Its last user let go a moment ago and the close is still flushing: wait for it
                // (it holds the file) rather than fail with ERR_STORAGE_LOCKED. Brief, and only
                // then; the registry is not held meanwhile, the close needs it.
                drop(r);
                d.wait();
                continue;
            }
            None => {}
        }
        return open_locked(&mut r, resolved, fsync, finished_in_memory);
    }
}

fn open_locked(
    r: &mut Registry,
    resolved: Option<PathBuf>,
    fsync: bool,
    finished_in_memory: Option<u32>,
) -> Result<u32> {
    if r.engines.is_empty() {
        let engine: Shared = Arc::new(Engine::new(config())?);
        r.engines.push(Some(engine));
    }
    let Some(resolved) = resolved else {
        return Ok(0);
    };
    if let Some(&id) = r.by_path.get(&resolved) {
        if let (true, Some(Some(e))) = (fsync, r.engines.get(id as usize)) {
            e.require_fsync();
        }
        return Ok(id);
    }
    let engine: Shared = Arc::new(Engine::new(EngineConfig {
        path: Some(resolved.clone()),
        sync_full: fsync,
        finished_in_memory: finished_in_memory.map(|n| n.max(1) as usize),
        ..config()
    })?);
    let id = r.engines.len() as u32;
    r.engines.push(Some(engine));
    r.by_path.insert(resolved, id);
    Ok(id)
}

/// Opens a view of the SQLite file at `path` (the CLI's reads): its content as last committed,
/// read without taking the file, in an engine in memory that never writes it
/// (`storage/read_only.rs`). Each call opens a new one; it closes when its last user lets go.
#[napi(catch_unwind)]
pub fn open_view(env: &Env, path: String) -> napi::Result<u32> {
    run(env, || {
        let resolved = resolve(&path)?;
        let view: Shared = Arc::new(Engine::new(EngineConfig {
            path: Some(resolved),
            read_only: true,
            timer: false,
            ..config()
        })?);
        let mut r = registry().write();
        if r.engines.is_empty() {
            let engine: Shared = Arc::new(Engine::new(config())?);
            r.engines.push(Some(engine));
        }
        let id = r.engines.len() as u32;
        r.engines.push(Some(view));
        r.databases.insert(id);
        Ok(id)
    })
}

/// Opens (or finds) the PostgreSQL backend of `url` in `schema` (default `ferroqueue`) with at
/// most `max` connections (default 4). Connecting happens on the first call that needs the
/// database, whose answer carries a connection error.
#[napi(catch_unwind)]
pub fn open_postgres(
    env: &Env,
    url: String,
    schema: Option<String>,
    max: Option<u32>,
) -> napi::Result<u32> {
    run(env, || {
        let target = ferroqueue_postgres::Target::new(&url, schema.as_deref())?;
        let key = (url.clone(), target.schema().to_string());
        let mut r = registry().write();
        if r.engines.is_empty() {
            let engine: Shared = Arc::new(Engine::new(config())?);
            r.engines.push(Some(engine));
        }
        if let Some(&id) = r.by_url.get(&key) {
            return Ok(id);
        }
        let mut pg = ferroqueue_postgres::PgConfig::new(target, Arc::new(crate::wire::JsonWire));
        if let Some(n) = max {
            pg.max_connections = (n as usize).clamp(1, 64);
        }
        let backend: Shared = Arc::new(ferroqueue_postgres::PgBackend::open(pg)?);
        let id = r.engines.len() as u32;
        r.engines.push(Some(backend));
        r.by_url.insert(key, id);
        r.databases.insert(id);
        Ok(id)
    })
}

/// Detaches a durable engine from its path, synchronously, before its asynchronous close: a new
/// open of the path then waits for that close instead of getting the closing engine.
#[napi(catch_unwind)]
pub fn detach_engine(id: u32) -> napi::Result<()> {
    let mut r = registry().write();
    if let Some(Some(e)) = r.engines.get(id as usize).cloned() {
        r.detach(id, &e);
    }
    Ok(())
}

impl Registry {
    /// Moves engine `id`'s paths from the open map to the closing one.
    fn detach(&mut self, id: u32, e: &Shared) {
        self.by_url.retain(|_, v| *v != id);
        let paths: Vec<PathBuf> = self
            .by_path
            .iter()
            .filter(|(_, v)| **v == id)
            .map(|(p, _)| p.clone())
            .collect();
        let done = Arc::new(Done::default());
        for p in paths {
            self.by_path.remove(&p);
            self.closing.insert(p, (e.clone(), done.clone()));
        }
    }
}

/// Closes a durable engine (off the JS thread: it commits what is queued, checkpoints and
/// releases the file). Later calls on its queues fail with ERR_QUEUE_CLOSED.
#[napi(catch_unwind, ts_return_type = "Promise<void>")]
pub fn close_engine(env: &Env, id: u32) -> napi::Result<PromiseRaw<'_, ()>> {
    settle(env, close(id))
}

async fn close(id: u32) -> Result<()> {
    let e = {
        let mut r = registry().write();
        let Some(Some(e)) = r.engines.get(id as usize).cloned() else {
            return Ok(());
        };
        if !e.is_durable() && !r.databases.remove(&id) {
            return Ok(());
        }
        r.detach(id, &e);
        r.engines[id as usize] = None;
        for slot in r.queues.iter_mut() {
            if slot.as_ref().is_some_and(|(eid, _, _)| *eid == id) {
                *slot = None;
            }
        }
        e
    };
    let closed = e.close().await;
    let mut r = registry().write();
    for (c, done) in r.closing.values() {
        if same(c, &e) {
            done.set();
        }
    }
    r.closing.retain(|_, (c, _)| !same(c, &e));
    closed
}

/// Resolves (engine, prefix, queue name) to a handle, validating both.
#[napi(catch_unwind)]
pub fn open_queue(
    env: &Env,
    engine: u32,
    name: String,
    prefix: Option<String>,
) -> napi::Result<u32> {
    run(env, || queue_handle(engine, &name, prefix.as_deref()))
}

fn queue_handle(engine: u32, name: &str, prefix: Option<&str>) -> Result<u32> {
    let mut r = registry().write();
    let Some(Some(e)) = r.engines.get(engine as usize).cloned() else {
        return Err(range("engine", format!("{engine} is not an open engine")));
    };
    let q = e.queue(prefix, name)?;
    let found = r.queues.iter().position(|slot| {
        slot.as_ref()
            .is_some_and(|(id, _, qr)| *id == engine && qr == &q)
    });
    if let Some(i) = found {
        return Ok(i as u32);
    }
    r.queues.push(Some((engine, e, q)));
    crate::dlq::start_keeper();
    Ok((r.queues.len() - 1) as u32)
}

/// Every open queue handle with its backend, for the DLQ keeper (`dlq.rs`).
pub fn kept_queues() -> Vec<Kept> {
    let r = registry().read();
    r.queues
        .iter()
        .enumerate()
        .filter_map(|(h, slot)| {
            let (_, e, q) = slot.as_ref()?;
            (!e.is_closed()).then(|| (e.clone(), q.clone(), h as u32))
        })
        .collect()
}

/// Runs `f` with the backend and queue of handle `h`.
pub fn with_queue<R>(h: u32, f: impl FnOnce(&dyn Backend, &QueueRef) -> R) -> Result<R> {
    let r = registry().read();
    match r.queues.get(h as usize) {
        Some(Some((_, e, q))) if !e.is_closed() => Ok(f(e.as_ref(), q)),
        Some(_) => Err(EngineError::QueueClosed(format!("(handle {h})"))),
        None => Err(range("queue", format!("handle {h} is not an open queue"))),
    }
}

/// The engine id, backend and queue of handle `h`.
pub fn queue_of(h: u32) -> Result<(u32, Shared, QueueRef)> {
    let r = registry().read();
    match r.queues.get(h as usize) {
        Some(Some((id, e, q))) if !e.is_closed() => Ok((*id, e.clone(), q.clone())),
        Some(_) => Err(EngineError::QueueClosed(format!("(handle {h})"))),
        None => Err(range("queue", format!("handle {h} is not an open queue"))),
    }
}

/// The backend with id `id`.
pub fn engine(id: u32) -> Result<Shared> {
    match registry().read().engines.get(id as usize) {
        Some(Some(e)) => Ok(e.clone()),
        Some(None) => Err(EngineError::QueueClosed(format!("(engine {id})"))),
        None => Err(range("engine", format!("{id} is not an open engine"))),
    }
}

/// Makes backend `id` commit nothing for `ms` milliseconds (a stalled disk), so tests can see
/// back-pressure. Only in the test build (feature `test-hooks`).
#[cfg(feature = "test-hooks")]
#[napi(catch_unwind)]
pub fn debug_stall_writer(env: &Env, id: u32, ms: u32) -> napi::Result<()> {
    run(env, || {
        engine(id)?.stall_writer(ms as u64);
        Ok(())
    })
}

/// Panics on purpose, so tests can check that a Rust panic reaches JS as an error. Only in the
/// test build (feature `test-hooks`).
#[cfg(feature = "test-hooks")]
#[napi(catch_unwind)]
pub fn debug_panic(message: String) -> napi::Result<()> {
    panic!("{message}");
}
