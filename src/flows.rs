//! Flows: adding a tree of jobs all or nothing (FlowProducer), and a parent's dependencies.

use ferroqueue_engine::domain::flow::{queue_key, Deps};
use ferroqueue_engine::{EngineError, FlowNode, JobOptions, NewJob, Result};
use napi::Env;
use napi_derive::napi;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::errors::{ms, run};
use crate::registry::{queue_of, with_queue, Shared};
use crate::reply::{answer, Answer};
use crate::wire::push_json_str;

#[derive(Deserialize)]
struct Node<'a> {
    /// The queue handle.
    h: u32,
    name: String,
    #[serde(borrow)]
    data: Option<&'a RawValue>,
    #[serde(borrow)]
    opts: Option<&'a RawValue>,
    parent: Option<usize>,
    children: usize,
}

/// Parses the nodes (parents first) and checks that every queue is on engine `engine`.
fn parse_nodes(engine: u32, nodes: &str, now: u64) -> Result<(Shared, Vec<FlowNode>)> {
    let items: Vec<Node> = serde_json::from_str(nodes)
        .map_err(|e| EngineError::type_error("flow", format!("is not a valid flow: {e}")))?;
    let mut backend = None;
    let mut out = Vec::with_capacity(items.len());
    for (i, n) in items.into_iter().enumerate() {
        let (id, b, queue) = queue_of(n.h)?;
        if id != engine {
            return Err(EngineError::FlowCrossEngine {
                queue: queue.name().to_string(),
                reason: "its queuesOptions name another dataPath or connection".into(),
            });
        }
        if n.parent.is_some_and(|p| p >= i) {
            return Err(EngineError::Internal(
                "a flow node before its parent".into(),
            ));
        }
        let opts_text = n.opts.map(RawValue::get).filter(|t| *t != "null");
        let opts = match opts_text {
            Some(t) => JobOptions::from_json(t)?,
            None => JobOptions::defaults(),
        };
        out.push(FlowNode {
            queue,
            job: NewJob {
                name: n.name,
                data: n.data.map_or("{}", RawValue::get).into(),
                opts,
                opts_json: opts_text.map(Into::into),
                timestamp: now,
            },
            parent: n.parent,
            children: n.children,
        });
        backend.get_or_insert(b);
    }
    let backend = backend.ok_or_else(|| EngineError::type_error("flow", "has no job"))?;
    Ok((backend, out))
}

/// Adds a flow on engine `engine`, all or nothing: `nodes` is a JSON array of `{h, name, data,
/// opts, parent, children}`, parents first (`parent`: the index of an earlier node). Answers a
/// JSON array of the jobs' ids, in node order.
#[napi(catch_unwind, ts_return_type = "string | Promise<string>")]
pub fn add_flow(
    env: &Env,
    engine: u32,
    nodes: String,
    timestamp: f64,
) -> napi::Result<Answer<'_, String>> {
    let reply = run(env, || {
        let (backend, nodes) = parse_nodes(engine, &nodes, ms("timestamp", timestamp)?)?;
        Ok(backend.add_flow(nodes))
    })?;
    answer(env, reply, |ids| {
        serde_json::to_string(&ids).unwrap_or_else(|_| "[]".into())
    })
}

/// A parent's dependencies as JSON: `{"processed":{key:value},"unprocessed":[key],
/// "failed":{key:reason},"ignored":{key:reason},"children":[[queueKey,id]]}` (children: every
/// child it has or had), or `null` for a job without children.
#[napi(
    catch_unwind,
    ts_return_type = "string | null | Promise<string | null>"
)]
pub fn get_dependencies(env: &Env, h: u32, id: String) -> napi::Result<Answer<'_, Option<String>>> {
    let reply = run(env, || with_queue(h, |b, q| b.dependencies(q, &id)))?;
    answer(env, reply, |d| d.map(|d| deps_json(&d)))
}

fn deps_json(d: &Deps) -> String {
    let mut out = String::from("{\"processed\":{");
    for (i, (c, v)) in d.processed.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_json_str(&mut out, &c.key());
        out.push(':');
        out.push_str(v);
    }
    out.push_str("},\"unprocessed\":[");
    for (i, c) in d.pending.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_json_str(&mut out, &c.key());
    }
    out.push(']');
    for (field, list) in [("failed", &d.failed), ("ignored", &d.ignored)] {
        out.push_str(&format!(",\"{field}\":{{"));
        for (i, (c, reason)) in list.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            push_json_str(&mut out, &c.key());
            out.push(':');
            push_json_str(&mut out, reason);
        }
        out.push('}');
    }
    out.push_str(",\"children\":[");
    for (i, c) in d.children().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push('[');
        push_json_str(&mut out, &queue_key(&c.queue));
        out.push(',');
        push_json_str(&mut out, &c.id);
        out.push(']');
    }
    out.push_str("]}");
    out
}
