//! Deduplication in a queue (`domain/dedup.rs` holds the keys and the rules): what an add with a
//! deduplication id does, keys given up when their job finishes or goes, and the queue's calls
//! (`getDeduplicationJobId`, `removeDeduplicationKey`). A durable queue records each key it sets
//! or drops (`dedup_ops`), written with its other changes.

use super::{id_of, Effects, QueueState};
use crate::domain::dedup::{DedupKey, Deduplication, Verdict};
use crate::domain::event::EventKind;
use crate::domain::job::{JobKey, JobState, CUSTOM_KEY_BIT};

impl QueueState {
    /// Decides an add with `d`: add, replace a delayed holder, or answer the holder.
    pub(super) fn deduplicate(&mut self, d: &Deduplication, now: u64) -> Verdict {
        let jobs = &self.jobs;
        let v = self.dedup.decide(d, now, |k| {
            jobs.get(&k).is_some_and(|j| j.state == JobState::Delayed)
        });
        if let (Verdict::Duplicate(_), true) = (v, d.extend && d.ttl.is_some()) {
            // The window restarted: record it.
            if let Some(k) = self.dedup.get(&d.id, now) {
                self.record_dedup(&d.id, Some(k));
            }
        }
        v
    }

    /// The duplicate add of a job that would have had id `would_be`: nothing is added; the
    /// event names the holder.
    pub(super) fn deduplicated(
        &mut self,
        d: &Deduplication,
        holder: JobKey,
        would_be: String,
        fx: &mut Effects,
    ) {
        let job_id = self.holder_id(holder);
        self.emit(fx, || EventKind::Deduplicated {
            job_id,
            deduplication_id: d.id.to_string(),
            deduplicated_job_id: would_be,
        });
    }

    /// Removes a delayed holder that a new job replaces (`removed`, prev `delayed`); the key
    /// stays, for the new job to take over with the window left.
    pub(super) fn replace_holder(
        &mut self,
        d: &Deduplication,
        old: JobKey,
        now: u64,
        fx: &mut Effects,
    ) {
        if self.delayed.remove(&old).is_none() {
            return;
        }
        let id = id_of(old, &self.jobs);
        let key = self.dedup.get(&d.id, now);
        self.forget(old);
        if let Some(k) = key {
            self.dedup.restore(d.id.clone(), k);
        }
        self.emit(fx, || EventKind::Removed {
            job_id: id,
            prev: "delayed",
        });
    }

    /// The new job `key` holds the key of `d` after `verdict`.
    pub(super) fn hold_dedup(
        &mut self,
        d: &Deduplication,
        key: JobKey,
        verdict: Verdict,
        replaced: Option<String>,
        now: u64,
        fx: &mut Effects,
    ) {
        let k = self.dedup.hold(d, key, verdict, now);
        self.record_dedup(&d.id, Some(k));
        if let Some(old) = replaced {
            self.emit(fx, || EventKind::Deduplicated {
                job_id: id_of(key, &self.jobs),
                deduplication_id: d.id.to_string(),
                deduplicated_job_id: old,
            });
        }
    }

    /// A job that holds the key of `id` finished: a key without a window goes.
    pub(super) fn dedup_finished(&mut self, id: &str, key: JobKey) {
        if self.dedup.finished(id, key) {
            self.record_dedup(id, None);
        }
    }

    /// A job was removed: the key it holds goes.
    pub(super) fn dedup_removed(&mut self, id: &str, key: JobKey) {
        if self.dedup.removed(id, key) {
            self.record_dedup(id, None);
        }
    }

    fn record_dedup(&mut self, id: &str, key: Option<DedupKey>) {
        if self.jobs.persists() {
            self.dedup_ops.push((id.into(), key));
        }
    }

    /// The id of the job holding the key of `id` (`getDeduplicationJobId`), if a key lives.
    pub fn dedup_holder(&mut self, id: &str, now: u64) -> Option<String> {
        let k = self.dedup.get(id, now)?;
        Some(self.holder_id(k.job))
    }

    /// The id of a holder, also when only the file holds it (a finished job evicted from
    /// memory, whose window lasts).
    fn holder_id(&self, key: JobKey) -> String {
        if let Some(j) = self.jobs.get(&key) {
            return j.id_string();
        }
        if key & CUSTOM_KEY_BIT == 0 {
            return key.to_string();
        }
        self.evicted
            .ids
            .iter()
            .find(|(_, k)| **k == key)
            .map(|(id, _)| id.to_string())
            .unwrap_or_default()
    }

    /// Removes the key of `id` (`removeDeduplicationKey`); with `holder`, only if that job
    /// holds it. Answers whether a live key was removed.
    pub fn remove_dedup_key(&mut self, id: &str, holder: Option<&str>, now: u64) -> bool {
        if let Some(h) = holder {
            match (self.dedup.get(id, now), self.key_of(h)) {
                (Some(k), Some(job)) if k.job == job => {}
                _ => return false,
            }
        }
        let removed = self.dedup.remove(id, now);
        if removed {
            self.record_dedup(id, None);
        }
        removed
    }

    /// Puts a stored key back (at open).
    pub fn restore_dedup(&mut self, id: Box<str>, key: DedupKey) {
        self.dedup.restore(id, key);
    }

    /// Takes the keys set (`Some`) or dropped (`None`) since the last call, in order.
    pub fn take_dedup_ops(&mut self) -> Vec<(Box<str>, Option<DedupKey>)> {
        std::mem::take(&mut self.dedup_ops)
    }
}
