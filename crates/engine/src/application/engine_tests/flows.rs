//! Flows across queues of one engine: a three-level tree completes children first and each
//! parent sees its children's values; each child failure rule; a removed child no longer holds
//! its parent; a missing or finished parent is refused with nothing added.

use super::*;
use crate::application::engine_flows::FlowNode;
use crate::domain::flow::ChildRef;

fn node(e: &Engine, q: &QueueRef, opts: &str, parent: Option<usize>, children: usize) -> FlowNode {
    FlowNode {
        queue: q.clone(),
        job: NewJob {
            opts_json: Some(opts.into()),
            ..job(e, opts)
        },
        parent,
        children,
    }
}

/// Takes every ready job of `q` and finishes each with `outcome(id)`.
fn run_all(e: &Engine, q: &QueueRef, outcome: impl Fn(&str) -> Outcome) -> Vec<String> {
    let (_, text) = e.take(q, 100, WorkerLimits::default());
    let got = taken(&text);
    let acks = got.iter().map(|(id, t)| ack(id, *t, outcome(id))).collect();
    e.ack_many(q, acks);
    got.into_iter().map(|(id, _)| id).collect()
}

fn state(e: &Engine, q: &QueueRef, id: &str) -> &'static str {
    e.state(q, id)
}

#[test]
fn a_three_level_flow_completes_children_first_and_parents_see_their_values() {
    let (e, _) = engine();
    let (top, mid, leaf) = (qref(&e, "top"), qref(&e, "mid"), qref(&e, "leaf"));
    let ids = e
        .add_flow(vec![
            node(&e, &top, "{}", None, 1),
            node(&e, &mid, "{}", Some(0), 2),
            node(&e, &leaf, "{}", Some(1), 0),
            node(&e, &leaf, r#"{"priority":3}"#, Some(1), 0),
        ])
        .unwrap();
    assert_eq!(ids, ["1", "1", "1", "2"]);
    assert_eq!(state(&e, &top, "1"), "waiting-children");
    assert_eq!(state(&e, &mid, "1"), "waiting-children");
    assert_eq!(counts(&e, &leaf), "waiting=1 prioritized=1");
    assert_eq!(counts(&e, &top), "waiting-children=1");
    // Nothing of the parents runs before their children.
    assert!(run_all(&e, &top, |_| ok("0")).is_empty());
    assert_eq!(
        run_all(&e, &leaf, |id| ok(&format!("\"leaf{id}\""))),
        ["1", "2"]
    );
    assert_eq!(state(&e, &mid, "1"), "waiting");
    let deps = e.dependencies(&mid, "1").unwrap();
    let values: Vec<(String, String)> = deps
        .processed
        .iter()
        .map(|(c, v)| (c.key(), v.to_string()))
        .collect();
    assert_eq!(
        values,
        [
            ("bull:leaf:1".to_string(), "\"leaf1\"".to_string()),
            ("bull:leaf:2".to_string(), "\"leaf2\"".to_string())
        ]
    );
    assert!(deps.pending.is_empty());
    assert_eq!(run_all(&e, &mid, |_| ok("42")), ["1"]);
    assert_eq!(state(&e, &top, "1"), "waiting");
    let top_deps = e.dependencies(&top, "1").unwrap();
    assert_eq!(&*top_deps.processed[0].1, "42");
    // The children's options name their parents, as BullMQ's do.
    let rec: Value = serde_json::from_str(&e.job_json(&leaf, "1").unwrap()).unwrap();
    assert_eq!(
        rec["opts"]["parent"],
        json!({ "id": "1", "queue": "bull:mid" })
    );
}

fn failing_child(rule: &str) -> (Engine, QueueRef, QueueRef) {
    let (e, _) = engine();
    let (p, c) = (qref(&e, "parents"), qref(&e, "children"));
    let failing = format!(r#"{{"{rule}":true}}"#);
    e.add_flow(vec![
        node(&e, &p, "{}", None, 2),
        node(&e, &c, &failing, Some(0), 0),
        node(&e, &c, r#"{"delay":1000}"#, Some(0), 0),
    ])
    .unwrap();
    run_all(&e, &c, |_| fail());
    (e, p, c)
}

#[test]
fn each_child_failure_rule_does_what_bullmq_does() {
    // No rule: the parent keeps waiting.
    let (e, p, _) = failing_child("lifo");
    assert_eq!(state(&e, &p, "1"), "waiting-children");
    assert_eq!(e.dependencies(&p, "1").unwrap().pending.len(), 2);

    let (e, p, _) = failing_child("failParentOnFailure");
    assert_eq!(state(&e, &p, "1"), "failed");
    let rec: Value = serde_json::from_str(&e.job_json(&p, "1").unwrap()).unwrap();
    assert_eq!(rec["failedReason"], "child bull:children:1 failed");

    let (e, p, c) = failing_child("ignoreDependencyOnFailure");
    let d = e.dependencies(&p, "1").unwrap();
    assert_eq!((d.pending.len(), d.ignored.len()), (1, 1));
    assert_eq!(
        state(&e, &p, "1"),
        "waiting-children",
        "one child still pending"
    );
    e.remove(&c, "2").unwrap();
    assert_eq!(
        state(&e, &p, "1"),
        "waiting",
        "a removed child no longer holds it"
    );

    let (e, p, _) = failing_child("removeDependencyOnFailure");
    let d = e.dependencies(&p, "1").unwrap();
    assert_eq!(
        (d.pending.len(), d.ignored.len(), d.failed.len()),
        (1, 0, 0)
    );

    let (e, p, _) = failing_child("continueParentOnFailure");
    assert_eq!(state(&e, &p, "1"), "waiting", "runs at once");
    let d = e.dependencies(&p, "1").unwrap();
    assert_eq!((d.pending.len(), d.failed.len()), (1, 1));
}

#[test]
fn a_failed_parent_fails_its_own_parent_by_its_rule() {
    let (e, _) = engine();
    let q = qref(&e, "q");
    e.add_flow(vec![
        node(&e, &q, "{}", None, 1),
        node(&e, &q, r#"{"failParentOnFailure":true}"#, Some(0), 1),
        node(&e, &q, r#"{"failParentOnFailure":true}"#, Some(1), 0),
    ])
    .unwrap();
    assert_eq!(run_all(&e, &q, |_| fail()), ["3"]);
    assert_eq!(state(&e, &q, "2"), "failed");
    assert_eq!(state(&e, &q, "1"), "failed");
}

#[test]
fn children_added_with_parent_are_checked_and_counted() {
    let (e, _) = engine();
    let (p, c) = (qref(&e, "p"), qref(&e, "c"));
    let parent = add(&e, &p, "{}");
    let with_parent = |id: &str| {
        let o = format!(r#"{{"parent":{{"id":"{id}","queue":"bull:p"}}}}"#);
        NewJob {
            opts_json: Some(o.clone().into()),
            ..job(&e, &o)
        }
    };
    let err = e
        .add_linked(&c, vec![with_parent(&parent), with_parent("404")])
        .unwrap_err();
    assert_eq!(err.code(), "ERR_PARENT_NOT_FOUND");
    assert_eq!(counts(&e, &c), "", "all or nothing");
    let added = e.add_linked(&c, vec![with_parent(&parent)]).unwrap();
    assert_eq!(added, [Added::New(1)]);
    let child = ChildRef {
        queue: c.name_arc().clone(),
        id: "1".into(),
    };
    assert_eq!(e.dependencies(&p, &parent).unwrap().pending, [child]);
    let rule = job(&e, r#"{"failParentOnFailure":true}"#);
    assert_eq!(
        e.add_linked(&c, vec![rule]).unwrap_err().code(),
        "ERR_INVALID_OPTION"
    );
    // A finished parent takes no more children.
    run_all(&e, &p, |_| ok("1"));
    let err = e.add_linked(&c, vec![with_parent(&parent)]).unwrap_err();
    assert_eq!(err.code(), "ERR_PARENT_FINISHED");
}

#[test]
fn a_taken_job_id_refuses_the_whole_flow() {
    let (e, _) = engine();
    let q = qref(&e, "q");
    add(&e, &q, r#"{"jobId":"x"}"#);
    let err = e
        .add_flow(vec![
            node(&e, &q, "{}", None, 1),
            node(&e, &q, r#"{"jobId":"x"}"#, Some(0), 0),
        ])
        .unwrap_err();
    assert_eq!(err.code(), "ERR_FLOW_JOB_EXISTS");
    assert_eq!(counts(&e, &q), "waiting=1");
}
