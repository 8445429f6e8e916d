//! Flows through the backend (`crate::flows`): adding a flow, or jobs with a `parent`, and acks
//! of flow children, each in one transaction on the backend's own connection, so that a child's
//! change and its parent's commit together.

use std::collections::HashMap;
use std::sync::Arc;

use ferroqueue_engine::domain::flow::{
    with_parent_json, ChildEnd, ChildRef, Notice, OnChildFailure, ParentLink,
};
use ferroqueue_engine::{AckResult, Added, EngineError, FlowNode, NewJob, QueueRef, Result};

use super::Shared;
use crate::acks::{Completion, Failed, Failure};
use crate::connect::{Target, RETRIES};
use crate::flows;
use crate::jobs::AddedRow;
use crate::pool::Conn;

/// Begins a transaction on the backend's own connection (ending first one a dropped future
/// left open).
async fn begin(c: &Conn, t: &Target) -> Result<()> {
    c.client
        .batch_execute("ROLLBACK; BEGIN")
        .await
        .map_err(|e| t.error("cannot begin a flow's transaction", e))
}

/// Ends a transaction by its outcome `r`: commits it, or rolls it back. A transaction that hit
/// a deadlock (a lease renewal or a claim locking the same rows in another order) or a
/// serialization failure answers `None` while tries are left: the caller runs it again.
async fn end<T>(c: &Conn, t: &Target, r: Result<T>, tries: &mut u32) -> Option<Result<T>> {
    match r {
        Ok(v) => Some(
            c.client
                .batch_execute("COMMIT")
                .await
                .map(|()| v)
                .map_err(|e| t.error("cannot commit a flow's transaction", e)),
        ),
        Err(e) => {
            let _ = c.client.batch_execute("ROLLBACK").await;
            if *tries < RETRIES && retryable(&e) {
                *tries += 1;
                tokio::time::sleep(std::time::Duration::from_millis(5 << *tries)).await;
                return None;
            }
            Some(Err(e))
        }
    }
}

/// Runs `$body` (an expression over `$c` and `$t`) in a transaction on the backend's own
/// connection, again after a retryable failure (see [`end`]).
macro_rules! transaction {
    ($s:expr, |$c:ident, $t:ident| $body:expr) => {{
        let conn = $s.pool.exclusive().await?;
        let $c: &Conn = &conn;
        let $t: &Target = $s.target();
        let mut tries = 0;
        loop {
            begin($c, $t).await?;
            let r = $body.await;
            if let Some(done) = end($c, $t, r, &mut tries).await {
                break done;
            }
        }
    }};
}

/// A deadlock or serialization failure inside a transaction (the statement retried by
/// `query_retrying` then finds the transaction aborted: 25P02).
fn retryable(e: &EngineError) -> bool {
    let text = e.to_string();
    ["(40P01)", "(40001)", "(25P02)"]
        .iter()
        .any(|code| text.contains(code))
}

/// A parent: its queue and id.
type ParentKey = (Arc<str>, Box<str>);

/// Adds a flow, all or none; answers the ids in node order.
pub(super) async fn add_flow(s: &Shared, nodes: Vec<FlowNode>) -> Result<Vec<String>> {
    let now = super::upkeep::now_ms();
    let queues: Vec<Arc<str>> = nodes.iter().map(|n| n.queue.name_arc().clone()).collect();
    let added = transaction!(s, |c, t| add_nodes(c, t, nodes.clone(), now))?;
    for q in &queues {
        s.wake(q);
    }
    s.upkeep.notify_one();
    Ok(added.into_iter().map(|(_, id)| id).collect())
}

/// Adds jobs of `queue` of which some have a `parent`, all or none.
pub(super) async fn add_linked(
    s: &Shared,
    queue: &Arc<str>,
    jobs: Vec<NewJob>,
) -> Result<Vec<Added>> {
    let nodes: Vec<FlowNode> = jobs
        .into_iter()
        .map(|job| FlowNode {
            queue: QueueRef::new(queue.clone(), 0),
            job,
            parent: None,
            children: 0,
        })
        .collect();
    let now = super::upkeep::now_ms();
    let added = transaction!(s, |c, t| add_nodes(c, t, nodes.clone(), now))?;
    s.wake(queue);
    s.upkeep.notify_one();
    Ok(added
        .into_iter()
        .map(|(key, _)| Added::New(key as u64))
        .collect())
}

/// The statements of adding flow nodes: level by level, each level's jobs of one queue in one
/// insert; parents then wait for their children; the dependencies are recorded last.
async fn add_nodes(
    c: &Conn,
    t: &Target,
    nodes: Vec<FlowNode>,
    now: i64,
) -> Result<Vec<(i64, String)>> {
    let mut depth = vec![0usize; nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        if n.job.opts.deduplication().is_some() {
            return Err(EngineError::Unsupported {
                option: "deduplication".into(),
                reason: "is not taken in a flow's jobs (add them with Queue.add)".into(),
            });
        }
        if let Some(p) = n.parent {
            depth[i] = depth[p] + 1;
        } else {
            n.job.opts.check_rule_has_parent()?;
            if let Some((q, id)) = n.job.opts.parent() {
                flows::lock_parent(c, t, q, id).await?;
                flows::check_parent(c, t, q, id).await?;
            }
        }
    }
    let queue_of: Vec<Arc<str>> = nodes.iter().map(|n| n.queue.name_arc().clone()).collect();
    let mut out: Vec<Option<(i64, String)>> = vec![None; nodes.len()];
    let mut slots: Vec<Option<FlowNode>> = nodes.into_iter().map(Some).collect();
    let deepest = depth.iter().copied().max().unwrap_or(0);
    let mut edges: Vec<(ParentKey, Vec<ChildRef>)> = Vec::new();
    for d in 0..=deepest {
        // This level's nodes, by queue, in node order.
        let mut by_queue: Vec<(Arc<str>, Vec<usize>)> = Vec::new();
        for i in (0..slots.len()).filter(|i| depth[*i] == d) {
            match by_queue.iter_mut().find(|(name, _)| *name == queue_of[i]) {
                Some((_, v)) => v.push(i),
                None => by_queue.push((queue_of[i].clone(), vec![i])),
            }
        }
        for (queue, idx) in by_queue {
            let mut rows = Vec::with_capacity(idx.len());
            let mut who = Vec::with_capacity(idx.len());
            for &i in &idx {
                let Some(node) = slots[i].take() else {
                    continue;
                };
                let mut job = node.job;
                if let Some(p) = node.parent {
                    let Some((_, pid)) = out[p].clone() else {
                        return Err(EngineError::Internal(
                            "a flow node before its parent".into(),
                        ));
                    };
                    let pq = &queue_of[p];
                    job.opts_json =
                        Some(with_parent_json(job.opts_json.as_deref(), pq, &pid).into());
                    job.opts.controls_mut().parent = Some((pq.clone(), pid.into()));
                }
                who.push((i, job.opts.parent().cloned(), node.children));
                rows.push(super::work::row_of(job, now));
            }
            let added = c.jobs.add_bulk(&c.client, t, &queue, &rows).await?;
            let mut waits = Vec::new();
            for (((i, parent, children), row), a) in who.into_iter().zip(&rows).zip(added) {
                let AddedRow::New(key) = a else {
                    return Err(EngineError::FlowJobExists {
                        queue: queue.to_string(),
                        id: row.custom_id.clone().unwrap_or_default(),
                    });
                };
                let id = row.custom_id.clone().unwrap_or_else(|| key.to_string());
                out[i] = Some((key, id.clone()));
                if children > 0 {
                    waits.push(key);
                }
                if let Some(link) = parent {
                    let child = ChildRef {
                        queue: queue.clone(),
                        id: id.into(),
                    };
                    match edges.iter_mut().find(|(p, _)| *p == link) {
                        Some((_, v)) => v.push(child),
                        None => edges.push((link, vec![child])),
                    }
                }
            }
            if !waits.is_empty() {
                flows::wait_for_children(c, t, &queue, &waits).await?;
            }
        }
    }
    for ((pq, pid), children) in edges {
        flows::add_edges(c, t, &pq, &pid, &children).await?;
    }
    Ok(out.into_iter().flatten().collect())
}

/// A flow child's link, as its ack needs it: its parent and its own id.
pub(super) type Link = (ParentLink, Box<str>);

/// Finishes activations of which some are flow children, in one transaction with what their
/// parents hear (see `work::ack`). Answers what the three statements answered.
pub(super) async fn ack_children(
    s: &Shared,
    queue: &Arc<str>,
    completions: &[Completion],
    failures: &[Failure],
    releases: &[(i64, i64, bool)],
    links: &HashMap<i64, Link>,
) -> Result<(Vec<i64>, Vec<Failed>, Vec<i64>)> {
    transaction!(s, |c, t| finish_children(
        c,
        t,
        queue,
        completions,
        failures,
        releases,
        links
    ))
}

async fn finish_children(
    c: &Conn,
    t: &Target,
    queue: &Arc<str>,
    completions: &[Completion],
    failures: &[Failure],
    releases: &[(i64, i64, bool)],
    links: &HashMap<i64, Link>,
) -> Result<(Vec<i64>, Vec<Failed>, Vec<i64>)> {
    {
        let completed = c
            .jobs
            .acks
            .complete(&c.client, t, queue, completions)
            .await?;
        let fails = c.jobs.acks.fail(&c.client, t, queue, failures).await?;
        let released = c.jobs.acks.release(&c.client, t, queue, releases).await?;
        let mut notices = Vec::new();
        let notice = |key: i64, end: ChildEnd| {
            links.get(&key).map(|(link, id)| Notice {
                queue: link.queue.clone(),
                id: link.id.clone(),
                child: ChildRef {
                    queue: queue.clone(),
                    id: id.clone(),
                },
                end: match end {
                    ChildEnd::Failed(r, _) => ChildEnd::Failed(r, link.on_failure),
                    other => other,
                },
            })
        };
        for d in completions.iter().filter(|d| completed.contains(&d.key)) {
            notices.extend(notice(
                d.key,
                ChildEnd::Completed(d.returnvalue.as_str().into()),
            ));
        }
        for f in failures
            .iter()
            .filter(|f| fails.contains(&Failed::Final(f.key)))
        {
            let end = ChildEnd::Failed(f.reason.as_str().into(), OnChildFailure::Wait);
            notices.extend(notice(f.key, end));
        }
        flows::resolve(c, t, notices).await?;
        Ok((completed, fails, released))
    }
}

/// Jobs of `queue` that ended outside an ack (removed, drained, cleaned, obliterated before they
/// finished, or failed by the stall sweep): their parents hear, in a transaction of its own.
/// `jobs`: each one's id and options text; those without a parent are skipped.
pub(super) async fn ended(
    s: &Shared,
    queue: &str,
    jobs: &[(String, Option<String>)],
    end: ChildEnd,
) -> Result<()> {
    let notices: Vec<Notice> = jobs
        .iter()
        .filter_map(|(id, opts)| flows::notice_of(queue, id, opts.as_deref(), end.clone()))
        .collect();
    if notices.is_empty() {
        return Ok(());
    }
    transaction!(s, |c, t| flows::resolve(c, t, notices.clone()))
}

/// Whether a job's options text may name a parent (a cheap filter before parsing).
pub(super) fn may_have_parent(opts: Option<&str>) -> bool {
    opts.is_some_and(|o| o.contains("\"parent\""))
}

/// A step of a step job: job `key`, active under `token`, waits for its pending children
/// (`flows::step_to_children`), in a transaction of its own.
pub(super) async fn wait_for_children_step(
    s: &Shared,
    queue: &str,
    key: i64,
    token: i64,
) -> Result<AckResult> {
    let moved = transaction!(s, |c, t| flows::step_to_children(c, t, queue, key, token))?;
    Ok(match moved {
        None => AckResult::Stale,
        Some(true) => AckResult::WaitingChildren,
        Some(false) => AckResult::StillActive,
    })
}
