//! Finished jobs beyond the in-memory bound of a durable queue.
//!
//! A durable queue keeps a bounded number of completed and failed jobs in memory
//! (the newest); older ones are *evicted*: they leave the job map and the ordered finished set but
//! stay in the file, where getters and lookups read them. Memory keeps only their number per
//! state and the custom ids among them (so a duplicate `jobId` is still recognised without
//! touching disk). Evicted rows are always the oldest of their state, so "evicted" is exactly
//! "on disk with a `seq` below the oldest in-memory one".
//!
//! Which jobs are evicted, and when, is storage's policy (`storage/eviction.rs`); this module
//! keeps the books and offers the one move, [`QueueState::evict`]. Deleting evicted rows
//! (retention, `clean`, `remove`) is done by idempotent [`EvictedOp`]s; the writer reports what
//! it deleted and [`QueueState::forget_evicted`] settles the counts.

use rustc_hash::FxHashMap;

use super::QueueState;
use crate::domain::changes::{DeletedReply, EvictedOp, RevivedReply, STATE};
use crate::domain::job::{parse_auto_id, Job, JobKey, JobState, CUSTOM_KEY_BIT};

/// Index of a finished state in per-state arrays: completed 0, failed 1.
pub fn fin(state: JobState) -> usize {
    usize::from(state == JobState::Failed)
}

/// What a queue knows of its evicted jobs.
#[derive(Debug, Default)]
pub struct Evicted {
    /// Evicted rows per finished state.
    pub count: [u64; 2],
    /// Custom ids of evicted jobs.
    pub ids: FxHashMap<Box<str>, JobKey>,
    /// Evicted jobs being brought back into memory, by key. Counted as in memory by
    /// [`QueueState::oldest_in_memory`], so no deletion of evicted rows queued meanwhile reaches
    /// their rows, and never evicted again while a caller still waits to change them.
    pub reviving: FxHashMap<JobKey, Revival>,
}

/// One evicted job on its way back into memory.
#[derive(Debug, Clone, Copy)]
pub struct Revival {
    /// The order its row was given by the queued [`EvictedOp::Revive`].
    pub seq: u64,
    /// Callers waiting to change it (each queued its own `Revive`, with the same `seq`).
    pub callers: u32,
}

impl QueueState {
    /// Evicted rows of a finished state.
    pub fn evicted_count(&self, state: JobState) -> u64 {
        match state {
            JobState::Completed | JobState::Failed => self.evicted.count[fin(state)],
            _ => 0,
        }
    }

    /// Whether any finished job lives only on disk.
    pub fn has_evicted(&self) -> bool {
        self.evicted.count.iter().any(|c| *c > 0) || !self.evicted.ids.is_empty()
    }

    /// `seq` of the oldest in-memory finished job of `state` (`u64::MAX` if none), or of a job
    /// being revived if that is older: every row of that state with a smaller one is evicted.
    pub fn oldest_in_memory(&self, state: JobState) -> u64 {
        let set = if state == JobState::Failed {
            &self.failed
        } else {
            &self.completed
        };
        let reviving = self.evicted.reviving.values().map(|r| r.seq).min();
        let oldest = set.first_key_value().map_or(u64::MAX, |(s, _)| *s);
        reviving.map_or(oldest, |r| r.min(oldest))
    }

    /// Finished jobs of `state` in memory.
    pub fn finished_in_memory(&self, state: JobState) -> usize {
        match state {
            JobState::Completed => self.completed.len(),
            JobState::Failed => self.failed.len(),
            _ => 0,
        }
    }

    /// Up to `n` keys of the oldest finished jobs of `state` in memory that may be evicted
    /// (not those that callers still wait to change, being revived), oldest first.
    pub fn evictable(&self, state: JobState, n: usize) -> Vec<JobKey> {
        let set = if state == JobState::Failed {
            &self.failed
        } else {
            &self.completed
        };
        set.values()
            .filter(|k| !self.evicted.reviving.contains_key(k))
            .take(n)
            .copied()
            .collect()
    }

    /// Moves the finished job `key` out of memory; its row stays in the file unchanged, so
    /// nothing is recorded. Runs after the call's changes were snapshotted for storage, so its
    /// row is already on the way to the file. Returns false for a job that is not finished.
    pub fn evict(&mut self, key: JobKey) -> bool {
        let Some(job) = self.jobs.get(&key) else {
            return false;
        };
        let (state, seq) = (job.state, job.state_seq);
        if !matches!(state, JobState::Completed | JobState::Failed) || !self.persists() {
            return false;
        }
        self.finished_set(state).remove(&seq);
        if let Some(job) = self.jobs.evict(&key) {
            if let Some(id) = job.into_custom_id() {
                self.custom_ids.remove(&id);
                self.evicted.ids.insert(id, key);
            }
            self.evicted.count[fin(state)] += 1;
        }
        true
    }

    /// The key of a job that may be evicted (on disk only), if the id can name one.
    pub fn evicted_key(&self, id: &str) -> Option<JobKey> {
        if !self.has_evicted() {
            return None;
        }
        match parse_auto_id(id) {
            Some(n) if n <= self.last_auto_id && !self.jobs.contains_key(&n) => Some(n),
            Some(_) => None,
            None => self.evicted.ids.get(id).copied(),
        }
    }

    /// Queues an operation on evicted rows (durable queues only). Deleting one job by key also
    /// cancels its revival.
    fn evicted_op(&mut self, op: EvictedOp) {
        if self.jobs.persists() {
            if let EvictedOp::Delete { key, .. } = &op {
                self.evicted.reviving.remove(key);
            }
            self.evicted_ops.push(op);
        }
    }

    /// Deletes the evicted job `key`; `reply` gets its id once committed if it existed.
    pub fn delete_evicted(&mut self, key: JobKey, reply: DeletedReply) {
        self.evicted_op(EvictedOp::Delete {
            key,
            reply: Some(reply),
        });
    }

    /// Deletes evicted jobs of `state` finished before `finished_before`, oldest first, at most
    /// `limit` (0: all); `reply` gets their ids once committed.
    pub fn drop_evicted(
        &mut self,
        state: JobState,
        finished_before: u64,
        limit: u64,
        reply: Option<DeletedReply>,
    ) {
        let below_seq = self.oldest_in_memory(state);
        self.evicted_op(EvictedOp::Drop {
            state,
            finished_before,
            below_seq,
            limit,
            reply,
        });
    }

    /// Retention by count over memory and disk: keeps the newest `keep` of `state` overall.
    pub(super) fn trim_evicted(&mut self, state: JobState, keep: u64) {
        let mem = self.finished_set(state).len() as u64;
        if self.evicted.count[fin(state)] == 0 || mem + self.evicted.count[fin(state)] <= keep {
            return;
        }
        let op = EvictedOp::Trim {
            state,
            keep: keep.saturating_sub(mem),
            below_seq: self.oldest_in_memory(state),
        };
        self.evicted_op(op);
    }

    /// Retention by age over disk: drops evicted rows of `state` finished before `cutoff`.
    pub(super) fn drop_evicted_older(&mut self, state: JobState, cutoff: u64) {
        if self.evicted.count[fin(state)] == 0 {
            return;
        }
        self.drop_evicted(state, cutoff, 0, None);
    }

    /// Settles counts after the writer deleted evicted rows (`(key, custom_id)` each).
    pub fn forget_evicted(&mut self, state: JobState, deleted: &[(JobKey, Option<String>)]) {
        let i = fin(state);
        self.evicted.count[i] = self.evicted.count[i].saturating_sub(deleted.len() as u64);
        for (key, id) in deleted {
            if let Some(id) = id {
                if self.evicted.ids.get(id.as_str()) == Some(key) {
                    self.evicted.ids.remove(id.as_str());
                }
            }
        }
    }

    /// Starts bringing the evicted job `key` back into memory (to change it): queues a
    /// [`EvictedOp::Revive`] that gives its row the next order `seq` (the newest of its state) and
    /// replies with the row once committed; [`QueueState::finish_revive`] then takes it in.
    /// Returns false (nothing queued) when the job is in memory already or the queue is not
    /// durable.
    pub fn begin_revive(&mut self, key: JobKey, reply: RevivedReply) -> bool {
        if !self.jobs.persists() || self.jobs.contains_key(&key) {
            return false;
        }
        // A revival already under way: ask again with the same order (the update is idempotent),
        // so that every caller's reply matches.
        let seq = match self.evicted.reviving.get_mut(&key) {
            Some(r) => {
                r.callers += 1;
                r.seq
            }
            None => {
                let seq = self.next_state_seq();
                let r = Revival { seq, callers: 1 };
                self.evicted.reviving.insert(key, r);
                seq
            }
        };
        self.evicted_ops.push(EvictedOp::Revive {
            key,
            seq,
            reply: Some(reply),
        });
        true
    }

    /// One caller's end of a revival: takes in the job its [`QueueState::begin_revive`] claimed
    /// (`None`: the file had no such finished job), unless an earlier caller did. Returns whether
    /// the job is in memory for this caller to change: false when the revival was cancelled
    /// meanwhile (the job was removed, or the queue obliterated: then a job in memory under the
    /// same key is another job).
    pub fn finish_revive(&mut self, key: JobKey, stored: Option<Job>) -> bool {
        let Some(r) = self.evicted.reviving.get_mut(&key) else {
            return false;
        };
        r.callers = r.callers.saturating_sub(1);
        let seq = r.seq;
        if r.callers == 0 {
            self.evicted.reviving.remove(&key);
        }
        if self.jobs.contains_key(&key) {
            // An earlier caller took it in; it stayed in memory for this one.
            return true;
        }
        let Some(mut job) = stored else { return false };
        let state = job.state;
        if job.state_seq != seq || !matches!(state, JobState::Completed | JobState::Failed) {
            return false;
        }
        if let Some(id) = job.custom_id() {
            self.evicted.ids.remove(id);
            self.custom_ids.insert(id.into(), key);
        }
        // The newest of its state now (jobs evicted while it was on its way may be newer than
        // the order it was claimed with); the new order is written.
        let newest = self.next_state_seq();
        job.state_seq = newest;
        self.finished_set(state).insert(newest, key);
        self.jobs.restore(key, job);
        let _ = self.jobs.change(&key, STATE);
        let i = fin(state);
        self.evicted.count[i] = self.evicted.count[i].saturating_sub(1);
        true
    }

    /// Restores the evicted bookkeeping at open.
    pub fn set_evicted(&mut self, count: [u64; 2], ids: Vec<(Box<str>, JobKey)>) {
        self.evicted.count = count;
        for (id, key) in ids {
            if key & CUSTOM_KEY_BIT != 0 && !self.custom_ids.contains_key(&id) {
                self.evicted.ids.insert(id, key);
            }
        }
    }
}
