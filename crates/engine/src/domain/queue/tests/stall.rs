//! Stalled jobs: a lease holder gone (`stall.rs`).

use super::*;
use crate::domain::limits::WorkerLimits;
use crate::domain::queue::STALLED_TOO_OFTEN;

/// Takes up to `max` jobs for `holder`: their (id, token) pairs.
fn take_for(q: &mut QueueState, holder: u32, max: usize, now: u64) -> Vec<(String, u64)> {
    let mut taken = Vec::new();
    let worker = WorkerLimits {
        holder,
        ..WorkerLimits::default()
    };
    q.take_limited(max, worker, now, &mut Effects::default(), |j| {
        taken.push((j.id_string(), j.lock))
    });
    taken
}

#[test]
fn a_gone_holders_jobs_go_back_to_the_head_in_order_without_an_attempt() {
    let mut q = queue();
    q.listeners = 1;
    for _ in 0..4 {
        add(&mut q, "{}", T0);
    }
    let gone = take_for(&mut q, 7, 2, T0);
    let kept = take_for(&mut q, 8, 1, T0);
    let mut fx = Effects::default();
    assert_eq!(q.stall_held(7, 1, T0 + 5, &mut fx), 2);
    let kinds: Vec<EventKind> = fx.events.into_iter().map(|e| e.kind).collect();
    let stalled = |id: &str| EventKind::Stalled { job_id: id.into() };
    let back = |id: &str| EventKind::Waiting {
        job_id: id.into(),
        prev: Some("active"),
    };
    assert_eq!(
        kinds,
        vec![stalled("2"), back("2"), stalled("1"), back("1")]
    );
    assert_eq!(counts(&q), "waiting=3 active=1");
    // Their old tokens are stale; the other holder's job is untouched.
    assert_eq!(ack(&mut q, &gone[0], ok(), T0), AckResult::Stale);
    assert_eq!(ack(&mut q, &kept[0], ok(), T0), AckResult::Completed);
    // Earliest first, ahead of the job that was never taken.
    assert_eq!(take_ids(&mut q, 10, T0), strs(&["1", "2", "4"]));
    let j = json(&q, "1");
    assert_eq!(
        (j["stalledCounter"].as_u64(), j["attemptsMade"].as_u64()),
        (Some(1), Some(0))
    );
    // A holder that holds nothing, and the "no holder" id 0, stall nothing.
    assert_eq!(q.stall_held(7, 1, T0, &mut Effects::default()), 0);
    assert_eq!(q.stall_held(0, 1, T0, &mut Effects::default()), 0);
}

#[test]
fn past_max_stalled_a_job_fails_with_bullmqs_reason_and_spends_the_attempt() {
    let mut q = queue();
    q.listeners = 1;
    add(&mut q, r#"{"attempts":3}"#, T0);
    take_for(&mut q, 1, 1, T0);
    assert_eq!(q.stall_held(1, 1, T0, &mut Effects::default()), 1);
    take_for(&mut q, 2, 1, T0);
    let mut fx = Effects::default();
    assert_eq!(q.stall_held(2, 1, T0 + 9, &mut fx), 1);
    let kinds: Vec<EventKind> = fx.events.into_iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        vec![
            EventKind::Stalled { job_id: "1".into() },
            EventKind::Failed {
                job_id: "1".into(),
                failed_reason: STALLED_TOO_OFTEN.into(),
            },
        ]
    );
    assert_eq!(counts(&q), "failed=1");
    let j = json(&q, "1");
    assert_eq!(j["failedReason"], STALLED_TOO_OFTEN);
    assert_eq!(
        (j["stalledCounter"].as_u64(), j["attemptsMade"].as_u64()),
        (Some(2), Some(1))
    );
    assert_eq!(j["finishedOn"].as_u64(), Some(T0 + 9));
    // Its history: one final attempt that stalled, the DLQ reason `stalled`.
    let history = crate::domain::dlq::parse_history(&j["history"].to_string());
    assert_eq!(history.len(), 1);
    assert_eq!(
        (history[0].kind, history[0].last, history[0].failed_at),
        (crate::domain::dlq::AttemptEnd::Stalled, true, T0 + 9)
    );
    assert_eq!(
        crate::domain::dlq::DlqReason::of(&history),
        crate::domain::dlq::DlqReason::Stalled
    );
}

#[test]
fn max_stalled_zero_fails_at_the_first_stall() {
    let mut q = queue();
    add(&mut q, "{}", T0);
    take_for(&mut q, 3, 1, T0);
    assert_eq!(q.stall_held(3, 0, T0, &mut Effects::default()), 1);
    assert_eq!(counts(&q), "failed=1");
}
