//! Job schedulers in the file: a scheduler and its pending job survive a restart, and its next
//! job after it comes once.

use super::tests::{open, settle};
use crate::domain::limits::WorkerLimits;

#[test]
fn a_scheduler_survives_close_and_reopen_without_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sched.db");
    let e = open(&path).unwrap();
    let q = e.queue_ref("q").unwrap();
    let first = e
        .upsert_scheduler(&q, "s", r#"{"every":200}"#, (Some("tick"), "{}", None))
        .unwrap();
    assert!(first.contains("repeat:s:1000000"), "{first}");
    settle(&e);
    e.close();

    let e = open(&path).unwrap();
    let q = e.queue_ref("q").unwrap();
    assert_eq!(e.scheduler_count(&q), 1);
    let s = e.scheduler_json(&q, "s").unwrap();
    assert!(
        s.contains(r#""next":1000000"#) && s.contains(r#""every":200"#),
        "{s}"
    );
    // An upsert after the restart updates: still one pending job.
    e.upsert_scheduler(&q, "s", r#"{"every":200}"#, (Some("tick"), "{}", None))
        .unwrap();
    let (n, _) = e.take(&q, 10, WorkerLimits::default());
    assert_eq!(n, 1);
    assert_eq!(e.state(&q, "repeat:s:1000200"), "delayed");
    settle(&e);
    e.close();

    let e = open(&path).unwrap();
    let q = e.queue_ref("q").unwrap();
    let s = e.scheduler_json(&q, "s").unwrap();
    assert!(
        s.contains(r#""next":1000200"#) && s.contains(r#""iterationCount":2"#),
        "{s}"
    );
    assert_eq!(e.state(&q, "repeat:s:1000200"), "delayed");
    assert!(e.remove_scheduler(&q, "s"));
    settle(&e);
    e.close();

    let e = open(&path).unwrap();
    let q = e.queue_ref("q").unwrap();
    assert_eq!(e.scheduler_count(&q), 0);
    assert_eq!(e.state(&q, "repeat:s:1000200"), "unknown");
    e.close();
}
