//! Tests of one queue's state machine ([`QueueState`]) called directly with explicit `now`:
//! shared helpers, then ordering, delays, pause and retries. Child modules: `admin` (retention,
//! ids, counts, getters, drain/clean/obliterate/remove), `jobs` (single-job operations and
//! events) and `model` (the model-based property test).

use std::sync::Arc;

use serde_json::Value;

use super::{AckResult, Added, Effects, NewJob, Outcome, QueueState};
use crate::domain::event::EventKind;
use crate::domain::job::JobState;
use crate::domain::listing::StateFilter;
use crate::domain::options::{JobOptions, KeepJobs};
use crate::error::EngineError;

mod admin;
mod clean;
mod dedup;
mod groups;
mod jobs;
mod model;
mod schedulers;
mod stall;
mod steps;

const T0: u64 = 1_000_000;

fn queue() -> QueueState {
    QueueState::new(Arc::from("q"))
}

fn new_job(opts: &str, timestamp: u64) -> NewJob {
    NewJob {
        name: "job".into(),
        data: "{\"n\":1}".into(),
        opts: JobOptions::from_json(opts).unwrap(),
        opts_json: None,
        timestamp,
    }
}

/// Adds a job created at `now`; returns its id.
fn add(q: &mut QueueState, opts: &str, now: u64) -> String {
    add_fx(q, opts, now, &mut Effects::default())
}

fn add_fx(q: &mut QueueState, opts: &str, now: u64, fx: &mut Effects) -> String {
    match q.add(new_job(opts, now), now, fx) {
        Added::New(key) => q.jobs.get(&key).map(|j| j.id_string()).unwrap_or_default(),
        other => panic!("unexpected {other:?}"),
    }
}

/// Takes up to `max` jobs: their (id, token) pairs.
fn take_fx(q: &mut QueueState, max: usize, now: u64, fx: &mut Effects) -> Vec<(String, u64)> {
    let mut taken = Vec::new();
    let n = q.take(max, now, fx, |j| taken.push((j.id_string(), j.lock)));
    assert_eq!(
        taken.len(),
        n,
        "take's count matches the jobs it handed out"
    );
    taken
}

fn take(q: &mut QueueState, max: usize, now: u64) -> Vec<(String, u64)> {
    take_fx(q, max, now, &mut Effects::default())
}

fn take_ids(q: &mut QueueState, max: usize, now: u64) -> Vec<String> {
    take(q, max, now).into_iter().map(|(id, _)| id).collect()
}

fn ok() -> Outcome {
    Outcome::Completed("\"done\"".into())
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

fn ack_with(
    q: &mut QueueState,
    t: &(String, u64),
    o: Outcome,
    keep: Option<KeepJobs>,
    now: u64,
) -> AckResult {
    let key = q.key_of(&t.0).expect("acked job exists");
    q.ack(key, t.1, o, keep, now, &mut Effects::default())
}

fn ack(q: &mut QueueState, t: &(String, u64), o: Outcome, now: u64) -> AckResult {
    ack_with(q, t, o, None, now)
}

/// Takes the single ready job and acks it.
fn run_one(
    q: &mut QueueState,
    o: Outcome,
    keep: Option<KeepJobs>,
    now: u64,
) -> (String, AckResult) {
    let t = take(q, 1, now).pop().expect("a ready job");
    let r = ack_with(q, &t, o, keep, now);
    (t.0, r)
}

/// Non-zero counts as "state=n" in `StateFilter::ALL` order.
fn counts(q: &QueueState) -> String {
    StateFilter::ALL
        .iter()
        .map(|s| (s, q.count_of(StateFilter::parse(s).unwrap())))
        .filter(|(_, n)| *n > 0)
        .map(|(s, n)| format!("{s}={n}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn json(q: &QueueState, id: &str) -> Value {
    crate::wire::test_json::record_value(q.job_by_id(id).expect("job exists"), false)
}

/// Ids of a page of jobs in `filters`.
fn page_ids(
    q: &QueueState,
    filters: &[StateFilter],
    start: i64,
    end: i64,
    asc: bool,
) -> Vec<String> {
    let mut ids = Vec::new();
    q.jobs_page(filters, start, end, asc, |j| ids.push(j.id_string()));
    ids
}

fn ids_of(q: &QueueState, states: &[JobState], start: i64, end: i64, asc: bool) -> Vec<String> {
    let f: Vec<StateFilter> = states.iter().map(|s| StateFilter::State(*s)).collect();
    page_ids(q, &f, start, end, asc)
}

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn unprioritized_first_then_lower_priority_number_fifo_within_priority() {
    let mut q = queue();
    for opts in [
        r#"{"priority":3}"#,
        "{}",
        r#"{"priority":1}"#,
        r#"{"priority":1}"#,
        r#"{"priority":0}"#,
        r#"{"priority":3}"#,
    ] {
        add(&mut q, opts, T0);
    }
    assert_eq!(q.state_of("1"), Some(JobState::Prioritized));
    assert_eq!(q.state_of("2"), Some(JobState::Waiting));
    assert_eq!(counts(&q), "waiting=2 prioritized=4");
    assert_eq!(
        ids_of(&q, &[JobState::Waiting, JobState::Prioritized], 0, -1, true),
        strs(&["2", "5", "3", "4", "1", "6"])
    );
    assert_eq!(
        take_ids(&mut q, 10, T0),
        strs(&["2", "5", "3", "4", "1", "6"])
    );
    assert_eq!(counts(&q), "active=6");
}

#[test]
fn lifo_goes_to_the_head_of_its_own_priority() {
    let mut q = queue();
    for opts in [
        "{}",
        "{}",
        r#"{"lifo":true}"#,
        r#"{"priority":2}"#,
        r#"{"priority":2,"lifo":true}"#,
        r#"{"lifo":true}"#,
    ] {
        add(&mut q, opts, T0);
    }
    assert_eq!(
        take_ids(&mut q, 10, T0),
        strs(&["6", "3", "1", "2", "5", "4"])
    );
}

#[test]
fn delayed_jobs_become_ready_at_timestamp_plus_delay_in_run_at_order() {
    let mut q = queue();
    let mut fx = Effects::default();
    for opts in [
        r#"{"delay":300}"#,
        r#"{"delay":100}"#,
        r#"{"delay":200}"#,
        r#"{"delay":100}"#,
    ] {
        add_fx(&mut q, opts, T0, &mut fx);
    }
    assert_eq!(fx.wake_at, Some(T0 + 100), "earliest run-at to wake for");
    // Created 50 ms ago: due at T0 + 50. Created 200 ms ago with delay 100: ready at once.
    q.add(
        new_job(r#"{"delay":100}"#, T0 - 50),
        T0,
        &mut Effects::default(),
    );
    q.add(
        new_job(r#"{"delay":100}"#, T0 - 200),
        T0,
        &mut Effects::default(),
    );
    assert_eq!(counts(&q), "waiting=1 delayed=5");
    assert_eq!(q.count(), 6);
    assert_eq!(
        ids_of(&q, &[JobState::Delayed], 0, -1, true),
        strs(&["5", "2", "4", "3", "1"])
    );
    assert_eq!(q.next_due(), Some(T0 + 50));
    assert_eq!(q.promote_due(T0 + 49, &mut Effects::default()), 0);
    assert_eq!(q.promote_due(T0 + 50, &mut Effects::default()), 1);
    assert_eq!(q.promote_due(T0 + 99, &mut Effects::default()), 0);
    assert_eq!(q.state_of("2"), Some(JobState::Delayed));
    assert_eq!(q.promote_due(T0 + 100, &mut Effects::default()), 2);
    assert_eq!(q.state_of("3"), Some(JobState::Delayed));
    assert_eq!(
        take_ids(&mut q, 10, T0 + 299),
        strs(&["6", "5", "2", "4", "3"]),
        "take promotes what is due"
    );
    assert_eq!(q.state_of("1"), Some(JobState::Delayed));
    assert_eq!(take_ids(&mut q, 10, T0 + 300), strs(&["1"]));
    assert_eq!(q.next_due(), None);
}

#[test]
fn paused_queue_hands_out_nothing_but_adds_still_land() {
    let mut q = queue();
    add(&mut q, "{}", T0);
    q.pause(&mut Effects::default());
    assert!(q.is_paused());
    add(&mut q, "{}", T0);
    add(&mut q, r#"{"priority":2}"#, T0);
    add(&mut q, r#"{"delay":10}"#, T0);
    assert_eq!(q.state_of("2"), Some(JobState::Waiting));
    assert_eq!(q.state_of("3"), Some(JobState::Prioritized));
    // As in BullMQ 5+: a paused queue's jobs are counted where they are, never as `paused`.
    assert_eq!(q.count_of(StateFilter::Paused), 0);
    assert_eq!(q.count_of(StateFilter::State(JobState::Waiting)), 2);
    assert!(q.keys_in(StateFilter::Paused).is_empty());
    assert_eq!(q.count(), 4);
    assert!(take(&mut q, 10, T0 + 20).is_empty());
    assert_eq!(
        q.state_of("4"),
        Some(JobState::Waiting),
        "delayed jobs are still promoted"
    );
    q.resume(&mut Effects::default());
    assert_eq!(q.count_of(StateFilter::Paused), 0);
    assert_eq!(take_ids(&mut q, 10, T0 + 20), strs(&["1", "2", "4", "3"]));
}

#[test]
fn retries_without_backoff_go_back_to_waiting_until_attempts_run_out() {
    let mut q = queue();
    add(&mut q, r#"{"attempts":3}"#, T0);
    let mut tokens = Vec::new();
    for attempt in 1..=3u32 {
        let t = take(&mut q, 1, T0).pop().unwrap();
        tokens.push(t.1);
        assert_eq!(counts(&q), "active=1");
        let stack = Outcome::Failed {
            reason: format!("boom {attempt}").into(),
            stack: Some("at x".into()),
            unrecoverable: false,
            timed_out: false,
            lost: false,
            delay: None,
        };
        let r = ack(&mut q, &t, stack, T0);
        let j = json(&q, "1");
        assert_eq!(j["attemptsMade"], attempt);
        assert_eq!(j["attemptsStarted"], attempt);
        assert_eq!(j["failedReason"], format!("boom {attempt}"));
        if attempt < 3 {
            assert_eq!(r, AckResult::Retrying { delay: 0 });
            assert_eq!(counts(&q), "waiting=1");
        } else {
            assert_eq!(r, AckResult::Failed);
            assert_eq!(counts(&q), "failed=1");
            assert_eq!(j["stacktrace"].as_array().unwrap().len(), 3);
        }
    }
    tokens.dedup();
    assert_eq!(tokens.len(), 3, "every activation has its own token");
}

#[test]
fn fixed_backoff_waits_delay_each_time() {
    let mut q = queue();
    add(
        &mut q,
        r#"{"attempts":3,"backoff":{"type":"fixed","delay":500}}"#,
        T0,
    );
    let mut now = T0;
    for _ in 0..2 {
        let (_, r) = run_one(&mut q, fail(), None, now);
        assert_eq!(r, AckResult::Retrying { delay: 500 });
        assert_eq!(counts(&q), "delayed=1");
        assert!(take(&mut q, 1, now + 499).is_empty());
        now += 500;
    }
    assert_eq!(run_one(&mut q, fail(), None, now).1, AckResult::Failed);
}

#[test]
fn a_wait_decided_by_the_worker_overrides_the_backoff_option() {
    let mut q = queue();
    add(&mut q, r#"{"attempts":3,"backoff":{"type":"linear"}}"#, T0);
    let decided = |delay| Outcome::Failed {
        reason: "x".into(),
        stack: None,
        unrecoverable: false,
        timed_out: false,
        lost: false,
        delay,
    };
    let (_, r) = run_one(&mut q, decided(Some(250)), None, T0);
    assert_eq!(r, AckResult::Retrying { delay: 250 });
    assert_eq!(counts(&q), "delayed=1");
    let (_, r) = run_one(&mut q, decided(None), None, T0 + 250);
    assert_eq!(
        r,
        AckResult::Retrying { delay: 0 },
        "custom type, no wait sent"
    );
    assert_eq!(json(&q, "1")["attemptsMade"], 2);
}

#[test]
fn attempts_made_counts_every_finished_attempt_the_successful_one_included() {
    let mut q = queue();
    add(&mut q, "{}", T0);
    add(&mut q, r#"{"attempts":2}"#, T0);
    run_one(&mut q, ok(), None, T0);
    assert_eq!(json(&q, "1")["attemptsMade"], 1);
    run_one(&mut q, fail(), None, T0);
    run_one(&mut q, ok(), None, T0);
    assert_eq!(json(&q, "2")["attemptsMade"], 2);
}

#[test]
fn exponential_backoff_doubles_from_delay() {
    let mut q = queue();
    add(
        &mut q,
        r#"{"attempts":4,"backoff":{"type":"exponential","delay":100}}"#,
        T0,
    );
    let mut now = T0;
    for want in [100, 200, 400] {
        let (_, r) = run_one(&mut q, fail(), None, now);
        assert_eq!(r, AckResult::Retrying { delay: want });
        assert_eq!(q.state_of("1"), Some(JobState::Delayed));
        assert_eq!(q.next_due(), Some(now + want));
        assert!(take(&mut q, 1, now + want - 1).is_empty());
        now += want;
    }
    assert_eq!(run_one(&mut q, fail(), None, now).1, AckResult::Failed);
}

#[test]
fn jitter_stays_within_its_band_and_varies() {
    let mut q = queue();
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..50 {
        add(
            &mut q,
            r#"{"attempts":2,"backoff":{"type":"exponential","delay":1000,"jitter":0.5}}"#,
            T0,
        );
        match run_one(&mut q, fail(), None, T0).1 {
            AckResult::Retrying { delay } => {
                assert!((500..=1000).contains(&delay), "{delay}");
                seen.insert(delay);
            }
            r => panic!("{r:?}"),
        }
    }
    assert!(seen.len() > 10, "jitter is drawn per failure: {seen:?}");
}

#[test]
fn unrecoverable_failure_fails_at_once() {
    let mut q = queue();
    q.listeners = 1;
    add(&mut q, r#"{"attempts":5,"backoff":100}"#, T0);
    let t = take(&mut q, 1, T0).pop().unwrap();
    let mut fx = Effects::default();
    let key = q.key_of("1").unwrap();
    let o = Outcome::Failed {
        reason: "fatal".into(),
        stack: None,
        unrecoverable: true,
        timed_out: false,
        lost: false,
        delay: None,
    };
    assert_eq!(q.ack(key, t.1, o, None, T0, &mut fx), AckResult::Failed);
    assert_eq!(counts(&q), "failed=1");
    assert_eq!(json(&q, "1")["attemptsMade"], 1);
    let kinds: Vec<_> = fx.events.iter().map(|e| e.kind.clone()).collect();
    assert_eq!(
        kinds,
        vec![EventKind::Failed {
            job_id: "1".into(),
            failed_reason: "fatal".into()
        }]
    );
}

#[test]
fn exhausted_attempts_fail_and_emit_retries_exhausted_only_with_listeners() {
    for listeners in [0, 1] {
        let mut q = queue();
        q.listeners = listeners;
        add(&mut q, r#"{"attempts":2}"#, T0);
        run_one(&mut q, fail(), None, T0);
        let t = take(&mut q, 1, T0).pop().unwrap();
        let mut fx = Effects::default();
        let key = q.key_of("1").unwrap();
        assert_eq!(
            q.ack(key, t.1, fail(), None, T0, &mut fx),
            AckResult::Failed
        );
        let want = match listeners {
            0 => vec![],
            _ => vec![
                EventKind::Failed {
                    job_id: "1".into(),
                    failed_reason: "boom".into(),
                },
                EventKind::RetriesExhausted {
                    job_id: "1".into(),
                    attempts_made: 2,
                },
            ],
        };
        assert_eq!(
            fx.events.into_iter().map(|e| e.kind).collect::<Vec<_>>(),
            want
        );
    }
}

#[test]
fn stale_acks_change_nothing() {
    let mut q = queue();
    add(&mut q, r#"{"attempts":2}"#, T0);
    let first = take(&mut q, 1, T0).pop().unwrap();
    let wrong = (first.0.clone(), first.1 + 1);
    assert_eq!(ack(&mut q, &wrong, ok(), T0), AckResult::Stale);
    assert_eq!(counts(&q), "active=1");
    assert_eq!(
        ack(&mut q, &first, fail(), T0),
        AckResult::Retrying { delay: 0 }
    );
    assert_eq!(
        ack(&mut q, &first, ok(), T0),
        AckResult::Stale,
        "already acked"
    );
    assert_eq!(counts(&q), "waiting=1");
    let second = take(&mut q, 1, T0).pop().unwrap();
    assert_eq!(
        ack(&mut q, &first, ok(), T0),
        AckResult::Stale,
        "token of the earlier activation"
    );
    assert_eq!(counts(&q), "active=1");
    let key = q.key_of("1").unwrap();
    q.obliterate(true).unwrap();
    assert_eq!(
        q.ack(key, second.1, ok(), None, T0, &mut Effects::default()),
        AckResult::Stale
    );
    assert_eq!(counts(&q), "");
}

#[test]
fn ack_from_before_obliterate_is_stale_for_a_new_job_with_the_same_id() {
    let mut q = queue();
    add(&mut q, "{}", T0);
    let old = take(&mut q, 1, T0).pop().unwrap();
    q.obliterate(true).unwrap();
    add(&mut q, "{}", T0);
    let new = take(&mut q, 1, T0).pop().unwrap();
    assert_eq!(new.0, old.0, "ids restart at 1");
    assert_eq!(ack(&mut q, &old, ok(), T0), AckResult::Stale);
    assert_eq!(counts(&q), "active=1");
}
