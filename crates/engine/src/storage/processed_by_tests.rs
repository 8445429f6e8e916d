//! `processedBy` in the file: the name of the Worker that took a job is written with its
//! activation, kept when it finishes, and read back after a restart; a Worker without a name
//! leaves the last one.

use std::sync::Arc;

use super::tests::{ack_ok, job, open, settle};
use crate::domain::limits::WorkerLimits;

fn named(name: &str) -> WorkerLimits {
    WorkerLimits {
        name: Some(Arc::from(name)),
        ..WorkerLimits::default()
    }
}

fn records(text: &str) -> Vec<serde_json::Value> {
    serde_json::from_str(text).unwrap()
}

#[test]
fn the_taking_workers_name_is_kept_through_finish_and_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pb.db");
    let e = open(&path).unwrap();
    let q = e.queue_ref("q").unwrap();
    e.add(&q, job("a", "{}", "{}"));
    e.add(&q, job("b", "{}", "{}"));
    let (_, text) = e.take(&q, 1, named("mailer-1"));
    let a = &records(&text)[0];
    assert_eq!(a["processedBy"], "mailer-1");
    ack_ok(&e, &q, "1", a["token"].as_u64().unwrap(), "null");
    // A Worker without a name: no processedBy.
    let (_, text) = e.take(&q, 1, WorkerLimits::default());
    assert!(records(&text)[0].get("processedBy").is_none(), "{text}");
    settle(&e);
    e.close();

    let e = open(&path).unwrap();
    let q = e.queue_ref("q").unwrap();
    let a: serde_json::Value = serde_json::from_str(&e.job_json(&q, "1").unwrap()).unwrap();
    assert_eq!(
        (a["processedBy"].as_str(), a["finishedOn"].is_u64()),
        (Some("mailer-1"), true)
    );
    // Job 2 stalled at the restart; a named Worker takes it again.
    let (_, text) = e.take(&q, 1, named("mailer-2"));
    assert_eq!(records(&text)[0]["processedBy"], "mailer-2");
    settle(&e);
    e.close();
    let e = open(&path).unwrap();
    let q = e.queue_ref("q").unwrap();
    let b: serde_json::Value = serde_json::from_str(&e.job_json(&q, "2").unwrap()).unwrap();
    assert_eq!(b["processedBy"], "mailer-2");
    e.close();
}
