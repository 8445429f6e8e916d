//! Job groups (BullMQ Pro's `group`, free here): the ready jobs of a group wait in the group's
//! own lane, a [`ReadyHeap`] keyed by `(group priority, admission order)`, so each group is FIFO
//! within a priority. Workers take from the groups in round-robin: a ring holds the groups whose
//! turn may come; taking from a group moves it to the back of the ring.
//!
//! A group that may not start a job now (paused, at its concurrency, or out of rate tokens) is
//! parked out of the ring, its head left in place: no later take looks at it again until what
//! blocks it changes. A group at its concurrency or paused is parked until one of its jobs
//! finishes or it is resumed; one out of tokens is parked until its next token, in a set ordered
//! by time. So one blocked group never holds up the others (no head-of-line blocking), and no
//! job is popped and pushed back. Each take is O(log n) plus O(1) per group it parks.
//!
//! A group's limits are its own settings (`setGroupConcurrency`, `setGroupRateLimit`), else the
//! defaults of the taking worker's `group` option. A group's record lives while it has ready or
//! active jobs or settings of its own. No I/O, no clock: calls take `now` (ms).

pub mod option;
#[cfg(test)]
mod tests;

use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::job::JobKey;
use super::job_table::JobTable;
use super::limits::{RateLimit, TokenBucket};
use super::ready::ReadyHeap;

/// The group limits a worker brings (its `group` option), for groups without their own.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupDefaults {
    pub concurrency: Option<u32>,
    pub rate: Option<RateLimit>,
}

/// A group's own settings, as stored.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupSettings {
    pub concurrency: Option<u32>,
    pub rate: Option<RateLimit>,
    pub paused: bool,
}

/// One change of a group's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupChange {
    /// Sets (or with `None` removes) the group's own concurrency.
    Concurrency(Option<u32>),
    /// Sets (or with `None` removes) the group's own rate limit.
    Rate(Option<RateLimit>),
    /// Pauses or resumes the group.
    Paused(bool),
}

/// What a group holds and its settings, for the getters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupInfo {
    pub waiting: usize,
    pub active: u32,
    pub settings: GroupSettings,
}

/// Where a group stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Place {
    /// No ready job.
    #[default]
    Idle,
    /// In the ring.
    Turn,
    /// Out of the ring until a job of it finishes, it is resumed or its settings change.
    Parked,
    /// Out of the ring until this time (its next rate token).
    Timed(u64),
}

/// Why a group may not start a job now.
enum Block {
    Wait,
    Until(u64),
}

#[derive(Default)]
struct Group {
    ready: ReadyHeap,
    active: u32,
    settings: GroupSettings,
    bucket: TokenBucket,
    place: Place,
}

impl Group {
    fn rate(&self, d: GroupDefaults) -> Option<RateLimit> {
        self.settings.rate.or(d.rate)
    }

    fn blocked(&mut self, d: GroupDefaults, now: u64) -> Option<Block> {
        if self.settings.paused {
            return Some(Block::Wait);
        }
        if let Some(c) = self.settings.concurrency.or(d.concurrency) {
            if self.active >= c {
                return Some(Block::Wait);
            }
        }
        if let Some(r) = self.rate(d) {
            self.bucket.refill(r, now);
            if self.bucket.tokens() == 0 {
                return Some(Block::Until(self.bucket.next_token_at(now)));
            }
        }
        None
    }

    /// Whether the record can go: nothing in it and nothing of its own.
    fn is_spent(&self) -> bool {
        self.ready.is_empty() && self.active == 0 && self.settings == GroupSettings::default()
    }
}

/// The groups of one queue.
#[derive(Default)]
pub struct Groups {
    map: FxHashMap<Arc<str>, Group>,
    ring: VecDeque<Arc<str>>,
    timed: BTreeSet<(u64, Arc<str>)>,
    /// Ready jobs in every lane.
    ready: usize,
    /// The defaults of the last take (a take with others looks at every parked group again).
    defaults: GroupDefaults,
    /// Settings changed since the last [`Groups::take_changes`].
    changed: Vec<(Arc<str>, GroupSettings)>,
}

impl Groups {
    /// Ready jobs in every group.
    pub fn len(&self) -> usize {
        self.ready
    }

    /// Whether the queue has no group record (no grouped job ready or active, no settings).
    pub fn is_unused(&self) -> bool {
        self.map.is_empty()
    }

    /// Whether no grouped job is ready.
    pub fn is_empty(&self) -> bool {
        self.ready == 0
    }

    /// Puts job `key` (already in `jobs`) in `group`'s lane at `prio`. O(log n).
    pub fn push(&mut self, jobs: &mut JobTable, group: &Arc<str>, key: JobKey, prio: (u32, i64)) {
        let g = self.map.entry(group.clone()).or_default();
        let was_in = g.ready.get(jobs, key).is_some();
        g.ready.push(jobs, key, prio);
        if !was_in {
            self.ready += 1;
        }
        if g.place == Place::Idle {
            g.place = Place::Turn;
            self.ring.push_back(group.clone());
        }
    }

    /// Takes job `key` out of `group`'s lane (lazily); its `(priority, order)` if it was in.
    pub fn remove(&mut self, jobs: &mut JobTable, group: &str, key: JobKey) -> Option<(u32, i64)> {
        let g = self.map.get_mut(group)?;
        let prio = g.ready.remove(jobs, key)?;
        self.ready -= 1;
        // An emptied lane leaves the ring at its next turn (or here if it is parked).
        if g.ready.is_empty() && g.place != Place::Turn {
            self.unpark(group);
            if let Some(g) = self.map.get_mut(group) {
                g.place = Place::Idle;
            }
            self.tidy(group);
        }
        Some(prio)
    }

    /// The next job by round-robin over the groups that may start one now, under the taking
    /// worker's `defaults`: counted active in its group, a rate token spent. Returns the job, its
    /// `(priority, order)` and its group.
    pub fn next(
        &mut self,
        jobs: &mut JobTable,
        defaults: GroupDefaults,
        now: u64,
    ) -> Option<(JobKey, (u32, i64))> {
        if self.ready == 0 {
            return None;
        }
        if defaults != self.defaults {
            self.defaults = defaults;
            self.wake_all();
        }
        self.promote_timed(now);
        while let Some(id) = self.ring.pop_front() {
            let Some(g) = self.map.get_mut(&id) else {
                continue;
            };
            if g.ready.is_empty() {
                g.place = Place::Idle;
                self.tidy(&id);
                continue;
            }
            match g.blocked(defaults, now) {
                Some(Block::Wait) => {
                    g.place = Place::Parked;
                    continue;
                }
                Some(Block::Until(t)) => {
                    g.place = Place::Timed(t);
                    self.timed.insert((t, id));
                    continue;
                }
                None => {}
            }
            let Some((key, prio)) = g.ready.pop(jobs) else {
                g.place = Place::Idle;
                continue;
            };
            self.ready -= 1;
            g.active += 1;
            if g.rate(defaults).is_some() {
                g.bucket.spend(1);
            }
            if g.ready.is_empty() {
                g.place = Place::Idle;
            } else {
                self.ring.push_back(id);
            }
            return Some((key, prio));
        }
        None
    }

    /// A job of `group` left active. Answers whether the group, parked, may take its turn again
    /// (a waiting worker should try).
    pub fn finished(&mut self, group: &str) -> bool {
        let Some(g) = self.map.get_mut(group) else {
            return false;
        };
        g.active = g.active.saturating_sub(1);
        let woke = g.place == Place::Parked && self.wake(group);
        self.tidy(group);
        woke
    }

    /// Changes `group`'s settings. Answers whether they changed (pausing a paused group, or
    /// resuming one that is not, changes nothing).
    pub fn change(&mut self, group: &str, change: GroupChange) -> bool {
        let id: Arc<str> = match self.map.get_key_value(group) {
            Some((k, _)) => k.clone(),
            None => Arc::from(group),
        };
        let g = self.map.entry(id.clone()).or_default();
        let before = g.settings;
        match change {
            GroupChange::Concurrency(c) => g.settings.concurrency = c,
            GroupChange::Rate(r) => g.settings.rate = r,
            GroupChange::Paused(p) => g.settings.paused = p,
        }
        let changed = g.settings != before;
        if changed {
            self.changed.push((id.clone(), g.settings));
            self.wake(&id);
        }
        self.tidy(&id);
        changed
    }

    /// Restores a group's stored settings (recovery; not recorded).
    pub fn restore(&mut self, group: Arc<str>, settings: GroupSettings) {
        self.map.entry(group).or_default().settings = settings;
    }

    /// Settings changed since the last call, in order (durable queues write them).
    pub fn take_changes(&mut self) -> Vec<(Arc<str>, GroupSettings)> {
        std::mem::take(&mut self.changed)
    }

    /// When a group parked by its rate may take its turn (`None`: none is).
    pub fn next_token_at(&self) -> Option<u64> {
        self.timed.first().map(|(t, _)| *t)
    }

    /// Whether ready grouped jobs exist but no group may start one now (as far as the last take
    /// saw, with the same defaults).
    pub fn held_back(&self, defaults: GroupDefaults, now: u64) -> bool {
        self.ready > 0
            && self.ring.is_empty()
            && defaults == self.defaults
            && self.next_token_at().is_none_or(|t| t > now)
    }

    /// What `group` holds and its settings (`None`: the group has nothing).
    pub fn info(&self, group: &str) -> Option<GroupInfo> {
        self.map.get(group).map(|g| GroupInfo {
            waiting: g.ready.len(),
            active: g.active,
            settings: g.settings,
        })
    }

    /// `group`'s ready jobs in the order it hands them out.
    pub fn lane(&self, jobs: &JobTable, group: &str) -> Vec<(JobKey, (u32, i64))> {
        self.map
            .get(group)
            .map(|g| g.ready.sorted(jobs))
            .unwrap_or_default()
    }

    /// Keys of every ready grouped job, unordered. O(n).
    pub fn keys(&self, jobs: &JobTable) -> Vec<JobKey> {
        self.map.values().flat_map(|g| g.ready.keys(jobs)).collect()
    }

    /// Every ready grouped job in `(priority, order)` order. O(n log n).
    pub fn sorted(&self, jobs: &JobTable) -> Vec<(JobKey, (u32, i64))> {
        let mut all: Vec<(JobKey, (u32, i64))> = self
            .map
            .values()
            .flat_map(|g| g.ready.sorted(jobs))
            .collect();
        all.sort_unstable_by_key(|&(k, p)| (p, k));
        all
    }

    /// Empties every lane (drain); active counts and settings stay. O(n).
    pub fn clear(&mut self, jobs: &mut JobTable) {
        for g in self.map.values_mut() {
            g.ready.clear(jobs);
            g.place = Place::Idle;
        }
        self.ring.clear();
        self.timed.clear();
        self.ready = 0;
        self.map.retain(|_, g| !g.is_spent());
    }

    /// Puts a parked or timed group with ready jobs back in the ring. Answers whether it went.
    fn wake(&mut self, id: &str) -> bool {
        let Some((key, g)) = self.map.get_key_value(id) else {
            return false;
        };
        let key = key.clone();
        if g.ready.is_empty() || matches!(g.place, Place::Turn | Place::Idle) {
            return false;
        }
        self.unpark(id);
        if let Some(g) = self.map.get_mut(id) {
            g.place = Place::Turn;
        }
        self.ring.push_back(key);
        true
    }

    /// Takes a timed group out of the timed set (its place is set by the caller).
    fn unpark(&mut self, id: &str) {
        if let Some((k, g)) = self.map.get_key_value(id) {
            if let Place::Timed(t) = g.place {
                self.timed.remove(&(t, k.clone()));
            }
        }
    }

    fn wake_all(&mut self) {
        let parked: Vec<Arc<str>> = self
            .map
            .iter()
            .filter(|(_, g)| matches!(g.place, Place::Parked | Place::Timed(_)))
            .map(|(k, _)| k.clone())
            .collect();
        for id in parked {
            self.wake(&id);
        }
    }

    fn promote_timed(&mut self, now: u64) {
        while let Some((t, _)) = self.timed.first() {
            if *t > now {
                break;
            }
            let Some((_, id)) = self.timed.pop_first() else {
                break;
            };
            if let Some(g) = self.map.get_mut(&id) {
                if g.ready.is_empty() {
                    g.place = Place::Idle;
                    self.tidy(&id);
                } else {
                    g.place = Place::Turn;
                    self.ring.push_back(id);
                }
            }
        }
    }

    /// Drops the record of a group that holds nothing.
    fn tidy(&mut self, id: &str) {
        if self
            .map
            .get(id)
            .is_some_and(|g| g.is_spent() && g.place == Place::Idle)
        {
            self.map.remove(id);
        }
    }
}
