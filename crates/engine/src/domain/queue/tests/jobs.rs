//! Single-job operations (priority, delay, promote, retry, progress, logs) and events.

use super::*;

#[test]
fn change_priority_moves_a_ready_job() {
    let mut q = queue();
    for _ in 0..3 {
        add(&mut q, "{}", T0);
    }
    add(&mut q, r#"{"delay":5}"#, T0);
    q.change_priority("1", 5, false).unwrap();
    q.change_priority("3", 0, true).unwrap();
    q.change_priority("4", 1, false).unwrap();
    assert_eq!(q.state_of("1"), Some(JobState::Prioritized));
    assert_eq!(counts(&q), "waiting=2 delayed=1 prioritized=1");
    assert!(matches!(
        q.change_priority("9", 1, false),
        Err(EngineError::JobNotFound(_))
    ));
    assert_eq!(take_ids(&mut q, 10, T0 + 5), strs(&["3", "2", "4", "1"]));
}

#[test]
fn change_delay_and_promote_need_a_delayed_job() {
    let mut q = queue();
    add(&mut q, "{}", T0);
    add(&mut q, r#"{"delay":1000}"#, T0);
    add(&mut q, r#"{"delay":1000}"#, T0);
    let mut fx = Effects::default();
    for e in [
        q.change_delay("1", 5, T0, &mut fx).unwrap_err(),
        q.promote("1", &mut fx).unwrap_err(),
    ] {
        assert_eq!(e.code(), "ERR_JOB_STATE", "{e}");
    }
    assert_eq!(
        q.promote("9", &mut fx).unwrap_err().code(),
        "ERR_JOB_NOT_FOUND"
    );
    q.change_delay("2", 50, T0 + 10, &mut fx).unwrap();
    assert_eq!(fx.wake_at, Some(T0 + 60));
    assert_eq!(q.next_due(), Some(T0 + 60));
    q.promote("3", &mut fx).unwrap();
    assert_eq!(q.state_of("3"), Some(JobState::Waiting));
    assert_eq!(take_ids(&mut q, 10, T0 + 59), strs(&["1", "3"]));
    assert_eq!(take_ids(&mut q, 10, T0 + 60), strs(&["2"]));
}

#[test]
fn retry_moves_failed_or_completed_jobs_back_to_waiting() {
    let mut q = queue();
    add(&mut q, "{}", T0);
    add(&mut q, "{}", T0);
    add(&mut q, "{}", T0);
    run_one(&mut q, fail(), None, T0);
    run_one(&mut q, fail(), None, T0);
    run_one(&mut q, ok(), None, T0);
    let mut fx = Effects::default();
    q.retry("1", JobState::Failed, false, &mut fx).unwrap();
    q.retry("2", JobState::Failed, true, &mut fx).unwrap();
    q.retry("3", JobState::Completed, false, &mut fx).unwrap();
    assert_eq!(counts(&q), "waiting=3");
    let (j1, j2) = (json(&q, "1"), json(&q, "2"));
    assert_eq!(
        (&j1["attemptsMade"], &j1["failedReason"], &j1["finishedOn"]),
        (&Value::from(1), &Value::Null, &Value::Null)
    );
    assert_eq!(
        (&j2["attemptsMade"], &j2["attemptsStarted"]),
        (&Value::from(0), &Value::from(0))
    );
    assert_eq!(json(&q, "3")["returnvalue"], Value::Null);
    assert_eq!(
        q.retry("1", JobState::Failed, false, &mut fx)
            .unwrap_err()
            .code(),
        "ERR_JOB_STATE"
    );
    assert_eq!(
        q.retry("1", JobState::Waiting, false, &mut fx)
            .unwrap_err()
            .code(),
        "ERR_INVALID_OPTION"
    );
    assert_eq!(
        q.retry("9", JobState::Failed, false, &mut fx)
            .unwrap_err()
            .code(),
        "ERR_JOB_NOT_FOUND"
    );
    assert_eq!(take_ids(&mut q, 10, T0), strs(&["1", "2", "3"]));
}

#[test]
fn progress_and_logs() {
    let mut q = queue();
    q.listeners = 1;
    add(&mut q, "{}", T0);
    let mut fx = Effects::default();
    assert_eq!(
        q.update_progress("9", "1".into(), &mut fx)
            .unwrap_err()
            .code(),
        "ERR_JOB_NOT_FOUND"
    );
    q.update_progress("1", "{\"pct\":42}".into(), &mut fx)
        .unwrap();
    assert_eq!(json(&q, "1")["progress"]["pct"], 42);
    let want = EventKind::Progress {
        job_id: "1".into(),
        data: "{\"pct\":42}".into(),
    };
    assert_eq!(
        fx.events.into_iter().map(|e| e.kind).collect::<Vec<_>>(),
        vec![want]
    );
    for i in 1..=5 {
        assert_eq!(q.add_log("1", format!("r{i}").into(), 0), Ok(i));
    }
    assert_eq!(
        q.logs("1", 0, -1, true),
        (strs(&["r1", "r2", "r3", "r4", "r5"]), 5)
    );
    assert_eq!(q.logs("1", 0, 1, false), (strs(&["r5", "r4"]), 5));
    assert_eq!(q.logs("1", -2, -1, true), (strs(&["r4", "r5"]), 5));
    assert_eq!(q.add_log("1", "r6".into(), 3), Ok(3));
    assert_eq!(q.logs("1", 0, -1, true), (strs(&["r4", "r5", "r6"]), 3));
    assert_eq!(q.logs("9", 0, -1, true), (vec![], 0));
    assert!(q.add_log("9", "x".into(), 0).is_err());
}

#[test]
fn released_job_goes_back_to_the_head_of_its_priority_without_an_attempt() {
    let mut q = queue();
    q.listeners = 1;
    add(&mut q, r#"{"priority":2}"#, T0);
    add(&mut q, r#"{"priority":2}"#, T0);
    add(&mut q, "{}", T0);
    let t = take(&mut q, 2, T0);
    assert_eq!(
        t.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>(),
        ["3", "1"]
    );
    let mut fx = Effects::default();
    assert_eq!(
        q.ack(
            1,
            t[1].1,
            Outcome::Released { started: true },
            None,
            T0,
            &mut fx
        ),
        AckResult::Released
    );
    let want = EventKind::Waiting {
        job_id: "1".into(),
        prev: Some("active"),
    };
    assert_eq!(kinds(&mut fx), vec![want]);
    assert_eq!(
        (q.state_of("1"), counts(&q)),
        (Some(JobState::Prioritized), "active=1 prioritized=2".into())
    );
    assert_eq!(json(&q, "1")["attemptsMade"], 0);
    assert_eq!(json(&q, "1")["attemptsStarted"], 1, "its processor ran");
    assert_eq!(
        ack(&mut q, &t[1], ok(), T0),
        AckResult::Stale,
        "the released token is dead"
    );
    assert_eq!(take_ids(&mut q, 5, T0), strs(&["1", "2"]));
}

#[test]
fn a_job_given_back_unstarted_does_not_count_its_start() {
    let mut q = queue();
    add(&mut q, "{}", T0);
    add(&mut q, "{}", T0);
    let t = take(&mut q, 2, T0);
    let mut fx = Effects::default();
    let unstarted = Outcome::Released { started: false };
    assert_eq!(
        q.ack(2, t[1].1, unstarted, None, T0, &mut fx),
        AckResult::Released
    );
    assert_eq!(json(&q, "2")["attemptsStarted"], 0);
    assert_eq!(json(&q, "1")["attemptsStarted"], 1);
    let again = take(&mut q, 1, T0);
    assert_eq!(again[0].0, "2");
    assert_eq!(json(&q, "2")["attemptsStarted"], 1);
}

fn kinds(fx: &mut Effects) -> Vec<EventKind> {
    fx.events.drain(..).map(|e| e.kind).collect()
}

#[test]
fn events_are_emitted_only_while_someone_listens() {
    let mut q = queue();
    let mut fx = Effects::default();
    add_fx(&mut q, "{}", T0, &mut fx);
    add_fx(&mut q, r#"{"delay":5}"#, T0, &mut fx);
    let t = take_fx(&mut q, 1, T0, &mut fx);
    q.ack(1, t[0].1, ok(), None, T0, &mut fx);
    q.pause(&mut fx);
    q.resume(&mut fx);
    q.remove("2", T0, &mut fx).unwrap();
    assert!(fx.events.is_empty(), "{:?}", fx.events);
}

#[test]
fn events_have_bullmq_kinds_and_payloads() {
    use EventKind as E;
    let mut q = queue();
    q.listeners = 2;
    let mut fx = Effects::default();
    let name: Arc<str> = Arc::from("job");
    add_fx(&mut q, "{}", T0, &mut fx);
    add_fx(&mut q, "{}", T0, &mut fx);
    add_fx(
        &mut q,
        r#"{"delay":70,"attempts":2,"backoff":30}"#,
        T0,
        &mut fx,
    );
    assert_eq!(
        kinds(&mut fx),
        vec![
            E::Added {
                job_id: "1".into(),
                name: name.clone()
            },
            E::Waiting {
                job_id: "1".into(),
                prev: None
            },
            E::Added {
                job_id: "2".into(),
                name: name.clone()
            },
            E::Waiting {
                job_id: "2".into(),
                prev: None
            },
            E::Added {
                job_id: "3".into(),
                name
            },
            E::Delayed {
                job_id: "3".into(),
                delay: T0 + 70
            },
        ]
    );
    let a = take_fx(&mut q, 1, T0, &mut fx);
    assert_eq!(
        kinds(&mut fx),
        vec![E::Active {
            job_id: "1".into(),
            prev: "waiting"
        }],
        "no drained while jobs remain"
    );
    let b = take_fx(&mut q, 1, T0, &mut fx);
    assert_eq!(
        kinds(&mut fx),
        vec![
            E::Active {
                job_id: "2".into(),
                prev: "waiting"
            },
            E::Drained
        ]
    );
    q.ack(1, a[0].1, ok(), None, T0, &mut fx);
    q.ack(2, b[0].1, fail(), None, T0, &mut fx);
    assert_eq!(
        kinds(&mut fx),
        vec![
            E::Completed {
                job_id: "1".into(),
                returnvalue: "\"done\"".into()
            },
            E::Failed {
                job_id: "2".into(),
                failed_reason: "boom".into()
            },
            E::RetriesExhausted {
                job_id: "2".into(),
                attempts_made: 1
            },
        ]
    );
    q.promote_due(T0 + 70, &mut fx);
    let c = take_fx(&mut q, 1, T0 + 70, &mut fx);
    q.ack(3, c[0].1, fail(), None, T0 + 80, &mut fx);
    assert_eq!(
        kinds(&mut fx),
        vec![
            E::Waiting {
                job_id: "3".into(),
                prev: Some("delayed")
            },
            E::Active {
                job_id: "3".into(),
                prev: "waiting"
            },
            E::Drained,
            E::Delayed {
                job_id: "3".into(),
                delay: T0 + 110
            },
        ]
    );
    q.pause(&mut fx);
    q.pause(&mut fx);
    q.resume(&mut fx);
    q.resume(&mut fx);
    q.remove("1", T0, &mut fx).unwrap();
    assert_eq!(
        kinds(&mut fx),
        vec![
            E::Paused,
            E::Resumed,
            E::Removed {
                job_id: "1".into(),
                prev: "completed"
            }
        ]
    );
}

#[test]
fn a_null_return_value_allocates_nothing_and_reads_back_as_null() {
    let mut q = queue();
    add(&mut q, "{}", T0);
    add(&mut q, "{}", T0);
    run_one(&mut q, Outcome::Completed("null".into()), None, T0);
    run_one(&mut q, Outcome::Completed("7".into()), None, T0);
    let no_extra = q
        .key_of("1")
        .and_then(|k| q.jobs.get(&k))
        .map(|j| j.extra.is_none());
    assert_eq!(no_extra, Some(true));
    assert_eq!(json(&q, "1")["returnvalue"], Value::Null);
    assert_eq!(json(&q, "2")["returnvalue"], Value::from(7));
    // A retried job that completes with null again loses its earlier value.
    let mut fx = Effects::default();
    q.retry("2", JobState::Completed, false, &mut fx).unwrap();
    run_one(&mut q, Outcome::Completed("null".into()), None, T0);
    assert_eq!(json(&q, "2")["returnvalue"], Value::Null);
}
