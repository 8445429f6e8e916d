//! The writer thread: owns the write connection and commits in groups. Every change submitted
//! while a transaction is being written joins the next one; each group is one transaction, and
//! everything in it becomes durable together. Submissions get increasing sequence numbers under
//! the same mutex that queues them, so "committed up to N" always means every submission <= N.
//! After each commit the `on_commit` hook runs with the committed sequence number.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rusqlite::Connection;

use super::apply::{apply, Applied, Deleted};
use super::handoff::Handoff;
use super::rows::StorageOp;
use crate::domain::metrics::{Histogram, COMMIT_BOUNDS_US};
use crate::error::EngineError;

/// The sequence number of operations dropped because the writer was closing: never committed.
pub const NEVER: u64 = u64::MAX;

/// Called on the writer thread after each commit with the committed sequence number and the
/// evicted rows the transaction deleted.
pub type OnCommit = Arc<dyn Fn(u64, Vec<Deleted>) + Send + Sync>;

pub(super) struct Shared {
    pending: Handoff<StorageOp>,
    committed: AtomicU64,
    /// Copy of `Pending::seq`, readable without the lock (the writer's short spin).
    submitted: AtomicU64,
    /// When the last submission came, in ns since `started`.
    submitted_at: AtomicU64,
    started: Instant,
    failure: Mutex<Option<EngineError>>,
    sync_full: AtomicBool,
    on_commit: Mutex<Option<OnCommit>>,
    /// What must live until the writer has finished (the file lock, when the writer closed
    /// itself): dropped after the final checkpoint.
    keep_until_exit: Mutex<Vec<Box<dyn Send>>>,
    /// The thread has finished: nothing submitted from now on is committed.
    stopped: AtomicBool,
    /// Operations submitted and not yet committed (or dropped after a failure): the memory the
    /// writer holds on to, bounded by back-pressure (see [`Writer::backlog`]).
    backlog: AtomicUsize,
    /// How long each commit took, µs (a transaction's statements and its COMMIT).
    commit_us: Mutex<Histogram>,
    /// Test hook: the writer waits until then before its next commit (a stalled disk).
    #[cfg(any(test, feature = "test-hooks"))]
    stall_until: Mutex<Option<Instant>>,
}

/// Handle on the writer thread.
pub struct Writer {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Writer {
    /// Starts the writer on `conn`.
    pub fn start(conn: Connection, path: PathBuf, sync_full: bool) -> std::io::Result<Writer> {
        let shared = Arc::new(Shared {
            pending: Handoff::default(),
            committed: AtomicU64::new(0),
            submitted: AtomicU64::new(0),
            submitted_at: AtomicU64::new(0),
            started: Instant::now(),
            failure: Mutex::new(None),
            sync_full: AtomicBool::new(sync_full),
            on_commit: Mutex::new(None),
            keep_until_exit: Mutex::new(Vec::new()),
            stopped: AtomicBool::new(false),
            backlog: AtomicUsize::new(0),
            commit_us: Mutex::new(Histogram::new(COMMIT_BOUNDS_US)),
            #[cfg(any(test, feature = "test-hooks"))]
            stall_until: Mutex::new(None),
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("ferroqueue-writer".into())
            .spawn(move || run(s, conn, path, sync_full))?;
        Ok(Writer {
            shared,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Sets the hook run after each commit.
    pub fn set_on_commit(&self, f: OnCommit) {
        *self.shared.on_commit.lock() = Some(f);
    }

    /// Queues operations for the next group; returns their sequence number (the current one when
    /// `ops` is empty). Operations submitted after [`Writer::close`] are dropped and get
    /// [`NEVER`]: whoever waits for their commit learns that the engine closed instead.
    pub fn submit(&self, ops: &mut Vec<StorageOp>) -> u64 {
        let had_ops = !ops.is_empty();
        let shared = &self.shared;
        let seq = shared.pending.submit(ops, |count, seq| {
            shared.backlog.fetch_add(count, Ordering::AcqRel);
            shared.submitted.store(seq, Ordering::Release);
            let at = shared.started.elapsed().as_nanos() as u64;
            shared.submitted_at.store(at, Ordering::Relaxed);
        });
        match seq {
            Some(s) => s,
            // After close nothing more is written (see `Handoff::submit`).
            None if had_ops => NEVER,
            None => shared.pending.seq(),
        }
    }

    /// Sequence number of the last submission.
    pub fn submitted(&self) -> u64 {
        self.shared.pending.seq()
    }

    /// Sequence number up to which everything is committed.
    pub fn committed(&self) -> u64 {
        self.shared.committed.load(Ordering::SeqCst)
    }

    /// The first write failure, if any. After one, nothing more is written.
    pub fn failure(&self) -> Option<EngineError> {
        self.shared.failure.lock().clone()
    }

    /// Switches to `synchronous=FULL` (every commit fsynced) from the next group on.
    pub fn require_fsync(&self) {
        self.shared.sync_full.store(true, Ordering::Release);
    }

    /// How long commits took so far, µs.
    pub fn commit_latency(&self) -> Histogram {
        self.shared.commit_us.lock().clone()
    }

    /// Operations submitted and not yet committed. Callers hold producers back when it passes
    /// [`crate::storage::BACKLOG_LIMIT`].
    pub fn backlog(&self) -> usize {
        self.shared.backlog.load(Ordering::Acquire)
    }

    /// Test hook: the writer commits nothing more for `for_ms` (as if the disk stalled).
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn stall(&self, for_ms: u64) {
        *self.shared.stall_until.lock() =
            Some(Instant::now() + std::time::Duration::from_millis(for_ms));
    }

    /// Whether the thread has finished (after [`Writer::close`]).
    pub fn is_stopped(&self) -> bool {
        self.shared.stopped.load(Ordering::Acquire)
    }

    /// Commits what is queued, checkpoints the WAL into the database and stops the thread.
    /// Later submissions are dropped. `keep` lives until all that is done (the file lock).
    ///
    /// Called on the writer thread itself (the commit hook held the last handle on the engine,
    /// whose teardown ends here), it cannot wait for itself: the writer finishes the same way
    /// once the hook returns, and drops `keep` last.
    pub fn close(&self, keep: Option<Box<dyn Send>>) {
        self.shared.pending.close();
        // The guard is held through the join: a second caller waits until the first is done.
        let mut thread = self.thread.lock();
        let on_writer = thread
            .as_ref()
            .is_some_and(|t| t.thread().id() == std::thread::current().id());
        if on_writer {
            self.shared.keep_until_exit.lock().extend(keep);
            return;
        }
        if let Some(t) = thread.take() {
            let _ = t.join();
        }
        drop(keep);
    }
}

fn run(shared: Arc<Shared>, conn: Connection, path: PathBuf, mut sync_full: bool) {
    let shown = path.display().to_string();
    let mut taken = 0;
    let mut spin = false;
    // On a single CPU a spinning writer would only hold off the thread it is waiting for.
    let may_spin = std::thread::available_parallelism().is_ok_and(|n| n.get() > 1);
    loop {
        let idle_from = Instant::now();
        if spin {
            spin_for_work(&shared, taken, idle_from);
        }
        let taken_now = shared.pending.take();
        let (ops, seq, closing) = (taken_now.items, taken_now.seq, taken_now.closing);
        taken = seq;
        let count = ops.len();
        #[cfg(any(test, feature = "test-hooks"))]
        {
            let until = shared.stall_until.lock().take();
            if let Some(t) = until {
                std::thread::sleep(t.saturating_duration_since(Instant::now()));
            }
        }
        // Spin next time if this submission came soon after the writer went idle.
        let idle_ns = idle_from.duration_since(shared.started).as_nanos() as u64;
        let gap = shared
            .submitted_at
            .load(Ordering::Relaxed)
            .saturating_sub(idle_ns);
        spin = may_spin && gap < SPIN.as_nanos() as u64;
        let mut applied = Applied::default();
        if !ops.is_empty() && shared.failure.lock().is_none() {
            let want_full = shared.sync_full.load(Ordering::Acquire);
            let mut result = Ok(());
            if want_full != sync_full {
                // A durability promised (`'fsync'`) but not in force would be a silent loss:
                // a failed switch stops the writes like a failed commit.
                let level = if want_full { "FULL" } else { "NORMAL" };
                result = conn.pragma_update(None, "synchronous", level);
                sync_full = want_full && result.is_ok();
            }
            let began = Instant::now();
            let result = result.and_then(|()| commit(&conn, ops));
            let took = began.elapsed().as_micros().min(u128::from(u64::MAX)) as u64;
            shared.commit_us.lock().observe(took);
            match result {
                Ok(a) => applied = a,
                Err(e) => {
                    *shared.failure.lock() = Some(EngineError::StorageIo {
                        path: shown.clone(),
                        reason: e.to_string(),
                    })
                }
            }
        }
        // After a failure nothing counts as committed any more: waiters learn of the failure
        // through `failure()` when the hook wakes them.
        if shared.failure.lock().is_none() {
            shared.committed.store(seq, Ordering::SeqCst);
        }
        shared.backlog.fetch_sub(count, Ordering::AcqRel);
        let hook = shared.on_commit.lock().clone();
        if let Some(f) = hook {
            f(seq, applied.deleted);
        }
        for (tx, ids) in applied.replies {
            let _ = tx.send(ids);
        }
        for (tx, row) in applied.revived {
            let _ = tx.send(row.map(super::restore::job_of));
        }
        if closing && shared.pending.is_empty() {
            break;
        }
    }
    let _ = conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);");
    drop(conn);
    shared.stopped.store(true, Ordering::Release);
    shared.keep_until_exit.lock().clear();
}

/// How long the writer waits busily for the next submission before it sleeps, when the last one
/// came within that time. A caller that awaits each commit (an `await queue.add()` loop) sends
/// its next change some 20–40 µs after the previous commit; sleeping in between costs a thread
/// wake-up on each side, which on this VM is most of a 60–100 µs round trip. The writer spins
/// only when the previous submission came within this time after it went idle, so an idle or
/// slow queue does not burn CPU, and never on a single CPU.
const SPIN: Duration = Duration::from_micros(100);

fn spin_for_work(shared: &Shared, taken: u64, from: Instant) {
    while shared.submitted.load(Ordering::Acquire) == taken && from.elapsed() < SPIN {
        std::hint::spin_loop();
    }
}

fn commit(conn: &Connection, ops: Vec<StorageOp>) -> rusqlite::Result<Applied> {
    conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
    match apply(conn, ops) {
        Ok(a) => conn.prepare_cached("COMMIT")?.execute([]).map(|_| a),
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            Err(e)
        }
    }
}
