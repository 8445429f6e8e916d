//! Deduplication in a queue: the holder answers duplicates until it finishes (no ttl) or its
//! window ends (ttl, restarted by `extend`); `replace` swaps a delayed holder; removing the
//! holder or the key lets the next add through; events name both jobs.

use super::*;

fn added(q: &mut QueueState, opts: &str, now: u64, fx: &mut Effects) -> Added {
    q.add(new_job(opts, now), now, fx)
}

fn holder(q: &mut QueueState, now: u64) -> Option<String> {
    q.dedup_holder("k", now)
}

const SIMPLE: &str = r#"{"deduplication":{"id":"k"}}"#;

#[test]
fn without_ttl_the_holder_answers_until_it_finishes() {
    let mut q = queue();
    q.subscribe();
    let mut fx = Effects::default();
    assert_eq!(add_fx(&mut q, SIMPLE, T0, &mut fx), "1");
    assert_eq!(
        added(&mut q, SIMPLE, T0 + 1, &mut fx),
        Added::Deduplicated(1)
    );
    assert_eq!(counts(&q), "waiting=1");
    let ev: Vec<_> = fx
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Deduplicated {
                job_id,
                deduplication_id,
                deduplicated_job_id,
            } => Some((
                job_id.clone(),
                deduplication_id.clone(),
                deduplicated_job_id.clone(),
            )),
            _ => None,
        })
        .collect();
    assert_eq!(
        ev,
        [("1".into(), "k".into(), "2".into())],
        "the would-be id is used up"
    );
    // Active is not finished: still held.
    let t = take(&mut q, 1, T0 + 2);
    assert!(matches!(
        added(&mut q, SIMPLE, T0 + 3, &mut fx),
        Added::Deduplicated(1)
    ));
    assert_eq!(ack(&mut q, &t[0], ok(), T0 + 4), AckResult::Completed);
    assert_eq!(holder(&mut q, T0 + 5), None);
    assert_eq!(add_fx(&mut q, SIMPLE, T0 + 6, &mut fx), "4");
}

#[test]
fn a_failed_holder_holds_until_its_last_attempt() {
    let mut q = queue();
    let mut fx = Effects::default();
    add_fx(
        &mut q,
        r#"{"deduplication":{"id":"k"},"attempts":2}"#,
        T0,
        &mut fx,
    );
    let t = take(&mut q, 1, T0);
    assert!(matches!(
        ack(&mut q, &t[0], fail(), T0),
        AckResult::Retrying { .. }
    ));
    assert_eq!(
        holder(&mut q, T0).as_deref(),
        Some("1"),
        "a retry still holds"
    );
    let t = take(&mut q, 1, T0);
    assert_eq!(ack(&mut q, &t[0], fail(), T0), AckResult::Failed);
    assert_eq!(holder(&mut q, T0), None);
}

#[test]
fn a_ttl_window_counts_exactly_and_extend_restarts_it() {
    let mut q = queue();
    let mut fx = Effects::default();
    let ttl = r#"{"deduplication":{"id":"k","ttl":100}}"#;
    add_fx(&mut q, ttl, T0, &mut fx);
    let t = take(&mut q, 1, T0);
    ack(&mut q, &t[0], ok(), T0 + 1);
    assert_eq!(
        holder(&mut q, T0 + 99).as_deref(),
        Some("1"),
        "a window outlives its job"
    );
    assert_eq!(added(&mut q, ttl, T0 + 99, &mut fx), Added::Deduplicated(1));
    assert_eq!(holder(&mut q, T0 + 100), None);
    assert_eq!(add_fx(&mut q, ttl, T0 + 100, &mut fx), "3");
    let ext = r#"{"deduplication":{"id":"k","ttl":100,"extend":true}}"#;
    assert_eq!(
        added(&mut q, ext, T0 + 190, &mut fx),
        Added::Deduplicated(3)
    );
    assert_eq!(
        added(&mut q, ext, T0 + 280, &mut fx),
        Added::Deduplicated(3)
    );
    assert_eq!(holder(&mut q, T0 + 379).as_deref(), Some("3"));
    assert_eq!(holder(&mut q, T0 + 380), None);
}

#[test]
fn replace_swaps_a_delayed_holder_for_the_new_job() {
    let mut q = queue();
    q.subscribe();
    let mut fx = Effects::default();
    let rep = r#"{"deduplication":{"id":"k","ttl":1000,"replace":true},"delay":500}"#;
    add_fx(&mut q, rep, T0, &mut fx);
    fx.events.clear();
    assert_eq!(add_fx(&mut q, rep, T0 + 10, &mut fx), "2");
    assert_eq!(counts(&q), "delayed=1");
    assert_eq!(holder(&mut q, T0 + 10).as_deref(), Some("2"));
    assert_eq!(
        holder(&mut q, T0 + 999).as_deref(),
        Some("2"),
        "the window left, from T0"
    );
    let names: Vec<&str> = fx.events.iter().map(|e| e.kind.name()).collect();
    assert!(
        names.contains(&"removed") && names.contains(&"deduplicated"),
        "{names:?}"
    );
    // Once it is no longer delayed, a duplicate is answered by it, not swapped.
    q.promote_due(T0 + 600, &mut fx);
    assert_eq!(
        added(&mut q, rep, T0 + 700, &mut fx),
        Added::Deduplicated(2)
    );
}

#[test]
fn removing_the_holder_or_the_key_lets_the_next_add_through() {
    let mut q = queue();
    let mut fx = Effects::default();
    add_fx(&mut q, SIMPLE, T0, &mut fx);
    q.remove("1", T0, &mut fx).expect("removed");
    assert_eq!(holder(&mut q, T0), None);
    assert_eq!(add_fx(&mut q, SIMPLE, T0, &mut fx), "2");
    assert!(
        !q.remove_dedup_key("k", Some("1"), T0),
        "job 1 holds nothing"
    );
    assert!(q.remove_dedup_key("k", Some("2"), T0));
    assert!(!q.remove_dedup_key("k", None, T0), "no live key left");
    assert_eq!(add_fx(&mut q, SIMPLE, T0, &mut fx), "3");
    assert!(q.remove_dedup_key("k", None, T0));
}

#[test]
fn a_durable_queue_records_every_key_it_sets_or_drops() {
    let mut q = queue();
    q.set_persist(true);
    let mut fx = Effects::default();
    add_fx(
        &mut q,
        r#"{"deduplication":{"id":"k","ttl":100,"extend":true}}"#,
        T0,
        &mut fx,
    );
    added(
        &mut q,
        r#"{"deduplication":{"id":"k","ttl":100,"extend":true}}"#,
        T0 + 50,
        &mut fx,
    );
    q.remove_dedup_key("k", None, T0 + 60);
    let ops: Vec<_> = q
        .take_dedup_ops()
        .into_iter()
        .map(|(id, k)| (id.to_string(), k.map(|k| (k.job, k.until))))
        .collect();
    assert_eq!(
        ops,
        [
            ("k".into(), Some((1, Some(T0 + 100)))),
            ("k".into(), Some((1, Some(T0 + 150)))),
            ("k".into(), None),
        ]
    );
}
