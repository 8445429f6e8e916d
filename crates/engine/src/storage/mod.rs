//! SQLite persistence of a durable engine: one file, one engine (`flock`), one writer thread
//! committing in groups, recovery at open. The domain states what changed; this layer decides
//! how it is written (`rows.rs`), reads it back (`restore.rs`, `recovery.rs`) and which finished
//! jobs live only in the file (`eviction.rs`). See `schema.rs` for the file format and pragmas.

mod apply;
mod coalesce;
pub mod eviction;
pub(crate) mod handoff;
pub mod read_only;
pub mod recovery;
pub mod restore;
pub mod rows;
pub mod schema;
pub mod writer;

#[cfg(test)]
mod backlog_tests;
#[cfg(test)]
mod coalesce_tests;
#[cfg(test)]
mod evicted_tests;
#[cfg(test)]
mod flow_tests;
#[cfg(test)]
mod processed_by_tests;
#[cfg(test)]
mod refusal_tests;
#[cfg(test)]
mod reopen_props;
#[cfg(test)]
mod scheduler_tests;
#[cfg(test)]
mod schema_tests;
#[cfg(test)]
mod tests;

use std::fs::File;
use std::path::{Path, PathBuf};

use parking_lot::Mutex;

use crate::domain::job::{JobKey, JobState};
use crate::error::{EngineError, Result};
pub use apply::Deleted;
pub use eviction::Eviction;
pub use recovery::Snapshot;
pub use rows::StorageOp;
pub use writer::OnCommit;
use writer::Writer;

/// Operations the writer may hold uncommitted before producers are held back: about 30 MB of
/// rows for small jobs, some 0.2–0.5 s of writing. A producer that outruns the disk (durability
/// `'buffered'` does not wait for commits) gets its answers only once the backlog is below this
/// again, instead of growing memory without limit.
pub const BACKLOG_LIMIT: usize = 100_000;

/// An open database: its lock, its writer.
pub struct Storage {
    path: PathBuf,
    lock: Mutex<Option<File>>,
    writer: Writer,
    eviction: Eviction,
    /// Read-only connection for reads of evicted jobs, opened on first use.
    reader: Mutex<Option<rusqlite::Connection>>,
}

impl Storage {
    /// Locks, opens (creating or migrating) and reads back the database at `path`.
    ///
    /// Errors: `ERR_STORAGE_LOCKED` when another engine holds the file, `ERR_STORAGE_FOREIGN`,
    /// `ERR_STORAGE_VERSION` or `ERR_STORAGE_CORRUPT` for files we must not touch,
    /// `ERR_STORAGE_IO` otherwise.
    /// Reads back only the finished jobs `eviction` keeps in memory; the engine applies it
    /// after every call ([`Storage::eviction`]).
    pub fn open(path: &Path, sync_full: bool, eviction: Eviction) -> Result<(Storage, Snapshot)> {
        let lock = schema::lock_file(path)?;
        let conn = schema::open(path, &lock, sync_full)?;
        let shown = path.display().to_string();
        let snapshot =
            recovery::load(&conn, eviction.limit()).map_err(|e| schema::classify(&shown, e))?;
        let writer = Writer::start(conn, path.to_path_buf(), sync_full).map_err(|e| {
            EngineError::StorageIo {
                path: shown,
                reason: format!("cannot start the writer thread: {e}"),
            }
        })?;
        Ok((
            Storage {
                path: path.to_path_buf(),
                lock: Mutex::new(Some(lock)),
                writer,
                eviction,
                reader: Mutex::new(None),
            },
            snapshot,
        ))
    }

    /// Which finished jobs stay in memory.
    pub fn eviction(&self) -> &Eviction {
        &self.eviction
    }

    /// The database path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Queues operations for the next group commit; returns their sequence number.
    pub fn submit(&self, ops: &mut Vec<StorageOp>) -> u64 {
        self.writer.submit(ops)
    }

    /// Sequence number of the last submission.
    pub fn submitted(&self) -> u64 {
        self.writer.submitted()
    }

    /// Everything up to this sequence number is committed.
    pub fn committed(&self) -> u64 {
        self.writer.committed()
    }

    /// How long the writer's commits took so far, µs.
    pub fn commit_latency(&self) -> crate::domain::metrics::Histogram {
        self.writer.commit_latency()
    }

    /// Operations submitted and not yet committed.
    pub fn backlog(&self) -> usize {
        self.writer.backlog()
    }

    /// Test hook: the writer commits nothing more for `for_ms`.
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn stall(&self, for_ms: u64) {
        self.writer.stall(for_ms);
    }

    /// Whether the writer has stopped (after [`Storage::close`]).
    pub fn is_stopped(&self) -> bool {
        self.writer.is_stopped()
    }

    /// The write failure, if one happened.
    pub fn failure(&self) -> Option<EngineError> {
        self.writer.failure()
    }

    /// Runs `f` after each commit (on the writer thread).
    pub fn set_on_commit(&self, f: OnCommit) {
        self.writer.set_on_commit(f);
    }

    /// Makes every later commit fsync (durability `fsync`).
    pub fn require_fsync(&self) {
        self.writer.require_fsync();
    }

    /// Runs a read on the read-only connection. Blocking: call it off the JS thread.
    pub fn read<R>(
        &self,
        f: impl FnOnce(&rusqlite::Connection) -> rusqlite::Result<R>,
    ) -> Result<R> {
        let shown = self.path.display().to_string();
        let mut guard = self.reader.lock();
        if guard.is_none() {
            *guard = Some(schema::open_reader(&self.path)?);
        }
        match guard.as_ref() {
            Some(conn) => f(conn).map_err(|e| schema::classify(&shown, e)),
            None => Err(EngineError::Internal("reader connection missing".into())),
        }
    }

    /// Keys of up to `limit` stored jobs of `queue` in finished `state` that finished before
    /// `before` (ms), oldest first. Blocking.
    pub fn finished_keys(
        &self,
        queue: &str,
        state: JobState,
        before: u64,
        limit: usize,
    ) -> Result<Vec<JobKey>> {
        self.read(|c| {
            // `state IN (4, 5)` lets SQLite use the partial index `jobs_finished`.
            let mut stmt = c.prepare_cached(
                "SELECT key FROM jobs WHERE queue = ?1 AND state IN (4, 5) AND state = ?2 \
                 AND finished_on < ?3 ORDER BY seq LIMIT ?4",
            )?;
            let before = before.min(i64::MAX as u64) as i64;
            let limit = limit.min(i64::MAX as usize) as i64;
            let rows = stmt.query_map(
                rusqlite::params![queue, apply::state_code(state), before, limit],
                |r| r.get::<_, i64>(0),
            )?;
            rows.map(|k| k.map(|k| k as JobKey)).collect()
        })
    }

    /// Flushes, checkpoints, stops the writer and releases the file lock (after the writer is
    /// done, even when called on the writer thread itself).
    pub fn close(&self) {
        self.reader.lock().take();
        let lock = self.lock.lock().take();
        self.writer
            .close(lock.map(|f| Box::new(f) as Box<dyn Send>));
    }
}
