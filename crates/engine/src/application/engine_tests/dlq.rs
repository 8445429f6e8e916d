//! The DLQ over the embedded engine, with the injected clock: histories and reasons as jobs
//! fail, `maxEntries` at once, expiry and automatic retries by the keeper's passes.

use std::sync::Arc;

use serde_json::Value;

use super::{ack, add, engine, qref, taken, START};
use crate::application::dlq::{self, DlqKeeper, Kept, KEEPER_PERIOD};
use crate::application::engine::Engine;
use crate::backend::{Backend, QueueRef};
use crate::domain::dlq::DlqConfig;
use crate::domain::dlq_view::DlqFilter;
use crate::domain::job::JobState;
use crate::domain::limits::WorkerLimits;
use crate::domain::listing::StateFilter;
use crate::domain::queue::Outcome;

fn failure(unrecoverable: bool, timed_out: bool) -> Outcome {
    Outcome::Failed {
        reason: if timed_out { "timeout" } else { "boom" }.into(),
        stack: None,
        unrecoverable,
        timed_out,
        lost: false,
        delay: None,
    }
}

/// Takes the next job and fails it as told.
fn take_and_fail(e: &Engine, q: &QueueRef, unrecoverable: bool, timed_out: bool) -> String {
    let (_, json) = e.take(q, 1, WorkerLimits::default());
    let (id, token) = taken(&json).pop().expect("a job to take");
    e.ack_many(q, vec![ack(&id, token, failure(unrecoverable, timed_out))]);
    id
}

fn run<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime")
        .block_on(f)
}

fn entries(e: &Engine, q: &QueueRef, filter: &str) -> Vec<Value> {
    let f = DlqFilter::parse(filter).expect("a filter");
    let json = run(dlq::entries(e, q, &f, e.now())).expect("entries");
    serde_json::from_str(&json).expect("JSON")
}

fn set(e: &Engine, q: &QueueRef, change: &str) -> DlqConfig {
    run(dlq::set_config(e, q, change)).expect("a valid change")
}

#[test]
fn a_failed_job_carries_its_attempts_and_reason() {
    let (e, clock) = engine();
    let q = qref(&e, "dlq");
    add(&e, &q, r#"{"attempts":2}"#);
    add(&e, &q, "{}");
    add(&e, &q, r#"{"attempts":3}"#);
    take_and_fail(&e, &q, false, true);
    clock.advance(10);
    take_and_fail(&e, &q, false, false);
    clock.advance(10);
    take_and_fail(&e, &q, true, false);
    clock.advance(10);
    // Job 1 again: its second attempt was its last.
    take_and_fail(&e, &q, false, false);
    let all = entries(&e, &q, "{}");
    let summary: Vec<(String, String, usize)> = all
        .iter()
        .map(|x| {
            let id = x["job"]["id"].as_str().unwrap_or_default().to_string();
            let n = x["attempts"].as_array().map_or(0, Vec::len);
            (id, x["reason"].as_str().unwrap_or_default().to_string(), n)
        })
        .collect();
    let expect = |id: &str, r: &str, n| (id.to_string(), r.to_string(), n);
    assert_eq!(
        summary,
        [
            expect("1", "max_attempts_exceeded", 2),
            expect("3", "explicit_fail", 1),
            expect("2", "max_attempts_exceeded", 1),
        ]
    );
    let first = &all[0];
    assert_eq!(first["attempts"][0]["kind"], "timeout");
    assert_eq!(first["attempts"][0]["final"], false);
    assert_eq!(first["attempts"][1]["final"], true);
    assert_eq!(first["enteredAt"], START + 30);
    assert_eq!(
        first["expiresAt"],
        START + 30 + DlqConfig::default().max_age
    );
    assert_eq!(first["job"]["failedReason"], "boom");
    let reasons = entries(&e, &q, r#"{"reason":"explicit_fail"}"#);
    assert_eq!(reasons.len(), 1);
    let stats: Value =
        serde_json::from_str(&run(dlq::stats(&e, &q)).expect("stats")).expect("JSON");
    assert_eq!(stats["total"], 3);
    assert_eq!(stats["byReason"]["max_attempts_exceeded"], 2);
}

#[test]
fn a_timed_out_last_attempt_is_the_reason() {
    let (e, _) = engine();
    let q = qref(&e, "dlq");
    add(&e, &q, "{}");
    take_and_fail(&e, &q, false, true);
    assert_eq!(entries(&e, &q, "{}")[0]["reason"], "timeout");
}

#[test]
fn a_lost_worker_is_the_reason() {
    let (e, _) = engine();
    let q = qref(&e, "dlq");
    add(&e, &q, "{}");
    let (_, json) = e.take(&q, 1, WorkerLimits::default());
    let (id, token) = taken(&json).pop().expect("a job to take");
    let lost = Outcome::Failed {
        reason: "worker thread exited with code 1".into(),
        stack: None,
        unrecoverable: false,
        timed_out: false,
        lost: true,
        delay: None,
    };
    e.ack_many(&q, vec![ack(&id, token, lost)]);
    let entry = &entries(&e, &q, "{}")[0];
    assert_eq!(entry["reason"], "worker_lost");
    assert_eq!(entry["attempts"][0]["kind"], "worker_lost");
    let lost_only = entries(&e, &q, r#"{"reason":"worker_lost"}"#);
    assert_eq!(lost_only.len(), 1);
}

#[test]
fn max_entries_drops_the_oldest_at_once() {
    let (e, clock) = engine();
    let q = qref(&e, "dlq");
    for _ in 0..4 {
        add(&e, &q, "{}");
    }
    for _ in 0..3 {
        take_and_fail(&e, &q, false, false);
        clock.advance(1);
    }
    set(&e, &q, r#"{"maxEntries":2}"#);
    let ids = |e: &Engine| -> Vec<Value> {
        entries(e, &q, "{}")
            .iter()
            .map(|x| x["job"]["id"].clone())
            .collect()
    };
    assert_eq!(ids(&e), ["3", "2"]);
    take_and_fail(&e, &q, false, false);
    assert_eq!(ids(&e), ["4", "3"]);
    let c = run(e.dlq_config(&q).wait()).expect("config");
    assert_eq!(c.max_entries, 2);
}

#[test]
fn entries_expire_after_max_age() {
    let (e, clock) = engine();
    let q = qref(&e, "dlq");
    set(&e, &q, r#"{"maxAge":1000}"#);
    add(&e, &q, "{}");
    add(&e, &q, "{}");
    take_and_fail(&e, &q, false, false);
    clock.advance(600);
    take_and_fail(&e, &q, false, false);
    let up = run(dlq::maintain(&e, &q, e.now())).expect("a pass");
    assert_eq!((up.expired, up.next_due), (0, Some(START + 1001)));
    clock.advance(401);
    let up = run(dlq::maintain(&e, &q, e.now())).expect("a pass");
    assert_eq!((up.expired, up.next_due), (1, Some(START + 1601)));
    assert_eq!(entries(&e, &q, "{}").len(), 1);
}

#[test]
fn automatic_retries_wait_longer_each_time_and_stop() {
    let (e, clock) = engine();
    let q = qref(&e, "dlq");
    set(
        &e,
        &q,
        r#"{"autoRetry":true,"autoRetryInterval":100,"maxAutoRetries":2}"#,
    );
    add(&e, &q, r#"{"attempts":2}"#);
    for round in 0..3u64 {
        // Both attempts fail each time: the job's attempts count again after each retry.
        take_and_fail(&e, &q, false, false);
        take_and_fail(&e, &q, false, false);
        let entered = e.now();
        let entry = &entries(&e, &q, "{}")[0];
        assert_eq!(entry["retries"], round);
        if round == 2 {
            assert_eq!(entry["nextRetryAt"], Value::Null, "retries spent");
            break;
        }
        let wait = 100 << round;
        assert_eq!(entry["nextRetryAt"], entered + wait);
        let up = run(dlq::maintain(&e, &q, e.now())).expect("a pass");
        assert_eq!((up.retried, up.next_due), (0, Some(entered + wait)));
        clock.advance(wait);
        let up = run(dlq::maintain(&e, &q, e.now())).expect("a pass");
        assert_eq!(up.retried, 1);
        assert!(entries(&e, &q, "{}").is_empty());
    }
    let history = &entries(&e, &q, "{}")[0]["attempts"];
    assert_eq!(history.as_array().map(Vec::len), Some(6));
}

#[test]
fn retry_by_filter_and_by_id() {
    let (e, _) = engine();
    let q = qref(&e, "dlq");
    for _ in 0..3 {
        add(&e, &q, "{}");
    }
    take_and_fail(&e, &q, false, true);
    take_and_fail(&e, &q, false, false);
    take_and_fail(&e, &q, false, false);
    let f = DlqFilter::parse(r#"{"reason":"timeout"}"#).expect("filter");
    assert_eq!(run(dlq::retry(&e, &q, &f, e.now())).expect("retry"), 1);
    let one = DlqFilter::of_id("3");
    assert_eq!(run(dlq::retry(&e, &q, &one, e.now())).expect("retry"), 1);
    assert_eq!(run(dlq::retry(&e, &q, &one, e.now())).expect("retry"), 0);
    assert_eq!(entries(&e, &q, "{}").len(), 1);
}

#[test]
fn the_keeper_passes_when_entries_fall_due() {
    let (e, clock) = engine();
    let e: Arc<dyn Backend> = Arc::new(e);
    let q = e.queue(None, "dlq").expect("a queue");
    let q2 = e.queue(None, "other").expect("a queue");
    let keeper = DlqKeeper::new(clock.clone());
    let kept: Vec<Kept> = vec![(e.clone(), q.clone(), 1), (e.clone(), q2, 2)];
    let next = run(keeper.pass(&kept));
    assert_eq!(next, START + KEEPER_PERIOD, "nothing due: a period later");
    run(dlq::set_config(&*e, &q, r#"{"maxAge":500}"#)).expect("set");
    keeper.nudge(1);
    let next = run(keeper.pass(&kept));
    assert_eq!(next, START + KEEPER_PERIOD);
    // A failure heard brings the queue's pass forward to when its entry can first expire.
    keeper.failed(1);
    assert_eq!(run(keeper.pass(&kept)), START + 501);
    // One of a queue whose entries live 7 days changes nothing sooner.
    keeper.failed(2);
    assert_eq!(run(keeper.pass(&kept)), START + 501);
    clock.advance(10);
    let (_, json) = engine_take(&e, &q);
    let (id, token) = taken(&json).pop().expect("a job");
    let results = run(e
        .ack(&q, vec![ack(&id, token, failure(false, false))])
        .wait());
    assert!(results.is_ok());
    keeper.nudge(1);
    let next = run(keeper.pass(&kept));
    assert_eq!(next, START + 10 + 500 + 1, "just past the entry's expiry");
    clock.advance(501);
    run(keeper.pass(&kept));
    let c = run(e
        .counts(&q, vec![StateFilter::State(JobState::Failed)])
        .wait())
    .expect("counts");
    assert_eq!(c, [0]);
}

/// Adds one job and takes it through the backend.
fn engine_take(e: &Arc<dyn Backend>, q: &QueueRef) -> (usize, String) {
    let job = crate::domain::queue::NewJob {
        name: "j".into(),
        data: "{}".into(),
        opts: crate::domain::options::JobOptions::defaults(),
        opts_json: None,
        timestamp: START,
    };
    run(e.add(q, job).wait()).expect("added");
    let json = run(e.take(q, 1, WorkerLimits::default()).wait()).expect("taken");
    (1, json)
}
