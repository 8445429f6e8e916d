//! The event hub: transitions of queues with listeners are buffered here and handed out in
//! batches. The first event after a drain calls the notifier once (the binding turns that into
//! one JS callback per batch); more events before the next drain only join the buffer.
//!
//! On a durable engine, events wait for the group commit that holds their change
//! ([`EventHub::publish_at`] / [`EventHub::release`]), so a listener never hears of an outcome that
//! a crash could still undo.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::sync::{AtomicBool, Mutex, Ordering, RwLock};

pub use crate::domain::event::{Event, EventKind};

/// Called (from any thread) when events become available.
pub type Notifier = Arc<dyn Fn() + Send + Sync>;

/// Buffered events with a coalesced notification.
#[derive(Default)]
pub struct EventHub {
    buf: Mutex<Vec<Event>>,
    held: Mutex<Held>,
    scheduled: AtomicBool,
    notifier: RwLock<Option<Notifier>>,
}

/// Events waiting for their commit.
#[derive(Default)]
struct Held {
    committed: u64,
    batches: VecDeque<(u64, Vec<Event>)>,
}

impl EventHub {
    /// Publishes `events` once everything up to write `seq` is committed (at once for 0).
    pub fn publish_at(&self, events: Vec<Event>, seq: u64) {
        if events.is_empty() {
            return;
        }
        {
            let mut h = self.held.lock();
            if seq > h.committed {
                h.batches.push_back((seq, events));
                return;
            }
        }
        self.publish(events);
    }

    /// Drops the events that wait for commits (after a storage failure they never come).
    pub fn discard_held(&self) {
        self.held.lock().batches.clear();
    }

    /// Everything up to `committed` is durable: publishes the events that waited for it.
    pub fn release(&self, committed: u64) {
        let mut ready = Vec::new();
        {
            let mut h = self.held.lock();
            h.committed = h.committed.max(committed);
            while h.batches.front().is_some_and(|(s, _)| *s <= h.committed) {
                if let Some((_, evs)) = h.batches.pop_front() {
                    ready.extend(evs);
                }
            }
        }
        self.publish(ready);
    }

    /// Sets (or clears) the notifier.
    pub fn set_notifier(&self, n: Option<Notifier>) {
        *self.notifier.write() = n;
        self.scheduled.store(false, Ordering::Release);
        if !self.buf.lock().is_empty() {
            self.notify();
        }
    }

    /// Adds events; notifies once per batch.
    pub fn publish(&self, events: Vec<Event>) {
        if events.is_empty() {
            return;
        }
        self.buf.lock().extend(events);
        self.notify();
    }

    /// Calls the notifier unless a call is pending; without a notifier nothing is armed.
    fn notify(&self) {
        let notifier = self.notifier.read().clone();
        if let Some(n) = notifier {
            if !self.scheduled.swap(true, Ordering::AcqRel) {
                n();
            }
        }
    }

    /// Takes every buffered event.
    pub fn drain(&self) -> Vec<Event> {
        let mut buf = self.buf.lock();
        self.scheduled.store(false, Ordering::Release);
        std::mem::take(&mut *buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn a_notifier_set_late_is_called_for_buffered_events() {
        let hub = EventHub::default();
        hub.publish(vec![Event {
            queue: Arc::from("q"),
            kind: EventKind::Drained,
        }]);
        let calls = Arc::new(AtomicUsize::new(0));
        let c = calls.clone();
        hub.set_notifier(Some(Arc::new(move || {
            c.fetch_add(1, Ordering::SeqCst);
        })));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert_eq!(hub.drain().len(), 1);
    }

    #[test]
    fn one_notification_per_batch() {
        let hub = EventHub::default();
        let calls = Arc::new(AtomicUsize::new(0));
        let c = calls.clone();
        hub.set_notifier(Some(Arc::new(move || {
            c.fetch_add(1, Ordering::SeqCst);
        })));
        let ev = || Event {
            queue: Arc::from("q"),
            kind: EventKind::Drained,
        };
        hub.publish(vec![ev()]);
        hub.publish(vec![ev(), ev()]);
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert_eq!(hub.drain().len(), 3);
        hub.publish(vec![ev()]);
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }
}
