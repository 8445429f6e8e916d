//! A queue's limits on PostgreSQL: the plain claim takes nothing from a queue with limits;
//! claims within them, from connections of different "processes" at once, never pass the cap
//! on active jobs; the token bucket and a hold answer when to try again; limits set by one
//! connection are seen by the others, and removed ones free the plain claim again.

mod support;

use std::time::Duration;

use ferroqueue_engine::domain::limits::{LimitChange, RateLimit, WorkerLimits};
use ferroqueue_postgres::jobs::{Completion, NewRow};
use ferroqueue_postgres::limits::{self, claim_within};
use ferroqueue_postgres::pool::Conn;
use ferroqueue_postgres::schema::migrate;
use ferroqueue_postgres::Target;

/// Two connections ("processes") on a fresh schema with `n` jobs in queue `q`.
async fn ready(name: &str, n: usize) -> Option<(Target, Conn, Conn)> {
    let (t, mut c) = support::fresh(name).await?;
    migrate(&mut c, &t).await.expect("schema");
    let (a, b) = (
        Conn::open(&t).await.expect("a"),
        Conn::open(&t).await.expect("b"),
    );
    let rows: Vec<NewRow> = (0..n)
        .map(|i| support::ready_row(&format!("j{i}")))
        .collect();
    a.jobs
        .add_bulk(&a.client, &t, "q", &rows)
        .await
        .expect("added");
    Some((t, a, b))
}

#[tokio::test]
async fn claims_from_two_connections_never_pass_the_cap() {
    let Some((t, a, b)) = ready("cap", 40).await else {
        return;
    };
    limits::change(&a, &t, "q", LimitChange::Concurrency(Some(3)))
        .await
        .expect("set");
    // The other connection sees the limit, and its plain claim takes nothing.
    assert!(limits::has_limits(&b, &t, "q").await.expect("read"));
    assert!(b
        .jobs
        .claim(&b.client, &t, "q", 10, 30_000)
        .await
        .expect("plain")
        .is_empty());
    let mut done = 0;
    let mut active: Vec<(i64, i64)> = Vec::new();
    while done < 40 {
        // Both claim at once (each on its own connection), as two workers would.
        let none = WorkerLimits::default();
        let (x, y) = tokio::join!(
            claim_within(&a, &t, "q", 10, 30_000, &none),
            claim_within(&b, &t, "q", 10, 30_000, &none)
        );
        for w in [x.expect("a claims"), y.expect("b claims")] {
            assert!(w.limited);
            assert_eq!(w.retry, None, "waiting alone never helps a capped queue");
            active.extend(w.claimed.iter().map(|j| (j.key, j.token)));
        }
        assert!(active.len() <= 3, "{} active", active.len());
        assert!(!active.is_empty());
        // Finish one, so one slot frees.
        let (key, token) = active.remove(0);
        let fin = Completion {
            key,
            token,
            returnvalue: "null".into(),
            keep: true,
        };
        let got = a
            .jobs
            .complete(&a.client, &t, "q", &[fin])
            .await
            .expect("ack");
        assert_eq!(got, vec![key]);
        done += 1;
    }
    limits::change(&b, &t, "q", LimitChange::Concurrency(None))
        .await
        .expect("removed");
    assert!(!limits::has_limits(&a, &t, "q").await.expect("read"));
    let w = claim_within(&a, &t, "q", 10, 30_000, &WorkerLimits::default())
        .await
        .expect("claims");
    assert!(!w.limited, "no limits left: plain claims will do");
}

#[tokio::test]
async fn the_bucket_and_a_hold_say_when_to_try_again() {
    let Some((t, a, b)) = ready("rate", 20).await else {
        return;
    };
    let five = Some(RateLimit {
        max: 5,
        duration: 500,
    });
    // A worker's own limiter limits its claims, though the queue has no limits of its own.
    let w = claim_within(&a, &t, "q", 10, 30_000, &WorkerLimits::rate(five))
        .await
        .expect("claims");
    assert_eq!((w.claimed.len(), w.limited), (5, true));
    let retry = w.retry.expect("held back by the rate");
    assert!(
        retry > Duration::from_millis(90) && retry <= Duration::from_millis(100),
        "{retry:?}"
    );
    let w = claim_within(&b, &t, "q", 10, 30_000, &WorkerLimits::rate(five))
        .await
        .expect("claims");
    assert_eq!(
        w.claimed.len(),
        0,
        "one budget for the queue, whoever claims"
    );
    tokio::time::sleep(Duration::from_millis(110)).await;
    let w = claim_within(&b, &t, "q", 10, 30_000, &WorkerLimits::rate(five))
        .await
        .expect("claims");
    assert_eq!(w.claimed.len(), 1);
    // The queue's own rate limit overrides the worker's.
    limits::change(
        &a,
        &t,
        "q",
        LimitChange::Rate(Some(RateLimit {
            max: 1,
            duration: 60_000,
        })),
    )
    .await
    .expect("set");
    let (settings, ttl) = limits::read(&b, &t, "q").await.expect("read");
    assert_eq!(settings.rate.map(|r| r.max), Some(1));
    assert!(ttl > 0, "the bucket is empty");
    limits::change(&a, &t, "q", LimitChange::Rate(None))
        .await
        .expect("removed");
    // A hold: nothing starts, and the wait is the hold's.
    limits::change(&a, &t, "q", LimitChange::HoldFor(300))
        .await
        .expect("held");
    let w = claim_within(&b, &t, "q", 10, 30_000, &WorkerLimits::default())
        .await
        .expect("claims");
    assert!(w.claimed.is_empty() && w.limited);
    let retry = w.retry.expect("held");
    assert!(
        retry > Duration::from_millis(200) && retry <= Duration::from_millis(300),
        "{retry:?}"
    );
    tokio::time::sleep(retry).await;
    let w = claim_within(&b, &t, "q", 3, 30_000, &WorkerLimits::default())
        .await
        .expect("claims");
    assert_eq!(w.claimed.len(), 3);
    // The hold is over and cleared: nothing limits the queue now.
    assert!(!limits::has_limits(&a, &t, "q").await.expect("read"));
}
