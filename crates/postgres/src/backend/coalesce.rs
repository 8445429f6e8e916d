//! Coalesced calls: the adds (or acks) a process makes to one queue while a statement of that
//! kind is in flight for it wait, and go together in the next one. A producer that adds one job
//! at a time with many in flight, or a worker whose jobs finish one by one, then pays one round
//! trip and one commit per batch, not per call. Calls are queued in call order (synchronously,
//! on the caller's thread), so ids follow the order of the adds.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use ferroqueue_engine::{Ack, AckResult, Added, EngineError, NewJob, Result};
use parking_lot::Mutex;
use tokio::sync::oneshot;

use super::{work, Shared};

type Answer<R> = oneshot::Sender<Result<Vec<R>>>;

/// One call: its items and where its answer goes.
type Call<T, R> = (Vec<T>, Answer<R>);

/// The calls waiting, per queue.
type ByQueue<T, R> = HashMap<Arc<str>, Vec<Call<T, R>>>;

/// The waiting calls of every queue, for one kind of statement: items `T` in, one `R` out per
/// item, in order.
pub(super) struct Waiting<T, R> {
    queues: Mutex<ByQueue<T, R>>,
}

impl<T, R> Default for Waiting<T, R> {
    fn default() -> Self {
        Waiting {
            queues: Mutex::new(HashMap::new()),
        }
    }
}

/// Calls taken together for one statement.
pub(super) struct Batch<T, R> {
    pub items: Vec<T>,
    calls: Vec<(usize, Answer<R>)>,
}

impl<T, R> Waiting<T, R> {
    /// Queues a call of `items`; answers the receiver of its result and whether the caller must
    /// start the queue's flusher (none runs).
    pub fn enqueue(
        &self,
        queue: &Arc<str>,
        items: Vec<T>,
    ) -> (oneshot::Receiver<Result<Vec<R>>>, bool) {
        let (tx, rx) = oneshot::channel();
        let mut queues = self.queues.lock();
        let start = !queues.contains_key(queue);
        queues.entry(queue.clone()).or_default().push((items, tx));
        (rx, start)
    }

    /// The calls waiting for `queue`, up to `most` items (a first call larger than that goes
    /// alone); `None`, and the flusher ends, when none wait.
    pub fn next(&self, queue: &Arc<str>, most: usize) -> Option<Batch<T, R>> {
        let mut queues = self.queues.lock();
        let calls = queues.get_mut(queue)?;
        if calls.is_empty() {
            queues.remove(queue);
            return None;
        }
        let mut n = 0;
        let take = calls
            .iter()
            .take_while(|(items, _)| {
                let fits = n == 0 || n + items.len() <= most;
                n += items.len();
                fits
            })
            .count()
            .max(1);
        let mut batch = Batch {
            items: Vec::with_capacity(n),
            calls: Vec::with_capacity(take),
        };
        for (items, tx) in calls.drain(..take) {
            batch.calls.push((items.len(), tx));
            batch.items.extend(items);
        }
        Some(batch)
    }
}

impl<T, R> Batch<T, R> {
    /// Answers each call with its share of `result` (an error goes to every call).
    pub fn answer(self, result: Result<Vec<R>>) {
        match result {
            Ok(out) => {
                let mut it = out.into_iter();
                for (n, tx) in self.calls {
                    let _ = tx.send(Ok(it.by_ref().take(n).collect()));
                }
            }
            Err(e) => {
                for (_, tx) in self.calls {
                    let _ = tx.send(Err(e.clone()));
                }
            }
        }
    }
}

/// A kind of call that is coalesced: where its calls wait, how many items one statement takes
/// (a larger wait goes in the next one), and the statement.
pub(super) trait Coalesced: Sized + Send + 'static {
    type Out: Send + 'static;
    const MOST: usize;
    fn waiting(s: &Shared) -> &Waiting<Self, Self::Out>;
    fn write(
        s: &Shared,
        queue: &Arc<str>,
        items: Vec<Self>,
    ) -> impl Future<Output = Result<Vec<Self::Out>>> + Send;
}

impl Coalesced for NewJob {
    type Out = Added;
    const MOST: usize = 10_000;
    fn waiting(s: &Shared) -> &Waiting<Self, Added> {
        &s.adds
    }
    fn write(
        s: &Shared,
        queue: &Arc<str>,
        jobs: Vec<Self>,
    ) -> impl Future<Output = Result<Vec<Added>>> + Send {
        work::add(s, queue, jobs)
    }
}

impl Coalesced for Ack {
    type Out = AckResult;
    const MOST: usize = 5_000;
    fn waiting(s: &Shared) -> &Waiting<Self, AckResult> {
        &s.acks
    }
    fn write(
        s: &Shared,
        queue: &Arc<str>,
        acks: Vec<Self>,
    ) -> impl Future<Output = Result<Vec<AckResult>>> + Send {
        work::ack(s, queue, acks)
    }
}

/// Writes the waiting calls of `queue`, a statement at a time, until none wait. Each statement
/// first waits for the subscriptions made before it (as every change does, see `Shared::gate`).
pub(super) async fn flush<T: Coalesced>(s: Arc<Shared>, queue: Arc<str>) {
    loop {
        s.gate().await;
        let Some(mut batch) = T::waiting(&s).next(&queue, T::MOST) else {
            return;
        };
        let items = std::mem::take(&mut batch.items);
        batch.answer(T::write(&s, &queue, items).await);
    }
}

/// The error of a call whose flusher went away (the backend closed under it).
pub(super) fn dropped() -> EngineError {
    EngineError::QueueClosed("(PostgreSQL backend: closed before the call was written)".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(name: &str) -> Arc<str> {
        Arc::from(name)
    }

    #[test]
    fn calls_go_together_up_to_the_bound_and_each_gets_its_share() {
        let w: Waiting<u32, u32> = Waiting::default();
        let (a, start_a) = w.enqueue(&q("x"), vec![1, 2]);
        let (b, start_b) = w.enqueue(&q("x"), vec![3]);
        let (c, _) = w.enqueue(&q("x"), vec![4, 5, 6]);
        let (other, start_other) = w.enqueue(&q("y"), vec![9]);
        assert_eq!((start_a, start_b, start_other), (true, false, true));
        let first = w.next(&q("x"), 4).unwrap();
        assert_eq!(first.items, [1, 2, 3]);
        first.answer(Ok(vec![10, 20, 30]));
        let second = w.next(&q("x"), 4).unwrap();
        assert_eq!(second.items, [4, 5, 6]);
        second.answer(Err(EngineError::Internal("down".into())));
        assert!(w.next(&q("x"), 4).is_none());
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            assert_eq!(a.await.unwrap().unwrap(), [10, 20]);
            assert_eq!(b.await.unwrap().unwrap(), [30]);
            assert!(c.await.unwrap().is_err());
        });
        // The queue's flusher ended: the next call starts one again.
        let (_d, start_d) = w.enqueue(&q("x"), vec![7]);
        assert!(start_d);
        drop(other);
    }

    #[test]
    fn a_call_larger_than_the_bound_goes_alone() {
        let w: Waiting<u32, u32> = Waiting::default();
        let _a = w.enqueue(&q("x"), vec![0; 10]);
        let _b = w.enqueue(&q("x"), vec![1]);
        assert_eq!(w.next(&q("x"), 4).unwrap().items.len(), 10);
        assert_eq!(w.next(&q("x"), 4).unwrap().items, [1]);
    }
}
