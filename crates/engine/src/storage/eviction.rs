//! The eviction policy of a durable engine: how many finished jobs per state and queue stay in
//! memory (the newest; spec: bounded sets), the rest living only in the file. The domain keeps
//! the books of evicted jobs and offers the move (`domain/queue/evicted.rs`); this decides which
//! jobs move and when: after every engine call, once its changes were snapshotted.

use crate::domain::job::JobState;
use crate::domain::queue::QueueState;

/// Finished jobs kept in memory per state and queue by default.
pub const DEFAULT_FINISHED_IN_MEMORY: usize = 10_000;

/// Keeps at most `limit` completed and as many failed jobs of a queue in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Eviction {
    limit: usize,
}

impl Eviction {
    /// A bound of `limit` (at least 1) finished jobs per state.
    pub fn new(limit: usize) -> Eviction {
        Eviction {
            limit: limit.max(1),
        }
    }

    /// The bound.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Moves the oldest finished jobs beyond the bound out of memory (their rows stay).
    pub fn apply(&self, q: &mut QueueState) {
        if !q.persists() {
            return;
        }
        for state in [JobState::Completed, JobState::Failed] {
            let over = q.finished_in_memory(state).saturating_sub(self.limit);
            if over == 0 {
                continue;
            }
            for key in q.evictable(state, over) {
                q.evict(key);
            }
        }
    }
}
