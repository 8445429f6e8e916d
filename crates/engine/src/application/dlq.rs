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

use crate::backend::{Backend, Page, QueueRef};
use crate::clock::Clock;
use crate::domain::dlq::DlqConfig;
use crate::domain::dlq_view::{self, DlqFilter};
use crate::domain::job::JobState;
use crate::domain::listing::StateFilter;
use crate::error::Result;

/// The longest the keeper waits between two passes over a queue (the spec's 60 s).
pub const KEEPER_PERIOD: u64 = 60_000;

const FAILED: StateFilter = StateFilter::State(JobState::Failed);

/// Every failed job's record, newest first (a JSON array).
async fn failed_records(b: &dyn Backend, q: &QueueRef) -> Result<String> {
    let page = Page {
        start: 0,
        end: -1,
        asc: false,
    };
    b.jobs(q, vec![FAILED], page).wait().await
}

/// `getDlq(filter)`: the selected entries as a JSON array.
pub async fn entries(
    b: &dyn Backend,
    q: &QueueRef,
    filter: &DlqFilter,
    now: u64,
) -> Result<String> {
    let config = b.dlq_config(q).wait().await?;
    let records = failed_records(b, q).await?;
    let all = dlq_view::entries_of(&records, &config)?;
    Ok(dlq_view::entries_json(&dlq_view::select(&all, filter, now)))
}

/// `getDlqStats()` as JSON.
pub async fn stats(b: &dyn Backend, q: &QueueRef) -> Result<String> {
    let config = b.dlq_config(q).wait().await?;
    let records = failed_records(b, q).await?;
    Ok(dlq_view::stats_json(&dlq_view::entries_of(
        &records, &config,
    )?))
}

/// Retries the entries `filter` selects, each with its attempts counted again from 0; answers
/// how many went back. An entry that left the DLQ meanwhile is skipped.
pub async fn retry(b: &dyn Backend, q: &QueueRef, filter: &DlqFilter, now: u64) -> Result<usize> {
    let config = b.dlq_config(q).wait().await?;
    let records = failed_records(b, q).await?;
    let all = dlq_view::entries_of(&records, &config)?;
    let ids: Vec<String> = dlq_view::select(&all, filter, now)
        .into_iter()
        .map(|e| e.id.clone())
        .collect();
    if ids.is_empty() {
        return Ok(0);
    }
    b.retry_failed(q, ids).wait().await
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
    up.evicted = b.trim_dlq(q).wait().await?;
    if config.auto_retry {
        let records = failed_records(b, q).await?;
        let (due, next) = dlq_view::due_retries(&dlq_view::entries_of(&records, &config)?, now);
        if !due.is_empty() {
            up.retried = b.retry_failed(q, due).wait().await?;
        }
        up.next_due = next;
    }
    let oldest = Page {
        start: 0,
        end: 0,
        asc: true,
    };
    let records = b.jobs(q, vec![FAILED], oldest).wait().await?;
    if let Some(e) = dlq_view::entries_of(&records, &config)?.first() {
        // `clean` takes what finished strictly before `now - maxAge`.
        let gone = e.expires_at.saturating_add(1);
        up.next_due = Some(up.next_due.map_or(gone, |n| n.min(gone)));
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
    /// The shortest of `maxAge` and, with automatic retries, their first interval (as its last
    /// pass read them).
    horizon: u64,
    /// Nudged since its pass began: due again at once.
    nudged: bool,
    /// The last failure heard since its pass began: that pass may have counted before it.
    failed_at: Option<u64>,
}

impl Due {
    fn new() -> Due {
        Due {
            at: 0,
            horizon: KEEPER_PERIOD,
            nudged: false,
            failed_at: None,
        }
    }
}

/// The longest one queue's pass may take before the keeper moves on (a call that hangs must not
/// stop the others).
const PASS_LIMIT: Duration = Duration::from_secs(30);

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
        let mut due = self.due.lock();
        let d = due.entry(key).or_insert_with(Due::new);
        d.at = 0;
        d.nudged = true;
        drop(due);
        self.wake.notify_one();
    }

    /// Queue `key` has new entries: its next pass comes no later than the first can expire or
    /// fall due for a retry. O(1); wakes the keeper only when that moves its pass earlier (or
    /// the queue was never passed over: it is due now).
    pub fn failed(&self, key: u32) {
        let now = self.clock.now_ms();
        let mut due = self.due.lock();
        let fresh = !due.contains_key(&key);
        let d = due.entry(key).or_insert_with(Due::new);
        d.failed_at = Some(now);
        let by = now.saturating_add(d.horizon).saturating_add(1);
        let earlier = fresh || by < d.at;
        d.at = d.at.min(by);
        drop(due);
        if earlier {
            self.wake.notify_one();
        }
    }

    /// One pass: maintains every queue of `queues` that is due; answers the earliest next due
    /// instant among them. A queue whose pass fails (or takes longer than [`PASS_LIMIT`]) is
    /// tried again a period later; each runs as a task of its own, so a panic stays there.
    pub async fn pass(&self, queues: &[Kept]) -> u64 {
        let now = self.clock.now_ms();
        let mut earliest = now.saturating_add(KEEPER_PERIOD);
        for (b, q, key) in queues {
            if b.is_closed() {
                continue;
            }
            let due = {
                let mut all = self.due.lock();
                let d = all.entry(*key).or_insert_with(Due::new);
                if d.at <= now {
                    d.nudged = false;
                    d.failed_at = None;
                }
                d.at
            };
            if due > now {
                earliest = earliest.min(due);
                continue;
            }
            let later = now.saturating_add(KEEPER_PERIOD);
            let (b, q) = (b.clone(), q.clone());
            let task = tokio::spawn(async move { maintain(b.as_ref(), &q, now).await });
            let (at, horizon) = match tokio::time::timeout(PASS_LIMIT, task).await {
                Ok(Ok(Ok(up))) => (
                    up.next_due.map_or(later, |d| d.clamp(now + 1, later)),
                    up.horizon,
                ),
                _ => (later, KEEPER_PERIOD),
            };
            let mut all = self.due.lock();
            let d = all.entry(*key).or_insert_with(Due::new);
            d.horizon = horizon;
            d.at = if d.nudged {
                0
            } else if let Some(t) = d.failed_at {
                // A failure during the pass: its entry may be newer than what the pass read.
                at.min(t.saturating_add(horizon).saturating_add(1))
            } else {
                at
            };
            earliest = earliest.min(d.at);
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
