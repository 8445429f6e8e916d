//! Flows across the queues of one engine (`domain/flow.rs`): adding a tree of jobs all or
//! nothing, adding children to a parent, and delivering the notices children raise for their
//! parents. A child and its parent may live in different shards, so these hold several shard
//! locks at once. They take the engine's flow lock first: only its holder ever holds more than
//! one shard lock, so there is no lock-order cycle. Once an engine has a flow job, every
//! changing call takes that lock (`Engine::with_seq`), so that a child's change and its
//! parent's are made under one hold and stored in one submission (one transaction): no crash
//! leaves a completed child whose parent never heard.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use parking_lot::MutexGuard;

use super::engine::{Engine, Inner};
use crate::backend::QueueRef;
use crate::domain::flow::{with_parent_json, ChildRef, Deps, Notice};
use crate::domain::queue::{Added, Effects, NewJob, QueueState};
use crate::domain::shard::Shard;
use crate::error::{EngineError, Result};
use crate::storage::StorageOp;
use crate::structures::fnv1a;

/// One job of a flow. Nodes come parent first: a node's `parent` is the index of an earlier
/// node; a node with `children > 0` waits for them (`waiting-children`).
#[derive(Clone)]
pub struct FlowNode {
    pub queue: QueueRef,
    pub job: NewJob,
    pub parent: Option<usize>,
    pub children: usize,
}

/// The shard locks a flow operation holds, taken as queues are reached.
struct Held<'a> {
    inner: &'a Inner,
    guards: Vec<(usize, MutexGuard<'a, Shard>)>,
}

impl<'a> Held<'a> {
    fn new(inner: &'a Inner) -> Held<'a> {
        Held {
            inner,
            guards: Vec::new(),
        }
    }

    /// The queue `name`, locking its shard if this hold does not have it yet.
    fn queue(&mut self, name: &Arc<str>) -> &mut QueueState {
        let slot = fnv1a(name.as_bytes()) as usize & (self.inner.shards.len() - 1);
        let i = match self.guards.iter().position(|(s, _)| *s == slot) {
            Some(i) => i,
            None => {
                self.guards.push((slot, self.inner.shards[slot].lock()));
                self.guards.len() - 1
            }
        };
        self.guards[i].1.queue_mut(name)
    }
}

impl Engine {
    /// Flow mode from now on (before the first flow job exists).
    fn use_flows(&self) {
        self.inner.flows.store(true, Ordering::Release);
    }

    /// Whether changing calls go through the flow lock.
    pub(super) fn flows_used(&self) -> bool {
        self.inner.flows.load(Ordering::Acquire)
    }

    /// [`Engine::with_seq`] in flow mode: under the flow lock, the notices `f` raised are
    /// delivered to the parents, in the same submission.
    pub(super) fn with_flows<R>(
        &self,
        q: &QueueRef,
        f: impl FnOnce(&mut QueueState, u64, &mut Effects) -> R,
    ) -> (R, u64) {
        let _flows = self.inner.flow_lock.lock();
        let now = self.now();
        let mut fx = Effects::default();
        let mut ops = Vec::new();
        let mut held = Held::new(&self.inner);
        let qs = held.queue(q.name_arc());
        let r = f(qs, now, &mut fx);
        let notices = qs.take_notices();
        self.inner.record(qs, &mut ops);
        self.deliver(&mut held, notices, now, &mut fx, &mut ops);
        (r, self.finish(held, ops, fx))
    }

    /// Delivers notices raised outside flow mode (a child changed by a call that began before
    /// the engine had flows): under the flow lock, in a submission of their own.
    pub(super) fn deliver_late(&self, notices: Vec<Notice>) {
        let _flows = self.inner.flow_lock.lock();
        let now = self.now();
        let mut fx = Effects::default();
        let mut ops = Vec::new();
        let mut held = Held::new(&self.inner);
        self.deliver(&mut held, notices, now, &mut fx, &mut ops);
        self.finish(held, ops, fx);
    }

    /// Delivers notices to their parents, and the notices those raise in turn.
    fn deliver(
        &self,
        held: &mut Held,
        notices: Vec<Notice>,
        now: u64,
        fx: &mut Effects,
        ops: &mut Vec<StorageOp>,
    ) {
        let mut pending: VecDeque<Notice> = notices.into();
        while let Some(n) = pending.pop_front() {
            let qs = held.queue(&n.queue);
            qs.child_ended(&n.id, n.child, n.end, now, fx);
            pending.extend(qs.take_notices());
            self.inner.record(qs, ops);
        }
    }

    /// Submits the operation's writes, hands its effects out and lets the shards go; answers
    /// the submission's sequence number.
    fn finish(&self, held: Held, mut ops: Vec<StorageOp>, fx: Effects) -> u64 {
        let changed = !ops.is_empty();
        let seq = self.inner.submit(&mut ops);
        self.inner.after(fx, seq);
        drop(held);
        if changed {
            super::tickets::note(self.inner.serial, seq);
        }
        seq
    }

    /// Adds jobs of which some have a `parent` (or a child failure rule, which needs one), all
    /// or none: every parent must exist in this engine and not be finished.
    pub fn add_linked(&self, q: &QueueRef, jobs: Vec<NewJob>) -> Result<Vec<Added>> {
        self.use_flows();
        let _flows = self.inner.flow_lock.lock();
        let now = self.now();
        let mut fx = Effects::default();
        let mut ops = Vec::new();
        let mut held = Held::new(&self.inner);
        for job in &jobs {
            job.opts.check_rule_has_parent()?;
            if let Some((queue, id)) = job.opts.parent() {
                held.queue(queue).check_parent(id)?;
            }
        }
        let mut out = Vec::with_capacity(jobs.len());
        for job in jobs {
            let parent = job.opts.parent().cloned();
            let qs = held.queue(q.name_arc());
            let added = qs.add(job, now, &mut fx);
            let child = match added {
                Added::New(key) => qs.job(key).map(|j| ChildRef {
                    queue: q.name_arc().clone(),
                    id: j.id_string().into(),
                }),
                _ => None,
            };
            let notices = qs.take_notices();
            self.inner.record(qs, &mut ops);
            if let (Some((queue, id)), Some(child)) = (parent, child) {
                let pq = held.queue(&queue);
                pq.add_dependency(&id, child)?;
                self.inner.record(pq, &mut ops);
            }
            self.deliver(&mut held, notices, now, &mut fx, &mut ops);
            out.push(added);
        }
        self.finish(held, ops, fx);
        Ok(out)
    }

    /// Adds a flow, all or none (see [`FlowNode`]); answers the jobs' ids in node order.
    ///
    /// Errors: `ERR_FLOW_JOB_EXISTS` for a `jobId` taken (or given twice in the flow), the
    /// errors of a root's `parent` ([`QueueState::check_parent`]), a child failure rule on a
    /// root without `parent`, and `deduplication` (not taken in flows).
    pub fn add_flow(&self, nodes: Vec<FlowNode>) -> Result<Vec<String>> {
        self.use_flows();
        let _flows = self.inner.flow_lock.lock();
        let now = self.now();
        let mut fx = Effects::default();
        let mut ops = Vec::new();
        let mut held = Held::new(&self.inner);
        let mut seen = std::collections::HashSet::new();
        for n in &nodes {
            if n.job.opts.deduplication().is_some() {
                return Err(EngineError::Unsupported {
                    option: "deduplication".into(),
                    reason: "is not taken in a flow's jobs (add them with Queue.add)".into(),
                });
            }
            if let Some(id) = &n.job.opts.job_id {
                let taken = held.queue(n.queue.name_arc()).key_of(id).is_some();
                if taken || !seen.insert((n.queue.name_arc().clone(), id.clone())) {
                    return Err(EngineError::FlowJobExists {
                        queue: n.queue.name().to_string(),
                        id: id.to_string(),
                    });
                }
            }
            if n.parent.is_none() {
                n.job.opts.check_rule_has_parent()?;
                if let Some((queue, id)) = n.job.opts.parent() {
                    held.queue(queue).check_parent(id)?;
                }
            }
        }
        let mut ids: Vec<(Arc<str>, String)> = Vec::with_capacity(nodes.len());
        for n in nodes {
            let mut job = n.job;
            if let Some(p) = n.parent {
                let (pq, pid) = ids[p].clone();
                job.opts_json = Some(with_parent_json(job.opts_json.as_deref(), &pq, &pid).into());
                job.opts.controls_mut().parent = Some((pq, pid.into()));
            }
            let parent = job.opts.parent().cloned();
            let qs = held.queue(n.queue.name_arc());
            let key = if n.children > 0 {
                qs.add_parent(job, &mut fx)?
            } else {
                match qs.add(job, now, &mut fx) {
                    Added::New(key) => key,
                    _ => return Err(EngineError::Internal("a flow job was not added".into())),
                }
            };
            let id = qs.job(key).map(|j| j.id_string()).unwrap_or_default();
            self.inner.record(qs, &mut ops);
            if let Some((queue, pid)) = parent {
                let child = ChildRef {
                    queue: n.queue.name_arc().clone(),
                    id: id.clone().into(),
                };
                let pq = held.queue(&queue);
                pq.add_dependency(&pid, child)?;
                self.inner.record(pq, &mut ops);
            }
            ids.push((n.queue.name_arc().clone(), id));
        }
        self.finish(held, ops, fx);
        Ok(ids.into_iter().map(|(_, id)| id).collect())
    }

    /// A parent's dependencies (`None`: no such job, or one without children).
    pub fn dependencies(&self, q: &QueueRef, id: &str) -> Option<Deps> {
        self.read(q, |qs| qs.dependencies(id)).flatten()
    }
}
