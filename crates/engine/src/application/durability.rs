//! Durability of an engine: commit tickets, waits for commits and for room in the writer's
//! backlog (woken by commits, never polling), the commit notifier, storage failures.

use super::engine::{Engine, Inner};
use super::events::Notifier;
use crate::error::{EngineError, Result};
use crate::storage::Storage;

impl Engine {
    /// The commit ticket of the latest change this thread made on this engine (0 in memory).
    pub fn ticket(&self) -> u64 {
        super::tickets::latest(self.inner.serial)
    }

    /// Resolves once everything up to `seq` is committed; fails with the storage failure that
    /// stopped writes first, or `ERR_QUEUE_CLOSED` if the engine closed before. Woken by
    /// commits, never polling.
    pub async fn commit_of(&self, seq: u64) -> Result<()> {
        self.until_writer(|s| {
            if s.committed() >= seq {
                Some(Ok(()))
            } else if s.is_stopped() {
                Some(Err(EngineError::QueueClosed(
                    s.path().display().to_string(),
                )))
            } else {
                None
            }
        })
        .await
    }

    /// Whether the writer holds more than [`crate::storage::BACKLOG_LIMIT`] uncommitted
    /// operations (producers should wait with [`Engine::backlog_room`]).
    pub fn backlogged(&self) -> bool {
        self.inner
            .storage
            .as_ref()
            .is_some_and(|s| s.backlog() > crate::storage::BACKLOG_LIMIT)
    }

    /// Resolves once the writer's backlog is back within [`crate::storage::BACKLOG_LIMIT`]
    /// (or the writer stopped); fails with the storage failure that stopped writes. Woken by
    /// commits, never polling.
    pub async fn backlog_room(&self) -> Result<()> {
        self.until_writer(|s| {
            (s.backlog() <= crate::storage::BACKLOG_LIMIT || s.is_stopped()).then_some(Ok(()))
        })
        .await
    }

    /// Waits until `done` answers, testing it after each commit (and at once); a storage
    /// failure ends the wait first. In memory there is no writer: resolves at once.
    async fn until_writer(&self, done: impl Fn(&Storage) -> Option<Result<()>>) -> Result<()> {
        let Some(s) = &self.inner.storage else {
            return Ok(());
        };
        // Subscribed before the first test: a commit after it wakes the loop.
        let mut rx = self.inner.commits.subscribe();
        loop {
            if let Some(e) = s.failure() {
                return Err(e);
            }
            if let Some(r) = done(s) {
                return r;
            }
            if rx.changed().await.is_err() {
                return Err(EngineError::Internal("the engine went away".into()));
            }
        }
    }

    /// Test hook: the writer commits nothing more for `for_ms` (a stalled disk).
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn stall_writer(&self, for_ms: u64) {
        if let Some(s) = &self.inner.storage {
            s.stall(for_ms);
        }
    }

    /// Sequence number of the latest change handed to storage (0 in memory). A change is durable
    /// once [`Engine::committed`] reaches the sequence number read after making it.
    pub fn submitted(&self) -> u64 {
        self.inner.storage.as_ref().map_or(0, Storage::submitted)
    }

    /// Everything up to this sequence number is committed.
    pub fn committed(&self) -> u64 {
        self.inner.storage.as_ref().map_or(0, Storage::committed)
    }

    /// The storage failure that stopped writes, if any.
    pub fn storage_failure(&self) -> Option<EngineError> {
        self.inner.storage.as_ref().and_then(Storage::failure)
    }

    /// Makes every later commit fsync (durability `fsync`).
    pub fn require_fsync(&self) {
        if let Some(s) = &self.inner.storage {
            s.require_fsync();
        }
    }

    /// Sets the function called (on the writer thread, coalesced) after commits; the callee reads
    /// [`Engine::take_commit_notice`].
    pub fn set_commit_notifier(&self, n: Option<Notifier>) {
        self.inner.notice.set_notifier(n);
    }

    /// Re-arms the commit notifier and returns the committed sequence number (see
    /// `commit_notice.rs`).
    pub fn take_commit_notice(&self) -> u64 {
        self.inner.notice.take()
    }
}

impl Inner {
    /// Runs on the writer thread after each commit.
    pub(super) fn committed(&self, seq: u64) {
        match self.storage.as_ref().and_then(Storage::failure) {
            // Changes past the last good commit are not in the file: their events never go out.
            Some(_) => self.hub.discard_held(),
            None => self.hub.release(seq),
        }
        self.commits.send_replace(seq);
        // After a failure the committed number stays where it was; JS, rung, learns of the
        // failure from `storage_failure`.
        self.notice
            .publish(self.storage.as_ref().map_or(0, Storage::committed));
    }
}
