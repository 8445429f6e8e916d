//! Job schedulers (`schedulers.rs`): one pending job per scheduler, the next created when it
//! starts, missed slots skipped, upserts that update and never duplicate.

use super::*;
use crate::domain::scheduler::Repeat;

fn upsert(q: &mut QueueState, id: &str, repeat: &str, now: u64) -> String {
    let r = Repeat::from_json(repeat).unwrap();
    q.upsert_scheduler(
        id,
        r,
        (Some("tick"), r#"{"n":1}"#, None),
        now,
        &mut Effects::default(),
    )
    .unwrap()
}

#[test]
fn every_keeps_one_job_pending_and_skips_missed_slots() {
    let mut q = queue();
    assert_eq!(
        upsert(&mut q, "s", r#"{"every":200}"#, T0),
        format!("repeat:s:{T0}")
    );
    assert_eq!(counts(&q), "waiting=1");
    // The first runs at once; starting it schedules the next slot.
    assert_eq!(
        take_ids(&mut q, 10, T0 + 5),
        strs(&[&format!("repeat:s:{T0}")])
    );
    assert_eq!(counts(&q), "active=1 delayed=1");
    assert_eq!(q.scheduler("s").unwrap().next, Some(T0 + 200));
    // Nothing ran for a while: the due job runs once, the next is the first slot after now.
    assert_eq!(
        take_ids(&mut q, 10, T0 + 1_050),
        strs(&[&format!("repeat:s:{}", T0 + 200)])
    );
    assert_eq!(q.scheduler("s").unwrap().next, Some(T0 + 1_200));
    assert_eq!(q.scheduler("s").unwrap().iteration_count, 3);
    let j = json(&q, &format!("repeat:s:{}", T0 + 1_200));
    assert_eq!(
        (j["name"].as_str(), j["data"]["n"].as_u64()),
        (Some("tick"), Some(1))
    );
}

#[test]
fn an_upsert_updates_the_scheduler_and_replaces_its_pending_job() {
    let mut q = queue();
    upsert(&mut q, "s", r#"{"every":200,"startDate":2000000}"#, T0);
    upsert(&mut q, "s", r#"{"every":500,"startDate":3000000}"#, T0 + 1);
    assert_eq!(counts(&q), "delayed=1");
    assert_eq!(q.scheduler_count(), 1);
    assert_eq!(q.scheduler("s").unwrap().next, Some(3_000_000));
    assert!(q.job_by_id("repeat:s:2000000").is_none());
    // The same slot again: no second job.
    upsert(&mut q, "s", r#"{"every":500,"startDate":3000000}"#, T0 + 2);
    assert_eq!(counts(&q), "delayed=1");
}

#[test]
fn a_limit_ends_the_scheduler_and_remove_takes_its_pending_job() {
    let mut q = queue();
    upsert(&mut q, "two", r#"{"every":100,"limit":2}"#, T0);
    take(&mut q, 1, T0);
    assert_eq!(q.scheduler("two").unwrap().iteration_count, 2);
    take(&mut q, 1, T0 + 100);
    assert!(q.scheduler("two").is_none(), "past its limit");
    upsert(&mut q, "gone", r#"{"every":100,"startDate":9000000}"#, T0);
    assert!(q.remove_scheduler("gone", &mut Effects::default()));
    assert!(!q.remove_scheduler("gone", &mut Effects::default()));
    assert!(q.job_by_id("repeat:gone:9000000").is_none());
}

#[test]
fn template_options_are_checked() {
    let mut q = queue();
    let r = Repeat::from_json(r#"{"every":100}"#).unwrap();
    let err = q
        .upsert_scheduler(
            "s",
            r,
            (None, "{}", Some(r#"{"jobId":"x"}"#)),
            T0,
            &mut Effects::default(),
        )
        .unwrap_err();
    assert!(err.to_string().contains("template.opts"), "{err}");
    let past = Repeat::from_json(r#"{"every":100,"endDate":5}"#).unwrap();
    assert!(q
        .upsert_scheduler("p", past, (None, "{}", None), T0, &mut Effects::default())
        .is_err());
    assert_eq!(q.scheduler_count(), 0);
}

#[test]
fn a_removed_or_drained_pending_job_skips_one_run_and_the_scheduler_goes_on() {
    let mut q = queue();
    let first = upsert(&mut q, "s", r#"{"every":100}"#, T0);
    let mut fx = Effects::default();
    // Removed before it started: the next slot after now, on the grid.
    assert_eq!(q.remove(&first, T0 + 150, &mut fx), Ok(Some("waiting")));
    assert_eq!(q.scheduler("s").unwrap().next, Some(T0 + 200));
    assert_eq!(counts(&q), "delayed=1");
    // Drained (delayed ones too): the same.
    assert_eq!(q.drain(true, T0 + 420, &mut fx), 1);
    assert_eq!(q.scheduler("s").unwrap().next, Some(T0 + 500));
    assert_eq!(counts(&q), "delayed=1");
    // Cleaned while delayed: the same.
    let cleaned = q.clean(
        0,
        0,
        StateFilter::State(JobState::Delayed),
        T0 + 510,
        &mut fx,
    );
    assert_eq!(cleaned, strs(&[&format!("repeat:s:{}", T0 + 500)]));
    assert_eq!(q.scheduler("s").unwrap().next, Some(T0 + 600));
    // Its removal (or an upsert) does not make another.
    assert!(q.remove_scheduler("s", &mut fx));
    assert_eq!(counts(&q), "");
    assert_eq!(q.scheduler_count(), 0);
}
