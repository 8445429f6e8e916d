//! Parent/child flows (BullMQ's FlowProducer and the `parent` option): a child names its parent
//! ([`ParentLink`]: the parent's queue and id, and what its failure does to the parent); a parent
//! keeps its dependencies ([`Deps`]): the children still pending, the values of those that
//! completed, and those that failed or were ignored. When a child finishes or goes, a [`Notice`]
//! carries the news to the parent's queue (`domain/queue/flow.rs`); the engine delivers notices
//! under the parent's shard lock in the same storage submission as the child's change.
//!
//! Keys are BullMQ's: a queue's key is `prefix:name` (`bull:name` for plain names), a job's key
//! `queueKey:id`.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::queue_name::{qualified_name, DEFAULT_PREFIX};
use crate::error::{EngineError, Result};

/// What a child's failure (for good) does to its parent: BullMQ's four child options, or none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum OnChildFailure {
    /// The parent keeps waiting for the child (BullMQ's default).
    #[default]
    Wait,
    /// `failParentOnFailure`: the parent fails.
    FailParent,
    /// `ignoreDependencyOnFailure`: the dependency counts as resolved; the failure is kept.
    Ignore,
    /// `removeDependencyOnFailure`: the dependency is dropped.
    Remove,
    /// `continueParentOnFailure`: the parent runs now; the failure is kept.
    Continue,
}

/// A child's link to its parent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParentLink {
    /// The parent's queue as the engine names it (`queue_name::qualified_name`).
    pub queue: Arc<str>,
    /// The parent's id.
    pub id: Box<str>,
    pub on_failure: OnChildFailure,
}

/// A job of some queue of the engine, as a dependency.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ChildRef {
    /// The child's queue as the engine names it.
    pub queue: Arc<str>,
    pub id: Box<str>,
}

impl ChildRef {
    /// BullMQ's key of the job: `prefix:queue:id`.
    pub fn key(&self) -> String {
        format!("{}:{}", queue_key(&self.queue), self.id)
    }
}

/// BullMQ's key of a queue (`prefix:name`) from the engine's name of it.
pub fn queue_key(queue: &str) -> String {
    if queue.contains(':') {
        queue.to_string()
    } else {
        format!("{DEFAULT_PREFIX}:{queue}")
    }
}

/// The engine's name of a queue from BullMQ's key of it (`prefix:name`; a plain name is taken
/// as is). Errors name `option`.
pub fn queue_of_key(option: &str, key: &str) -> Result<Arc<str>> {
    let name = match key.rsplit_once(':') {
        Some((prefix, name)) => qualified_name(Some(prefix), name),
        None => qualified_name(None, key),
    };
    name.map(Arc::from).map_err(|e| {
        EngineError::range(
            option,
            format!("must be a queue key 'prefix:name', got {key:?} ({e})"),
        )
    })
}

/// A parent's dependencies.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Deps {
    /// Children not finished yet.
    pub pending: Vec<ChildRef>,
    /// Children that completed, with their return values (JSON text), in completion order.
    pub processed: Vec<(ChildRef, Box<str>)>,
    /// Children that failed for good under `failParentOnFailure` or `continueParentOnFailure`,
    /// with their failure reasons.
    pub failed: Vec<(ChildRef, Box<str>)>,
    /// Children that failed for good under `ignoreDependencyOnFailure`, with their reasons.
    pub ignored: Vec<(ChildRef, Box<str>)>,
}

impl Deps {
    /// Takes `child` out of the pending ones; answers whether it was pending.
    pub fn resolve(&mut self, child: &ChildRef) -> bool {
        match self.pending.iter().position(|c| c == child) {
            Some(i) => {
                self.pending.remove(i);
                true
            }
            None => false,
        }
    }

    /// Every child the parent has or had, in the order: pending, processed, failed, ignored.
    pub fn children(&self) -> impl Iterator<Item = &ChildRef> {
        self.pending
            .iter()
            .chain(self.processed.iter().map(|(c, _)| c))
            .chain(self.failed.iter().map(|(c, _)| c))
            .chain(self.ignored.iter().map(|(c, _)| c))
    }

    /// The JSON text stored for them.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{}".into())
    }

    /// Reads stored JSON text (`None` when unreadable).
    pub fn from_json(text: &str) -> Option<Deps> {
        serde_json::from_str(text).ok()
    }
}

/// How a child ended, for its parent.
#[derive(Debug, Clone, PartialEq)]
pub enum ChildEnd {
    /// Completed with this return value (JSON text).
    Completed(Box<str>),
    /// Failed for good with this reason; the child's rule for its parent.
    Failed(Box<str>, OnChildFailure),
    /// Removed before it finished.
    Removed,
}

/// News for a parent, delivered under its queue's lock.
#[derive(Debug, Clone, PartialEq)]
pub struct Notice {
    /// The parent's queue (engine name) and id.
    pub queue: Arc<str>,
    pub id: Box<str>,
    pub child: ChildRef,
    pub end: ChildEnd,
}

/// The job options of flows as JSON gives them: `parent` and the child failure flags.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawParent {
    id: Option<serde_json::Value>,
    queue: Option<serde_json::Value>,
}

/// The `parent` option, validated: the parent's queue (engine name) and id.
pub fn parse_parent(raw: RawParent) -> Result<(Arc<str>, Box<str>)> {
    let id = match raw.id {
        Some(serde_json::Value::String(s)) if !s.is_empty() && s.len() <= 1024 => s,
        Some(serde_json::Value::Number(n)) if n.is_u64() => n.to_string(),
        Some(other) => {
            return Err(EngineError::type_error(
                "parent.id",
                format!("must be a job id (a non-empty string), got {other}"),
            ))
        }
        None => return Err(EngineError::type_error("parent.id", "is required")),
    };
    let queue = match raw.queue {
        Some(serde_json::Value::String(s)) => queue_of_key("parent.queue", &s)?,
        Some(other) => {
            return Err(EngineError::type_error(
                "parent.queue",
                format!("must be a queue key 'prefix:name', got {other}"),
            ))
        }
        None => return Err(EngineError::type_error("parent.queue", "is required")),
    };
    Ok((queue, id.into()))
}

/// The child failure rule from the four flags; more than one set is refused.
pub fn on_failure(fail: bool, ignore: bool, remove: bool, cont: bool) -> Result<OnChildFailure> {
    let set: Vec<(&str, OnChildFailure)> = [
        ("failParentOnFailure", fail, OnChildFailure::FailParent),
        ("ignoreDependencyOnFailure", ignore, OnChildFailure::Ignore),
        ("removeDependencyOnFailure", remove, OnChildFailure::Remove),
        ("continueParentOnFailure", cont, OnChildFailure::Continue),
    ]
    .into_iter()
    .filter(|(_, on, _)| *on)
    .map(|(name, _, rule)| (name, rule))
    .collect();
    match set.as_slice() {
        [] => Ok(OnChildFailure::Wait),
        [(_, rule)] => Ok(*rule),
        [(a, _), (b, _), ..] => Err(EngineError::type_error(
            *b,
            format!("cannot be combined with {a}: a child's failure does one thing to its parent"),
        )),
    }
}

/// Adds `"parent":{"id":…,"queue":…}` to an options object's JSON text (`None`: no options).
pub fn with_parent_json(opts: Option<&str>, queue: &str, id: &str) -> String {
    let parent = serde_json::json!({ "id": id, "queue": queue_key(queue) }).to_string();
    let body = opts.map(str::trim).unwrap_or("{}");
    match body.strip_suffix('}') {
        Some(head) if head.trim_end().ends_with('{') => format!("{head}\"parent\":{parent}}}"),
        Some(head) => format!("{head},\"parent\":{parent}}}"),
        None => format!("{{\"parent\":{parent}}}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn child(q: &str, id: &str) -> ChildRef {
        ChildRef {
            queue: Arc::from(q),
            id: id.into(),
        }
    }

    #[test]
    fn keys_are_bullmqs() {
        assert_eq!(child("paint", "7").key(), "bull:paint:7");
        assert_eq!(child("acme:paint", "user:1").key(), "acme:paint:user:1");
        assert_eq!(&*queue_of_key("o", "bull:paint").unwrap(), "paint");
        assert_eq!(&*queue_of_key("o", "acme:paint").unwrap(), "acme:paint");
        assert_eq!(&*queue_of_key("o", "a:b:paint").unwrap(), "a:b:paint");
        assert_eq!(&*queue_of_key("o", "paint").unwrap(), "paint");
        assert!(queue_of_key("o", "bull:").is_err());
    }

    #[test]
    fn one_failure_rule_at_most() {
        assert_eq!(
            on_failure(false, false, false, false).unwrap(),
            OnChildFailure::Wait
        );
        assert_eq!(
            on_failure(false, true, false, false).unwrap(),
            OnChildFailure::Ignore
        );
        let e = on_failure(true, false, false, true).unwrap_err();
        assert!(e.to_string().contains("continueParentOnFailure"), "{e}");
    }

    #[test]
    fn the_parent_goes_into_the_options_text() {
        let p = r#""parent":{"id":"1","queue":"bull:q"}"#;
        assert_eq!(with_parent_json(None, "q", "1"), format!("{{{p}}}"));
        assert_eq!(with_parent_json(Some("{}"), "q", "1"), format!("{{{p}}}"));
        assert_eq!(
            with_parent_json(Some(" { } "), "q", "1"),
            format!("{{ {p}}}")
        );
        assert_eq!(
            with_parent_json(Some(r#"{"delay":5}"#), "q", "1"),
            format!(r#"{{"delay":5,{p}}}"#)
        );
        let v: serde_json::Value =
            serde_json::from_str(&with_parent_json(Some(r#"{"a":{"b":1}}"#), "x:q", "2")).unwrap();
        assert_eq!(v["parent"]["queue"], "x:q");
        assert_eq!(v["a"]["b"], 1);
    }

    #[test]
    fn deps_round_trip_as_json() {
        let mut d = Deps::default();
        d.pending.push(child("a", "1"));
        d.processed.push((child("b", "2"), "{\"v\":1}".into()));
        d.ignored.push((child("c", "x"), "boom".into()));
        assert_eq!(Deps::from_json(&d.to_json()), Some(d.clone()));
        assert!(d.resolve(&child("a", "1")));
        assert!(!d.resolve(&child("a", "1")));
        assert_eq!(d.children().count(), 2);
    }
}
