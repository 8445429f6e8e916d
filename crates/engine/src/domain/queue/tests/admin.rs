//! Retention, ids, counts, getters and whole-queue administration (drain, clean, obliterate,
//! remove) of one queue.

use super::*;

fn completed_ids(q: &QueueState) -> Vec<String> {
    ids_of(q, &[JobState::Completed], 0, -1, true)
}

#[test]
fn remove_on_complete_and_fail_rules() {
    let mut q = queue();
    add(&mut q, r#"{"removeOnComplete":true}"#, T0);
    assert_eq!(
        run_one(&mut q, ok(), None, T0),
        ("1".into(), AckResult::Completed)
    );
    assert_eq!((q.state_of("1"), counts(&q)), (None, String::new()));
    for _ in 0..4 {
        add(&mut q, r#"{"removeOnComplete":2}"#, T0);
        run_one(&mut q, ok(), None, T0);
    }
    assert_eq!(completed_ids(&q), strs(&["4", "5"]), "keeps the newest 2");
    let mut q = queue();
    for at in [T0, T0 + 5_000, T0 + 11_000] {
        add(&mut q, r#"{"removeOnComplete":{"age":10}}"#, at);
        run_one(&mut q, ok(), None, at);
    }
    assert_eq!(completed_ids(&q), strs(&["2", "3"]), "age is in seconds");
    let mut q = queue();
    add(&mut q, r#"{"removeOnFail":true}"#, T0);
    assert_eq!(run_one(&mut q, fail(), None, T0).1, AckResult::Failed);
    assert_eq!(counts(&q), "");
    for _ in 0..3 {
        add(&mut q, r#"{"removeOnFail":{"count":1}}"#, T0);
        run_one(&mut q, fail(), None, T0);
    }
    assert_eq!(ids_of(&q, &[JobState::Failed], 0, -1, true), strs(&["4"]));
}

#[test]
fn worker_keep_applies_only_to_jobs_without_their_own_rule() {
    let mut q = queue();
    add(&mut q, r#"{"removeOnComplete":false}"#, T0);
    add(&mut q, r#"{"attempts":3,"removeOnComplete":5}"#, T0);
    run_one(&mut q, ok(), Some(KeepJobs::None), T0);
    run_one(&mut q, ok(), Some(KeepJobs::None), T0);
    assert_eq!(completed_ids(&q), strs(&["1", "2"]), "own rules win");
    let mut q = queue();
    add(&mut q, r#"{"attempts":3}"#, T0);
    run_one(&mut q, ok(), Some(KeepJobs::None), T0);
    assert_eq!(
        counts(&q),
        "",
        "a policy without a retention rule falls back to the worker's"
    );
    let keep_one = Some(KeepJobs::Bounded {
        count: Some(1),
        age_secs: None,
    });
    for _ in 0..3 {
        add(&mut q, "{}", T0);
        run_one(&mut q, fail(), keep_one, T0);
    }
    assert_eq!(ids_of(&q, &[JobState::Failed], 0, -1, true), strs(&["4"]));
}

#[test]
fn remove_on_complete_true_removes_only_that_job() {
    let mut q = queue();
    add(&mut q, "{}", T0);
    run_one(&mut q, ok(), None, T0);
    add(&mut q, r#"{"removeOnComplete":true}"#, T0);
    run_one(&mut q, ok(), None, T0);
    assert_eq!(
        completed_ids(&q),
        strs(&["1"]),
        "job 1 has no rule and must be kept"
    );
}

#[test]
fn custom_ids_deduplicate_and_do_not_consume_auto_ids() {
    let mut q = queue();
    q.listeners = 1;
    assert_eq!(add(&mut q, "{}", T0), "1");
    assert_eq!(add(&mut q, r#"{"jobId":"x"}"#, T0), "x");
    assert_eq!(add(&mut q, "{}", T0), "2");
    let x = q.key_of("x").unwrap();
    let mut fx = Effects::default();
    assert_eq!(
        q.add(new_job(r#"{"jobId":"x","priority":4}"#, T0), T0, &mut fx),
        Added::Duplicate(x)
    );
    assert_eq!(
        fx.events.into_iter().map(|e| e.kind).collect::<Vec<_>>(),
        vec![EventKind::Duplicated { job_id: "x".into() }]
    );
    assert_eq!(counts(&q), "waiting=3");
    assert_eq!(add(&mut q, r#"{"jobId":"y"}"#, T0), "y");
    assert_eq!(add(&mut q, "{}", T0), "3");
    assert_eq!(q.last_auto_id(), 3);
    q.remove("x", T0, &mut Effects::default()).unwrap();
    assert_eq!(
        add(&mut q, r#"{"jobId":"x"}"#, T0),
        "x",
        "a removed custom id can be reused"
    );
}

#[test]
fn counts_follow_every_transition() {
    let mut q = queue();
    add(&mut q, "{}", T0);
    add(&mut q, r#"{"priority":1}"#, T0);
    add(&mut q, r#"{"delay":10}"#, T0);
    assert_eq!(
        (counts(&q), q.count()),
        ("waiting=1 delayed=1 prioritized=1".into(), 3)
    );
    let a = take(&mut q, 1, T0).pop().unwrap();
    assert_eq!(
        (counts(&q), q.count()),
        ("active=1 delayed=1 prioritized=1".into(), 2)
    );
    ack(&mut q, &a, ok(), T0);
    assert_eq!(counts(&q), "completed=1 delayed=1 prioritized=1");
    let b = take(&mut q, 1, T0 + 10).pop().unwrap();
    assert_eq!(
        b.0, "3",
        "promoted unprioritized job before the prioritized one"
    );
    assert_eq!(
        (counts(&q), q.count()),
        ("active=1 completed=1 prioritized=1".into(), 1)
    );
    ack(&mut q, &b, fail(), T0 + 10);
    assert_eq!(counts(&q), "completed=1 failed=1 prioritized=1");
    q.remove("2", T0, &mut Effects::default()).unwrap();
    assert_eq!((counts(&q), q.count()), ("completed=1 failed=1".into(), 0));
}

#[test]
fn getters_page_inclusively_and_desc_reverses_each_state() {
    let mut q = queue();
    for _ in 0..5 {
        add(&mut q, "{}", T0);
    }
    add(&mut q, r#"{"delay":20}"#, T0);
    add(&mut q, r#"{"delay":10}"#, T0);
    let w = [JobState::Waiting];
    assert_eq!(
        ids_of(&q, &w, 0, -1, true),
        strs(&["1", "2", "3", "4", "5"])
    );
    assert_eq!(ids_of(&q, &w, 1, 3, true), strs(&["2", "3", "4"]));
    assert_eq!(ids_of(&q, &w, -2, -1, true), strs(&["4", "5"]));
    assert_eq!(
        ids_of(&q, &w, 0, -1, false),
        strs(&["5", "4", "3", "2", "1"])
    );
    assert_eq!(ids_of(&q, &w, 0, 1, false), strs(&["5", "4"]));
    assert_eq!(ids_of(&q, &w, 3, 1, true), Vec::<String>::new());
    let dw = [JobState::Delayed, JobState::Waiting];
    assert_eq!(
        ids_of(&q, &dw, 0, -1, true),
        strs(&["7", "6", "1", "2", "3", "4", "5"])
    );
    assert_eq!(
        ids_of(&q, &dw, 0, -1, false),
        strs(&["6", "7", "5", "4", "3", "2", "1"])
    );
    assert_eq!(
        ids_of(&q, &dw, 1, 2, false),
        strs(&["7", "5"]),
        "paged after concatenation"
    );
    for t in take(&mut q, 3, T0).iter().rev() {
        ack(&mut q, t, ok(), T0);
    }
    assert_eq!(
        ids_of(&q, &[JobState::Completed], 0, -1, true),
        strs(&["3", "2", "1"]),
        "completion order"
    );
    let j = json(&q, "1");
    assert_eq!(
        (j["returnvalue"].as_str(), j["data"]["n"].as_u64()),
        (Some("done"), Some(1))
    );
    assert!(q.job_by_id("99").is_none());
}

#[test]
fn drain_removes_ready_jobs_and_optionally_delayed() {
    let mut q = queue();
    add(&mut q, "{}", T0);
    let active = take(&mut q, 1, T0).pop().unwrap();
    add(&mut q, r#"{"jobId":"w"}"#, T0);
    add(&mut q, "{}", T0);
    add(&mut q, r#"{"priority":3}"#, T0);
    add(&mut q, r#"{"delay":5}"#, T0);
    add(&mut q, r#"{"delay":9}"#, T0);
    assert_eq!(q.drain(false, T0, &mut Effects::default()), 3);
    assert_eq!(counts(&q), "active=1 delayed=2");
    assert_eq!(q.state_of("w"), None);
    assert_eq!(
        add(&mut q, r#"{"jobId":"w"}"#, T0),
        "w",
        "drained custom ids are free again"
    );
    assert_eq!(q.drain(true, T0, &mut Effects::default()), 3);
    assert_eq!(counts(&q), "active=1");
    assert_eq!(ack(&mut q, &active, ok(), T0), AckResult::Completed);
}

#[test]
fn clean_removes_oldest_first_within_limit_and_never_active() {
    let mut q = queue();
    for _ in 0..5 {
        add(&mut q, "{}", T0);
    }
    let t = take(&mut q, 5, T0);
    for (i, idx) in [2usize, 0, 3, 1].into_iter().enumerate() {
        ack(&mut q, &t[idx], ok(), T0 + 10 * i as u64);
    }
    let done = StateFilter::State(JobState::Completed);
    let mut fx = Effects::default();
    q.listeners = 1;
    assert_eq!(q.clean(15, 2, done, T0 + 40, &mut fx), strs(&["3", "1"]));
    assert_eq!(
        fx.events.pop().map(|e| e.kind),
        Some(EventKind::Cleaned { count: 2 })
    );
    assert_eq!(q.clean(15, 0, done, T0 + 40, &mut fx), strs(&["4"]));
    assert_eq!(completed_ids(&q), strs(&["2"]));
    let active = StateFilter::State(JobState::Active);
    assert!(q.clean(0, 0, active, T0 + 1_000_000, &mut fx).is_empty());
    assert_eq!(counts(&q), "active=1 completed=1");
    // Pop order 6, 7, 8; creation order 8, 7, 6.
    add(&mut q, "{}", T0 + 100);
    add(&mut q, "{}", T0 + 50);
    add(&mut q, "{}", T0 + 40);
    let wait = StateFilter::State(JobState::Waiting);
    let oldest = q.clean(60, 1, wait, T0 + 150, &mut fx);
    assert_eq!(oldest, strs(&["8"]), "waiting jobs by creation time");
    assert_eq!(q.clean(60, 0, wait, T0 + 150, &mut fx), strs(&["7"]));
    assert_eq!(q.state_of("6"), Some(JobState::Waiting));
}

#[test]
fn obliterate_refuses_active_jobs_unless_forced_and_restarts_ids() {
    let mut q = queue();
    add(&mut q, "{}", T0);
    add(&mut q, r#"{"delay":100}"#, T0);
    add(&mut q, r#"{"jobId":"c"}"#, T0);
    take(&mut q, 1, T0);
    q.pause(&mut Effects::default());
    let e = q.obliterate(false).unwrap_err();
    assert_eq!(
        e,
        EngineError::QueueActive {
            queue: "q".into(),
            active: 1
        }
    );
    assert_eq!(e.code(), "ERR_QUEUE_ACTIVE");
    assert_eq!(counts(&q), "waiting=1 active=1 delayed=1");
    q.obliterate(true).unwrap();
    assert_eq!(
        (counts(&q), q.is_paused(), q.state_of("c")),
        (String::new(), false, None)
    );
    assert_eq!(add(&mut q, "{}", T0), "1");
    assert_eq!(add(&mut q, r#"{"jobId":"c"}"#, T0), "c");
    q.obliterate(false).unwrap();
    assert_eq!(q.count(), 0);
}

#[test]
fn remove_refuses_active_jobs_and_reports_the_previous_state() {
    let mut q = queue();
    add(&mut q, "{}", T0);
    add(&mut q, "{}", T0);
    add(&mut q, r#"{"priority":2}"#, T0);
    add(&mut q, r#"{"delay":5}"#, T0);
    let t = take(&mut q, 1, T0).pop().unwrap();
    let mut fx = Effects::default();
    assert_eq!(
        q.remove("1", T0, &mut fx),
        Err(EngineError::JobLocked("1".into()))
    );
    assert_eq!(q.remove("42", T0, &mut fx), Ok(None));
    assert_eq!(q.remove("nope", T0, &mut fx), Ok(None));
    assert_eq!(q.remove("3", T0, &mut fx), Ok(Some("prioritized")));
    assert_eq!(q.remove("4", T0, &mut fx), Ok(Some("delayed")));
    assert_eq!(q.remove("2", T0, &mut fx), Ok(Some("waiting")));
    assert_eq!(counts(&q), "active=1");
    ack(&mut q, &t, ok(), T0);
    q.listeners = 1;
    assert_eq!(q.remove("1", T0, &mut fx), Ok(Some("completed")));
    assert_eq!(
        fx.events.pop().map(|e| e.kind),
        Some(EventKind::Removed {
            job_id: "1".into(),
            prev: "completed"
        })
    );
    assert_eq!(
        (counts(&q), q.remove("1", T0, &mut fx)),
        (String::new(), Ok(None))
    );
}
