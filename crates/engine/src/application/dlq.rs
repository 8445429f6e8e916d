//! The DLQ's operations (`domain/dlq.rs`) over any [`Backend`]: each is built from calls every
//! backend has (its failed jobs as records, `clean`, a job's retry) and the queue's stored
//! settings, so memory, SQLite and PostgreSQL behave alike. The [`DlqKeeper`] runs the spec's
//! maintenance (expiry, `maxEntries`, automatic retries) for the queues a process opened, at the
//! instants they fall due and at least once a minute.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::backend::{Backend, JobChange, Page, QueueRef};
use crate::clock::Clock;
use crate::domain::dlq::DlqConfig;
use crate::domain::dlq_view::{self, DlqFilter, Entry};
use crate::domain::job::JobState;
use crate::domain::listing::StateFilter;
use crate::error::{EngineError, Result};

/// The longest the keeper waits between two passes over a queue (the spec's 60 s).
pub const KEEPER_PERIOD: u64 = 60_000;

const FAILED: StateFilter = StateFilter::State(JobState::Failed);

/// Every entry of the queue's DLQ, newest first.
async fn all_entries(b: &dyn Backend, q: &QueueRef, config: &DlqConfig) -> Result<Vec<Entry>> {
    let page = Page {
        start: 0,
        end: -1,
        asc: false,
    };
    let records = b.jobs(q, vec![FAILED], page).wait().await?;
    dlq_view::entries_of(&records, config)
}

/// `getDlq(filter)`: the selected entries as a JSON array.
pub async fn entries(
    b: &dyn Backend,
    q: &QueueRef,
    filter: &DlqFilter,
    now: u64,
) -> Result<String> {
    let config = b.dlq_config(q).wait().await?;
    let all = all_entries(b, q, &config).await?;
    Ok(dlq_view::entries_json(&dlq_view::select(&all, filter, now)))
}

/// `getDlqStats()` as JSON.
pub async fn stats(b: &dyn Backend, q: &QueueRef) -> Result<String> {
    let config = b.dlq_config(q).wait().await?;
    Ok(dlq_view::stats_json(&all_entries(b, q, &config).await?))
}

/// Retries the entries `filter` selects, each with its attempts counted again from 0; answers
/// how many went back. An entry that left the DLQ meanwhile is skipped.
pub async fn retry(b: &dyn Backend, q: &QueueRef, filter: &DlqFilter, now: u64) -> Result<usize> {
    let config = b.dlq_config(q).wait().await?;
    let all = all_entries(b, q, &config).await?;
    let ids: Vec<String> = dlq_view::select(&all, filter, now)
        .into_iter()
        .map(|e| e.id.clone())
        .collect();
    retry_ids(b, q, &ids).await
}

async fn retry_ids(b: &dyn Backend, q: &QueueRef, ids: &[String]) -> Result<usize> {
    let mut n = 0;
    for id in ids {
        let change = JobChange::Retry {
            from: JobState::Failed,
            reset_attempts: true,
        };
        match b.change(q, id, change).wait().await {
            Ok(_) => n += 1,
            Err(EngineError::JobNotFound(_) | EngineError::InvalidState { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// `purgeDlq()`: removes every entry that entered before the call; answers how many.
pub async fn purge(b: &dyn Backend, q: &QueueRef) -> Result<usize> {
    // `clean` takes what finished before its own `now`: a millisecond later, that is every
    // entry that entered before this call.
    tokio::time::sleep(Duration::from_millis(2)).await;
    Ok(b.clean(q, 0, 0, FAILED).wait().await?.len())
}

/// `removeDlqJob(id)`: removes job `id` if it is failed; answers whether it was.
pub async fn remove(b: &dyn Backend, q: &QueueRef, id: &str) -> Result<bool> {
    if b.state(q, id).wait().await? != Some(JobState::Failed) {
        return Ok(false);
    }
    b.remove(q, id).wait().await
}

/// `setDlqConfig(change)`: applies the fields given to the stored settings; answers the result.
pub async fn set_config(b: &dyn Backend, q: &QueueRef, change: &str) -> Result<DlqConfig> {
    let config = b.dlq_config(q).wait().await?.merged(change)?;
    b.set_dlq_config(q, config).wait().await?;
    Ok(config)
}

/// What one maintenance pass over a queue did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Upkeep {
    /// Entries removed past `maxAge`.
    pub expired: usize,
    /// Oldest entries removed beyond `maxEntries`.
    pub evicted: usize,
    /// Entries retried automatically.
    pub retried: usize,
    /// When the next entry expires or falls due for a retry.
    pub next_due: Option<u64>,
    /// How soon after it enters an entry can expire or fall due (see [`DlqKeeper::failed`]).
    pub horizon: u64,
}

/// One maintenance pass over a queue at `now` (spec: expiry, `maxEntries`, automatic retries).
pub async fn maintain(b: &dyn Backend, q: &QueueRef, now: u64) -> Result<Upkeep> {
    let config = b.dlq_config(q).wait().await?;
    let retry_first = config.auto_retry.then_some(config.auto_retry_interval);
    let mut up = Upkeep {
        horizon: retry_first.map_or(config.max_age, |r| r.min(config.max_age)),
        ..Upkeep::default()
    };
    // Most queues have no failed job: one count, and nothing else to do.
    let total = b.counts(q, vec![FAILED]).wait().await?.first().copied();
    if total.unwrap_or(0) == 0 {
        return Ok(up);
    }
    up.expired = b.clean(q, config.max_age, 0, FAILED).wait().await?.len();
    let total = total.unwrap_or(0).saturating_sub(up.expired);
    let over = (total as u64).saturating_sub(config.max_entries);
    if over > 0 {
        let limit = usize::try_from(over).unwrap_or(usize::MAX);
        // Grace 1 ms: every entry but those failing this very millisecond.
        up.evicted = b.clean(q, 1, limit, FAILED).wait().await?.len();
    }
    if config.auto_retry {
        let all = all_entries(b, q, &config).await?;
        let (due, next) = dlq_view::due_retries(&all, now);
        up.retried = retry_ids(b, q, &due).await?;
        up.next_due = next;
    }
    let oldest = Page {
        start: 0,
        end: 0,
        asc: true,
    };
    let records = b.jobs(q, vec![FAILED], oldest).wait().await?;
    if let Some(e) = dlq_view::entries_of(&records, &config)?.first() {
        up.next_due = Some(up.next_due.map_or(e.expires_at, |n| n.min(e.expires_at)));
    }
    Ok(up)
}

/// A queue the keeper looks after: its backend, the queue and a key unique among them.
pub type Kept = (Arc<dyn Backend>, QueueRef, u32);

/// Runs [`maintain`] over the queues a process opened, each when it falls due.
pub struct DlqKeeper {
    clock: Arc<dyn Clock>,
    /// Each queue's next pass by key (absent: due now).
    due: Mutex<HashMap<u32, Due>>,
    wake: Notify,
}

/// When a queue's next pass is, and how soon after a failure one can be needed.
#[derive(Debug, Clone, Copy)]
struct Due {
    at: u64,
    /// The shortest of `maxAge` and, with automatic retries, their first interval.
    horizon: u64,
}

impl DlqKeeper {
    /// A keeper reading time from `clock`.
    pub fn new(clock: Arc<dyn Clock>) -> Arc<DlqKeeper> {
        Arc::new(DlqKeeper {
            clock,
            due: Mutex::new(HashMap::new()),
            wake: Notify::new(),
        })
    }

    /// Makes queue `key` due now (its settings changed) and wakes the keeper.
    pub fn nudge(&self, key: u32) {
        self.due.lock().remove(&key);
        self.wake.notify_one();
    }

    /// Queue `key` has new entries: its next pass comes no later than the first can expire or
    /// fall due for a retry. O(1); wakes the keeper only when that moves its pass earlier (or
    /// the queue was never passed over: it is due now).
    pub fn failed(&self, key: u32) {
        let now = self.clock.now_ms();
        let mut due = self.due.lock();
        let earlier = match due.get_mut(&key) {
            Some(d) => {
                let by = now.saturating_add(d.horizon).saturating_add(1);
                let earlier = by < d.at;
                d.at = d.at.min(by);
                earlier
            }
            None => true,
        };
        drop(due);
        if earlier {
            self.wake.notify_one();
        }
    }

    /// One pass: maintains every queue of `queues` that is due; answers the earliest next due
    /// instant among them. A queue whose pass fails is tried again a period later.
    pub async fn pass(&self, queues: &[Kept]) -> u64 {
        let now = self.clock.now_ms();
        let mut earliest = now.saturating_add(KEEPER_PERIOD);
        for (b, q, key) in queues {
            if b.is_closed() {
                continue;
            }
            let due = self.due.lock().get(key).map_or(0, |d| d.at);
            let next = if due <= now {
                let later = now.saturating_add(KEEPER_PERIOD);
                let (at, horizon) = match maintain(b.as_ref(), q, now).await {
                    Ok(up) => (
                        up.next_due.map_or(later, |d| d.clamp(now + 1, later)),
                        up.horizon,
                    ),
                    Err(_) => (later, KEEPER_PERIOD),
                };
                self.due.lock().insert(*key, Due { at, horizon });
                at
            } else {
                due
            };
            earliest = earliest.min(next);
        }
        earliest
    }

    /// Passes for ever over the queues `queues` lists, sleeping between them until the next
    /// one falls due or [`DlqKeeper::nudge`] wakes it.
    pub async fn run(self: Arc<Self>, queues: impl Fn() -> Vec<Kept> + Send + 'static) {
        loop {
            let next = self.pass(&queues()).await;
            let wait = next.saturating_sub(self.clock.now_ms()).max(1);
            let _ = tokio::time::timeout(Duration::from_millis(wait), self.wake.notified()).await;
        }
    }
}
