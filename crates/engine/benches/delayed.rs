//! Delayed jobs: `DelayedHeap<u64>` against an ordered map with a key index.
//!
//! A queue keeps its delayed jobs in a `DelayedHeap` (4-ary heap of `(run_at, seq, key)` plus an
//! FxHashMap `key -> (run_at, seq)`, lazy deletion, rebuild when stale entries outnumber live
//! ones). The obvious std alternative is a `BTreeMap<(run_at, seq), key>`, which pops in time order
//! and removes eagerly, plus a `HashMap<key, (run_at, seq)>` to find a key's entry for
//! rescheduling and removal. Both orders are `(run_at, seq)`, so both pop exactly the same
//! sequence (checked once before measuring).
//!
//! Workload per iteration, for N keys with run_at uniform in a 60 s horizon (ms resolution):
//! insert all N; reschedule a random 20 % (insert again with a new run_at, as `changeDelay` or a
//! retry with backoff does); remove a random 10 % (may overlap the rescheduled ones); then run a
//! timer that advances by 10 ms ticks and calls `pop_due(now)` until it returns `None`, until
//! everything has been popped in time order. Throughput is one element per key, so time / N is
//! the cost of one key's share of insert + reschedule + remove + pop.

use std::collections::{BTreeMap, HashMap};
use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ferroqueue_engine::structures::DelayedHeap;

const SIZES: [usize; 2] = [10_000, 100_000];
const HORIZON_MS: u64 = 60_000;
const TICK_MS: u64 = 10;

#[path = "support/rng.rs"]
mod support_rng;
use support_rng::rng;

struct Workload {
    inserts: Vec<(u64, u64)>,
    reschedules: Vec<(u64, u64)>,
    removes: Vec<u64>,
}

fn workload(n: usize) -> Workload {
    let mut r = rng(n as u64);
    let inserts = (0..n as u64).map(|k| (k, r() % HORIZON_MS)).collect();
    // A random permutation of the keys; its prefixes are distinct random subsets.
    let mut keys: Vec<u64> = (0..n as u64).collect();
    for i in (1..n).rev() {
        keys.swap(i, (r() % (i as u64 + 1)) as usize);
    }
    let reschedules = keys[..n / 5]
        .iter()
        .map(|&k| (k, r() % HORIZON_MS))
        .collect();
    // Every other key of the permutation: half overlap the rescheduled 20 %.
    let removes = keys.iter().step_by(2).take(n / 10).copied().collect();
    Workload {
        inserts,
        reschedules,
        removes,
    }
}

/// The std alternative: eager removal from an ordered map, found through a key index.
#[derive(Default)]
struct BTreeTimer {
    by_time: BTreeMap<(u64, u64), u64>,
    index: HashMap<u64, (u64, u64)>,
    seq: u64,
}

impl BTreeTimer {
    fn insert(&mut self, key: u64, run_at: u64) {
        self.seq += 1;
        if let Some(old) = self.index.insert(key, (run_at, self.seq)) {
            self.by_time.remove(&old);
        }
        self.by_time.insert((run_at, self.seq), key);
    }

    fn remove(&mut self, key: &u64) -> Option<u64> {
        let old = self.index.remove(key)?;
        self.by_time.remove(&old);
        Some(old.0)
    }

    fn pop_due(&mut self, now: u64) -> Option<(u64, u64)> {
        let e = self.by_time.first_entry()?;
        if e.key().0 > now {
            return None;
        }
        let ((run_at, _), key) = e.remove_entry();
        self.index.remove(&key);
        Some((key, run_at))
    }
}

/// Runs the workload through a timer structure, calling `sink` on each popped `(key, run_at)`.
macro_rules! run {
    ($timer:expr, $w:expr, $sink:expr) => {{
        let mut t = $timer;
        for &(k, at) in &$w.inserts {
            t.insert(k, at);
        }
        for &(k, at) in &$w.reschedules {
            t.insert(k, at);
        }
        for &k in &$w.removes {
            black_box(t.remove(black_box(&k)));
        }
        let mut now = 0;
        while now <= HORIZON_MS {
            while let Some(e) = t.pop_due(now) {
                $sink(e);
            }
            now += TICK_MS;
        }
        t
    }};
}

fn delayed(c: &mut Criterion) {
    let mut g = c.benchmark_group("delayed");
    g.sample_size(10);
    for n in SIZES {
        let w = workload(n);
        // Same pop sequence from both, and everything not removed is popped.
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let h = run!(DelayedHeap::<u64>::new(), w, |e| a.push(e));
        let t = run!(BTreeTimer::default(), w, |e| b.push(e));
        assert!(a == b && h.is_empty() && t.index.is_empty());
        assert_eq!(a.len(), n - n / 10);
        assert!(a.windows(2).all(|p| p[0].1 <= p[1].1));

        g.throughput(Throughput::Elements(n as u64));
        g.bench_function(BenchmarkId::new("DelayedHeap", n), |b| {
            b.iter(|| run!(DelayedHeap::<u64>::new(), w, black_box::<(u64, u64)>))
        });
        g.bench_function(BenchmarkId::new("BTreeMap+HashMap", n), |b| {
            b.iter(|| run!(BTreeTimer::default(), w, black_box::<(u64, u64)>))
        });
    }
    g.finish();
}

criterion_group!(benches, delayed);
criterion_main!(benches);
