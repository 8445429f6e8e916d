//! Steps of step jobs (`steps.rs`): moved to delayed or to waiting for children by their
//! processor, spending no attempt.

use super::*;
use crate::domain::flow::{ChildEnd, ChildRef};

#[test]
fn a_delayed_step_spends_no_attempt_and_runs_again_when_due() {
    let mut q = queue();
    q.listeners = 1;
    add(&mut q, "{}", T0);
    let t = take(&mut q, 1, T0).pop().expect("taken");
    let mut fx = Effects::default();
    let key = q.key_of("1").expect("job");
    assert_eq!(
        q.ack(
            key,
            t.1,
            Outcome::Delayed { run_at: T0 + 100 },
            None,
            T0,
            &mut fx
        ),
        AckResult::Delayed
    );
    let kinds: Vec<EventKind> = fx.events.into_iter().map(|e| e.kind).collect();
    let delayed = EventKind::Delayed {
        job_id: "1".into(),
        delay: T0 + 100,
    };
    assert_eq!(kinds, vec![delayed]);
    assert_eq!(counts(&q), "delayed=1");
    // The old token no longer holds it.
    assert!(!q.holds_lock("1", t.1));
    assert_eq!(ack(&mut q, &t, ok(), T0), AckResult::Stale);
    assert!(take(&mut q, 1, T0 + 99).is_empty());
    let again = take(&mut q, 1, T0 + 100).pop().expect("due");
    assert!(q.holds_lock("1", again.1));
    let j = json(&q, "1");
    assert_eq!(
        (j["attemptsMade"].as_u64(), j["attemptsStarted"].as_u64()),
        (Some(0), Some(2))
    );
    assert_eq!(ack(&mut q, &again, ok(), T0 + 100), AckResult::Completed);
    assert_eq!(json(&q, "1")["attemptsMade"].as_u64(), Some(1));
}

#[test]
fn a_delay_step_to_a_time_past_runs_at_once() {
    let mut q = queue();
    add(&mut q, "{}", T0);
    let t = take(&mut q, 1, T0).pop().expect("taken");
    let key = q.key_of("1").expect("job");
    let step = Outcome::Delayed { run_at: T0 - 5 };
    q.ack(key, t.1, step, None, T0, &mut Effects::default());
    assert_eq!(take_ids(&mut q, 1, T0), strs(&["1"]));
}

#[test]
fn a_waiting_children_step_waits_only_while_children_are_pending() {
    let mut q = queue();
    q.listeners = 1;
    add(&mut q, "{}", T0);
    let t = take(&mut q, 1, T0).pop().expect("taken");
    let key = q.key_of("1").expect("job");
    // No children: it stays active, its lock valid.
    let mut fx = Effects::default();
    assert_eq!(
        q.ack(key, t.1, Outcome::WaitingChildren, None, T0, &mut fx),
        AckResult::StillActive
    );
    assert!(fx.events.is_empty());
    assert!(q.holds_lock("1", t.1));
    // A child added while it runs: now it waits for it.
    let child = ChildRef {
        queue: Arc::from("kids"),
        id: "c1".into(),
    };
    q.add_dependency("1", child.clone())
        .expect("parent takes a child");
    let mut fx = Effects::default();
    assert_eq!(
        q.ack(key, t.1, Outcome::WaitingChildren, None, T0, &mut fx),
        AckResult::WaitingChildren
    );
    let kinds: Vec<EventKind> = fx.events.into_iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        vec![EventKind::WaitingChildren { job_id: "1".into() }]
    );
    assert_eq!(counts(&q), "waiting-children=1");
    let mut fx = Effects::default();
    q.child_ended("1", child, ChildEnd::Completed("7".into()), T0 + 1, &mut fx);
    let again = take(&mut q, 1, T0 + 1).pop().expect("back to waiting");
    let j = json(&q, "1");
    assert_eq!(
        (j["attemptsMade"].as_u64(), j["attemptsStarted"].as_u64()),
        (Some(0), Some(2))
    );
    assert_eq!(ack(&mut q, &again, ok(), T0 + 1), AckResult::Completed);
}
