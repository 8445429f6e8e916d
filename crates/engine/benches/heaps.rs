//! Heaps: our keyed/4-ary heaps against `std::collections::BinaryHeap`.
//!
//! The waiting set of a queue is an `IndexedHeap<JobKey, (priority, order)>`: a 4-ary heap with
//! an FxHashMap index giving O(1) removal by key (lazy deletion, compaction at 20 % stale). The
//! plain std alternative is a `BinaryHeap<Reverse<(priority, order, key)>>`, which cannot remove
//! by key. These benches show what the index costs on the plain push/pop path and what it buys
//! when keys are removed (jobs removed, promoted or re-prioritised while waiting).
//!
//! - `push_pop/{N}`: push N keys with random priorities (0..10, with increasing order), pop all.
//!   `MinHeap4-no-index` pushes the same `(priority, order, key)` tuples into a bare `MinHeap4`,
//!   so the gap to `IndexedHeap` is the index and the gap to `BinaryHeap` is the 4-ary heap.
//! - `mixed/{N}`: rounds of 1,000 keys: push 1,000, remove a random 200 of those just pushed (all
//!   still live), pop 700; the remainder is drained at the end. Every key is pushed once and
//!   either popped or removed. The `BinaryHeap` emulates removal with tombstones: removed keys go
//!   into a `HashSet`, and `pop` discards (and forgets) tombstoned entries as they surface. That is
//!   what one writes without an index; a rebuild per removal would be O(n) each and far slower.
//! - `minheap4/{N}`: the bare `MinHeap4<u64>` against `BinaryHeap<Reverse<u64>>`, random u64.
//!
//! Throughput is one element per key, so criterion's time / N is the cost of one push plus its
//! pop (or remove).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};
use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ferroqueue_engine::structures::{IndexedHeap, MinHeap4};

const SIZES: [usize; 2] = [10_000, 100_000];
const ROUND: usize = 1_000;
const REMOVE_PER_ROUND: usize = 200;
const POP_PER_ROUND: usize = 700;

#[path = "support/rng.rs"]
mod support_rng;
use support_rng::rng;

/// `(key, (priority, order))` for N jobs: priority 0..10, order = admission counter.
fn jobs(n: usize) -> Vec<(u64, (u32, i64))> {
    let mut r = rng(n as u64);
    (0..n)
        .map(|i| (i as u64, ((r() % 10) as u32, i as i64)))
        .collect()
}

/// For each round, the indices (within the round) of the keys to remove: a random 20 %.
fn removals(n: usize) -> Vec<Vec<usize>> {
    let mut r = rng(7 + n as u64);
    (0..n / ROUND)
        .map(|_| {
            let mut idx: Vec<usize> = (0..ROUND).collect();
            for i in (1..ROUND).rev() {
                idx.swap(i, (r() % (i as u64 + 1)) as usize);
            }
            idx.truncate(REMOVE_PER_ROUND);
            idx
        })
        .collect()
}

fn push_pop(c: &mut Criterion) {
    let mut g = c.benchmark_group("push_pop");
    g.sample_size(20);
    for n in SIZES {
        let input = jobs(n);
        g.throughput(Throughput::Elements(n as u64));
        g.bench_with_input(BenchmarkId::new("IndexedHeap", n), &input, |b, input| {
            b.iter(|| {
                let mut h: IndexedHeap<u64, (u32, i64)> = IndexedHeap::with_capacity(n);
                for &(k, p) in input {
                    h.push(k, p);
                }
                while let Some(e) = h.pop() {
                    black_box(e);
                }
            })
        });
        // The same heap without the index: separates the 4-ary heap's cost from the index's.
        g.bench_with_input(
            BenchmarkId::new("MinHeap4-no-index", n),
            &input,
            |b, input| {
                b.iter(|| {
                    let mut h = MinHeap4::with_capacity(n);
                    for &(k, (p, o)) in input {
                        h.push((p, o, k));
                    }
                    while let Some(e) = h.pop() {
                        black_box(e);
                    }
                })
            },
        );
        g.bench_with_input(BenchmarkId::new("BinaryHeap", n), &input, |b, input| {
            b.iter(|| {
                let mut h = BinaryHeap::with_capacity(n);
                for &(k, (p, o)) in input {
                    h.push(Reverse((p, o, k)));
                }
                while let Some(e) = h.pop() {
                    black_box(e);
                }
            })
        });
    }
    g.finish();
}

fn mixed_indexed(input: &[(u64, (u32, i64))], rm: &[Vec<usize>]) -> usize {
    let mut h: IndexedHeap<u64, (u32, i64)> = IndexedHeap::with_capacity(input.len() / 4);
    let mut popped = 0;
    for (round, chunk) in input.chunks(ROUND).enumerate() {
        for &(k, p) in chunk {
            h.push(k, p);
        }
        for &i in &rm[round] {
            black_box(h.remove(&chunk[i].0));
        }
        for _ in 0..POP_PER_ROUND {
            popped += usize::from(black_box(h.pop()).is_some());
        }
    }
    while black_box(h.pop()).is_some() {
        popped += 1;
    }
    popped
}

fn mixed_binary(input: &[(u64, (u32, i64))], rm: &[Vec<usize>]) -> usize {
    let mut h = BinaryHeap::with_capacity(input.len() / 4);
    let mut removed: HashSet<u64> = HashSet::new();
    // Pops the smallest entry that was not removed, dropping tombstoned ones on the way.
    let pop = |h: &mut BinaryHeap<Reverse<(u32, i64, u64)>>, removed: &mut HashSet<u64>| loop {
        let Reverse(e) = h.pop()?;
        if !removed.remove(&e.2) {
            return Some(e);
        }
    };
    let mut popped = 0;
    for (round, chunk) in input.chunks(ROUND).enumerate() {
        for &(k, (p, o)) in chunk {
            h.push(Reverse((p, o, k)));
        }
        for &i in &rm[round] {
            removed.insert(black_box(chunk[i].0));
        }
        for _ in 0..POP_PER_ROUND {
            popped += usize::from(black_box(pop(&mut h, &mut removed)).is_some());
        }
    }
    while black_box(pop(&mut h, &mut removed)).is_some() {
        popped += 1;
    }
    popped
}

fn mixed(c: &mut Criterion) {
    let mut g = c.benchmark_group("mixed");
    g.sample_size(20);
    for n in SIZES {
        let input = jobs(n);
        let rm = removals(n);
        // Both strategies must pop the same jobs: every key minus the removed 20 %.
        assert_eq!(mixed_indexed(&input, &rm), n - n / 5);
        assert_eq!(mixed_binary(&input, &rm), n - n / 5);
        g.throughput(Throughput::Elements(n as u64));
        g.bench_function(BenchmarkId::new("IndexedHeap", n), |b| {
            b.iter(|| mixed_indexed(&input, &rm))
        });
        g.bench_function(BenchmarkId::new("BinaryHeap+tombstones", n), |b| {
            b.iter(|| mixed_binary(&input, &rm))
        });
    }
    g.finish();
}

fn minheap4(c: &mut Criterion) {
    let mut g = c.benchmark_group("minheap4");
    g.sample_size(20);
    for n in SIZES {
        let mut r = rng(42);
        let input: Vec<u64> = (0..n).map(|_| r()).collect();
        g.throughput(Throughput::Elements(n as u64));
        g.bench_with_input(BenchmarkId::new("MinHeap4", n), &input, |b, input| {
            b.iter(|| {
                let mut h = MinHeap4::with_capacity(n);
                for &x in input {
                    h.push(x);
                }
                while let Some(x) = h.pop() {
                    black_box(x);
                }
            })
        });
        g.bench_with_input(BenchmarkId::new("BinaryHeap", n), &input, |b, input| {
            b.iter(|| {
                let mut h = BinaryHeap::with_capacity(n);
                for &x in input {
                    h.push(Reverse(x));
                }
                while let Some(x) = h.pop() {
                    black_box(x);
                }
            })
        });
    }
    g.finish();
}

criterion_group!(benches, push_pop, mixed, minheap4);
criterion_main!(benches);
