//! Metrics of the embedded engine: per-minute counts, totals, processing times, Workers.

use super::*;
use crate::domain::lease::{HolderInfo, LeaseTerms};
use crate::domain::metrics::MINUTE_MS;

/// Adds a job, takes it and finishes it with `outcome` after `ms` of processing.
fn run(e: &Engine, clock: &MockClock, q: &QueueRef, outcome: Outcome, ms: u64) {
    add(e, q, "{}");
    let (_, json) = e.take(q, 1, WorkerLimits::default());
    let (id, token) = taken(&json).remove(0);
    clock.advance(ms);
    e.ack_many(q, vec![ack(&id, token, outcome)]);
}

#[test]
fn finished_jobs_are_counted_per_minute_once_asked_and_always_in_totals() {
    let (e, clock) = engine();
    clock.set(10 * MINUTE_MS);
    let q = qref(&e, "m");
    run(&e, &clock, &q, ok("null"), 3);
    assert_eq!(e.metrics(&q, false, 0, -1).count, 0, "not asked for yet");
    e.keep_metrics(&q, 60);
    run(&e, &clock, &q, ok("1"), 7);
    clock.advance(MINUTE_MS);
    run(&e, &clock, &q, fail(), 40);
    run(&e, &clock, &q, ok("null"), 2_000);
    clock.advance(2 * MINUTE_MS);
    let done = e.metrics(&q, false, 0, -1);
    assert_eq!(
        (done.count, &done.data[..], done.len),
        (2, &[0, 1, 1][..], 3)
    );
    assert_eq!(done.prev_count, 2);
    let failed = e.metrics(&q, true, 0, -1);
    assert_eq!((failed.count, &failed.data[..]), (1, &[0, 1][..]));
    let stats = e.finish_stats(&q);
    assert_eq!((stats.completed, stats.failed), (3, 1));
    // 3, 7 and 40 ms, then 2 s: cumulative counts at 5, 10, 25, 50 ms … and +Inf.
    let cumulative = stats.processing_ms.cumulative();
    assert_eq!(&cumulative[..4], &[1, 2, 2, 3]);
    assert_eq!(*cumulative.last().unwrap(), 4);
    assert_eq!(stats.processing_ms.sum(), 2_050);
    assert!(e.commit_latency().is_none());
}

#[test]
fn obliterate_clears_the_minutes_and_keeps_the_totals() {
    let (e, clock) = engine();
    let q = qref(&e, "o");
    e.keep_metrics(&q, 10);
    run(&e, &clock, &q, ok("null"), 1);
    e.obliterate(&q, false).unwrap();
    assert_eq!(e.metrics(&q, false, 0, -1).count, 0);
    assert_eq!(e.finish_stats(&q).completed, 1);
    run(&e, &clock, &q, ok("null"), 1);
    assert_eq!(e.metrics(&q, false, 0, -1).count, 1, "still recorded");
}

#[test]
fn workers_are_the_live_holders_that_said_who_they_are() {
    let (e, _) = engine();
    let q = qref(&e, "w");
    let who = |name: &str, started: u64| {
        Some(HolderInfo {
            queue: q.name_arc().clone(),
            name: Some(name.to_string()),
            started,
        })
    };
    e.hold_as(3, LeaseTerms::default(), who("b", 6));
    e.hold_as(4, LeaseTerms::default(), who("a", 5));
    e.hold(5, LeaseTerms::default());
    e.hold_as(6, LeaseTerms::default(), None);
    let names: Vec<_> = e.workers(&q).into_iter().map(|w| w.name).collect();
    assert_eq!(names, vec![Some("a".to_string()), Some("b".to_string())]);
    e.let_go(3);
    assert_eq!(e.workers(&q).len(), 1);
    assert!(e.workers(&qref(&e, "other")).is_empty());
}
