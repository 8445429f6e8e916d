//! The commit notice: how the writer thread tells JS that commits happened, once per batch.
//!
//! The writer publishes the committed sequence number, then rings unless a ring is pending; JS,
//! called back, clears the pending flag, then reads the number. Both sides use `SeqCst`: the
//! writer's "store the number, then test the flag" and JS's "clear the flag, then read the
//! number" must not both miss, or a commit would go unreported and its waiters hang. The loom
//! model `commit_notice_reports_every_commit` (in `loom_models.rs`) checks exactly that.

use std::sync::Arc;

use super::events::Notifier;
use crate::sync::{AtomicBool, AtomicU64, Ordering, RwLock};

/// The committed number and its coalesced notification.
#[derive(Default)]
pub struct CommitNotice {
    committed: AtomicU64,
    scheduled: AtomicBool,
    notifier: RwLock<Option<Notifier>>,
}

impl CommitNotice {
    /// Sets (or clears) the function rung after commits, and rings it once.
    pub fn set_notifier(&self, n: Option<Notifier>) {
        *self.notifier.write() = n;
        self.scheduled.store(false, Ordering::SeqCst);
        self.ring();
    }

    /// The writer's side: everything up to `committed` is committed.
    pub fn publish(&self, committed: u64) {
        self.committed.store(committed, Ordering::SeqCst);
        self.ring();
    }

    /// JS's side, when rung: re-arms the notification, then reads the committed number.
    pub fn take(&self) -> u64 {
        self.scheduled.swap(false, Ordering::SeqCst);
        self.committed.load(Ordering::SeqCst)
    }

    /// Calls the notifier unless a call is pending (and only if one is set, so that a notifier
    /// set later is not left disarmed).
    fn ring(&self) {
        let notifier: Option<Arc<dyn Fn() + Send + Sync>> = self.notifier.read().clone();
        if let Some(n) = notifier {
            if !self.scheduled.swap(true, Ordering::SeqCst) {
                n();
            }
        }
    }
}
