//! Reads and changes of evicted jobs (finished jobs of durable queues that only the file holds).
//! The reads are blocking (SQLite): the binding runs them off the JS thread, after waiting for
//! the commit of everything submitted before, so the file is as current as memory.

use tokio::sync::oneshot;

use super::engine::{Engine, QueueRef};
use crate::domain::job::{JobKey, JobState};
use crate::domain::persist::{JobRow, StorageOp};
use crate::domain::queue_read::{page_bounds, StateFilter};
use crate::domain::{row_json, row_logs};
use crate::error::{EngineError, Result};
use crate::storage::recovery::{finished_page, row_of, JOB_SELECT};
use crate::storage::Storage;

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

    /// Reads a stored job row. Blocking.
    pub fn disk_row(&self, q: &QueueRef, key: JobKey) -> Result<Option<JobRow>> {
        let name = q.name().to_string();
        self.storage()?.read(|c| {
            let mut stmt =
                c.prepare_cached(&format!("{JOB_SELECT} WHERE queue = ?1 AND key = ?2"))?;
            let mut rows = stmt.query(rusqlite::params![name, key as i64])?;
            let mut names = Default::default();
            match rows.next()? {
                Some(r) => Ok(Some(row_of(r, &mut names)?)),
                None => Ok(None),
            }
        })
    }

    /// The JSON record of a stored job. Blocking.
    pub fn disk_job_json(&self, q: &QueueRef, key: JobKey) -> Result<Option<String>> {
        Ok(self.disk_row(q, key)?.map(row_json))
    }

    /// A page of a stored job's logs and their total. Blocking.
    pub fn disk_logs(
        &self,
        q: &QueueRef,
        key: JobKey,
        start: i64,
        end: i64,
        asc: bool,
    ) -> Result<(Vec<String>, usize)> {
        let Some(row) = self.disk_row(q, key)? else {
            return Ok((Vec::new(), 0));
        };
        let mut logs: Vec<String> = row_logs(&row).into_iter().map(Into::into).collect();
        if !asc {
            logs.reverse();
        }
        let total = logs.len();
        let page = match page_bounds(total, start, end) {
            Some((a, b)) => logs[a..=b].to_vec(),
            None => Vec::new(),
        };
        Ok((page, total))
    }

    /// Like [`Engine::jobs_json`], but finished states are read from the file, where they are
    /// complete (memory holds only the newest). Blocking.
    pub fn jobs_json_with_disk(
        &self,
        q: &QueueRef,
        states: &[String],
        start: i64,
        end: i64,
        asc: bool,
    ) -> Result<String> {
        let filters = super::engine_ops::parse_states("types", states)?;
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
                            v.push(row_json(row_of(r, &mut names)?));
                        }
                        Ok(v)
                    })?
                }
                other => {
                    let text = self.jobs_json(
                        q,
                        &[state_name(*other).to_string()],
                        offset as i64,
                        (offset + count - 1) as i64,
                        asc,
                    )?;
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

    /// Brings an evicted job back into memory so it can be changed. Blocking.
    ///
    /// The row is read outside the shard lock, so a deletion of evicted rows could slip between
    /// the read and the revival and leave memory with a job the file no longer has. To exclude
    /// that: note the queue's deletion epoch, wait until everything submitted so far (every
    /// deletion queued before) is committed, read, and revive only if no deletion was queued
    /// meanwhile; else try again.
    pub fn revive(&self, q: &QueueRef, key: JobKey) -> Result<bool> {
        for _ in 0..64 {
            let epoch = self.read(q, |qs| qs.evicted_epoch()).unwrap_or(0);
            self.wait_committed(self.submitted())?;
            let Some(row) = self.disk_row(q, key)? else {
                return Ok(false);
            };
            let revived = self.with(q, |qs, _, _| {
                (qs.evicted_epoch() == epoch).then(|| qs.revive(row))
            });
            if let Some(done) = revived {
                return Ok(done);
            }
        }
        Err(EngineError::Internal(
            "reviving a job kept racing with deletions".into(),
        ))
    }

    /// Blocks until everything up to `seq` is committed (or storage failed). Blocking.
    pub fn wait_committed(&self, seq: u64) -> Result<()> {
        let start = std::time::Instant::now();
        loop {
            if let Some(e) = self.storage_failure() {
                return Err(e);
            }
            if self.committed() >= seq || self.is_closed() {
                return Ok(());
            }
            if start.elapsed() > std::time::Duration::from_secs(60) {
                return Err(EngineError::Internal(
                    "waited over a minute for a commit".into(),
                ));
            }
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
    }

    /// Deletes an evicted job; resolves whether it existed.
    pub async fn remove_evicted(&self, q: &QueueRef, key: JobKey) -> Result<bool> {
        let (tx, rx) = oneshot::channel();
        self.with(q, |qs, _, _| {
            qs.push_disk_op(StorageOp::DeleteEvicted {
                queue: qs.name.clone(),
                key,
                reply: Some(tx),
            })
        });
        self.deleted_ids(rx).await.map(|ids| !ids.is_empty())
    }

    /// `clean` of a finished state over disk and memory: evicted rows first (they are the
    /// oldest), then memory, at most `limit` (0: no limit) in all; resolves the removed ids.
    pub async fn clean_with_disk(
        &self,
        q: &QueueRef,
        grace: u64,
        limit: usize,
        state: &str,
    ) -> Result<Vec<String>> {
        let filter = super::engine_ops::parse_states("type", &[state.to_string()])?[0];
        let StateFilter::State(s @ (JobState::Completed | JobState::Failed)) = filter else {
            return self.clean(q, grace, limit, state);
        };
        if limit == 0 {
            // Disk and memory in one step: no job can move between them in between.
            let (tx, rx) = oneshot::channel();
            let mem = self.with(q, |qs, now, fx| {
                qs.push_disk_op(StorageOp::DropEvicted {
                    queue: qs.name.clone(),
                    state: s,
                    finished_before: now.saturating_sub(grace),
                    below_seq: qs.oldest_in_memory(s),
                    limit: 0,
                    reply: Some(tx),
                });
                qs.clean(grace, 0, filter, now, fx)
            });
            let mut ids = self.deleted_ids(rx).await?;
            ids.extend(mem);
            return Ok(ids);
        }
        let (tx, rx) = oneshot::channel();
        self.with(q, |qs, now, _| {
            qs.push_disk_op(StorageOp::DropEvicted {
                queue: qs.name.clone(),
                state: s,
                finished_before: now.saturating_sub(grace),
                below_seq: qs.oldest_in_memory(s),
                limit: limit as u64,
                reply: Some(tx),
            })
        });
        let mut ids = self.deleted_ids(rx).await?;
        let left = limit.saturating_sub(ids.len());
        if left > 0 {
            ids.extend(self.clean(q, grace, left, state)?);
        }
        Ok(ids)
    }

    async fn deleted_ids(&self, rx: oneshot::Receiver<Vec<String>>) -> Result<Vec<String>> {
        match rx.await {
            Ok(ids) => Ok(ids),
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

fn state_name(f: StateFilter) -> &'static str {
    match f {
        StateFilter::Paused => "paused",
        StateFilter::State(s) => s.as_str(),
    }
}

/// Splits a JSON array of records produced by the engine into the records' texts. A text that
/// does not parse is a bug of ours, reported as such rather than as an empty page.
fn split_records(text: &str) -> Result<Vec<String>> {
    let values = serde_json::from_str::<Vec<Box<serde_json::value::RawValue>>>(text)
        .map_err(|e| EngineError::Internal(format!("a page of job records is not JSON: {e}")))?;
    Ok(values.into_iter().map(|v| v.get().to_string()).collect())
}
