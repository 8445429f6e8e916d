//! Durable engine tests: round trips through a real file, recovery of active jobs, commits and
//! events (refused files: `refusal_tests.rs`).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::clock::MockClock;
use crate::domain::groups::{GroupChange, GroupSettings};
use crate::domain::limits::{LimitChange, LimitSettings, RateLimit, WorkerLimits};
use crate::domain::queue::{Added, NewJob, Outcome};
use crate::{Ack, Engine, EngineConfig, JobOptions};

pub(super) fn open(path: &Path) -> crate::Result<Engine> {
    Engine::new(EngineConfig {
        clock: Arc::new(MockClock::new(1_000_000)),
        timer: false,
        path: Some(path.to_path_buf()),
        ..EngineConfig::new(crate::wire::test_json::wire())
    })
}

pub(super) fn settle(e: &Engine) {
    let t = Instant::now();
    while e.committed() < e.submitted() {
        assert!(t.elapsed() < Duration::from_secs(5), "commit did not come");
        std::thread::sleep(Duration::from_millis(1));
    }
}

pub(super) fn job(name: &str, data: &str, opts: &str) -> NewJob {
    NewJob {
        name: name.into(),
        data: data.into(),
        opts: JobOptions::from_json(opts).unwrap(),
        opts_json: Some(opts.into()),
        timestamp: 1_000_000,
    }
}

pub(super) fn ack_ok(e: &Engine, q: &crate::QueueRef, id: &str, token: u64, value: &str) {
    e.ack_many(
        q,
        vec![Ack {
            id: id.into(),
            token,
            outcome: Outcome::Completed(value.into()),
            keep: None,
        }],
    );
}

#[test]
fn state_survives_close_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("q.db");
    let e = open(&path).unwrap();
    assert!(e.is_durable());
    let q = e.queue_ref("mail").unwrap();
    assert_eq!(e.add(&q, job("a", "{\"n\":1}", "{}")), Added::New(1));
    assert_eq!(
        e.add(&q, job("b", "{\"n\":2}", "{\"priority\":2}")),
        Added::New(2)
    );
    assert_eq!(e.add(&q, job("c", "3", "{\"delay\":5000}")), Added::New(3));
    assert!(matches!(
        e.add(&q, job("d", "4", "{\"jobId\":\"custom\"}")),
        Added::New(_)
    ));
    let (n, text) = e.take(&q, 1, WorkerLimits::default());
    assert_eq!(n, 1);
    let pulled: serde_json::Value = serde_json::from_str(&text).unwrap();
    let token = pulled[0]["token"].as_u64().unwrap();
    ack_ok(&e, &q, "1", token, "{\"sent\":true}");
    e.update_progress(&q, "2", "42").unwrap();
    e.add_log(&q, "2", "hello", 0).unwrap();
    e.pause(&q);
    let limits = LimitSettings {
        rate: Some(RateLimit {
            max: 7,
            duration: 1_500,
        }),
        concurrency: Some(3),
    };
    e.change_limits(&q, LimitChange::Rate(limits.rate));
    e.change_limits(&q, LimitChange::Concurrency(limits.concurrency));
    settle(&e);
    let before: Vec<_> = ["1", "2", "3", "custom"]
        .iter()
        .map(|id| e.job_json(&q, id))
        .collect();
    let counts = e.counts(&q, &[]).unwrap();
    e.close();

    let e = open(&path).unwrap();
    let q = e.queue_ref("mail").unwrap();
    let after: Vec<_> = ["1", "2", "3", "custom"]
        .iter()
        .map(|id| e.job_json(&q, id))
        .collect();
    assert_eq!(before, after);
    assert_eq!(e.counts(&q, &[]).unwrap(), counts);
    assert!(e.is_paused(&q));
    assert_eq!(e.limits(&q).0, limits);
    assert_eq!(e.logs(&q, "2", 0, -1, true).0, vec!["hello".to_string()]);
    // the id sequence goes on
    assert_eq!(e.add(&q, job("e", "5", "{}")), Added::New(4));
    // the custom id is still known
    assert!(matches!(
        e.add(&q, job("d", "4", "{\"jobId\":\"custom\"}")),
        Added::Duplicate(_)
    ));
    e.close();
}

/// The job as JSON (the test wire).
fn json_of(e: &Engine, q: &crate::QueueRef, id: &str) -> serde_json::Value {
    serde_json::from_str(&e.job_json(q, id).unwrap()).unwrap()
}

#[test]
fn active_jobs_stall_without_spending_an_attempt_and_fail_past_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("q.db");
    let e = open(&path).unwrap();
    let q = e.queue_ref("work").unwrap();
    e.add(&q, job("once", "1", "{}"));
    e.add(&q, job("other", "2", "{}"));
    assert_eq!(e.take(&q, 2, WorkerLimits::default()).0, 2);
    settle(&e);
    e.close();

    // Stalled once: back at the head of waiting, no attempt spent, even with one attempt.
    let e = open(&path).unwrap();
    let q = e.queue_ref("work").unwrap();
    assert_eq!(e.state(&q, "1"), "waiting");
    assert_eq!(e.state(&q, "2"), "waiting");
    let j = json_of(&e, &q, "1");
    assert_eq!(
        (j["attemptsMade"].as_u64(), j["stalledCounter"].as_u64()),
        (Some(0), Some(1))
    );
    assert_eq!(j["failedReason"], serde_json::Value::Null);
    let mut stalled = e.take_stalled(&q);
    stalled.sort();
    assert_eq!(stalled, vec!["1".to_string(), "2".to_string()]);
    assert!(e.take_stalled(&q).is_empty(), "reported once");
    // Job 1 stalls a second time; job 2 finishes.
    let (n, text) = e.take(&q, 2, WorkerLimits::default());
    assert_eq!(n, 2);
    let records: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
    let token = |id: &str| {
        let r = records
            .iter()
            .find(|r| crate::domain::job::record_id(&r["id"]) == id)
            .unwrap();
        r["token"].as_u64().unwrap()
    };
    ack_ok(&e, &q, "2", token("2"), "null");
    settle(&e);
    e.close();

    // Past maxStalledCount (1): failed with BullMQ's reason; the failure counts the attempt.
    let e = open(&path).unwrap();
    let q = e.queue_ref("work").unwrap();
    assert_eq!(e.state(&q, "1"), "failed");
    assert_eq!(e.state(&q, "2"), "completed");
    let j = json_of(&e, &q, "1");
    assert_eq!(
        (j["attemptsMade"].as_u64(), j["stalledCounter"].as_u64()),
        (Some(1), Some(2))
    );
    assert_eq!(j["failedReason"], crate::domain::STALLED_TOO_OFTEN);
    assert_eq!(e.take_stalled(&q), vec!["1".to_string()]);
    settle(&e);
    e.close();
    // The recovery itself was persisted.
    let e = open(&path).unwrap();
    let q = e.queue_ref("work").unwrap();
    assert_eq!(e.state(&q, "1"), "failed");
    assert_eq!(json_of(&e, &q, "1")["stalledCounter"], 2);
    e.close();
}

#[test]
fn obliterate_and_removals_reach_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("q.db");
    let e = open(&path).unwrap();
    let a = e.queue_ref("a").unwrap();
    let b = e.queue_ref("b").unwrap();
    for _ in 0..100 {
        e.add(&a, job("x", "1", "{}"));
    }
    e.add(&b, job("y", "1", "{}"));
    e.add(&b, job("z", "1", "{}"));
    e.remove(&b, "1").unwrap();
    e.obliterate(&a, false).unwrap();
    settle(&e);
    e.close();
    let e = open(&path).unwrap();
    let a = e.queue_ref("a").unwrap();
    let b = e.queue_ref("b").unwrap();
    assert_eq!(e.count(&a), 0);
    assert_eq!(e.state(&b, "1"), "unknown");
    assert_eq!(e.state(&b, "2"), "waiting");
    assert_eq!(e.add(&a, job("x", "1", "{}")), Added::New(1));
    e.close();
}

#[test]
fn ids_never_repeat_across_restarts_though_adds_do_not_write_the_queue_row() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("q.db");
    let e = open(&path).unwrap();
    let q = e.queue_ref("q").unwrap();
    for _ in 0..3 {
        e.add(&q, job("x", "1", "{}"));
    }
    e.add(&q, job("c", "\"a\"", r#"{"jobId":"a"}"#));
    e.add(&q, job("c", "\"b\"", r#"{"jobId":"b"}"#));
    settle(&e);
    e.close();
    // Reopened from the rows alone: the next ids follow the highest key in the file.
    let e = open(&path).unwrap();
    let q = e.queue_ref("q").unwrap();
    assert_eq!(e.add(&q, job("x", "1", "{}")), Added::New(4));
    // Removing the newest jobs writes the sequences, so their ids are not handed out again.
    e.remove(&q, "4").unwrap();
    e.remove(&q, "b").unwrap();
    settle(&e);
    e.close();
    let e = open(&path).unwrap();
    let q = e.queue_ref("q").unwrap();
    assert_eq!(e.add(&q, job("x", "1", "{}")), Added::New(5));
    e.add(&q, job("c", "\"c\"", r#"{"jobId":"c"}"#));
    settle(&e);
    e.close();
    // The custom-id job added after the restart got a key of its own: both rows are there.
    let e = open(&path).unwrap();
    let q = e.queue_ref("q").unwrap();
    let a = e.job_json(&q, "a").expect("job a kept");
    let c = e.job_json(&q, "c").expect("job c kept");
    assert!(
        a.contains("\"data\":\"a\"") && c.contains("\"data\":\"c\""),
        "{a} {c}"
    );
    assert_eq!(e.count(&q), 6);
    e.close();
}

#[test]
fn events_wait_for_the_commit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("q.db");
    let e = open(&path).unwrap();
    let q = e.queue_ref("q").unwrap();
    e.subscribe(&q);
    e.add(&q, job("x", "1", "{}"));
    settle(&e);
    // the writer released them after its commit
    let t = Instant::now();
    let mut got = Vec::new();
    while got.len() < 2 && t.elapsed() < Duration::from_secs(2) {
        got.extend(e.drain_events());
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(got.len(), 2, "added + waiting");
    e.close();
}

#[test]
fn a_commit_notifier_set_after_commits_still_fires() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("q.db");
    let e = open(&path).unwrap();
    let q = e.queue_ref("q").unwrap();
    e.add(&q, job("x", "1", "{}"));
    settle(&e);
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    e.set_commit_notifier(Some(Arc::new(move || {
        c.fetch_add(1, Ordering::SeqCst);
    })));
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "armed and called once when set"
    );
    assert_eq!(e.take_commit_notice(), e.submitted());
    e.add(&q, job("y", "2", "{}"));
    settle(&e);
    let t = Instant::now();
    while calls.load(Ordering::SeqCst) < 2 && t.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(calls.load(Ordering::SeqCst), 2, "later commits notify");
    e.close();
}

/// The writer's commit hook holds the engine while it runs. If every other handle goes in that
/// moment, the engine is torn down on the writer thread itself: it must still commit what is
/// queued, checkpoint the WAL and release the file, in that order (it used to try to join
/// itself, which failed and lost the queued writes).
#[test]
fn teardown_on_the_writer_thread_commits_checkpoints_and_releases_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("q.db");
    let e = open(&path).unwrap();
    let q = e.queue_ref("mail").unwrap();
    let slot = Arc::new(parking_lot::Mutex::new(Some(e.clone())));
    let held = slot.clone();
    let q2 = q.clone();
    e.set_commit_notifier(Some(Arc::new(move || {
        // On the writer thread, inside the commit hook: queue one more write, then let go of
        // the last handle but the hook's own. Setting the notifier calls it once at once, on
        // this thread: re-arm it so the writer's next commit calls it.
        if std::thread::current().name() != Some("ferroqueue-writer") {
            if let Some(e) = held.lock().as_ref() {
                e.take_commit_notice();
            }
            return;
        }
        if let Some(last) = held.lock().take() {
            last.add(&q2, job("queued", "2", "{}"));
        }
    })));
    e.add(&q, job("first", "1", "{}"));
    drop(e);
    let t = Instant::now();
    let reopened = loop {
        match open(&path) {
            Ok(r) => break r,
            Err(err) if err.code() == "ERR_STORAGE_LOCKED" => {
                assert!(
                    t.elapsed() < Duration::from_secs(5),
                    "the file was never released"
                );
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(err) => panic!("{err}"),
        }
    };
    assert!(slot.lock().is_none(), "the notifier ran");
    let wal = dir.path().join("q.db-wal");
    let wal_len = std::fs::metadata(&wal).map_or(0, |m| m.len());
    assert_eq!(
        wal_len, 0,
        "the WAL was checkpointed before the file was released"
    );
    let q = reopened.queue_ref("mail").unwrap();
    assert_eq!(reopened.counts(&q, &["waiting".into()]).unwrap()[0].1, 2);
    reopened.close();
}

#[test]
fn deduplication_keys_survive_close_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dedup.db");
    let simple = r#"{"deduplication":{"id":"a"}}"#;
    let window = r#"{"deduplication":{"id":"b","ttl":60000}}"#;
    let e = open(&path).unwrap();
    let q = e.queue_ref("mail").unwrap();
    assert_eq!(e.add(&q, job("a", "1", simple)), Added::New(1));
    assert_eq!(e.add(&q, job("b", "2", window)), Added::New(2));
    assert_eq!(
        e.add(&q, job("c", "3", r#"{"deduplication":{"id":"c"}}"#)),
        Added::New(3)
    );
    assert!(e.remove_dedup_key(&q, "c", None));
    settle(&e);
    e.close();

    let e = open(&path).unwrap();
    let q = e.queue_ref("mail").unwrap();
    assert_eq!(e.add(&q, job("a", "4", simple)), Added::Deduplicated(1));
    assert_eq!(e.add(&q, job("b", "5", window)), Added::Deduplicated(2));
    assert_eq!(e.dedup_holder(&q, "b").as_deref(), Some("2"));
    assert_eq!(e.dedup_holder(&q, "c"), None, "a removed key stays removed");
    // The holder finishes: its key without a window goes, and is gone after the next open.
    let (n, text) = e.take(&q, 1, WorkerLimits::default());
    assert_eq!(n, 1);
    let token = crate::domain::job::parse_taken(&text)[0].1;
    ack_ok(&e, &q, "1", token, "null");
    settle(&e);
    e.close();
    let e = open(&path).unwrap();
    let q = e.queue_ref("mail").unwrap();
    assert_eq!(e.dedup_holder(&q, "a"), None);
    assert_eq!(e.dedup_holder(&q, "b").as_deref(), Some("2"));
    e.close();
}

#[test]
fn groups_and_their_settings_survive_close_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("groups.db");
    let e = open(&path).unwrap();
    let q = e.queue_ref("mail").unwrap();
    for (g, p) in [("A", 0), ("A", 2), ("A", 0), ("B", 0)] {
        let opts = format!(r#"{{"group":{{"id":"{g}","priority":{p}}}}}"#);
        assert!(matches!(e.add(&q, job("j", "1", &opts)), Added::New(_)));
    }
    let rate = RateLimit {
        max: 3,
        duration: 1_000,
    };
    assert!(e.change_group(&q, "A", GroupChange::Concurrency(Some(2))));
    assert!(e.change_group(&q, "A", GroupChange::Rate(Some(rate))));
    assert!(e.change_group(&q, "B", GroupChange::Paused(true)));
    assert!(e.change_group(&q, "C", GroupChange::Concurrency(Some(1))));
    assert!(e.change_group(&q, "C", GroupChange::Concurrency(None)));
    settle(&e);
    e.close();

    let e = open(&path).unwrap();
    let q = e.queue_ref("mail").unwrap();
    let a = e.group_info(&q, "A");
    assert_eq!(
        a.settings,
        GroupSettings {
            concurrency: Some(2),
            rate: Some(rate),
            paused: false,
        }
    );
    assert_eq!(a.waiting, 3);
    assert!(e.group_info(&q, "B").settings.paused);
    assert_eq!(
        e.group_info(&q, "C"),
        Default::default(),
        "a cleared group has no row"
    );
    assert_eq!(e.grouped_count(&q), 4);
    // A at its concurrency of 2, B paused; A's jobs in group priority order.
    let (n, text) = e.take(&q, 10, WorkerLimits::default());
    assert_eq!(n, 2);
    let ids: Vec<String> = crate::domain::job::parse_taken(&text)
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert_eq!(ids, ["1", "3"]);
    e.close();
}
