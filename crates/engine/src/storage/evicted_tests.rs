//! Finished jobs beyond the in-memory bound: evicted, counted, readable from the file, deleted
//! by retention, clean and remove, revived to be changed, and restored with the same bound.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::clock::MockClock;
use crate::domain::queue::{NewJob, Outcome};
use crate::{Ack, Added, Engine, EngineConfig, JobOptions, QueueRef};

const LIMIT: usize = 3;

fn open(path: &Path, clock: Arc<MockClock>) -> Engine {
    Engine::new(EngineConfig {
        clock,
        timer: false,
        path: Some(path.to_path_buf()),
        finished_in_memory: Some(LIMIT),
        ..EngineConfig::default()
    })
    .unwrap()
}

fn settle(e: &Engine) {
    let t = Instant::now();
    while e.committed() < e.submitted() {
        assert!(t.elapsed() < Duration::from_secs(5));
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn add(e: &Engine, q: &QueueRef, opts: &str) -> Added {
    e.add(
        q,
        NewJob {
            name: "j".into(),
            data: "{}".into(),
            opts: JobOptions::from_json(opts).unwrap(),
            opts_json: Some(opts.into()),
            timestamp: e.now(),
        },
    )
}

/// Takes and completes every ready job with its id as return value.
fn complete_all(e: &Engine, q: &QueueRef, clock: &MockClock) {
    loop {
        let (n, text) = e.take(q, 1);
        if n == 0 {
            break;
        }
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let id = crate::domain::job::record_id(&v[0]["id"]);
        clock.advance(10);
        e.ack_many(
            q,
            vec![Ack {
                id: id.clone(),
                token: v[0]["token"].as_u64().unwrap(),
                outcome: Outcome::Completed(format!("\"{id}\"").into()),
                keep: None,
            }],
        );
    }
}

fn ids(json: &str) -> Vec<String> {
    let v: Vec<serde_json::Value> = serde_json::from_str(json).unwrap();
    v.iter()
        .map(|j| crate::domain::job::record_id(&j["id"]))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_jobs_beyond_the_bound_live_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("e.db");
    let clock = Arc::new(MockClock::new(1_000_000));
    let e = open(&path, clock.clone());
    let q = e.queue_ref("q").unwrap();
    add(&e, &q, "{\"jobId\":\"first\"}");
    for _ in 0..9 {
        add(&e, &q, "{}");
    }
    complete_all(&e, &q, &clock);
    settle(&e);
    // memory holds the newest 3; counts see all 10
    assert!(e.has_evicted(&q));
    assert_eq!(e.counts(&q, &["completed".into()]).unwrap()[0].1, 10);
    assert_eq!(e.job_json(&q, "first"), None);
    let key = e.evicted_key(&q, "first").unwrap();
    let rec: serde_json::Value =
        serde_json::from_str(&e.disk_job_json(&q, key).unwrap().unwrap()).unwrap();
    assert_eq!(rec["returnvalue"], "first");
    assert_eq!(e.evicted_key(&q, "9"), None, "job 9 is in memory");
    // a duplicate of an evicted custom id is still a duplicate
    assert!(matches!(
        add(&e, &q, "{\"jobId\":\"first\"}"),
        Added::Duplicate(_)
    ));
    // the full list, newest first, across memory and disk
    let all = e
        .jobs_json_with_disk(&q, &["completed".into()], 0, -1, false)
        .unwrap();
    assert_eq!(
        ids(&all),
        vec!["9", "8", "7", "6", "5", "4", "3", "2", "1", "first"]
    );
    let page = e
        .jobs_json_with_disk(&q, &["completed".into()], 2, 4, true)
        .unwrap();
    assert_eq!(ids(&page), vec!["2", "3", "4"]);

    // remove an evicted job
    assert!(e
        .remove_evicted(&q, e.evicted_key(&q, "2").unwrap())
        .await
        .unwrap());
    settle(&e);
    assert_eq!(e.counts(&q, &["completed".into()]).unwrap()[0].1, 9);
    assert!(!e.remove_evicted(&q, 2).await.unwrap(), "already gone");

    // clean: the oldest first, from disk
    clock.advance(1_000);
    let cleaned = e.clean_with_disk(&q, 0, 2, "completed").await.unwrap();
    assert_eq!(cleaned, vec!["first".to_string(), "1".to_string()]);
    settle(&e);
    assert_eq!(e.counts(&q, &["completed".into()]).unwrap()[0].1, 7);
    assert!(
        matches!(add(&e, &q, "{\"jobId\":\"first\"}"), Added::New(_)),
        "a cleaned custom id is free again"
    );

    // revive an evicted job to change it: retry it
    let k3 = e.evicted_key(&q, "3").unwrap();
    assert!(e.revive(&q, k3).unwrap());
    e.retry(&q, "3", "completed", false).unwrap();
    assert_eq!(e.state(&q, "3"), "waiting");
    settle(&e);
    e.close();

    // reopen: same counts, same bound
    let e = open(&path, clock.clone());
    let q = e.queue_ref("q").unwrap();
    assert_eq!(e.counts(&q, &["completed".into()]).unwrap()[0].1, 6);
    assert_eq!(e.state(&q, "3"), "waiting");
    assert!(e.has_evicted(&q));
    e.close();
}

#[test]
fn retention_counts_over_memory_and_disk() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.db");
    let clock = Arc::new(MockClock::new(1_000_000));
    let e = open(&path, clock.clone());
    let q = e.queue_ref("q").unwrap();
    for _ in 0..10 {
        add(&e, &q, "{}");
    }
    complete_all(&e, &q, &clock);
    settle(&e);
    assert_eq!(e.counts(&q, &["completed".into()]).unwrap()[0].1, 10);
    // a job that keeps the newest 5 completed trims the evicted ones on disk
    add(&e, &q, "{\"removeOnComplete\":5}");
    complete_all(&e, &q, &clock);
    settle(&e);
    let t = Instant::now();
    while e.counts(&q, &["completed".into()]).unwrap()[0].1 != 5
        && t.elapsed() < Duration::from_secs(2)
    {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(e.counts(&q, &["completed".into()]).unwrap()[0].1, 5);
    let all = e
        .jobs_json_with_disk(&q, &["completed".into()], 0, -1, true)
        .unwrap();
    assert_eq!(ids(&all), vec!["7", "8", "9", "10", "11"]);
    // an age rule drops old evicted rows too
    clock.advance(60_000);
    add(&e, &q, "{\"removeOnComplete\":{\"age\":30}}");
    complete_all(&e, &q, &clock);
    settle(&e);
    let t = Instant::now();
    while e.counts(&q, &["completed".into()]).unwrap()[0].1 != 1
        && t.elapsed() < Duration::from_secs(2)
    {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(e.counts(&q, &["completed".into()]).unwrap()[0].1, 1);
    e.close();
}
