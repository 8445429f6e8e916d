//! The hand-off between threads that submit writes and the writer thread: one pending list under
//! a mutex, numbered as it grows, and a condition variable the writer sleeps on. Closing wakes
//! the writer, which takes what is left and stops; anything submitted after closing is dropped
//! (its reply senders with it, so nobody waits for an answer that will not come). The loom model
//! `handoff_loses_nothing_submitted_before_close` (in `loom_models.rs`) checks that every
//! accepted submission is taken exactly once, in order, and that the writer always stops.

use crate::sync::{Condvar, Mutex};

struct Pending<T> {
    items: Vec<T>,
    seq: u64,
    closing: bool,
}

/// Submissions waiting for the writer.
pub struct Handoff<T> {
    pending: Mutex<Pending<T>>,
    cv: Condvar,
}

impl<T> Default for Handoff<T> {
    fn default() -> Self {
        Handoff {
            pending: Mutex::new(Pending {
                items: Vec::new(),
                seq: 0,
                closing: false,
            }),
            cv: Condvar::new(),
        }
    }
}

/// What the writer takes in one go.
pub struct Taken<T> {
    pub items: Vec<T>,
    /// The number of the last submission among them: committing them commits up to it.
    pub seq: u64,
    /// Closing was asked: the writer stops once nothing is left.
    pub closing: bool,
}

impl<T> Handoff<T> {
    /// Queues `items` (emptying it) as one submission and wakes the writer; `queued(count, seq)`
    /// runs under the lock for the caller's bookkeeping. Returns the submission's number, or,
    /// when `items` is empty, the latest one. After [`Handoff::close`] the items are dropped
    /// and `None` is returned.
    pub fn submit(&self, items: &mut Vec<T>, queued: impl FnOnce(usize, u64)) -> Option<u64> {
        let mut p = self.pending.lock();
        if p.closing {
            items.clear();
            return None;
        }
        if !items.is_empty() {
            let count = items.len();
            p.items.append(items);
            p.seq += 1;
            queued(count, p.seq);
            self.cv.notify_one();
        }
        Some(p.seq)
    }

    /// The number of the latest submission.
    pub fn seq(&self) -> u64 {
        self.pending.lock().seq
    }

    /// The writer's side: waits until there is something to take or closing was asked, then
    /// takes everything pending.
    pub fn take(&self) -> Taken<T> {
        let mut p = self.pending.lock();
        while p.items.is_empty() && !p.closing {
            p = self.cv.wait(p);
        }
        Taken {
            items: std::mem::take(&mut p.items),
            seq: p.seq,
            closing: p.closing,
        }
    }

    /// Whether nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.pending.lock().items.is_empty()
    }

    /// Asks the writer to finish: later submissions are dropped.
    pub fn close(&self) {
        let mut p = self.pending.lock();
        p.closing = true;
        self.cv.notify_one();
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn submissions_are_numbered_taken_together_and_dropped_after_close() {
        let h = Handoff::default();
        let mut counted = Vec::new();
        assert_eq!(
            h.submit(&mut vec![1, 2], |n, s| counted.push((n, s))),
            Some(1)
        );
        assert_eq!(h.submit(&mut vec![], |_, _| unreachable!()), Some(1));
        assert_eq!(h.submit(&mut vec![3], |n, s| counted.push((n, s))), Some(2));
        assert_eq!(counted, vec![(2, 1), (1, 2)]);
        let t = h.take();
        assert_eq!((t.items, t.seq, t.closing), (vec![1, 2, 3], 2, false));
        h.close();
        let mut late = vec![4];
        assert_eq!(h.submit(&mut late, |_, _| unreachable!()), None);
        assert!(late.is_empty(), "dropped");
        let t = h.take();
        assert_eq!((t.items.len(), t.closing), (0, true));
        assert!(h.is_empty());
    }
}
