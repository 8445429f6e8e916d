//! The hot path: adds, claims (take and the long-poll pull) and acks. Retries and retention are
//! decided here from each job's options, as the embedded engine decides them (`ack.rs` of the
//! domain), then written in one statement per kind of outcome.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use ferroqueue_engine::domain::dlq::AttemptEnd;
use ferroqueue_engine::domain::groups::GroupDefaults;
use ferroqueue_engine::domain::job::JobState;
use ferroqueue_engine::domain::job_scheduler::parse_slot_job_id;
use ferroqueue_engine::domain::limits::WorkerLimits;
use ferroqueue_engine::wire::push_record;
use ferroqueue_engine::{Ack, AckResult, Added, EngineError, KeepJobs, NewJob, Outcome, Result};

use super::{Held, Shared};
use crate::acks::{Completion, Failed, Failure};
use crate::jobs::{AddedRow, Claimed, NewRow, NOW_MS};
use crate::limits;
use crate::record::state_number;

/// A job to add as a row: a delay counts from the job's timestamp, as in the embedded engine
/// and BullMQ: the producer's clock says how much of it has passed, the database's clock when
/// it ends.
pub(super) fn row_of(j: NewJob, now: i64) -> NewRow {
    let due = (j.timestamp as i128 + j.opts.delay as i128 - now as i128)
        .clamp(i64::MIN as i128, i64::MAX as i128) as i64;
    NewRow {
        name: j.name,
        data: j.data.into(),
        opts: j.opts_json.map(String::from),
        priority: j.opts.priority as i32,
        delay: j.opts.delay.min(i64::MAX as u64) as i64,
        due_in: due,
        lifo: j.opts.lifo,
        timestamp: j.timestamp.min(i64::MAX as u64) as i64,
        group: j.opts.group().map(|g| g.id.to_string()),
        custom_id: j.opts.job_id.map(String::from),
    }
}

/// Adds jobs some of which have a deduplication id: all or none, in order, in one transaction
/// on the backend's own connection (`dedup.rs`).
pub(super) async fn add_deduplicated(
    s: &Shared,
    queue: &Arc<str>,
    jobs: Vec<NewJob>,
) -> Result<Vec<Added>> {
    let now = super::upkeep::now_ms();
    let delayed = jobs.iter().any(|j| j.opts.delay > 0);
    let rows: Vec<_> = jobs
        .into_iter()
        .map(|mut j| {
            let d = j.opts.take_deduplication();
            (row_of(j, now), d)
        })
        .collect();
    let c = s.pool.exclusive().await?;
    let out = crate::dedup::add(&c, s.target(), queue, &rows).await?;
    if delayed {
        s.upkeep.notify_one();
    }
    s.wake(queue);
    Ok(out)
}

/// Adds jobs, all or none; answers each, in order.
pub(super) async fn add(s: &Shared, queue: &Arc<str>, jobs: Vec<NewJob>) -> Result<Vec<Added>> {
    let now = super::upkeep::now_ms();
    let rows: Vec<NewRow> = jobs.into_iter().map(|j| row_of(j, now)).collect();
    let c = s.pool.get().await?;
    let got = c.jobs.add_bulk(&c.client, s.target(), queue, &rows).await?;
    let mut first_of: HashMap<&str, u64> = HashMap::new();
    let mut out = Vec::with_capacity(got.len());
    for (row, added) in rows.iter().zip(got) {
        out.push(match added {
            AddedRow::New(key) => {
                if let Some(id) = row.custom_id.as_deref() {
                    first_of.entry(id).or_insert(key as u64);
                }
                Added::New(key as u64)
            }
            AddedRow::Duplicate(Some(key)) => Added::Duplicate(key as u64),
            AddedRow::Duplicate(None) => {
                let earlier = row.custom_id.as_deref().and_then(|id| first_of.get(id));
                match earlier {
                    Some(&key) => Added::Duplicate(key),
                    None => {
                        return Err(EngineError::Internal("a duplicate without its job".into()))
                    }
                }
            }
        });
    }
    if rows.iter().any(|r| r.delay > 0) {
        s.upkeep.notify_one();
    }
    s.wake(queue);
    Ok(out)
}

/// Activates up to `max` ready jobs within the queue's limits (`limiter`: the worker's own):
/// a JSON array of records for a worker.
pub(super) async fn take(
    s: &Shared,
    queue: &Arc<str>,
    max: usize,
    worker: WorkerLimits,
) -> Result<String> {
    Ok(take_or_retry(s, queue, max, &worker).await?.0)
}

/// [`take`], and when a limit held ready jobs back, how long until waiting lets them start.
async fn take_or_retry(
    s: &Shared,
    queue: &Arc<str>,
    max: usize,
    worker: &WorkerLimits,
) -> Result<(String, Option<Duration>)> {
    let limiter = worker.rate;
    let mut out = String::from("[");
    let mut retry = None;
    if max > 0 {
        let c = s.pool.get().await?;
        let t = s.target();
        let lease_ms = s.lease_of(worker.holder);
        let mut claimed = Vec::new();
        let mut held_back = false;
        let mut within =
            limiter.is_some() || worker.group != GroupDefaults::default() || s.is_limited(queue);
        if !within {
            let max = max.min(10_000) as i64;
            claimed = c.jobs.claim(&c.client, t, queue, max, lease_ms).await?;
            // Nothing for a plain claim: maybe the queue has limits (set by any process).
            if claimed.is_empty() && limits::has_limits(&c, t, queue).await? {
                s.set_limited(queue, Some(true));
                within = true;
            }
        }
        if within {
            drop(c);
            let c = s.pool.exclusive().await?;
            let w = limits::claim_within(&c, t, queue, max, lease_ms, worker).await?;
            s.set_limited(queue, w.limited.then_some(w.capped));
            claimed = w.claimed;
            retry = w.retry;
            held_back = w.held_back;
        }
        {
            let mut h = s.held_back.lock();
            if held_back {
                h.insert(queue.clone());
            } else if !h.is_empty() {
                h.remove(queue);
            }
        }
        if let (Some(name), false) = (&worker.name, claimed.is_empty()) {
            stamp_processed_by(s, queue, name, &mut claimed).await;
        }
        {
            let mut held = s.held.lock();
            for j in &claimed {
                held.insert(
                    j.token,
                    Held {
                        queue: queue.clone(),
                        key: j.key,
                        attempts_made: j.job.attempts_made,
                        policy: j.job.policy().cloned(),
                        link: j
                            .job
                            .parent()
                            .map(|p| (p.clone(), j.job.id_string().into())),
                        holder: worker.holder,
                        custom_id: j.job.custom_id().map(Into::into),
                        acking: false,
                        processed_on: j.job.processed_on,
                    },
                );
                push_record(&*s.wire, &j.job, true, &mut out);
            }
        }
        // Jobs of schedulers that just started: their schedulers' next jobs.
        let slots: Vec<(String, u64)> = claimed
            .iter()
            .filter_map(|j| parse_slot_job_id(j.job.custom_id()?))
            .map(|(id, slot)| (id.to_string(), slot))
            .collect();
        if !slots.is_empty() {
            super::schedulers::started(s, queue, slots).await;
        }
    }
    out.push(']');
    Ok((out, retry))
}

/// Records `name` as the `processedBy` of jobs just claimed by a Worker with a name, in the
/// records handed to it and in the rows: one statement more per claim, for named Workers only.
/// The claim stands if that statement fails (the jobs are taken; only the label is not stored).
async fn stamp_processed_by(s: &Shared, queue: &str, name: &Arc<str>, claimed: &mut [Claimed]) {
    for j in claimed.iter_mut() {
        j.job.extra_mut().processed_by = Some(name.clone());
    }
    let t = s.target();
    let sql = format!(
        "UPDATE {}.jobs SET processed_by = $2 WHERE queue = $1 AND token = ANY($3)",
        t.schema()
    );
    let tokens: Vec<i64> = claimed.iter().map(|j| j.token).collect();
    let stored = crate::text::store(name);
    if let Ok(c) = s.pool.get().await {
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 3] =
            [&queue, &stored.as_ref(), &tokens];
        let _ = c.query(t, "cannot record processedBy", &sql, &params).await;
    }
}

/// Like [`take`], waiting up to `timeout` for jobs (woken by hints, or when a token comes or a
/// hold ends: never polling); empty on timeout, cancellation or close.
pub(super) async fn pull(
    s: &Shared,
    queue: &Arc<str>,
    puller: u32,
    max: usize,
    worker: WorkerLimits,
    timeout: Duration,
) -> Result<String> {
    let cancel = s.cancel_of(queue, puller);
    if cancel.armed.swap(false, Ordering::AcqRel) {
        return Ok("[]".into());
    }
    let ready = s.ready_of(queue);
    let end = tokio::time::Instant::now() + timeout;
    let cancelled = cancel.notify.notified();
    tokio::pin!(cancelled);
    cancelled.as_mut().enable();
    loop {
        // Registered before the claim: a hint that arrives while it runs is not lost.
        let woken = ready.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        let (got, retry) = take_or_retry(s, queue, max, &worker).await?;
        if got.len() > 2 || s.closed.load(Ordering::Acquire) {
            return Ok(got);
        }
        let again = retry
            .and_then(|d| tokio::time::Instant::now().checked_add(d))
            .map_or(end, |at| at.min(end));
        tokio::select! {
            _ = &mut woken => {}
            _ = &mut cancelled => {
                cancel.armed.store(false, Ordering::Release);
                return Ok("[]".into());
            }
            _ = tokio::time::sleep_until(again) => {
                if again >= end {
                    return Ok("[]".into());
                }
            }
        }
    }
}

/// The retention rule of a finished job: its own, else the worker's.
fn rule(own: Option<KeepJobs>, worker: Option<KeepJobs>) -> Option<KeepJobs> {
    own.or(worker)
}

/// Whether a rule keeps the job that just finished (`true` and a count of 0 remove it).
fn keeps(rule: Option<KeepJobs>) -> bool {
    !matches!(
        rule,
        Some(KeepJobs::None) | Some(KeepJobs::Bounded { count: Some(0), .. })
    )
}

/// Finishes activations; results in input order.
pub(super) async fn ack(s: &Shared, queue: &Arc<str>, acks: Vec<Ack>) -> Result<Vec<AckResult>> {
    let mut results = vec![AckResult::Stale; acks.len()];
    let mut started_at = vec![0u64; acks.len()];
    let mut done: Vec<(usize, Completion)> = Vec::new();
    let mut failed: Vec<(usize, Failure, u64)> = Vec::new();
    let mut given: Vec<(usize, (i64, i64, bool))> = Vec::new();
    let mut steps: Vec<(usize, i64, i64, Outcome)> = Vec::new();
    let mut bounds: Vec<(JobState, KeepJobs)> = Vec::new();
    let mut links: HashMap<i64, super::flows::Link> = HashMap::new();
    {
        let mut held = s.held.lock();
        for (i, a) in acks.into_iter().enumerate() {
            let token = a.token.min(i64::MAX as u64) as i64;
            let Some(h) = held.get_mut(&token).filter(|h| &h.queue == queue) else {
                continue;
            };
            // A lease renewal that no longer finds this job does not report its lock lost.
            h.acking = true;
            let h = &*h;
            started_at[i] = h.processed_on;
            if let Some(l) = &h.link {
                links.insert(h.key, l.clone());
            }
            let policy = h.policy.as_ref();
            match a.outcome {
                Outcome::Completed(rv) => {
                    let r = rule(policy.and_then(|p| p.remove_on_complete), a.keep);
                    if let Some(b @ KeepJobs::Bounded { .. }) = r {
                        bounds.push((JobState::Completed, b));
                    }
                    done.push((
                        i,
                        Completion {
                            key: h.key,
                            token,
                            returnvalue: rv.into(),
                            keep: keeps(r),
                        },
                    ));
                }
                Outcome::Failed {
                    reason,
                    stack,
                    unrecoverable,
                    timed_out,
                    lost,
                    delay,
                } => {
                    let made = h.attempts_made + 1;
                    let attempts = policy.map_or(1, |p| p.attempts);
                    let exhausted = made >= attempts;
                    let retry = (!unrecoverable && !exhausted).then(|| {
                        delay.unwrap_or_else(|| {
                            let backoff = policy.and_then(|p| p.backoff);
                            backoff.map_or(0, |b| b.delay_with_jitter(made, s.unit()))
                        })
                    });
                    let r = rule(policy.and_then(|p| p.remove_on_fail), a.keep);
                    if let (None, Some(b @ KeepJobs::Bounded { .. })) = (retry, r) {
                        bounds.push((JobState::Failed, b));
                    }
                    failed.push((
                        i,
                        Failure {
                            key: h.key,
                            token,
                            reason: reason.into(),
                            stack: stack.map(String::from),
                            retry_in: retry.map(|d| d.min(i64::MAX as u64) as i64),
                            exhausted,
                            keep: keeps(r),
                            kind: AttemptEnd::of_failure(unrecoverable, timed_out, lost),
                        },
                        retry.unwrap_or(0),
                    ));
                }
                Outcome::Released { started } => given.push((i, (h.key, token, started))),
                step @ (Outcome::Delayed { .. } | Outcome::WaitingChildren) => {
                    steps.push((i, h.key, token, step))
                }
            }
        }
    }
    let t = s.target();
    let began = std::time::Instant::now();
    let completions: Vec<Completion> = done.iter().map(|d| d.1.clone()).collect();
    let failures: Vec<Failure> = failed.iter().map(|f| f.1.clone()).collect();
    let releases: Vec<(i64, i64, bool)> = given.iter().map(|g| g.1).collect();
    let written = async {
        if !links.is_empty() {
            // Flow children: their parents hear in the same transaction.
            let l = &links;
            return super::flows::ack_children(s, queue, &completions, &failures, &releases, l)
                .await;
        }
        let c = s.pool.get().await?;
        // One round trip for all three: tokio-postgres pipelines them on the connection.
        let (completed, fails, released) = tokio::join!(
            c.jobs.acks.complete(&c.client, t, queue, &completions),
            c.jobs.acks.fail(&c.client, t, queue, &failures),
            c.jobs.acks.release(&c.client, t, queue, &releases),
        );
        Ok::<_, EngineError>((completed?, fails?, released?))
    }
    .await;
    s.ack_us
        .lock()
        .observe(began.elapsed().as_micros().min(u128::from(u64::MAX)) as u64);
    // The activations are given up whatever the answer: after an error (a dropped connection,
    // a server restarted) the job stays active in the database until its lease expires and the
    // sweep gives it to another worker. Renewing it on would hold it active for ever.
    {
        let mut held = s.held.lock();
        for (_, d) in &done {
            held.remove(&d.token);
        }
        for (_, f, _) in &failed {
            held.remove(&f.token);
        }
        for (_, g) in &given {
            held.remove(&g.1);
        }
    }
    for (i, key, token, step) in steps {
        let r = match step {
            Outcome::Delayed { run_at } => {
                super::steps::delay(s, queue, key, token, run_at).await?
            }
            _ => super::flows::wait_for_children_step(s, queue, key, token).await?,
        };
        if matches!(
            r,
            AckResult::Delayed | AckResult::WaitingChildren | AckResult::Stale
        ) {
            s.held.lock().remove(&token);
        }
        results[i] = r;
    }
    // Sets: a batch of 500 must not cost 500 × 500 comparisons.
    let (completed, fails, released) = written?;
    let completed: HashSet<i64> = completed.into_iter().collect();
    let fails: HashSet<Failed> = fails.into_iter().collect();
    let released: HashSet<i64> = released.into_iter().collect();
    for (i, d) in &done {
        if completed.contains(&d.key) {
            results[*i] = AckResult::Completed;
        }
    }
    for (i, f, delay) in &failed {
        if fails.contains(&Failed::Retrying(f.key)) {
            results[*i] = AckResult::Retrying { delay: *delay };
        } else if fails.contains(&Failed::Final(f.key)) {
            results[*i] = AckResult::Failed;
        }
    }
    for (i, g) in &given {
        if released.contains(&g.0) {
            results[*i] = AckResult::Released;
        }
    }
    if !released.is_empty() || fails.iter().any(|f| matches!(f, Failed::Retrying(_))) {
        s.wake(queue);
    }
    if failed.iter().any(|f| f.2 > 0) {
        s.upkeep.notify_one();
    }
    // A job of a queue with a cap on active jobs left active: workers held back claim again.
    if s.is_capped(queue) && results.iter().any(|r| *r != AckResult::Stale) {
        let c = s.pool.get().await?;
        limits::slot_freed(&c, s.target(), queue).await?;
        s.wake(queue);
    }
    bounds.dedup();
    for (state, b) in bounds {
        trim(s, queue, state, b).await?;
    }
    if results.contains(&AckResult::Failed) {
        super::dlq::bound(s, queue).await?;
    }
    let finished: Vec<(bool, u64)> = results
        .iter()
        .zip(&started_at)
        .filter_map(|(r, at)| match r {
            AckResult::Completed => Some((true, *at)),
            AckResult::Failed => Some((false, *at)),
            _ => None,
        })
        .collect();
    if !finished.is_empty() {
        super::metrics::finished(s, queue, &finished);
    }
    Ok(results)
}

/// Applies a bounded retention rule (`removeOnComplete: { count, age }`) to a finished state.
async fn trim(s: &Shared, queue: &str, state: JobState, rule: KeepJobs) -> Result<()> {
    let KeepJobs::Bounded { count, age_secs } = rule else {
        return Ok(());
    };
    let sch = s.target().schema();
    let sql = format!(
        "WITH cut AS (
            SELECT seq FROM {sch}.finished WHERE queue = $1 AND state = $2
            ORDER BY seq DESC OFFSET $3 LIMIT 1
        ), gone AS (
            DELETE FROM {sch}.finished f
            WHERE f.queue = $1 AND f.state = $2
              AND (($3::int8 IS NOT NULL AND f.seq <= (SELECT seq FROM cut))
                   OR ($4::int8 IS NOT NULL AND f.finished_on < {NOW_MS} - $4::int8 * 1000))
            RETURNING f.custom_id
        ), ids AS (
            DELETE FROM {sch}.job_ids i USING gone
            WHERE i.queue = $1 AND i.custom_id = gone.custom_id
        )
        SELECT count(*) FROM gone"
    );
    let count = count.map(|n| n.min(i64::MAX as u64) as i64);
    let age = age_secs.map(|n| n.min(i64::MAX as u64 / 1000) as i64);
    let c = s.pool.get().await?;
    c.query(
        s.target(),
        "cannot apply the retention rule",
        &sql,
        &[&queue, &state_number(state), &count, &age],
    )
    .await?;
    Ok(())
}
