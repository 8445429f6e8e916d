//! Flows in the file: a parent's dependencies and its children's links survive a restart, and a
//! child finished after it moves its parent on; so do a step job's moves.

use super::tests::{ack_ok, job, open, settle};
use crate::application::engine_flows::FlowNode;
use crate::domain::limits::WorkerLimits;

#[test]
fn a_flow_survives_close_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("flow.db");
    let e = open(&path).unwrap();
    let (p, c) = (e.queue_ref("p").unwrap(), e.queue_ref("c").unwrap());
    let nodes = vec![
        FlowNode {
            queue: p.clone(),
            job: job("parent", "{}", "{}"),
            parent: None,
            children: 2,
        },
        FlowNode {
            queue: c.clone(),
            job: job("a", "{}", "{}"),
            parent: Some(0),
            children: 0,
        },
        FlowNode {
            queue: c.clone(),
            job: job("b", "{}", r#"{"removeOnComplete":true}"#),
            parent: Some(0),
            children: 0,
        },
    ];
    assert_eq!(e.add_flow(nodes).unwrap(), ["1", "1", "2"]);
    let (_, text) = e.take(&c, 1, WorkerLimits::default());
    let (id, token) = crate::domain::job::parse_taken(&text).remove(0);
    ack_ok(&e, &c, &id, token, "\"first\"");
    settle(&e);
    e.close();

    let e = open(&path).unwrap();
    let (p, c) = (e.queue_ref("p").unwrap(), e.queue_ref("c").unwrap());
    assert_eq!(e.state(&p, "1"), "waiting-children");
    let d = e.dependencies(&p, "1").unwrap();
    assert_eq!(d.pending.len(), 1);
    assert_eq!(&*d.processed[0].1, "\"first\"");
    // The last child completes after the restart (and is removed on completion): the parent
    // hears, in the same commit.
    let (_, text) = e.take(&c, 1, WorkerLimits::default());
    let (id, token) = crate::domain::job::parse_taken(&text).remove(0);
    ack_ok(&e, &c, &id, token, "\"second\"");
    assert_eq!(e.state(&p, "1"), "waiting");
    settle(&e);
    e.close();

    let e = open(&path).unwrap();
    let p = e.queue_ref("p").unwrap();
    assert_eq!(e.state(&p, "1"), "waiting");
    assert_eq!(e.dependencies(&p, "1").unwrap().processed.len(), 2);
    e.close();
}

/// A step job's moves are written: delayed (with its run-at) and waiting for a child added while
/// it ran; both are where they were after a restart.
#[test]
fn step_moves_survive_close_and_reopen() {
    use crate::application::engine::Ack;
    use crate::domain::queue::{AckResult, Outcome};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("steps.db");
    let e = open(&path).unwrap();
    let q = e.queue_ref("q").unwrap();
    e.add(&q, job("later", "{}", "{}"));
    e.add(&q, job("parent", "{}", "{}"));
    let (_, text) = e.take(&q, 2, WorkerLimits::default());
    let taken = crate::domain::job::parse_taken(&text);
    let step = |id: &str, token: u64, outcome: Outcome| {
        let ack = Ack {
            id: id.into(),
            token,
            outcome,
            keep: None,
        };
        e.ack_many(&q, vec![ack]).remove(0)
    };
    let run_at = 1_000_000 + 60_000;
    assert_eq!(
        step(&taken[0].0, taken[0].1, Outcome::Delayed { run_at }),
        AckResult::Delayed
    );
    let kids = e.queue_ref("kids").unwrap();
    let opts = format!(r#"{{"parent":{{"id":"{}","queue":"bull:q"}}}}"#, taken[1].0);
    e.add_linked(&kids, vec![job("kid", "{}", &opts)]).unwrap();
    assert_eq!(
        step(&taken[1].0, taken[1].1, Outcome::WaitingChildren),
        AckResult::WaitingChildren
    );
    settle(&e);
    e.close();

    let e = open(&path).unwrap();
    let q = e.queue_ref("q").unwrap();
    assert_eq!(e.state(&q, &taken[0].0), "delayed");
    let record: serde_json::Value =
        serde_json::from_str(&e.job_json(&q, &taken[0].0).unwrap()).unwrap();
    assert_eq!(record["delay"], 60_000);
    assert_eq!(e.state(&q, &taken[1].0), "waiting-children");
    e.close();
}
