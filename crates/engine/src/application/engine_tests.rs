//! Tests of the [`Engine`]: queue names, isolation, shard totals, the event hub, `ack_many` and
//! the real delayed-job timer thread. Long-poll pulls are in the child module `pull`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::engine::{Ack, Engine, EngineConfig};
use crate::backend::QueueRef;
use crate::clock::MockClock;
use crate::domain::options::{JobOptions, KeepJobs};
use crate::domain::queue::{AckResult, Added, NewJob, Outcome};
use crate::error::ErrorKind;

mod dlq;
mod flows;
mod limited;
mod metrics;
mod pull;

const START: u64 = 1_000_000;

fn engine() -> (Engine, Arc<MockClock>) {
    let clock = Arc::new(MockClock::new(START));
    let config = EngineConfig {
        clock: clock.clone(),
        timer: false,
        shards: Some(4),
        ..EngineConfig::new(crate::wire::test_json::wire())
    };
    (Engine::new(config).unwrap(), clock)
}

fn qref(e: &Engine, name: &str) -> QueueRef {
    e.queue_ref(name).unwrap()
}

fn job(e: &Engine, opts: &str) -> NewJob {
    NewJob {
        name: "job".into(),
        data: "{}".into(),
        opts: JobOptions::from_json(opts).unwrap(),
        opts_json: None,
        timestamp: e.now(),
    }
}

/// Adds a job with an automatic id (whose key is the id); returns the id.
fn add(e: &Engine, q: &QueueRef, opts: &str) -> String {
    match e.add(q, job(e, opts)) {
        Added::New(key) => key.to_string(),
        d => panic!("{d:?}"),
    }
}

use crate::domain::job::parse_taken as taken;
use crate::domain::limits::WorkerLimits;

fn ids(json: &str) -> Vec<String> {
    let v: Vec<Value> = serde_json::from_str(json).unwrap();
    v.iter()
        .map(|j| crate::domain::job::record_id(&j["id"]))
        .collect()
}

/// Non-zero counts as "state=n".
fn counts(e: &Engine, q: &QueueRef) -> String {
    let c = e.counts(q, &[]).unwrap();
    let nonzero: Vec<String> = c
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|(s, n)| format!("{s}={n}"))
        .collect();
    nonzero.join(" ")
}

fn ok(value: &str) -> Outcome {
    Outcome::Completed(value.into())
}

fn fail() -> Outcome {
    Outcome::Failed {
        reason: "boom".into(),
        stack: None,
        unrecoverable: false,
        timed_out: false,
        lost: false,
        delay: None,
    }
}

fn ack(id: &str, token: u64, outcome: Outcome) -> Ack {
    Ack {
        id: id.into(),
        token,
        outcome,
        keep: None,
    }
}

#[test]
fn queue_names_are_validated() {
    let (e, _) = engine();
    let too_long = "x".repeat(256);
    let too_long_utf8 = "é".repeat(128);
    for bad in ["", "a:b", ":", &too_long, &too_long_utf8, "tab\there"] {
        let err = e.queue_ref(bad).unwrap_err();
        assert_eq!(
            (err.code(), err.kind()),
            ("ERR_INVALID_OPTION", ErrorKind::Range),
            "{bad:?}"
        );
        assert!(err.to_string().starts_with("name "), "{err}");
    }
    let max = "x".repeat(255);
    assert_eq!(qref(&e, &max).name(), max);
    assert_eq!(qref(&e, "émails"), qref(&e, "émails"));
}

#[test]
fn shard_count_is_a_power_of_two_up_to_64() {
    for (asked, got) in [(0, 1), (1, 1), (4, 4), (5, 8), (64, 64), (1000, 64)] {
        let config = EngineConfig {
            shards: Some(asked),
            timer: false,
            ..EngineConfig::new(crate::wire::test_json::wire())
        };
        assert_eq!(Engine::new(config).unwrap().shard_count(), got, "{asked}");
    }
}

#[test]
fn queues_are_isolated() {
    let (e, _) = engine();
    let (a, b, unused) = (qref(&e, "a"), qref(&e, "b"), qref(&e, "never-used"));
    add(&e, &a, "{}");
    add(&e, &a, "{}");
    assert_eq!(add(&e, &b, "{}"), "1", "ids are per queue");
    let (n, json) = e.take(&b, 10, WorkerLimits::default());
    assert_eq!((n, ids(&json)), (1, vec!["1".to_string()]));
    let b_token = taken(&json)[0].1;
    assert_eq!(
        (e.state(&a, "1"), e.state(&b, "1"), e.state(&b, "2")),
        ("waiting", "active", "unknown")
    );
    assert_eq!(
        e.ack_many(&a, vec![ack("1", b_token, ok("1"))]),
        vec![AckResult::Stale]
    );
    e.pause(&a);
    assert!(e.is_paused(&a) && !e.is_paused(&b));
    add(&e, &b, "{}");
    assert_eq!(
        (
            e.take(&a, 1, WorkerLimits::default()).0,
            e.take(&b, 1, WorkerLimits::default()).0
        ),
        (0, 1)
    );
    e.obliterate(&a, false).unwrap();
    assert_eq!(
        (counts(&e, &a), counts(&e, &b)),
        (String::new(), "active=2".to_string())
    );
    assert_eq!(
        (
            e.count(&unused),
            e.state(&unused, "1"),
            e.job_json(&unused, "1")
        ),
        (0, "unknown", None)
    );
    assert_eq!(
        e.jobs_json(&unused, &["wait".into()], 0, -1, true).unwrap(),
        "[]"
    );
}

#[test]
fn state_names_are_parsed_and_checked() {
    let (e, _) = engine();
    let q = qref(&e, "q");
    add(&e, &q, "{}");
    add(&e, &q, r#"{"priority":1}"#);
    let c = e
        .counts(&q, &["prioritized".into(), "wait".into()])
        .unwrap();
    assert_eq!(
        c,
        vec![("prioritized".to_string(), 1), ("wait".to_string(), 1)]
    );
    assert_eq!(e.counts(&q, &[]).unwrap().len(), 8);
    let json = e
        .jobs_json(&q, &["prioritized".into(), "waiting".into()], 0, -1, true)
        .unwrap();
    assert_eq!(ids(&json), vec!["2", "1"]);
    assert_eq!(
        e.counts(&q, &["bogus".into()]).unwrap_err().code(),
        "ERR_INVALID_OPTION"
    );
    assert_eq!(
        e.jobs_json(&q, &["x".into()], 0, -1, true)
            .unwrap_err()
            .code(),
        "ERR_INVALID_OPTION"
    );
    assert_eq!(
        e.clean(&q, 0, 0, "nope").unwrap_err().code(),
        "ERR_INVALID_OPTION"
    );
    assert_eq!(
        e.retry(&q, "1", "waiting", false).unwrap_err().code(),
        "ERR_INVALID_OPTION"
    );
    assert_eq!(
        (e.remove(&q, "9"), e.remove(&q, "1")),
        (Ok(false), Ok(true))
    );
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn events_reach_the_hub_only_for_subscribed_queues() {
    let (e, clock) = engine();
    let (q, other) = (qref(&e, "mail"), qref(&e, "other"));
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    e.set_event_notifier(Some(Arc::new(move || {
        c.fetch_add(1, Ordering::SeqCst);
    })));
    add(&e, &other, "{}");
    e.take(&other, 1, WorkerLimits::default());
    assert_eq!(
        (e.drain_events_json(), calls.load(Ordering::SeqCst)),
        ("[]".to_string(), 0)
    );
    e.subscribe(&q);
    add(&e, &q, "{}");
    add(&e, &q, r#"{"delay":50}"#);
    let token = taken(&e.take(&q, 1, WorkerLimits::default()).1)[0].1;
    e.ack_many(&q, vec![ack("1", token, ok(r#"{"ok":true}"#))]);
    let events: Value = serde_json::from_str(&e.drain_events_json()).unwrap();
    let want = json!([
        ["mail", "added", {"jobId": "1", "name": "job"}],
        ["mail", "waiting", {"jobId": "1"}],
        ["mail", "added", {"jobId": "2", "name": "job"}],
        ["mail", "delayed", {"jobId": "2", "delay": START + 50}],
        ["mail", "active", {"jobId": "1", "prev": "waiting"}],
        ["mail", "drained", {}],
        ["mail", "completed", {"jobId": "1", "returnvalue": {"ok": true}, "prev": "active"}],
    ]);
    assert_eq!(events, want);
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "one notification per batch"
    );
    assert_eq!(e.drain_events_json(), "[]");
    clock.advance(50);
    e.promote_due();
    let events: Value = serde_json::from_str(&e.drain_events_json()).unwrap();
    assert_eq!(
        events,
        json!([["mail", "waiting", {"jobId": "2", "prev": "delayed"}]])
    );
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    e.subscribe(&q);
    e.unsubscribe(&q);
    e.pause(&q);
    assert_eq!(
        e.drain_events_json(),
        r#"[["mail","paused",{}]]"#,
        "one listener left"
    );
    e.unsubscribe(&q);
    e.resume(&q);
    add(&e, &q, "{}");
    assert_eq!(e.drain_events(), vec![]);
}

#[test]
fn ack_many_returns_results_in_input_order() {
    let (e, _) = engine();
    let q = qref(&e, "q");
    for opts in ["{}", "{}", "{}", r#"{"attempts":2}"#, "{}", "{}"] {
        add(&e, &q, opts);
    }
    let t = taken(&e.take(&q, 6, WorkerLimits::default()).1);
    let results = e.ack_many(
        &q,
        vec![
            ack("1", t[0].1, ok("1")),
            Ack {
                id: "2".into(),
                token: t[1].1,
                outcome: fail(),
                keep: Some(KeepJobs::None),
            },
            ack("3", t[2].1 + 100, ok("1")),
            ack("4", t[3].1, fail()),
            ack("99", 1, ok("1")),
            ack("1", t[0].1, ok("1")),
            ack("5", t[4].1, ok("1")),
            ack("6", t[5].1, Outcome::Released { started: true }),
        ],
    );
    use AckResult::*;
    assert_eq!(
        results,
        vec![
            Completed,
            Failed,
            Stale,
            Retrying { delay: 0 },
            Stale,
            Stale,
            Completed,
            Released,
        ]
    );
    let states: Vec<&str> = ["1", "2", "3", "4", "5", "6"]
        .iter()
        .map(|id| e.state(&q, id))
        .collect();
    assert_eq!(
        states,
        vec![
            "completed",
            "unknown",
            "active",
            "waiting",
            "completed",
            "waiting"
        ]
    );
}

/// Polls `cond` every 2 ms for up to 500 ms; returns the time it took to hold.
fn wait_for(what: &str, cond: impl Fn() -> bool) -> Duration {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < ms(500), "{what}: not within 500 ms");
        std::thread::sleep(ms(2));
    }
    start.elapsed()
}

#[test]
fn real_timer_promotes_delayed_jobs_and_backoff_retries() {
    let e = Engine::new(EngineConfig::new(crate::wire::test_json::wire())).unwrap();
    let q = qref(&e, "timer");
    add(&e, &q, r#"{"delay":60000}"#);
    let start = Instant::now();
    add(&e, &q, r#"{"delay":30,"attempts":2,"backoff":30}"#);
    wait_for("delayed job promoted", || e.state(&q, "2") == "waiting");
    assert!(
        start.elapsed() >= ms(29),
        "promoted early, after {:?}",
        start.elapsed()
    );
    assert_eq!(e.state(&q, "1"), "delayed", "the far job stays");
    let token = taken(&e.take(&q, 1, WorkerLimits::default()).1)[0].1;
    let start = Instant::now();
    assert_eq!(
        e.ack_many(&q, vec![ack("2", token, fail())]),
        vec![AckResult::Retrying { delay: 30 }]
    );
    wait_for("backoff retry promoted", || e.state(&q, "2") == "waiting");
    assert!(
        start.elapsed() >= ms(29),
        "retried early, after {:?}",
        start.elapsed()
    );
}

#[tokio::test]
async fn real_timer_wakes_a_pending_pull() {
    let e = Engine::new(EngineConfig::new(crate::wire::test_json::wire())).unwrap();
    let q = qref(&e, "timer-pull");
    add(&e, &q, r#"{"delay":30}"#);
    let start = Instant::now();
    let (n, json) = e.pull(&q, 1, 1, WorkerLimits::default(), ms(500)).await;
    assert_eq!(
        (n, ids(&json)),
        (1, vec!["1".to_string()]),
        "after {:?}",
        start.elapsed()
    );
}

#[test]
fn prefixes_namespace_queues_and_bull_is_the_plain_namespace() {
    let (e, _) = engine();
    let plain = e.queue_ref("mail").unwrap();
    assert_eq!(e.queue_ref_in(Some("bull"), "mail").unwrap(), plain);
    let other = e.queue_ref_in(Some("{app}:v2"), "mail").unwrap();
    assert_eq!(other.name(), "{app}:v2:mail");
    add(&e, &plain, "{}");
    assert_eq!(counts(&e, &other), "");
    assert_eq!(counts(&e, &plain), "waiting=1");
    for (prefix, name) in [
        (Some(""), "a"),
        (Some("a\nb"), "a"),
        (None, "a:b"),
        (None, ""),
    ] {
        let err = e.queue_ref_in(prefix, name).unwrap_err();
        assert_eq!(err.code(), "ERR_INVALID_OPTION", "{prefix:?} {name:?}");
    }
}
