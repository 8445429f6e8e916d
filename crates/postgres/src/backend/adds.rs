//! Coalesced adds: the adds a process makes to one queue while a statement of that queue is in
//! flight wait and go together in the next one, so a producer that adds one job at a time with
//! many in flight pays one round trip and one commit per batch, not per job. Adds are queued in
//! call order (synchronously, on the caller's thread), so ids follow the order of the calls.

use std::collections::HashMap;
use std::sync::Arc;

use ferroqueue_engine::{Added, EngineError, NewJob, Result};
use parking_lot::Mutex;
use tokio::sync::oneshot;

use super::{work, Shared};

/// Most jobs one coalesced statement takes (a larger wait goes in the next one).
const MOST: usize = 10_000;

type Answer = oneshot::Sender<Result<Vec<Added>>>;

/// Adds waiting for their statement, per queue.
#[derive(Default)]
pub(super) struct Waiting {
    calls: Vec<(Vec<NewJob>, Answer)>,
}

/// The waiting adds of every queue.
pub(super) type Adds = Mutex<HashMap<Arc<str>, Waiting>>;

/// Queues the add of `jobs`; answers the receiver of its result and whether the caller must
/// start the queue's flusher (none runs).
pub(super) fn enqueue(
    s: &Shared,
    queue: &Arc<str>,
    jobs: Vec<NewJob>,
) -> (oneshot::Receiver<Result<Vec<Added>>>, bool) {
    let (tx, rx) = oneshot::channel();
    let mut adds = s.adds.lock();
    let start = !adds.contains_key(queue);
    adds.entry(queue.clone())
        .or_default()
        .calls
        .push((jobs, tx));
    (rx, start)
}

/// Writes the waiting adds of `queue`, a statement at a time, until none wait. Each statement
/// first waits for the subscriptions made before it (as every change does, see `Shared::gate`).
pub(super) async fn flush(s: Arc<Shared>, queue: Arc<str>) {
    loop {
        s.gate().await;
        let calls = {
            let mut adds = s.adds.lock();
            let Some(w) = adds.get_mut(&queue) else {
                return;
            };
            if w.calls.is_empty() {
                adds.remove(&queue);
                return;
            }
            let mut n = 0;
            let take = w
                .calls
                .iter()
                .take_while(|(jobs, _)| {
                    let fits = n == 0 || n + jobs.len() <= MOST;
                    n += jobs.len();
                    fits
                })
                .count();
            w.calls.drain(..take.max(1)).collect::<Vec<_>>()
        };
        let mut sizes = Vec::with_capacity(calls.len());
        let mut answers = Vec::with_capacity(calls.len());
        let mut jobs = Vec::new();
        for (j, tx) in calls {
            sizes.push(j.len());
            answers.push(tx);
            jobs.extend(j);
        }
        match work::add(&s, &queue, jobs).await {
            Ok(added) => {
                let mut it = added.into_iter();
                for (n, tx) in sizes.into_iter().zip(answers) {
                    let _ = tx.send(Ok(it.by_ref().take(n).collect()));
                }
            }
            Err(e) => {
                for tx in answers {
                    let _ = tx.send(Err(e.clone()));
                }
            }
        }
    }
}

/// The error of an add whose flusher went away (the backend closed under it).
pub(super) fn dropped() -> EngineError {
    EngineError::QueueClosed("(PostgreSQL backend: closed before the add was written)".into())
}
