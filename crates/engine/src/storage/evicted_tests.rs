//! Finished jobs beyond the in-memory bound: evicted, counted, readable from the file, deleted
//! by retention, clean and remove, revived to be changed, and restored with the same bound.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::backend::{Backend, JobChange, Page};
use crate::clock::MockClock;
use crate::domain::job::JobState;
use crate::domain::limits::WorkerLimits;
use crate::domain::listing::StateFilter;
use crate::domain::queue::{NewJob, Outcome};
use crate::{Ack, Added, Engine, EngineConfig, JobOptions, QueueRef};

const COMPLETED: StateFilter = StateFilter::State(JobState::Completed);

fn page(start: i64, end: i64, asc: bool) -> Page {
    Page { start, end, asc }
}

const LIMIT: usize = 3;

fn open(path: &Path, clock: Arc<MockClock>) -> Engine {
    Engine::new(EngineConfig {
        clock,
        timer: false,
        path: Some(path.to_path_buf()),
        finished_in_memory: Some(LIMIT),
        ..EngineConfig::new(crate::wire::test_json::wire())
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
        let (n, text) = e.take(q, 1, WorkerLimits::default());
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

/// A durable engine at `path` whose queue "q" has ten completed jobs, seven of them evicted.
fn ten_completed(path: &Path) -> (Engine, QueueRef, Arc<MockClock>) {
    let clock = Arc::new(MockClock::new(1_000_000));
    let e = open(path, clock.clone());
    let q = e.queue_ref("q").unwrap();
    for _ in 0..10 {
        add(&e, &q, "{}");
    }
    complete_all(&e, &q, &clock);
    settle(&e);
    (e, q, clock)
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
    // found through the facade, from the file
    let reply = Backend::job(&e, &q, "first");
    assert!(
        matches!(reply, crate::Reply::Later(_)),
        "read from the file"
    );
    let rec: serde_json::Value =
        serde_json::from_str(&reply.wait().await.unwrap().unwrap()).unwrap();
    assert_eq!(rec["returnvalue"], "first");
    let state = Backend::state(&e, &q, "first").wait().await.unwrap();
    assert_eq!(state, Some(JobState::Completed));
    assert_eq!(Backend::job(&e, &q, "nope").wait().await.unwrap(), None);
    assert_eq!(e.evicted_key(&q, "9"), None, "job 9 is in memory");
    // a duplicate of an evicted custom id is still a duplicate
    assert!(matches!(
        add(&e, &q, "{\"jobId\":\"first\"}"),
        Added::Duplicate(_)
    ));
    // the full list, newest first, across memory and disk
    let all = Backend::jobs(&e, &q, vec![COMPLETED], page(0, -1, false))
        .wait()
        .await
        .unwrap();
    assert_eq!(
        ids(&all),
        vec!["9", "8", "7", "6", "5", "4", "3", "2", "1", "first"]
    );
    let some = Backend::jobs(&e, &q, vec![COMPLETED], page(2, 4, true))
        .wait()
        .await
        .unwrap();
    assert_eq!(ids(&some), vec!["2", "3", "4"]);

    // remove an evicted job
    assert!(Backend::remove(&e, &q, "2").wait().await.unwrap());
    settle(&e);
    assert_eq!(e.counts(&q, &["completed".into()]).unwrap()[0].1, 9);
    assert!(!e.remove_evicted(&q, 2).await.unwrap(), "already gone");

    // clean: the oldest first, from disk
    clock.advance(1_000);
    let cleaned = Backend::clean(&e, &q, 0, 2, COMPLETED)
        .wait()
        .await
        .unwrap();
    assert_eq!(cleaned, vec!["first".to_string(), "1".to_string()]);
    settle(&e);
    assert_eq!(e.counts(&q, &["completed".into()]).unwrap()[0].1, 7);
    assert!(
        matches!(add(&e, &q, "{\"jobId\":\"first\"}"), Added::New(_)),
        "a cleaned custom id is free again"
    );

    // revive an evicted job to change it: retry it
    assert!(e.job_json(&q, "3").is_none());
    let retried = Backend::change(
        &e,
        &q,
        "3",
        JobChange::Retry {
            from: JobState::Completed,
            reset_attempts: false,
        },
    );
    assert!(matches!(retried, crate::Reply::Later(_)), "revived first");
    retried.wait().await.unwrap();
    assert_eq!(e.state(&q, "3"), "waiting");
    let k4 = e.evicted_key(&q, "4").unwrap();
    assert!(e.revive(&q, k4).await.unwrap());
    assert!(e.revive(&q, k4).await.unwrap(), "in memory already");
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
    let (e, q, clock) = ten_completed(&path);
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
        .jobs_json_with_disk(&q, &[COMPLETED], 0, -1, true)
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

/// A revival is queued in order with every other write: a removal queued while it is under way
/// wins (the change then finds no job), two changes of one evicted job both apply, and a clean
/// of evicted rows never takes a row being revived. Counts stay right in memory and on reopen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revivals_race_with_removals_cleans_and_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("race.db");
    let (e, q, clock) = ten_completed(&path);
    let log = |row: &str| JobChange::Log {
        row: format!("\"{row}\"").into(),
        keep: 0,
    };
    // a removal queued behind a revival cancels it
    let change = Backend::change(&e, &q, "2", log("a"));
    let removed = Backend::remove(&e, &q, "2");
    assert!(removed.wait().await.unwrap());
    let err = change.wait().await.unwrap_err();
    assert_eq!(err.code(), "ERR_JOB_NOT_FOUND");
    assert_eq!(Backend::state(&e, &q, "2").wait().await.unwrap(), None);
    // two changes of one evicted job: both apply, in order
    let first = Backend::change(&e, &q, "3", log("x"));
    let second = Backend::change(&e, &q, "3", log("y"));
    assert_eq!(first.wait().await.unwrap(), 1);
    assert_eq!(second.wait().await.unwrap(), 2);
    // a clean of every evicted row leaves the one being revived
    clock.advance(1_000);
    let change = Backend::change(&e, &q, "4", log("z"));
    let cleaned = Backend::clean(&e, &q, 0, 0, COMPLETED)
        .wait()
        .await
        .unwrap();
    assert!(!cleaned.contains(&"4".to_string()), "{cleaned:?}");
    assert_eq!(change.wait().await.unwrap(), 1);
    settle(&e);
    let count = |e: &Engine| e.counts(&q, &["completed".into()]).unwrap()[0].1;
    // 1 and 3 (revived, then cleaned from memory too) ... only 4 was out of reach
    assert_eq!(count(&e), 1, "cleaned: {cleaned:?}");
    assert_eq!(
        Backend::state(&e, &q, "4").wait().await.unwrap(),
        Some(JobState::Completed)
    );
    let logs = Backend::logs(&e, &q, "4", page(0, -1, true))
        .wait()
        .await
        .unwrap();
    assert_eq!(logs, (vec!["\"z\"".to_string()], 1));
    e.close();
    let e = open(&path, clock.clone());
    assert_eq!(count(&e), 1);
    let logs = Backend::logs(&e, &q, "4", page(0, -1, true))
        .wait()
        .await
        .unwrap();
    assert_eq!(logs.1, 1);
    e.close();
}

/// A revival cancelled by an obliterate never changes the new job that reuses the key; a
/// revived job stays in memory until every caller that waited for it has changed it; a change
/// whose revival ends after the engine closed fails with ERR_QUEUE_CLOSED, never silently.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revivals_across_obliterate_eviction_and_close() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("across.db");
    let (e, q, clock) = ten_completed(&path);
    let log = |row: &str| JobChange::Log {
        row: format!("\"{row}\"").into(),
        keep: 0,
    };
    // obliterate while "2" is on its way back: the change must not land on the new job 2
    let change = Backend::change(&e, &q, "2", log("old"));
    Backend::obliterate(&e, &q, true).wait().await.unwrap();
    for _ in 0..3 {
        add(&e, &q, "{}");
    }
    let err = change.wait().await.unwrap_err();
    assert_eq!(err.code(), "ERR_JOB_NOT_FOUND");
    let logs = Backend::logs(&e, &q, "2", page(0, -1, true))
        .wait()
        .await
        .unwrap();
    assert_eq!(logs.1, 0, "the new job 2 was not touched");
    // two callers wait for one evicted job; many jobs finish between their changes
    complete_all(&e, &q, &clock);
    for _ in 0..6 {
        add(&e, &q, "{}");
    }
    complete_all(&e, &q, &clock);
    settle(&e);
    assert!(e.evicted_key(&q, "1").is_some());
    let first = Backend::change(&e, &q, "1", log("a"));
    let second = Backend::change(&e, &q, "1", log("b"));
    assert_eq!(first.wait().await.unwrap(), 1);
    for _ in 0..5 {
        add(&e, &q, "{}");
    }
    complete_all(&e, &q, &clock);
    assert_eq!(
        second.wait().await.unwrap(),
        2,
        "still in memory for the second caller"
    );
    settle(&e);
    // closed while a revival is under way
    let key = e.evicted_key(&q, "2").unwrap();
    assert!(e.job_json(&q, "2").is_none(), "job {key} is evicted");
    let late = Backend::change(&e, &q, "2", log("late"));
    e.close();
    let err = late.wait().await.unwrap_err();
    assert_eq!(err.code(), "ERR_QUEUE_CLOSED");
    let e = open(&path, clock.clone());
    let logs = Backend::logs(&e, &q, "1", page(0, -1, true))
        .wait()
        .await
        .unwrap();
    assert_eq!(logs, (vec!["\"a\"".to_string(), "\"b\"".to_string()], 2));
    let logs = Backend::logs(&e, &q, "2", page(0, -1, true))
        .wait()
        .await
        .unwrap();
    assert_eq!(logs.1, 0, "the change after close was not written");
    e.close();
}
