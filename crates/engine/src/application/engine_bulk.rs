//! Moves of many jobs (`retryJobs`, `promoteJobs`), a batch per call. In memory a batch is one
//! step under the queue's lock. A durable queue whose finished jobs are partly on disk only
//! (evicted, the oldest) takes the batch's keys from the file, where the state is complete, and
//! brings each back into memory before moving it.

use super::engine::Engine;
use crate::backend::QueueRef;
use crate::domain::job::{JobKey, JobState};
use crate::error::Result;

impl Engine {
    /// Moves up to `count` jobs of finished state `from` that finished before `before` back to
    /// waiting, oldest first (memory only); answers how many.
    pub fn retry_jobs(&self, q: &QueueRef, from: JobState, count: usize, before: u64) -> usize {
        self.with(q, |qs, _, fx| qs.retry_finished(from, before, count, fx))
    }

    /// Moves up to `count` delayed jobs to waiting, earliest due first; answers how many.
    pub fn promote_jobs(&self, q: &QueueRef, count: usize) -> usize {
        self.with(q, |qs, _, fx| qs.promote_delayed(count, fx))
    }

    /// [`Engine::retry_jobs`] over file and memory; resolves once the moves are committed.
    pub async fn retry_jobs_with_disk(
        &self,
        q: &QueueRef,
        from: JobState,
        count: usize,
        before: u64,
    ) -> Result<usize> {
        let qq = q.clone();
        let keys = self
            .read_file(move |e| e.stored_finished_keys(&qq, from, before, count))
            .await?;
        let mut moved = 0;
        let mut last = 0;
        for key in keys {
            if !self.revive(q, key).await? {
                continue;
            }
            let (ok, seq) = self.with_seq(q, |qs, _, fx| qs.retry_key(key, from, fx));
            if ok {
                moved += 1;
                last = seq;
            }
        }
        // Made off the caller's thread, after waits: their commit is waited for here.
        self.commit_of(last).await?;
        Ok(moved)
    }

    /// Keys of up to `limit` stored jobs of finished `state` that finished before `before`,
    /// oldest first. Blocking.
    fn stored_finished_keys(
        &self,
        q: &QueueRef,
        state: JobState,
        before: u64,
        limit: usize,
    ) -> Result<Vec<JobKey>> {
        match self.inner.storage.as_ref() {
            Some(s) => s.finished_keys(q.name(), state, before, limit),
            None => Ok(Vec::new()),
        }
    }
}
