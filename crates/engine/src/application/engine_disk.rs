//! Reads and changes of evicted jobs (finished jobs of durable queues that only the file holds),
//! for the routing in `embedded.rs`. Reads wait (by commit ticket, woken by commits) until
//! everything submitted before them is committed, so the file is as current as memory, then run
//! on a blocking thread of the caller's runtime.

use tokio::sync::oneshot;

use super::engine::Engine;
use crate::backend::{Page, QueueRef};
use crate::domain::job::{Job, JobKey, JobState};
use crate::domain::listing::{page_bounds, StateFilter};
use crate::error::{EngineError, Result};
use crate::storage::recovery::{finished_page, row_of, JOB_SELECT};
use crate::storage::restore::job_of;
use crate::storage::Storage;
use crate::wire;

fn code(state: JobState) -> i64 {
    match state {
        JobState::Failed => 5,
        _ => 4,
    }
}

impl Engine {
    fn storage(&self) -> Result<&Storage> {
        self.inner
            .storage
            .as_ref()
            .ok_or_else(|| EngineError::Internal("not a durable engine".into()))
    }

    /// Whether some finished jobs of the queue live only on disk.
    pub fn has_evicted(&self, q: &QueueRef) -> bool {
        self.read(q, |qs| qs.has_evicted()).unwrap_or(false)
    }

    /// The key of a job that may be evicted, if `id` can name one.
    pub fn evicted_key(&self, q: &QueueRef, id: &str) -> Option<JobKey> {
        self.read(q, |qs| qs.evicted_key(id)).flatten()
    }

    /// Runs the blocking read `f` on a blocking thread once everything submitted so far is
    /// committed.
    pub(super) async fn read_file<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Engine) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        self.commit_of(self.submitted()).await?;
        let e = self.clone();
        tokio::task::spawn_blocking(move || f(&e))
            .await
            .map_err(|e| EngineError::Internal(format!("a file read did not finish: {e}")))?
    }

    /// Reads a job only the file holds. Blocking.
    pub fn stored_job(&self, q: &QueueRef, key: JobKey) -> Result<Option<Job>> {
        let name = q.name().to_string();
        self.storage()?.read(|c| {
            let mut stmt =
                c.prepare_cached(&format!("{JOB_SELECT} WHERE queue = ?1 AND key = ?2"))?;
            let mut rows = stmt.query(rusqlite::params![name, key as i64])?;
            let mut names = Default::default();
            match rows.next()? {
                Some(r) => Ok(Some(job_of(row_of(r, &mut names)?))),
                None => Ok(None),
            }
        })
    }

    /// Like [`Engine::jobs_json`], but finished states are read from the file, where they are
    /// complete (memory holds only the newest). Blocking.
    pub fn jobs_json_with_disk(
        &self,
        q: &QueueRef,
        filters: &[StateFilter],
        start: i64,
        end: i64,
        asc: bool,
    ) -> Result<String> {
        let sizes: Vec<usize> = filters
            .iter()
            .map(|f| self.read(q, |qs| qs.count_of(*f)).unwrap_or(0))
            .collect();
        let total: usize = sizes.iter().sum();
        let mut out = String::from("[");
        let Some((from, to)) = page_bounds(total, start, end) else {
            out.push(']');
            return Ok(out);
        };
        let mut base = 0usize;
        let mut first = true;
        for (f, size) in filters.iter().zip(sizes) {
            let (lo, hi) = (base, base + size);
            base = hi;
            if size == 0 || hi <= from || lo > to {
                continue;
            }
            let offset = from.saturating_sub(lo);
            let count = to.min(hi - 1) + 1 - (lo + offset);
            let records: Vec<String> = match f {
                StateFilter::State(s @ (JobState::Completed | JobState::Failed)) => {
                    let name = q.name().to_string();
                    let order = if asc { "ASC" } else { "DESC" };
                    let wire = &*self.inner.wire;
                    self.storage()?.read(|c| {
                        let mut stmt = c.prepare_cached(&finished_page(order))?;
                        let mut rows = stmt.query(rusqlite::params![
                            name,
                            code(*s),
                            count as i64,
                            offset as i64
                        ])?;
                        let mut names = Default::default();
                        let mut v = Vec::new();
                        while let Some(r) = rows.next()? {
                            v.push(wire::record(wire, &job_of(row_of(r, &mut names)?)));
                        }
                        Ok(v)
                    })?
                }
                other => {
                    let text = self
                        .read(q, |qs| {
                            let end = (offset + count - 1) as i64;
                            self.page_of(qs, &[*other], offset as i64, end, asc)
                        })
                        .unwrap_or_else(|| "[]".into());
                    split_records(&text)?
                }
            };
            for r in records {
                if !first {
                    out.push(',');
                }
                first = false;
                out.push_str(&r);
            }
        }
        out.push(']');
        Ok(out)
    }

    /// Brings an evicted job back into memory so it can be changed; resolves whether it is in
    /// memory now (false: the file has no such finished job, or it was removed meanwhile). The
    /// writer claims the row in order with every other write (see
    /// [`crate::domain::changes::EvictedOp::Revive`]), so no deletion can slip between reading
    /// it and taking it in.
    pub async fn revive(&self, q: &QueueRef, key: JobKey) -> Result<bool> {
        let (tx, rx) = oneshot::channel();
        let queued = self.with(q, |qs, _, _| {
            if qs.has_job(key) {
                Some(true)
            } else {
                qs.begin_revive(key, tx).then_some(false)
            }
        });
        match queued {
            Some(true) => Ok(true),
            None => Ok(false),
            Some(false) => {
                let row = self.replied(rx).await?;
                Ok(self.with(q, |qs, _, _| qs.finish_revive(key, row)))
            }
        }
    }

    /// Deletes an evicted job; resolves whether it existed.
    pub async fn remove_evicted(&self, q: &QueueRef, key: JobKey) -> Result<bool> {
        let (tx, rx) = oneshot::channel();
        self.with(q, |qs, _, _| qs.delete_evicted(key, tx));
        self.replied(rx).await.map(|ids| !ids.is_empty())
    }

    /// `clean` of a finished state over disk and memory: evicted rows first (they are the
    /// oldest), then memory, at most `limit` (0: no limit) in all; resolves the removed ids once
    /// every deletion is committed.
    pub async fn clean_with_disk(
        &self,
        q: &QueueRef,
        grace: u64,
        limit: usize,
        state: JobState,
    ) -> Result<Vec<String>> {
        let filter = StateFilter::State(state);
        let (tx, rx) = oneshot::channel();
        let drop_evicted = |qs: &mut crate::domain::queue::QueueState, now: u64, tx| {
            qs.drop_evicted(state, now.saturating_sub(grace), limit as u64, Some(tx))
        };
        if limit == 0 {
            // Disk and memory in one step: no job can move between them in between.
            let mem = self.with(q, |qs, now, fx| {
                drop_evicted(qs, now, tx);
                qs.clean(grace, 0, filter, now, fx)
            });
            let mut ids = self.replied(rx).await?;
            ids.extend(mem);
            return Ok(ids);
        }
        self.with(q, |qs, now, _| drop_evicted(qs, now, tx));
        let mut ids = self.replied(rx).await?;
        let left = limit.saturating_sub(ids.len());
        if left > 0 {
            let (mem, seq) = self.with_seq(q, |qs, now, fx| qs.clean(grace, left, filter, now, fx));
            // Made off the caller's thread, after a wait: its own ticket, waited for here.
            self.commit_of(seq).await?;
            ids.extend(mem);
        }
        Ok(ids)
    }

    /// The writer's reply to an operation on evicted rows (sent once it is committed).
    pub(super) async fn replied<T>(&self, rx: oneshot::Receiver<T>) -> Result<T> {
        match rx.await {
            Ok(v) => Ok(v),
            Err(_) => Err(self
                .storage_failure()
                .unwrap_or_else(|| EngineError::StorageIo {
                    path: self
                        .storage()
                        .map(|s| s.path().display().to_string())
                        .unwrap_or_default(),
                    reason: "the writer stopped before answering".into(),
                })),
        }
    }
}

/// A page of a stored job's log rows and their total.
pub(super) fn stored_logs_page(job: Job, page: Page) -> (Vec<String>, usize) {
    let mut logs: Vec<String> = job
        .extra
        .map(|e| e.logs.into_iter().map(Into::into).collect())
        .unwrap_or_default();
    if !page.asc {
        logs.reverse();
    }
    let total = logs.len();
    let rows = match page_bounds(total, page.start, page.end) {
        Some((a, b)) => logs.drain(a..=b).collect(),
        None => Vec::new(),
    };
    (rows, total)
}

/// Splits a JSON array of records produced by the engine into the records' texts. A text that
/// does not parse is a bug of ours, reported as such rather than as an empty page.
fn split_records(text: &str) -> Result<Vec<String>> {
    let values = serde_json::from_str::<Vec<Box<serde_json::value::RawValue>>>(text)
        .map_err(|e| EngineError::Internal(format!("a page of job records is not JSON: {e}")))?;
    Ok(values.into_iter().map(|v| v.get().to_string()).collect())
}
