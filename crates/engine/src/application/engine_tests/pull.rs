//! Long-poll pulls on tokio's paused clock: time only moves when every task waits, so elapsed
//! times are exact.

use tokio::time::{sleep, Instant as TokioInstant};

use super::*;
use crate::domain::limits::WorkerLimits;

const LONG: Duration = Duration::from_secs(10);

async fn timed_pull(e: &Engine, q: &QueueRef, puller: u32, max: usize) -> (Vec<String>, Duration) {
    let start = TokioInstant::now();
    let (n, json) = e.pull(q, puller, max, WorkerLimits::default(), LONG).await;
    let got = ids(&json);
    assert_eq!(n, got.len());
    (got, start.elapsed())
}

#[tokio::test(start_paused = true)]
async fn pull_returns_ready_jobs_at_once_and_at_most_max() {
    let (e, _) = engine();
    let q = qref(&e, "q");
    for _ in 0..5 {
        add(&e, &q, "{}");
    }
    assert_eq!(
        timed_pull(&e, &q, 1, 3).await,
        (vec!["1".into(), "2".into(), "3".into()], ms(0))
    );
    assert_eq!(
        timed_pull(&e, &q, 1, 10).await,
        (vec!["4".into(), "5".into()], ms(0))
    );
    assert_eq!(counts(&e, &q), "active=5");
}

#[tokio::test(start_paused = true)]
async fn pull_resolves_when_a_job_is_added_later() {
    let (e, _) = engine();
    let q = qref(&e, "q");
    let (e2, q2) = (e.clone(), q.clone());
    let adder = tokio::spawn(async move {
        sleep(ms(100)).await;
        add(&e2, &q2, "{}")
    });
    assert_eq!(timed_pull(&e, &q, 1, 5).await, (vec!["1".into()], ms(100)));
    assert_eq!(adder.await.unwrap(), "1");
}

#[tokio::test(start_paused = true)]
async fn pull_resolves_empty_at_timeout_without_losing_later_jobs() {
    let (e, _) = engine();
    let q = qref(&e, "q");
    let start = TokioInstant::now();
    assert_eq!(
        e.pull(&q, 1, 5, WorkerLimits::default(), ms(250)).await,
        (0, "[]".to_string())
    );
    assert_eq!(start.elapsed(), ms(250));
    assert_eq!(
        e.pull(&q, 1, 5, WorkerLimits::default(), Duration::ZERO)
            .await,
        (0, "[]".to_string())
    );
    add(&e, &q, "{}");
    assert_eq!(timed_pull(&e, &q, 2, 5).await, (vec!["1".into()], ms(0)));
}

#[tokio::test(start_paused = true)]
async fn cancel_pulls_resolves_only_that_pullers_pulls() {
    let (e, _) = engine();
    let q = qref(&e, "q");
    let (seven, eight, ()) =
        tokio::join!(timed_pull(&e, &q, 7, 1), timed_pull(&e, &q, 8, 1), async {
            sleep(ms(50)).await;
            e.cancel_pulls(&q, 7);
            sleep(ms(50)).await;
            add(&e, &q, "{}");
        });
    assert_eq!(seven, (vec![], ms(50)));
    assert_eq!(eight, (vec!["1".into()], ms(100)));
}

#[tokio::test(start_paused = true)]
async fn cancel_before_the_pull_registers_resolves_its_next_wait_once() {
    let (e, _) = engine();
    let q = qref(&e, "q");
    e.cancel_pulls(&q, 3);
    assert_eq!(
        timed_pull(&e, &q, 3, 1).await,
        (vec![], ms(0)),
        "late pull of a cancelled puller"
    );
    let (again, ()) = tokio::join!(timed_pull(&e, &q, 3, 1), async {
        sleep(ms(40)).await;
        add(&e, &q, "{}");
    });
    assert_eq!(
        again,
        (vec!["1".into()], ms(40)),
        "only one pull is cancelled"
    );
}

#[tokio::test(start_paused = true)]
async fn two_pullers_get_distinct_jobs() {
    let (e, _) = engine();
    let q = qref(&e, "q");
    let (a, b, added) = tokio::join!(timed_pull(&e, &q, 1, 1), timed_pull(&e, &q, 2, 1), async {
        sleep(ms(10)).await;
        e.add_bulk(&q, vec![job(&e, "{}"), job(&e, "{}"), job(&e, "{}")])
    });
    assert_eq!(added.len(), 3);
    assert_eq!((a.1, b.1), (ms(10), ms(10)));
    let mut all = [a.0, b.0].concat();
    all.sort();
    assert_eq!(all, vec!["1", "2"], "one job each, none twice");
    assert_eq!(counts(&e, &q), "waiting=1 active=2");
}

#[tokio::test(start_paused = true)]
async fn promote_due_wakes_a_pending_pull() {
    let (e, clock) = engine();
    let q = qref(&e, "q");
    add(&e, &q, r#"{"delay":500}"#);
    let (got, ()) = tokio::join!(timed_pull(&e, &q, 1, 1), async {
        sleep(ms(20)).await;
        clock.advance(500);
        assert_eq!(e.promote_due(), None);
    });
    assert_eq!(got, (vec!["1".into()], ms(20)));
}

#[tokio::test(start_paused = true)]
async fn resume_wakes_a_pull_on_a_paused_queue() {
    let (e, _) = engine();
    let q = qref(&e, "q");
    add(&e, &q, "{}");
    e.pause(&q);
    let (got, ()) = tokio::join!(timed_pull(&e, &q, 1, 1), async {
        sleep(ms(30)).await;
        e.resume(&q);
    });
    assert_eq!(got, (vec!["1".into()], ms(30)));
}

#[tokio::test(start_paused = true)]
async fn a_pull_with_max_zero_does_not_steal_wake_ups() {
    let (e, _) = engine();
    let q = qref(&e, "q");
    let (zero, one, ()) = tokio::join!(timed_pull(&e, &q, 1, 0), timed_pull(&e, &q, 2, 1), async {
        sleep(ms(10)).await;
        add(&e, &q, "{}");
    });
    assert_eq!(
        one,
        (vec!["1".into()], ms(10)),
        "the puller that can take it is woken"
    );
    assert_eq!(zero.0, Vec::<String>::new());
}

#[tokio::test(start_paused = true)]
async fn a_holder_let_go_stalls_its_jobs_in_every_queue_and_wakes_a_waiting_pull() {
    use crate::domain::lease::LeaseTerms;
    let (e, _) = engine();
    let (a, b) = (qref(&e, "a"), qref(&e, "b"));
    add(&e, &a, "{}");
    add(&e, &b, "{}");
    e.hold(9, LeaseTerms::default());
    let holder = WorkerLimits {
        holder: 9,
        ..WorkerLimits::default()
    };
    assert_eq!(e.take(&a, 1, holder.clone()).0, 1);
    assert_eq!(e.take(&b, 1, holder).0, 1);
    // Another worker waits on `a`; the holder's loss hands it the job at once.
    let waiting = {
        let (e, a) = (e.clone(), a.clone());
        tokio::spawn(async move { e.pull(&a, 1, 1, WorkerLimits::default(), LONG).await })
    };
    sleep(ms(10)).await;
    assert_eq!(e.let_go(9), 2);
    let (n, json) = waiting.await.expect("pull");
    assert_eq!((n, ids(&json)), (1, vec!["1".to_string()]));
    assert_eq!(counts(&e, &b), "waiting=1");
    // Let go once: again, or an unknown holder, stalls nothing.
    assert_eq!(e.let_go(9), 0);
    assert_eq!(e.let_go(12345), 0);
}

#[tokio::test(start_paused = true)]
async fn a_holder_answers_its_jobs_and_once_let_go_takes_nothing() {
    use crate::domain::lease::LeaseTerms;
    let (e, _) = engine();
    let q = qref(&e, "q");
    for _ in 0..3 {
        add(&e, &q, "{}");
    }
    e.hold(5, LeaseTerms::default());
    e.hold(6, LeaseTerms::default());
    let of = |holder| WorkerLimits {
        holder,
        ..WorkerLimits::default()
    };
    let (_, json) = e.take(&q, 2, of(5));
    e.take(&q, 1, of(6));
    let held = e.held(&q, 5);
    assert_eq!(
        held.iter().map(|(id, _)| id.clone()).collect::<Vec<_>>(),
        ids(&json)
    );
    assert!(held.iter().all(|(id, token)| e.holds_lock(&q, id, *token)));
    assert_eq!(e.held(&q, 6).len(), 1);
    assert!(e.held(&q, 0).is_empty() && e.held(&q, 77).is_empty());
    // A pull still pending for a holder that is let go (its thread died) takes nothing.
    e.hold(7, LeaseTerms::default());
    let pending = {
        let (e, q) = (e.clone(), q.clone());
        tokio::spawn(async move { e.pull(&q, 3, 1, of(7), LONG).await })
    };
    sleep(ms(10)).await;
    e.let_go(7);
    add(&e, &q, "{}");
    let (n, _) = pending.await.expect("pull");
    assert_eq!(n, 0);
    assert_eq!(e.take(&q, 1, of(7)).0, 0, "a let-go holder takes nothing");
    assert_eq!(
        e.take(&q, 1, of(0)).0,
        1,
        "the job is still there for others"
    );
}
