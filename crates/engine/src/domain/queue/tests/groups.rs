//! Groups in a queue: ungrouped jobs first, then the groups in turn, FIFO within each by group
//! priority; a group at its concurrency waits for its own jobs to finish while others run;
//! grouped jobs count as waiting, drain and remove take them out of their lane.

use super::*;
use crate::domain::groups::{GroupChange, GroupDefaults};
use crate::domain::limits::WorkerLimits;

fn grouped(g: &str) -> String {
    format!(r#"{{"group":{{"id":"{g}"}}}}"#)
}

fn take_with(q: &mut QueueState, max: usize, w: WorkerLimits, now: u64) -> Vec<(String, u64)> {
    let mut taken = Vec::new();
    q.take_limited(max, w, now, &mut Effects::default(), |j| {
        taken.push((j.id_string(), j.lock))
    });
    taken
}

fn ids(t: &[(String, u64)]) -> Vec<&str> {
    t.iter().map(|(id, _)| id.as_str()).collect()
}

fn serial() -> WorkerLimits {
    WorkerLimits {
        rate: None,
        group: GroupDefaults {
            concurrency: Some(1),
            rate: None,
        },
        holder: 0,
        name: None,
    }
}

#[test]
fn ungrouped_first_then_groups_in_turn_each_fifo() {
    let mut q = queue();
    for _ in 0..3 {
        add(&mut q, &grouped("A"), T0);
    }
    add(&mut q, &grouped("B"), T0);
    add(&mut q, "{}", T0);
    add(&mut q, r#"{"group":{"id":"B","priority":2}}"#, T0);
    add(&mut q, r#"{"group":{"id":"B"}}"#, T0);
    assert_eq!(counts(&q), "waiting=6 prioritized=1");
    assert_eq!(q.grouped_ready(), 6);
    assert_eq!(
        take_ids(&mut q, 10, T0),
        strs(&["5", "1", "4", "2", "7", "3", "6"])
    );
    assert_eq!(counts(&q), "active=7");
}

#[test]
fn a_group_at_its_concurrency_waits_for_its_own_jobs_only() {
    let mut q = queue();
    for i in 0..4 {
        add(&mut q, &grouped(if i % 2 == 0 { "A" } else { "B" }), T0);
    }
    let t = take_with(&mut q, 10, serial(), T0);
    assert_eq!(ids(&t), ["1", "2"]);
    assert!(take_with(&mut q, 10, serial(), T0).is_empty());
    assert!(q.held_back(serial(), T0), "not drained: the groups wait");
    assert_eq!(q.retry_at(serial(), T0), None, "a finished job wakes it");
    let rx = q.waiters().register(1);
    assert_eq!(ack(&mut q, &t[1], ok(), T0), AckResult::Completed);
    assert!(
        rx.is_some_and(|mut r| r.try_recv().is_ok()),
        "B's ack wakes a waiter"
    );
    assert_eq!(ids(&take_with(&mut q, 10, serial(), T0)), ["4"]);
    assert_eq!(q.group_info("A").active, 1);
    assert_eq!(q.group_info("A").waiting, 1);
}

#[test]
fn group_settings_override_the_workers_defaults_and_pause_parks_a_group() {
    let mut q = queue();
    for _ in 0..3 {
        add(&mut q, &grouped("A"), T0);
    }
    add(&mut q, &grouped("B"), T0);
    assert!(q.change_group("A", GroupChange::Concurrency(Some(2))));
    assert!(q.change_group("B", GroupChange::Paused(true)));
    assert_eq!(ids(&take_with(&mut q, 10, serial(), T0)), ["1", "2"]);
    assert!(q.change_group("B", GroupChange::Paused(false)));
    assert_eq!(ids(&take_with(&mut q, 10, serial(), T0)), ["4"]);
    let changes = q.take_group_changes();
    assert_eq!(changes.len(), 3);
}

#[test]
fn drain_remove_and_priority_changes_reach_the_lanes() {
    let mut q = queue();
    for _ in 0..4 {
        add(&mut q, &grouped("A"), T0);
    }
    assert_eq!(q.group_jobs("A", 0, -1), vec![1, 2, 3, 4]);
    q.change_priority("1", 3, false).unwrap();
    assert_eq!(q.group_jobs("A", 0, -1), vec![2, 3, 4, 1]);
    assert_eq!(q.group_jobs("A", 1, 2), vec![3, 4]);
    assert!(q
        .remove("2", T0, &mut Effects::default())
        .unwrap()
        .is_some());
    assert_eq!(q.group_info("A").waiting, 3);
    assert_eq!(q.drain(false, T0, &mut Effects::default()), 3);
    assert_eq!(q.ready_len(), 0);
    assert_eq!(q.group_info("A").waiting, 0);
    assert!(take_ids(&mut q, 10, T0).is_empty());
}

#[test]
fn priority_with_group_is_refused() {
    let e = JobOptions::from_json(r#"{"priority":1,"group":{"id":"A"}}"#).unwrap_err();
    assert_eq!(e.code(), "ERR_INVALID_OPTION");
    for bad in [
        r#"{"group":{}}"#,
        r#"{"group":{"id":""}}"#,
        r#"{"group":{"id":true}}"#,
        r#"{"group":{"id":1.5}}"#,
        r#"{"group":{"id":"A","priority":-1}}"#,
        r#"{"group":{"id":"A","what":1}}"#,
    ] {
        assert!(JobOptions::from_json(bad).is_err(), "{bad}");
    }
    let e = JobOptions::from_json(r#"{"group":{"id":"A","maxSize":3}}"#).unwrap_err();
    assert_eq!(e.code(), "ERR_UNSUPPORTED_OPTION");
    let o = JobOptions::from_json(r#"{"group":{"id":7,"priority":3}}"#).unwrap();
    assert_eq!(o.priority, 3);
    assert_eq!(o.group().map(|g| g.id.to_string()), Some("7".into()));
}
