//! Back-pressure: a producer that outruns the disk gets its answers only once the writer's
//! backlog is within [`BACKLOG_LIMIT`] again, instead of growing memory without limit.

use std::time::{Duration, Instant};

use super::BACKLOG_LIMIT;
use crate::backend::{Backend, Reply};
use crate::domain::queue::NewJob;
use crate::{Engine, EngineConfig, JobOptions};

fn batch(n: usize) -> Vec<NewJob> {
    (0..n)
        .map(|_| NewJob {
            name: "j".into(),
            data: "{}".into(),
            opts: JobOptions::defaults(),
            opts_json: None,
            timestamp: 1,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_producer_that_outruns_a_stalled_disk_waits_for_room() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::new(EngineConfig {
        path: Some(dir.path().join("b.db")),
        timer: false,
        ..EngineConfig::new(crate::wire::test_json::wire())
    })
    .unwrap();
    let q = e.queue_ref("q").unwrap();
    const BATCH: usize = 1_000;
    const STALL_MS: u64 = 3_000;
    e.stall_writer(STALL_MS);
    let stalled_at = Instant::now();
    let mut batches = 0;
    let pending = loop {
        batches += 1;
        assert!(batches <= 2 * BACKLOG_LIMIT / BATCH, "never held back");
        match Backend::add_bulk(&e, &q, batch(BATCH)) {
            Reply::Now(r) => assert_eq!(r.unwrap().len(), BATCH),
            Reply::Later(p) => break p,
        }
    };
    // Held back as soon as the writer holds more than the limit, not later.
    assert_eq!(batches, BACKLOG_LIMIT / BATCH + 1);
    assert!(
        stalled_at.elapsed() < Duration::from_millis(STALL_MS),
        "the batches were added while the disk stalled"
    );
    // The job was added; its answer waits for the disk.
    assert_eq!(e.count(&q), batches * BATCH);
    assert_eq!(pending.await.unwrap().len(), BATCH);
    assert!(stalled_at.elapsed() >= Duration::from_millis(STALL_MS / 2));
    assert!(e.backlog_room().await.is_ok());
    // Once the disk caught up, answers come at once.
    e.commit_of(e.submitted()).await.unwrap();
    assert!(!e.backlogged());
    assert!(matches!(
        Backend::add_bulk(&e, &q, batch(BATCH)),
        Reply::Now(Ok(_))
    ));
    e.close();
}
