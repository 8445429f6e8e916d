//! Metrics: BullMQ's `getMetrics` and `getWorkers`, the Worker option `metrics`, the list of an
//! engine's queues (the CLI's `stats`), and what
//! `exportPrometheusMetrics` reports besides job counts (this process's totals, processing
//! times and commit latency). Marshalling only: the numbers come from the backend.

use ferroqueue_engine::domain::lease::WorkerInfo;
use ferroqueue_engine::domain::metrics::{FinishStats, Histogram, MetricsPage};
use napi::Env;
use napi_derive::napi;

use crate::errors::run;
use crate::registry::{queue_of, with_queue};
use crate::reply::{answer, Answer};

/// BullMQ's `getMetrics` answer.
#[napi(object)]
pub struct Metrics {
    /// Jobs counted since counting began.
    pub count: f64,
    /// The start of the current minute, ms (0 before any count).
    pub prev_ts: f64,
    /// `count` without the current minute's jobs.
    pub prev_count: f64,
    /// Counts per finished minute, newest first.
    pub data: Vec<f64>,
    /// How many finished minutes are kept.
    pub len: f64,
}

impl From<MetricsPage> for Metrics {
    fn from(p: MetricsPage) -> Metrics {
        Metrics {
            count: p.count as f64,
            prev_ts: p.prev_ts as f64,
            prev_count: p.prev_count as f64,
            data: p.data.into_iter().map(|n| n as f64).collect(),
            len: p.len as f64,
        }
    }
}

/// A live Worker.
#[napi(object)]
pub struct LiveWorker {
    pub id: String,
    pub name: Option<String>,
    pub started: f64,
    pub seen: f64,
    pub pid: u32,
    pub addr: Option<String>,
}

impl From<WorkerInfo> for LiveWorker {
    fn from(w: WorkerInfo) -> LiveWorker {
        LiveWorker {
            id: w.id,
            name: w.name,
            started: w.started as f64,
            seen: w.seen as f64,
            pid: w.pid,
            addr: w.addr,
        }
    }
}

/// A histogram as Prometheus exposes it: cumulative counts per bound, then the total.
#[napi(object)]
pub struct Buckets {
    pub bounds: Vec<f64>,
    pub cumulative: Vec<f64>,
    pub sum: f64,
}

impl From<Histogram> for Buckets {
    fn from(h: Histogram) -> Buckets {
        Buckets {
            bounds: h.bounds().iter().map(|b| *b as f64).collect(),
            cumulative: h.cumulative().into_iter().map(|n| n as f64).collect(),
            sum: h.sum() as f64,
        }
    }
}

/// What this process saw finish on a queue, and its engine's commit latency.
#[napi(object)]
pub struct FinishTotals {
    pub completed: f64,
    pub failed: f64,
    /// Processing times, ms.
    pub processing: Buckets,
    /// Commit latency, µs (`None` in memory).
    pub commit: Option<Buckets>,
}

impl FinishTotals {
    fn of(stats: FinishStats, commit: Option<Histogram>) -> FinishTotals {
        FinishTotals {
            completed: stats.completed as f64,
            failed: stats.failed as f64,
            processing: stats.processing_ms.into(),
            commit: commit.map(Into::into),
        }
    }
}

/// Records the queue's per-minute counts for `points` minutes (a Worker's `metrics`).
#[napi(catch_unwind, ts_return_type = "undefined | Promise<undefined>")]
pub fn keep_metrics(env: &Env, h: u32, points: u32) -> napi::Result<Answer<'_, ()>> {
    let reply = run(env, || with_queue(h, |b, q| b.keep_metrics(q, points)))?;
    answer(env, reply, |()| ())
}

/// `getMetrics(type, start, end)`: completed (or `failed`) jobs per minute.
#[napi(catch_unwind, ts_return_type = "Metrics | Promise<Metrics>")]
pub fn get_metrics(
    env: &Env,
    h: u32,
    failed: bool,
    start: i64,
    end: i64,
) -> napi::Result<Answer<'_, Metrics>> {
    let reply = run(env, || {
        with_queue(h, |b, q| b.metrics(q, failed, start, end))
    })?;
    answer(env, reply, Metrics::from)
}

/// `getWorkers()`: the queue's live Workers.
#[napi(catch_unwind, ts_return_type = "LiveWorker[] | Promise<LiveWorker[]>")]
pub fn get_workers(env: &Env, h: u32) -> napi::Result<Answer<'_, Vec<LiveWorker>>> {
    let reply = run(env, || with_queue(h, |b, q| b.workers(q)))?;
    answer(env, reply, |list| {
        list.into_iter().map(Into::into).collect()
    })
}

/// This process's totals of the queue (Prometheus).
#[napi(catch_unwind)]
pub fn finish_totals(env: &Env, h: u32) -> napi::Result<FinishTotals> {
    run(env, || {
        let (_, b, q) = queue_of(h)?;
        Ok(FinishTotals::of(b.finish_stats(&q), b.commit_latency()))
    })
}

/// The names of every queue of engine `id` (`prefix:name`, or the name in the default
/// namespace), sorted: the CLI's list.
#[napi(catch_unwind, ts_return_type = "string[] | Promise<string[]>")]
pub fn queue_names(env: &Env, id: u32) -> napi::Result<Answer<'_, Vec<String>>> {
    let reply = run(env, || crate::registry::engine(id).map(|e| e.queue_names()))?;
    answer(env, reply, |names| names)
}
