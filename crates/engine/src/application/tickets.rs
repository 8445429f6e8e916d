//! Commit tickets per thread: the sequence number of the latest change each thread made on each
//! engine. A JS thread reads its ticket once per tick ([`crate::Backend::ticket`]) instead of
//! receiving one per call, and waits for exactly its own changes: a worker thread's changes on
//! the same engine do not lengthen its wait.
//!
//! Engines are told apart by a serial number that is never reused (an address could be, by a
//! later engine, which would then inherit tickets it never issued). A thread's entries of
//! engines that are gone are pruned when it first uses another engine, so a process that opens
//! and closes engines for ever keeps a bounded list.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use rustc_hash::FxHashSet;

static SERIAL: AtomicU64 = AtomicU64::new(1);
static LIVE: Mutex<Option<FxHashSet<u64>>> = Mutex::new(None);

thread_local! {
    /// (engine serial, latest ticket); a handful of engines per thread at most.
    static LATEST: RefCell<Vec<(u64, u64)>> = const { RefCell::new(Vec::new()) };
}

/// A serial number for a new engine, live until [`retire`].
pub(super) fn next_serial() -> u64 {
    let serial = SERIAL.fetch_add(1, Ordering::Relaxed);
    LIVE.lock()
        .get_or_insert_with(Default::default)
        .insert(serial);
    serial
}

/// The engine `serial` is gone: its tickets may be pruned.
pub(super) fn retire(serial: u64) {
    if let Some(live) = LIVE.lock().as_mut() {
        live.remove(&serial);
    }
}

/// Records `seq` as the calling thread's latest ticket on engine `serial`.
pub(super) fn note(serial: u64, seq: u64) {
    LATEST.with(|l| {
        let mut l = l.borrow_mut();
        match l.iter_mut().find(|(s, _)| *s == serial) {
            Some((_, t)) => *t = (*t).max(seq),
            None => {
                if let Some(live) = LIVE.lock().as_ref() {
                    l.retain(|(s, _)| live.contains(s));
                }
                l.push((serial, seq));
            }
        }
    });
}

/// The calling thread's latest ticket on engine `serial` (0: none).
pub(super) fn latest(serial: u64) -> u64 {
    LATEST.with(|l| {
        l.borrow()
            .iter()
            .find(|(s, _)| *s == serial)
            .map_or(0, |(_, t)| *t)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tickets_are_per_thread_and_per_engine() {
        let (a, b) = (next_serial(), next_serial());
        note(a, 5);
        note(b, 9);
        note(a, 3);
        assert_eq!(latest(a), 5, "a ticket never goes back");
        assert_eq!(latest(b), 9);
        std::thread::spawn(move || assert_eq!(latest(a), 0, "another thread has its own"))
            .join()
            .unwrap();
        retire(a);
        let c = next_serial();
        note(c, 1);
        assert_eq!(latest(a), 0, "a retired engine's entry is pruned");
        assert_eq!(latest(b), 9);
        LATEST.with(|l| assert_eq!(l.borrow().len(), 2));
    }
}
