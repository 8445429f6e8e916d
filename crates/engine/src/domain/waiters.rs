//! Long-poll waiters of one queue.
//!
//! An append-only entry array with a head cursor: waiters register at the tail; a notification
//! wakes the entry at the head and advances the cursor, skipping entries whose puller gave up
//! (timed out, so its receiver is gone) or was cancelled. Nothing is filtered or spliced per
//! notification. The consumed prefix is compacted once the head reaches 1,024 entries and at least
//! half the array is consumed. When a notification finds no live waiter, one coalesced
//! pending bit is set instead of counting credits: the next waiter to register is released at once
//! and retries its pull once, so surplus notifications never cause a run of empty pulls.
//!
//! Cancelling a puller is sticky: its pull may not have registered yet (the binding registers
//! from a runtime thread), so a cancelled puller id is remembered and its next registration
//! returns at once. Puller ids are single-use once cancelled; the last 4,096 are remembered.
//!
//! All methods run under the owning shard's lock, which is what makes "check for jobs, then
//! register" free of lost wake-ups.

use std::collections::VecDeque;

use tokio::sync::oneshot;

/// Head position from which the consumed prefix is compacted.
const COMPACT_AT: usize = 1_024;
/// Cancelled puller ids remembered for registrations that arrive late.
const CANCELLED_MEMORY: usize = 4_096;

struct Waiter {
    puller: u32,
    tx: oneshot::Sender<()>,
}

/// The waiters of one queue.
#[derive(Default)]
pub struct WaiterQueue {
    entries: Vec<Option<Waiter>>,
    head: usize,
    pending: bool,
    cancelled: VecDeque<u32>,
}

impl WaiterQueue {
    /// Registers a waiter for `puller`; the receiver resolves `Ok` when woken and `Err` when
    /// cancelled. `None` when `puller` was cancelled before it could register. O(c) for the c
    /// cancellations not yet matched by a registration (usually none), then O(1) amortized.
    pub fn register(&mut self, puller: u32) -> Option<oneshot::Receiver<()>> {
        if let Some(i) = self.cancelled.iter().position(|p| *p == puller) {
            self.cancelled.remove(i);
            return None;
        }
        let (tx, rx) = oneshot::channel();
        if self.pending {
            self.pending = false;
            let _ = tx.send(());
            return Some(rx);
        }
        self.sweep_if_bloated();
        self.entries.push(Some(Waiter { puller, tx }));
        Some(rx)
    }

    /// Wakes up to `n` live waiters; returns how many were woken. With none live, sets the
    /// pending bit (once, however many notifications arrive).
    pub fn notify(&mut self, n: usize) -> usize {
        let mut woken = 0;
        while woken < n && self.head < self.entries.len() {
            let slot = self.entries[self.head].take();
            self.head += 1;
            if let Some(w) = slot {
                if w.tx.send(()).is_ok() {
                    woken += 1;
                }
            }
        }
        if woken < n && n > 0 && woken == 0 {
            self.pending = true;
        }
        self.compact();
        woken
    }

    /// A waiter gives up (its pull timed out): it closes its receiver, and a wake-up that raced
    /// in before it did is passed on to the next waiter, so no job waits for another timeout.
    pub fn give_up(&mut self, rx: &mut oneshot::Receiver<()>) {
        rx.close();
        if rx.try_recv().is_ok() {
            self.notify(1);
        }
    }

    /// Cancels every waiter of `puller` (their pulls resolve empty), or, if none is registered,
    /// its next registration. O(waiters).
    pub fn cancel(&mut self, puller: u32) {
        let mut found = false;
        for slot in &mut self.entries[self.head..] {
            if slot.as_ref().is_some_and(|w| w.puller == puller) {
                *slot = None;
                found = true;
            }
        }
        if !found {
            if self.cancelled.len() == CANCELLED_MEMORY {
                self.cancelled.pop_front();
            }
            self.cancelled.push_back(puller);
        }
    }

    /// Cancels every waiter.
    pub fn cancel_all(&mut self) {
        self.entries.clear();
        self.head = 0;
        self.pending = false;
    }

    /// Live waiters (registered, not consumed, receiver still held).
    pub fn live(&self) -> usize {
        self.entries[self.head..]
            .iter()
            .filter(|s| s.as_ref().is_some_and(|w| !w.tx.is_closed()))
            .count()
    }

    /// Whether the coalesced pending bit is set.
    pub fn pending(&self) -> bool {
        self.pending
    }

    /// Entries held, live or not (for tests of the compaction bound).
    pub fn capacity_used(&self) -> usize {
        self.entries.len()
    }

    fn compact(&mut self) {
        if self.head >= COMPACT_AT && self.head * 2 >= self.entries.len() {
            self.entries.drain(..self.head);
            self.head = 0;
        } else if self.head == self.entries.len() {
            self.entries.clear();
            self.head = 0;
        }
    }

    /// Pullers that timed out leave dead entries behind while no job arrives; sweep them when
    /// they pile up so an idle queue's array stays bounded.
    fn sweep_if_bloated(&mut self) {
        let unconsumed = self.entries.len() - self.head;
        if unconsumed >= COMPACT_AT && unconsumed.is_multiple_of(COMPACT_AT) {
            self.entries.drain(..self.head);
            self.head = 0;
            self.entries
                .retain(|s| s.as_ref().is_some_and(|w| !w.tx.is_closed()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notify_wakes_in_registration_order() {
        let mut q = WaiterQueue::default();
        let mut a = q.register(1).unwrap();
        let mut b = q.register(2).unwrap();
        assert_eq!(q.notify(1), 1);
        assert!(a.try_recv().is_ok());
        assert!(b.try_recv().is_err());
        assert_eq!(q.notify(5), 1);
        assert!(b.try_recv().is_ok());
    }

    #[test]
    fn pending_bit_coalesces_notifications() {
        let mut q = WaiterQueue::default();
        assert_eq!(q.notify(3), 0);
        assert_eq!(q.notify(3), 0);
        assert!(q.pending());
        let mut a = q.register(1).unwrap();
        assert!(a.try_recv().is_ok(), "released at once by the pending bit");
        let mut b = q.register(1).unwrap();
        assert!(b.try_recv().is_err(), "only one retry hint");
    }

    #[test]
    fn dead_and_cancelled_waiters_are_skipped() {
        let mut q = WaiterQueue::default();
        let a = q.register(1).unwrap();
        drop(a); // timed out
        let mut b = q.register(2).unwrap();
        let mut c = q.register(3).unwrap();
        q.cancel(2);
        assert!(b.try_recv().is_err());
        assert_eq!(q.notify(1), 1);
        assert!(c.try_recv().is_ok());
    }

    #[test]
    fn cancel_before_register_is_sticky_once() {
        let mut q = WaiterQueue::default();
        q.cancel(7);
        assert!(
            q.register(7).is_none(),
            "late registration of a cancelled puller"
        );
        assert!(
            q.register(7).is_some(),
            "only the one registration is refused"
        );
        for i in 0..(CANCELLED_MEMORY as u32 + 10) {
            q.cancel(1_000 + i);
        }
        assert!(
            q.register(1_000).is_some(),
            "oldest cancellations are forgotten"
        );
        assert!(q.register(1_000 + CANCELLED_MEMORY as u32).is_none());
    }

    #[test]
    fn idle_timeouts_do_not_grow_without_bound() {
        let mut q = WaiterQueue::default();
        for i in 0..100_000u32 {
            drop(q.register(i).unwrap());
        }
        assert!(q.capacity_used() <= COMPACT_AT + 1, "{}", q.capacity_used());
        let mut keep = Vec::new();
        for i in 0..3_000u32 {
            keep.push(q.register(i).unwrap());
        }
        assert_eq!(q.live(), 3_000);
        assert_eq!(q.notify(3_000), 3_000);
        assert!(q.capacity_used() < COMPACT_AT * 2);
    }

    /// Every order of the operations that race a pull's timeout (they all run under the shard
    /// lock, so whole operations interleave): one or two jobs arriving (`notify`) and each of
    /// two waiters giving up. A wake-up never ends with a waiter that gave up: a live waiter
    /// holds it, or, with none left, the pending bit does.
    #[test]
    fn give_up_never_loses_a_wake_up_in_any_order() {
        #[derive(Clone, Copy, Debug, PartialEq)]
        enum Step {
            Notify,
            GiveUp(usize),
        }
        fn orders(rest: Vec<Step>, done: Vec<Step>, out: &mut Vec<Vec<Step>>) {
            if rest.is_empty() {
                if !out.contains(&done) {
                    out.push(done);
                }
                return;
            }
            for i in 0..rest.len() {
                let mut r = rest.clone();
                let mut d = done.clone();
                d.push(r.remove(i));
                orders(r, d, out);
            }
        }
        let mut all = Vec::new();
        for notifies in 1..=2 {
            for gave_up in [vec![], vec![0], vec![1], vec![0, 1]] {
                let mut steps = vec![Step::Notify; notifies];
                steps.extend(gave_up.iter().map(|w| Step::GiveUp(*w)));
                orders(steps, Vec::new(), &mut all);
            }
        }
        assert_eq!(all.len(), 30, "every distinct order");
        for order in all {
            let mut q = WaiterQueue::default();
            let mut rx = [q.register(1).unwrap(), q.register(2).unwrap()];
            let mut gone = [false, false];
            let mut woken = [false, false];
            for step in &order {
                match *step {
                    Step::Notify => {
                        q.notify(1);
                    }
                    Step::GiveUp(w) => {
                        q.give_up(&mut rx[w]);
                        gone[w] = true;
                    }
                }
            }
            for w in 0..2 {
                if !gone[w] {
                    woken[w] = rx[w].try_recv().is_ok();
                }
            }
            let live = (0..2).filter(|w| !gone[*w]).count();
            let notifies = order.iter().filter(|s| **s == Step::Notify).count();
            if live > 0 {
                let held = woken.iter().filter(|w| **w).count();
                assert!(
                    held >= notifies.min(live),
                    "{order:?}: {held} live waiter(s) woken for {notifies} job(s)"
                );
            } else {
                assert!(
                    q.pending(),
                    "{order:?}: the wake-up was lost with the waiters"
                );
            }
        }
    }
}
