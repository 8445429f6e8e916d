//! Pulls held back by a queue's limits, on tokio's paused clock with an engine clock that follows
//! it: a rate-limited pull resolves when the next token comes, a capped one when a job finishes,
//! a held one when the hold ends; none of them resolves early or waits for its timeout.

use tokio::time::Instant as TokioInstant;

use super::*;
use crate::clock::Clock;
use crate::domain::limits::{LimitChange, RateLimit, WorkerLimits};

/// The engine's clock, in step with tokio's (paused) time.
struct TokioClock(TokioInstant);

impl Clock for TokioClock {
    fn now_ms(&self) -> u64 {
        START + self.0.elapsed().as_millis() as u64
    }
}

fn tokio_engine() -> Engine {
    let config = EngineConfig {
        clock: Arc::new(TokioClock(TokioInstant::now())),
        timer: false,
        shards: Some(4),
        ..EngineConfig::new(crate::wire::test_json::wire())
    };
    Engine::new(config).unwrap()
}

const LONG: Duration = Duration::from_secs(10);
const FIVE_PER_500: Option<RateLimit> = Some(RateLimit {
    max: 5,
    duration: 500,
});

async fn pull_at(
    e: &Engine,
    q: &QueueRef,
    max: usize,
    limiter: Option<RateLimit>,
) -> (usize, u128) {
    let (n, _) = e.pull(q, 1, max, WorkerLimits::rate(limiter), LONG).await;
    (n, e.now() as u128 - START as u128)
}

#[tokio::test(start_paused = true)]
async fn a_rate_limited_pull_resolves_when_the_next_token_comes() {
    let e = tokio_engine();
    let q = qref(&e, "q");
    for _ in 0..12 {
        add(&e, &q, "{}");
    }
    assert!(
        !e.held_back(&q, WorkerLimits::rate(FIVE_PER_500)),
        "a full bucket holds nothing back"
    );
    assert_eq!(pull_at(&e, &q, 10, FIVE_PER_500).await, (5, 0));
    assert_eq!(e.take(&q, 10, WorkerLimits::rate(FIVE_PER_500)).0, 0);
    assert!(
        e.held_back(&q, WorkerLimits::rate(FIVE_PER_500)),
        "ready jobs wait for a token"
    );
    assert!(
        !e.held_back(&q, WorkerLimits::default()),
        "a worker without a limiter is not held back"
    );
    assert_eq!(pull_at(&e, &q, 10, FIVE_PER_500).await, (1, 100));
    assert_eq!(pull_at(&e, &q, 10, FIVE_PER_500).await, (1, 200));
    // The queue's own rate limit overrides the worker's.
    e.change_limits(
        &q,
        LimitChange::Rate(Some(RateLimit {
            max: 1,
            duration: 1_000,
        })),
    );
    assert_eq!(pull_at(&e, &q, 10, FIVE_PER_500).await, (1, 1_200));
    assert_eq!(e.limits(&q).0.rate.map(|r| r.max), Some(1));
    assert_eq!(e.limits(&q).1, 1_000);
    e.change_limits(&q, LimitChange::Rate(None));
    assert_eq!(pull_at(&e, &q, 10, None).await, (4, 1_200));
    assert!(
        !e.held_back(&q, WorkerLimits::rate(FIVE_PER_500)),
        "nothing is ready: drained, not held back"
    );
}

#[tokio::test(start_paused = true)]
async fn a_capped_pull_resolves_when_a_job_finishes() {
    let e = tokio_engine();
    let q = qref(&e, "q");
    e.change_limits(&q, LimitChange::Concurrency(Some(2)));
    for _ in 0..4 {
        add(&e, &q, "{}");
    }
    let first = taken(&e.take(&q, 10, WorkerLimits::default()).1);
    assert_eq!(first.len(), 2);
    let (e2, q2) = (e.clone(), q.clone());
    let acker = tokio::spawn(async move {
        tokio::time::sleep(ms(300)).await;
        let (id, token) = first[0].clone();
        e2.ack_many(
            &q2,
            vec![Ack {
                id,
                token,
                outcome: Outcome::Completed("null".into()),
                keep: None,
            }],
        )
    });
    assert_eq!(pull_at(&e, &q, 10, None).await, (1, 300));
    assert_eq!(acker.await.unwrap(), vec![AckResult::Completed]);
    assert_eq!(counts(&e, &q), "waiting=1 active=2 completed=1");
    // Raising the cap wakes the waiting pull at once.
    let (e2, q2) = (e.clone(), q.clone());
    let raiser = tokio::spawn(async move {
        tokio::time::sleep(ms(50)).await;
        e2.change_limits(&q2, LimitChange::Concurrency(Some(3)));
    });
    assert_eq!(pull_at(&e, &q, 10, None).await, (1, 350));
    raiser.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_held_queue_starts_nothing_until_the_hold_ends() {
    let e = tokio_engine();
    let q = qref(&e, "q");
    add(&e, &q, "{}");
    e.change_limits(&q, LimitChange::HoldFor(250));
    assert_eq!(e.limits(&q).1, 250);
    assert_eq!(e.take(&q, 10, WorkerLimits::default()).0, 0);
    assert_eq!(pull_at(&e, &q, 10, None).await, (1, 250));
    assert_eq!(e.limits(&q).1, 0);
}
