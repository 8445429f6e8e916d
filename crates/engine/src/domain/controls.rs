//! The job options of flow control (`deduplication`, `group`, `parent` and the child failure
//! rule), kept in one box beside [`JobOptions`]: most jobs have none of them, and a plain job's
//! options stay small. Every add moves its options a few times (binding, backend, queue); with
//! these four inline they were about 100 bytes larger, and the moves became `memcpy` calls:
//! about 230 instructions of the 22,000 of an add in memory (counted with
//! `bench/boundary/instructions.mjs` and callgrind).

use std::sync::Arc;

use super::dedup::Deduplication;
use super::flow::OnChildFailure;
use super::groups::option::JobGroup;
use super::options::JobOptions;
use crate::error::{EngineError, Result};

/// The flow-control options of one job.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Controls {
    /// `deduplication` (`dedup.rs`).
    pub deduplication: Option<Deduplication>,
    /// `group` (`groups/option.rs`); its priority is the job's `priority`.
    pub group: Option<JobGroup>,
    /// `parent`: the parent's queue (engine name) and id (`flow.rs`).
    pub parent: Option<(Arc<str>, Box<str>)>,
    /// What this job failing for good does to its parent (the four BullMQ flags).
    pub on_child_failure: OnChildFailure,
}

impl JobOptions {
    pub fn deduplication(&self) -> Option<&Deduplication> {
        self.controls.as_ref()?.deduplication.as_ref()
    }

    pub fn group(&self) -> Option<&JobGroup> {
        self.controls.as_ref()?.group.as_ref()
    }

    /// The parent's queue (engine name) and id.
    pub fn parent(&self) -> Option<&(Arc<str>, Box<str>)> {
        self.controls.as_ref()?.parent.as_ref()
    }

    pub fn on_child_failure(&self) -> OnChildFailure {
        self.controls
            .as_ref()
            .map_or(OnChildFailure::Wait, |c| c.on_child_failure)
    }

    /// Whether the job names a parent, or a child failure rule (which needs one).
    pub fn linked(&self) -> bool {
        self.parent().is_some() || self.on_child_failure() != OnChildFailure::Wait
    }

    /// A child failure rule needs a parent to act on: the error when one is set without it.
    pub fn check_rule_has_parent(&self) -> Result<()> {
        if self.parent().is_none() && self.on_child_failure() != OnChildFailure::Wait {
            return Err(EngineError::type_error(
                "parent",
                "is required by failParentOnFailure, ignoreDependencyOnFailure, \
                 removeDependencyOnFailure and continueParentOnFailure",
            ));
        }
        Ok(())
    }

    /// Takes the `deduplication` option out (the caller handles it apart).
    pub fn take_deduplication(&mut self) -> Option<Deduplication> {
        self.controls.as_mut()?.deduplication.take()
    }

    /// The flow-control options, boxed at the first change.
    pub fn controls_mut(&mut self) -> &mut Controls {
        self.controls.get_or_insert_with(Default::default)
    }
}
