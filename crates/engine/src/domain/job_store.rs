//! A queue's jobs, whose every change is recorded for storage.
//!
//! The domain cannot change a job without saying which of its columns the change touches: the
//! only mutable access is [`JobStore::change`], and adding or removing a job records the new or
//! deleted row by itself. At the end of each engine call the recorded keys are snapshotted into
//! storage operations (`storage/rows.rs`). Reads go through `Deref` to the [`JobTable`]; there is
//! no `DerefMut`. Two doors stay unrecorded on purpose, each named for its one use: the ready heap's
//! own bookkeeping in the records ([`JobStore::heap_slots`]), and jobs that move between memory
//! and the file without changing ([`JobStore::restore`], [`JobStore::evict`]).

use std::ops::Deref;

use super::changes::NEW;
use super::job::{Job, JobKey};
use super::job_table::JobTable;

/// Job records by key, with the log of what changed (on a durable queue).
#[derive(Default)]
pub struct JobStore {
    table: JobTable,
    /// Whether changes are recorded (a durable queue).
    persist: bool,
    /// `(key, columns)` changed since the last snapshot, in order.
    touched: Vec<(JobKey, u8)>,
}

impl Deref for JobStore {
    type Target = JobTable;

    fn deref(&self) -> &JobTable {
        &self.table
    }
}

impl JobStore {
    /// Whether changes are recorded.
    #[inline]
    pub fn persists(&self) -> bool {
        self.persist
    }

    /// Turns recording on (durable queues) or off.
    pub fn set_persist(&mut self, on: bool) {
        self.persist = on;
    }

    #[inline]
    fn record(&mut self, key: JobKey, columns: u8) {
        if !self.persist {
            return;
        }
        // The same job changing again in one operation (an ack sets state, then order) is
        // recorded once.
        if let Some(&(k, c)) = self.touched.last() {
            if k == key && c & columns == columns && columns != 0 && c != 0 {
                return;
            }
        }
        self.touched.push((key, columns));
    }

    /// The job `key`, to change the `columns` ([`super::changes::STATE`], `EXTRA`, `DATA`) named.
    #[inline]
    pub fn change(&mut self, key: &JobKey, columns: u8) -> Option<&mut Job> {
        self.record(*key, columns);
        self.table.get_mut(key)
    }

    /// Adds a new job: a new row.
    pub fn insert(&mut self, key: JobKey, job: Job) -> Option<Job> {
        self.record(key, NEW);
        self.table.insert(key, job)
    }

    /// Removes a job: its row is deleted.
    pub fn remove(&mut self, key: &JobKey) -> Option<Job> {
        self.record(*key, 0);
        self.table.remove(key)
    }

    /// Takes in a job exactly as the file holds it (restore, revival): nothing to write.
    pub fn restore(&mut self, key: JobKey, job: Job) -> Option<Job> {
        self.table.insert(key, job)
    }

    /// Lets go of a job whose row stays in the file unchanged (eviction): nothing to write.
    pub fn evict(&mut self, key: &JobKey) -> Option<Job> {
        self.table.remove(key)
    }

    /// The records for the ready heap's own bookkeeping (`ready_gen`, and `ready_order`, which
    /// is written with the `STATE` change of the job that moves). Nothing else may change a job
    /// through it.
    #[inline]
    pub fn heap_slots(&mut self) -> &mut JobTable {
        &mut self.table
    }

    /// Takes the changes recorded since the last call.
    pub fn take_touched(&mut self) -> Vec<(JobKey, u8)> {
        std::mem::take(&mut self.touched)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::changes::{EXTRA, STATE};

    fn job(key: JobKey) -> Job {
        let opts = crate::domain::options::JobOptions::defaults();
        Job::new(key, std::sync::Arc::from("n"), "{}".into(), &opts, 0)
    }

    #[test]
    fn every_change_is_recorded_and_moves_between_memory_and_file_are_not() {
        let mut s = JobStore::default();
        s.insert(1, job(1));
        assert!(s.take_touched().is_empty(), "nothing recorded in memory");
        s.set_persist(true);
        s.insert(2, job(2));
        s.change(&2, STATE);
        s.change(&2, STATE);
        s.restore(3, job(3));
        s.change(&3, EXTRA);
        s.evict(&1);
        s.remove(&2);
        assert_eq!(
            s.take_touched(),
            vec![(2, NEW), (2, STATE), (3, EXTRA), (2, 0)]
        );
        assert!(s.take_touched().is_empty());
        assert_eq!(s.len(), 1);
        assert!(s.get(&3).is_some());
    }
}
