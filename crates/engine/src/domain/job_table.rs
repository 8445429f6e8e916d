//! The job records of one queue: a slab (`Vec` of slots, with a free list) behind a key → slot
//! index. Same operations as a `HashMap<JobKey, Job>`, but the 136-byte records sit densely in
//! the slab instead of in a hash table's buckets (which stay half empty after each doubling), and
//! the table only hashes 16-byte (key, slot) pairs: about 190 bytes per job instead of ~340.

use rustc_hash::FxHashMap;

use super::job::{Job, JobKey};

/// Job records by key.
#[derive(Default)]
pub struct JobTable {
    index: FxHashMap<JobKey, u32>,
    slots: Vec<Option<Job>>,
    free: Vec<u32>,
}

impl JobTable {
    /// Every job with its key, in no order. O(n).
    pub fn iter(&self) -> impl Iterator<Item = (JobKey, &Job)> {
        self.slots.iter().flatten().map(|j| (j.key, j))
    }

    /// The job with `key`. O(1).
    #[inline]
    pub fn get(&self, key: &JobKey) -> Option<&Job> {
        let slot = *self.index.get(key)?;
        self.slots.get(slot as usize)?.as_ref()
    }

    /// The job with `key`, mutable. O(1).
    #[inline]
    pub fn get_mut(&mut self, key: &JobKey) -> Option<&mut Job> {
        let slot = *self.index.get(key)?;
        self.slots.get_mut(slot as usize)?.as_mut()
    }

    /// Whether a job with `key` is held. O(1).
    #[inline]
    pub fn contains_key(&self, key: &JobKey) -> bool {
        self.index.contains_key(key)
    }

    /// Stores `job` under `key`, returning the job it replaces. O(1) amortized.
    pub fn insert(&mut self, key: JobKey, job: Job) -> Option<Job> {
        if let Some(&slot) = self.index.get(&key) {
            return self
                .slots
                .get_mut(slot as usize)
                .and_then(|s| s.replace(job));
        }
        let slot = match self.free.pop() {
            Some(s) => {
                self.slots[s as usize] = Some(job);
                s
            }
            None => {
                self.slots.push(Some(job));
                (self.slots.len() - 1) as u32
            }
        };
        self.index.insert(key, slot);
        None
    }

    /// Removes and returns the job with `key`. O(1).
    pub fn remove(&mut self, key: &JobKey) -> Option<Job> {
        let slot = self.index.remove(key)?;
        let job = self.slots.get_mut(slot as usize)?.take();
        self.free.push(slot);
        if self.index.is_empty() {
            self.slots.clear();
            self.free.clear();
        }
        job
    }

    /// Number of jobs held.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Whether no job is held.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;

    use proptest::prelude::*;

    use super::*;
    use crate::domain::options::JobOptions;

    fn job(key: JobKey, tag: u32) -> Job {
        let mut j = Job::new(key, Arc::from("n"), "{}".into(), &JobOptions::defaults(), 0);
        j.priority = tag;
        j
    }

    proptest! {
        #[test]
        fn behaves_like_a_hash_map(ops in proptest::collection::vec((0u8..3, 0u64..64, any::<u32>()), 0..400)) {
            let mut t = JobTable::default();
            let mut m: HashMap<JobKey, u32> = HashMap::new();
            for (op, key, tag) in ops {
                match op {
                    0 => {
                        let old = t.insert(key, job(key, tag)).map(|j| j.priority);
                        prop_assert_eq!(old, m.insert(key, tag));
                    }
                    1 => prop_assert_eq!(t.remove(&key).map(|j| j.priority), m.remove(&key)),
                    _ => {
                        if let Some(j) = t.get_mut(&key) {
                            j.priority = tag;
                            m.insert(key, tag);
                        }
                    }
                }
                prop_assert_eq!(t.len(), m.len());
                for (k, v) in &m {
                    prop_assert_eq!(t.get(k).map(|j| j.priority), Some(*v));
                    prop_assert!(t.contains_key(k));
                }
                prop_assert!(t.slots.len() <= 64, "slots are reused");
            }
        }
    }
}
