//! The shard hot path: add, take and ack, against a naive FIFO queue.
//!
//! Three implementations run the same cycle on 10,000 jobs with 200-byte JSON payloads:
//!
//! - `Engine`: the public API (`Engine::add`, `take(q, 50)`, `ack_many`), so each call pays the
//!   shard lock, the clock read, the queue lookup by name and the effects hand-off.
//! - `QueueState`: the same state machine called directly with a fixed `now`: the cost of the
//!   structures (the ready heap keyed by `(priority, order)`, `active`/`completed` ordered
//!   maps, the job map, JSON records) without the engine around them.
//! - `VecDeque+HashMap`: a naive FIFO queue storing the same data (a std `HashMap` of jobs and a
//!   `VecDeque` of waiting ids, a token per activation, completed jobs kept in the map), with no
//!   priorities and no ordered state sets. It writes the same JSON record shape on take, so the
//!   difference is the price of priorities, LIFO, delayed jobs and state tracking.
//!
//! `add`: add 10,000 prebuilt jobs (building them is outside the measurement). `take_ack`: from
//! 10,000 waiting jobs, take batches of 50, parse id and token out of the JSON text, and complete
//! each with `"null"` until the queue is empty. Throughput is one element per job, so time / N is
//! the cost per job. Completed jobs are kept (BullMQ's default `removeOnComplete: false`).

use std::hint::black_box;
use std::sync::Arc;

use criterion::measurement::WallTime;
use criterion::{
    criterion_group, criterion_main, BatchSize, BenchmarkGroup, Criterion, Throughput,
};
use ferroqueue_engine::domain::limits::WorkerLimits;
use ferroqueue_engine::domain::queue::{Effects, QueueState};
use ferroqueue_engine::{
    Ack, AckResult, Engine, EngineConfig, JobOptions, NewJob, Outcome, QueueRef,
};

#[path = "support/bench_wire.rs"]
mod bench_wire;
#[path = "support/naive_queue.rs"]
mod naive_queue;
use bench_wire::BenchWire;
use naive_queue::Naive;

const N: usize = 10_000;
const BATCH: usize = 50;
const NOW: u64 = 1_700_000_000_000;

/// A 200-byte JSON object (contains no `"id"` or `"token"` key, which the parser relies on).
fn payload() -> Box<str> {
    let head = r#"{"user":12345,"action":"resize","blob":""#;
    let pad = 200 - head.len() - 2;
    let s = format!("{head}{}\"}}", "x".repeat(pad));
    assert_eq!(s.len(), 200);
    s.into()
}

fn new_jobs(timestamp: u64) -> Vec<NewJob> {
    let data = payload();
    (0..N)
        .map(|_| NewJob {
            name: "resize".into(),
            data: data.clone(),
            opts: JobOptions::defaults(),
            opts_json: None,
            timestamp,
        })
        .collect()
}

/// Cheap parse of a take result: each record starts with `{"id":<id>` (a number, or a quoted
/// string for the naive queue) and ends with `,"token":<n>}`; the payload in between is ours
/// and contains neither pattern.
fn parse_taken(json: &str, out: &mut Vec<(String, u64)>) {
    let mut rest = json;
    while let Some(i) = rest.find(r#"{"id":"#) {
        rest = &rest[i + 6..];
        let id = match rest.strip_prefix('"') {
            Some(quoted) => &quoted[..quoted.find('"').expect("id end")],
            None => &rest[..rest.bytes().take_while(u8::is_ascii_digit).count()],
        };
        let id = id.to_owned();
        let t = rest.find(r#""token":"#).expect("token") + 8;
        rest = &rest[t..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        out.push((id, rest[..digits].parse().expect("token digits")));
        rest = &rest[digits..];
    }
}

fn engine() -> (Engine, QueueRef) {
    let e = Engine::new(EngineConfig {
        timer: false,
        ..EngineConfig::new(Arc::new(BenchWire))
    })
    .expect("engine");
    let q = e.queue_ref("bench").expect("queue name");
    (e, q)
}

/// One implementation of the hot path.
trait Hot {
    fn add(&mut self, job: NewJob);
    /// Writes up to `BATCH` activated jobs into `out` as a JSON array; returns how many.
    fn take(&mut self, out: &mut String) -> usize;
    /// Completes the parsed `(id, token)` pairs (draining them); returns how many completed.
    fn ack(&mut self, taken: &mut Vec<(String, u64)>) -> usize;
}

/// Adds every job; returns the filled queue.
fn fill<W: Hot>((mut w, jobs): (W, Vec<NewJob>)) -> W {
    for job in jobs {
        w.add(job);
    }
    w
}

/// Takes and completes everything; returns how many acks completed a job.
fn cycle(w: &mut impl Hot) -> usize {
    let (mut out, mut parsed) = (String::new(), Vec::with_capacity(BATCH));
    let mut done = 0;
    loop {
        out.clear();
        if w.take(&mut out) == 0 {
            return done;
        }
        parse_taken(&out, &mut parsed);
        done += w.ack(&mut parsed);
    }
}

impl Hot for (Engine, QueueRef) {
    fn add(&mut self, job: NewJob) {
        black_box(self.0.add(&self.1, job));
    }

    fn take(&mut self, out: &mut String) -> usize {
        let (n, json) = self.0.take(&self.1, BATCH, WorkerLimits::default());
        *out = json;
        n
    }

    fn ack(&mut self, taken: &mut Vec<(String, u64)>) -> usize {
        let acks = taken.drain(..).map(|(id, token)| Ack {
            id,
            token,
            outcome: Outcome::Completed("null".into()),
            keep: None,
        });
        let results = self.0.ack_many(&self.1, acks.collect());
        results
            .iter()
            .filter(|&&r| r == AckResult::Completed)
            .count()
    }
}

impl Hot for QueueState {
    fn add(&mut self, job: NewJob) {
        black_box(QueueState::add(self, job, NOW, &mut Effects::default()));
    }

    fn take(&mut self, out: &mut String) -> usize {
        out.push('[');
        let n = QueueState::take(self, BATCH, NOW, &mut Effects::default(), |job| {
            ferroqueue_engine::wire::push_record(&BenchWire, job, true, out)
        });
        out.push(']');
        n
    }

    fn ack(&mut self, taken: &mut Vec<(String, u64)>) -> usize {
        let (mut fx, mut done) = (Effects::default(), 0);
        for (id, token) in taken.drain(..) {
            let key = self.key_of(&id).expect("known id");
            let value = Outcome::Completed("null".into());
            let r = QueueState::ack(self, key, token, value, None, NOW, &mut fx);
            done += usize::from(r == AckResult::Completed);
        }
        done
    }
}

type Group<'a> = BenchmarkGroup<'a, WallTime>;

/// Times `fill` of N prebuilt jobs into a fresh `new()`.
fn bench_add<W: Hot>(g: &mut Group, name: &str, new: fn() -> W) {
    let setup = || (new(), new_jobs(NOW));
    g.bench_function(name, |b| {
        b.iter_batched(setup, fill, BatchSize::PerIteration)
    });
}

/// Times `cycle` over a queue of N waiting jobs (filled outside the measurement).
fn bench_cycle<W: Hot>(g: &mut Group, name: &str, new: fn() -> W) {
    assert_eq!(cycle(&mut fill((new(), new_jobs(NOW)))), N);
    let setup = || fill((new(), new_jobs(NOW)));
    let run = |mut w: W| (cycle(&mut w), w); // dropped after the measurement
    g.bench_function(name, |b| {
        b.iter_batched(setup, run, BatchSize::PerIteration)
    });
}

fn add(c: &mut Criterion) {
    let mut g = c.benchmark_group("queue_add");
    g.throughput(Throughput::Elements(N as u64)).sample_size(20);
    bench_add(&mut g, "Engine", engine);
    bench_add(&mut g, "QueueState", || QueueState::new(Arc::from("bench")));
    bench_add(&mut g, "VecDeque+HashMap", Naive::default);
    g.finish();
}

fn take_ack(c: &mut Criterion) {
    let mut g = c.benchmark_group("queue_take_ack");
    g.throughput(Throughput::Elements(N as u64)).sample_size(20);
    bench_cycle(&mut g, "Engine", engine);
    bench_cycle(&mut g, "QueueState", || QueueState::new(Arc::from("bench")));
    bench_cycle(&mut g, "VecDeque+HashMap", Naive::default);
    g.finish();
}

criterion_group!(benches, add, take_ack);
criterion_main!(benches);
