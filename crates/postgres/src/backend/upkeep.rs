//! Periodic work. One process at a time is elected for the work that needs doing once
//! (promoting due delayed jobs, sweeping expired leases, repairing job schedulers, trimming old
//! events): the holder of a
//! session advisory lock on a connection of its own. When that process dies its connection
//! closes, the lock goes with it, and another process takes it within a second. Each process
//! renews the leases of its own activations.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use ferroqueue_engine::domain::event::{Event, EventKind};
use ferroqueue_engine::domain::flow::{ChildEnd, OnChildFailure};
use ferroqueue_engine::structures::fnv1a;

use super::Shared;
use crate::connect::connect;
use crate::leases::Lease;
use ferroqueue_engine::domain::lease::{HolderInfo, LeaseTerms};

/// Jobs promoted or swept per statement.
const BATCH: i64 = 1_000;

/// Events older than this are trimmed (readers are live: a reader that falls this far behind
/// has lost its process).
const EVENTS_KEPT_MS: i64 = 5 * 60 * 1_000;

/// How many times a job may stall and still run again (BullMQ's `maxStalledCount` default).
const MAX_STALLED: i32 = ferroqueue_engine::domain::MAX_STALLED_COUNT as i32;

/// How often the leader sweeps expired leases.
const SWEEP_EVERY: Duration = Duration::from_secs(5);

/// The advisory lock of the elected process (distinct from the migration lock).
fn leader_key(schema: &str) -> i64 {
    i64::from(fnv1a(format!("ferroqueue-leader:{schema}").as_bytes()))
}

/// Runs until the backend closes: tries to become the elected process, then does its work.
pub(super) async fn run(s: Arc<Shared>) {
    while !s.closed.load(Ordering::Acquire) {
        if lead(&s).await.is_err() && !s.closed.load(Ordering::Acquire) {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
}

/// One term: connects, waits to hold the lock (trying every second), then works until the
/// connection fails or the backend closes.
async fn lead(s: &Shared) -> Result<(), ()> {
    s.pool.migrated().await.map_err(|_| ())?;
    let t = s.target();
    let lock = connect(t).await.map_err(|_| ())?;
    let key = leader_key(t.schema());
    loop {
        if s.closed.load(Ordering::Acquire) {
            return Ok(());
        }
        let row = lock
            .query_one("SELECT pg_try_advisory_lock($1)", &[&key])
            .await
            .map_err(|_| ())?;
        if row.get::<_, bool>(0) {
            break;
        }
        // Often: a process whose elected one just closed (a test's backend after the last
        // one's) takes over within a tenth of a second, not a second (delayed jobs wait for it).
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let next_due = format!(
        "SELECT {} FROM {}.jobs WHERE state = 2",
        crate::jobs::ms("min(run_at)"),
        t.schema()
    );
    let mut last_sweep = tokio::time::Instant::now() - SWEEP_EVERY;
    while !s.closed.load(Ordering::Acquire) {
        if lock.is_closed() {
            return Err(());
        }
        let c = s.pool.get().await.map_err(|_| ())?;
        loop {
            let promoted = c
                .jobs
                .promote_due(&c.client, t, BATCH)
                .await
                .map_err(|_| ())?;
            if (promoted.len() as i64) < BATCH {
                break;
            }
        }
        if last_sweep.elapsed() >= SWEEP_EVERY {
            last_sweep = tokio::time::Instant::now();
            sweep(s, &c, MAX_STALLED).await?;
            super::schedulers::repair(s).await.map_err(|_| ())?;
            c.events
                .trim(&c.client, t, EVENTS_KEPT_MS)
                .await
                .map_err(|_| ())?;
        }
        // Sleep until the earliest delayed job is due, at most `upkeep_every`; a new delayed
        // job anywhere wakes this early (the `_delayed` hint).
        let rows = c
            .query(t, "cannot read the next run time", &next_due, &[])
            .await
            .map_err(|_| ())?;
        let due: Option<i64> = rows.first().and_then(|r| r.get(0));
        let now = now_ms();
        let wait = match due {
            Some(at) => Duration::from_millis((at - now).clamp(1, i64::MAX) as u64),
            None => s.upkeep_every,
        }
        .min(s.upkeep_every);
        let _ = tokio::time::timeout(wait, s.upkeep.notified()).await;
    }
    Ok(())
}

/// Milliseconds since the epoch by this process's clock.
pub(super) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Sweeps expired leases (any process may: `SKIP LOCKED` shares the work), failing those
/// stalled more than `max_stalled` times; flow parents of failed children hear.
async fn sweep(s: &Shared, c: &crate::pool::Conn, max_stalled: i32) -> Result<(), ()> {
    loop {
        let swept = c
            .leases
            .sweep(&c.client, s.target(), BATCH, max_stalled)
            .await
            .map_err(|_| ())?;
        let full = swept.len() as i64 == BATCH;
        // Flow children failed for stalling too often: their parents hear.
        for st in swept.into_iter().filter(|st| st.failed) {
            if super::flows::may_have_parent(st.opts.as_deref()) {
                let gone = [(st.id.unwrap_or_default(), st.opts)];
                let reason = crate::leases::STALLED_TOO_OFTEN.into();
                let end = ChildEnd::Failed(reason, OnChildFailure::Wait);
                let _ = super::flows::ended(s, &st.queue, &gone, end).await;
            }
        }
        if !full {
            return Ok(());
        }
    }
}

/// Registers lease holder `holder` of this process (a Worker) with its terms.
pub(super) fn hold(
    s: &Shared,
    holder: u32,
    terms: LeaseTerms,
    who: Option<HolderInfo>,
) -> ferroqueue_engine::Result<()> {
    s.holders.lock().insert(holder, terms.checked()?);
    s.holders_changed.notify_waiters();
    if let Some(who) = who {
        s.workers.lock().insert(holder, who);
        s.workers_changed.notify_waiters();
    }
    Ok(())
}

/// The jobs of `queue` this process holds for `holder`, as `(id, token)`, oldest claim first.
pub(super) fn held(s: &Shared, queue: &str, holder: u32) -> Vec<(String, u64)> {
    let mut held: Vec<(String, u64)> = s
        .held
        .lock()
        .iter()
        .filter(|(_, h)| h.holder == holder && &*h.queue == queue)
        .map(|(token, h)| {
            let id = h
                .custom_id
                .as_deref()
                .map_or_else(|| h.key.to_string(), String::from);
            (id, *token as u64)
        })
        .collect();
    held.sort_by_key(|(_, token)| *token);
    held
}

/// Holder `holder` is gone: its leases are no longer renewed, and since this process knows it,
/// they end now (`expire`), not when they would run out.
pub(super) fn let_go(s: &Arc<Shared>, handle: &tokio::runtime::Handle, holder: u32) {
    if s.workers.lock().remove(&holder).is_some() {
        s.workers_changed.notify_waiters();
    }
    let Some(terms) = s.holders.lock().remove(&holder) else {
        return;
    };
    let mut tokens = Vec::new();
    s.held.lock().retain(|token, h| {
        let mine = h.holder == holder;
        if mine {
            tokens.push(*token);
        }
        !mine
    });
    s.holders_changed.notify_waiters();
    if !tokens.is_empty() {
        handle.spawn(expire(s.clone(), tokens, terms.max_stalled));
    }
}

/// Ends the leases `tokens` of a holder that is gone and sweeps them at once (failing those
/// stalled more than `max_stalled` times, its `maxStalledCount`).
pub(super) async fn expire(s: Arc<Shared>, tokens: Vec<i64>, max_stalled: u32) {
    let Ok(c) = s.pool.get().await else { return };
    let sql = format!(
        "UPDATE {}.jobs SET lease_until = clock_timestamp() - interval '1 millisecond'
         WHERE token = ANY($1) AND state = 3",
        s.target().schema()
    );
    if c.query(s.target(), "cannot end leases", &sql, &[&tokens])
        .await
        .is_ok()
    {
        let _ = sweep(&s, &c, i32::try_from(max_stalled).unwrap_or(i32::MAX)).await;
    }
}

/// The stalled checks this process's Workers ask for (BullMQ runs one per Worker): every
/// shortest `stalledInterval` of its holders that do not `skipStalledCheck`, failing jobs past
/// the largest `maxStalledCount` among them. The elected process sweeps too, every
/// [`SWEEP_EVERY`], so jobs of processes that are gone come back even where no Worker checks.
pub(super) async fn sweep_for_holders(s: Arc<Shared>) {
    while !s.closed.load(Ordering::Acquire) {
        let checks = {
            let h = s.holders.lock();
            h.values()
                .filter(|t| !t.skip_stalled_check)
                .fold(None, |acc: Option<(u32, u32)>, t| {
                    let (every, max) = acc.unwrap_or((u32::MAX, 0));
                    Some((every.min(t.stalled_interval_ms), max.max(t.max_stalled)))
                })
        };
        let changed = s.holders_changed.notified();
        let Some((every, max_stalled)) = checks else {
            changed.await;
            continue;
        };
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(u64::from(every))) => {}
            _ = changed => continue,
        }
        if let Ok(c) = s.pool.get().await {
            let max = i32::try_from(max_stalled).unwrap_or(i32::MAX);
            let _ = sweep(&s, &c, max).await;
        }
    }
}

/// Renews the leases of this process's activations, each to its holder's `lockDuration`, in one
/// statement, every shortest `lockRenewTime` of the live holders (a third of the backend's
/// lease without any).
pub(super) async fn renew(s: Arc<Shared>) {
    while !s.closed.load(Ordering::Acquire) {
        let every = {
            let h = s.holders.lock();
            h.values()
                .map(|t| i64::from(t.renew_ms))
                .min()
                .unwrap_or(s.lease_ms / 3)
        };
        let changed = s.holders_changed.notified();
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(every.max(10) as u64)) => {}
            _ = changed => continue,
        }
        let (leases, owners): (Vec<Lease>, Vec<u32>) = {
            let holders = s.holders.lock();
            let mut held = s.held.lock();
            // A claim answered after its holder was let go (a pull still in flight when its
            // thread died) is not renewed: its lease runs out and a sweep stalls the job.
            held.retain(|_, h| h.holder == 0 || holders.contains_key(&h.holder));
            held.iter()
                .map(|(token, h)| {
                    let lease = Lease {
                        queue: h.queue.to_string(),
                        key: h.key,
                        token: *token,
                        lease_ms: holders
                            .get(&h.holder)
                            .map_or(s.lease_ms, |t| i64::from(t.lock_ms)),
                    };
                    (lease, h.holder)
                })
                .unzip()
        };
        if leases.is_empty() {
            continue;
        }
        let Ok(c) = s.pool.get().await else { continue };
        if let Ok(kept) = c.leases.renew(&c.client, s.target(), &leases).await {
            drop(c);
            renewed(&s, &leases, &owners, kept);
        }
    }
}

/// A Worker's job ids in one queue: leases renewed, leases lost.
type RenewedAndLost = (Vec<String>, Vec<String>);

/// After a renewal that kept `kept` (queue, key) of `leases` (held for `owners`): the leases it
/// did not keep are lost (they expired and were swept: the jobs are no longer this process's),
/// unless their ack is in flight or done. Workers listening hear `locksRenewed` and
/// `lockRenewalFailed` with their own jobs' ids.
fn renewed(s: &Shared, leases: &[Lease], owners: &[u32], kept: Vec<(String, i64)>) {
    let kept: HashSet<(&str, i64)> = kept.iter().map(|(q, k)| (q.as_str(), *k)).collect();
    let listened = s.listeners.lock().clone();
    let mut by_worker: HashMap<(u32, &str), RenewedAndLost> = HashMap::new();
    {
        let mut held = s.held.lock();
        for (l, &owner) in leases.iter().zip(owners) {
            let Some(h) = held.get(&l.token) else {
                continue; // acked or let go meanwhile
            };
            let renewed = kept.contains(&(l.queue.as_str(), l.key));
            if !renewed && h.acking {
                continue;
            }
            if owner != 0 && listened.contains_key(l.queue.as_str()) {
                let id = h
                    .custom_id
                    .as_deref()
                    .map_or_else(|| l.key.to_string(), String::from);
                let lists = by_worker.entry((owner, &l.queue)).or_default();
                if renewed {
                    lists.0.push(id);
                } else {
                    lists.1.push(id);
                }
            }
            if !renewed {
                held.remove(&l.token);
            }
        }
    }
    let mut events = Vec::new();
    for ((holder, queue), (renewed, lost)) in by_worker {
        let queue: Arc<str> = Arc::from(queue);
        if !renewed.is_empty() {
            let kind = EventKind::LocksRenewed {
                holder,
                job_ids: renewed,
            };
            events.push(Event {
                queue: queue.clone(),
                kind,
            });
        }
        if !lost.is_empty() {
            let kind = EventKind::LockRenewalFailed {
                holder,
                job_ids: lost,
            };
            events.push(Event { queue, kind });
        }
    }
    if events.is_empty() {
        return;
    }
    s.events.lock().extend(events);
    let notify = s.notifier.lock().clone();
    if let Some(n) = notify {
        n();
    }
}
