//! Flows in the file: a parent's dependencies and its children's links survive a restart, and a
//! child finished after it moves its parent on.

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
