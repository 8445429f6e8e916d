//! The event hub: transitions of queues with listeners are buffered here and handed out in
//! batches. The first event after a drain calls the notifier once (the binding turns that into
//! one JS callback per batch); more events before the next drain only join the buffer.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

pub use crate::domain::event::{Event, EventKind};

/// Called (from any thread) when events become available.
pub type Notifier = Arc<dyn Fn() + Send + Sync>;

/// Buffered events with a coalesced notification.
#[derive(Default)]
pub struct EventHub {
    buf: Mutex<Vec<Event>>,
    scheduled: AtomicBool,
    notifier: RwLock<Option<Notifier>>,
}

impl EventHub {
    /// Sets (or clears) the notifier.
    pub fn set_notifier(&self, n: Option<Notifier>) {
        *self.notifier.write() = n;
    }

    /// Adds events; notifies once per batch.
    pub fn publish(&self, events: Vec<Event>) {
        if events.is_empty() {
            return;
        }
        self.buf.lock().extend(events);
        if !self.scheduled.swap(true, Ordering::AcqRel) {
            if let Some(n) = self.notifier.read().clone() {
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
