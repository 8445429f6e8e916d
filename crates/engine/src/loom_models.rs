//! Loom models of the hand-made concurrency protocols, run by `npm test` (scripts/test.sh) with
//! `RUSTFLAGS="--cfg loom"`: loom runs each model under every interleaving (and every allowed
//! reordering of the atomics) of its threads. The code under test is the engine's own (its
//! primitives come from `crate::sync`, which is loom's in this build).
//!
//! The long-poll waiters run under their shard's lock, so their races are between whole
//! operations; every order of those is enumerated in `domain/waiters.rs`
//! (`give_up_never_loses_a_wake_up_in_any_order`).

use std::sync::Arc as StdArc;

use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;

use crate::application::commit_notice::CommitNotice;
use crate::application::events::{Event, EventHub, EventKind};
use crate::storage::handoff::Handoff;

fn event() -> Event {
    Event {
        queue: StdArc::from("q"),
        kind: EventKind::Drained,
    }
}

/// Counts the notifier's calls.
fn counting(rings: &Arc<AtomicUsize>) -> StdArc<dyn Fn() + Send + Sync> {
    let r = rings.clone();
    StdArc::new(move || {
        r.fetch_add(1, Ordering::SeqCst);
    })
}

/// Two threads publish while the consumer (JS) drains once per notification: every event is
/// delivered, none is left behind without a pending notification.
#[test]
fn event_hub_delivers_every_event() {
    loom::model(|| {
        let hub = Arc::new(EventHub::default());
        let rings = Arc::new(AtomicUsize::new(0));
        hub.set_notifier(Some(counting(&rings)));
        let done = Arc::new(AtomicUsize::new(0));
        let publishers: Vec<_> = (0..2)
            .map(|_| {
                let (hub, done) = (hub.clone(), done.clone());
                thread::spawn(move || {
                    hub.publish(vec![event()]);
                    done.fetch_add(1, Ordering::SeqCst);
                })
            })
            .collect();
        let mut handled = 0;
        let mut got = 0;
        loop {
            if rings.load(Ordering::SeqCst) > handled {
                handled += 1;
                got += hub.drain().len();
            } else if done.load(Ordering::SeqCst) == 2 && rings.load(Ordering::SeqCst) == handled {
                break;
            } else {
                thread::yield_now();
            }
        }
        for p in publishers {
            p.join().unwrap();
        }
        assert_eq!(got, 2, "an event was left without a notification");
    });
}

/// Events held for a commit are released by it, whichever of publishing and committing
/// comes first, and never before.
#[test]
fn event_hub_holds_events_until_their_commit() {
    loom::model(|| {
        let hub = Arc::new(EventHub::default());
        let committed = Arc::new(AtomicBool::new(false));
        let writer = {
            let (hub, committed) = (hub.clone(), committed.clone());
            thread::spawn(move || {
                committed.store(true, Ordering::SeqCst);
                hub.release(1);
            })
        };
        hub.publish_at(vec![event()], 1);
        let early = hub.drain().len();
        if early > 0 {
            assert!(
                committed.load(Ordering::SeqCst),
                "delivered before its commit"
            );
        }
        writer.join().unwrap();
        assert_eq!(early + hub.drain().len(), 1);
    });
}

/// The writer publishes two commits; JS takes the notice once per ring. The last commit is
/// always seen.
#[test]
fn commit_notice_reports_every_commit() {
    loom::model(|| {
        let notice = Arc::new(CommitNotice::default());
        let rings = Arc::new(AtomicUsize::new(0));
        notice.set_notifier(Some(counting(&rings)));
        // Setting the notifier rings once; JS answers that ring first.
        assert_eq!(rings.load(Ordering::SeqCst), 1);
        assert_eq!(notice.take(), 0);
        let writer = {
            let notice = notice.clone();
            thread::spawn(move || {
                notice.publish(1);
                notice.publish(2);
            })
        };
        let mut handled = 1;
        let mut seen = 0;
        while seen < 2 {
            if rings.load(Ordering::SeqCst) > handled {
                handled += 1;
                seen = seen.max(notice.take());
            } else {
                // Once the writer is done, no ring may be missing: JS would wait for ever.
                thread::yield_now();
            }
        }
        writer.join().unwrap();
    });
}

/// Two submitters and a closer race the writer: every submission accepted before the close is
/// taken exactly once and in order, and the writer always stops.
#[test]
fn handoff_loses_nothing_submitted_before_close() {
    loom::model(|| {
        let h = Arc::new(Handoff::<u32>::default());
        let submitters: Vec<_> = (0..2u32)
            .map(|i| {
                let h = h.clone();
                thread::spawn(move || {
                    let mut items = vec![i];
                    h.submit(&mut items, |_, _| {}).is_some()
                })
            })
            .collect();
        let closer = {
            let h = h.clone();
            thread::spawn(move || h.close())
        };
        let mut taken = Vec::new();
        let mut last_seq = 0;
        loop {
            let t = h.take();
            assert!(t.seq >= last_seq, "numbers go back");
            last_seq = t.seq;
            taken.extend(t.items);
            if t.closing && h.is_empty() {
                break;
            }
        }
        let accepted: Vec<u32> = submitters
            .into_iter()
            .enumerate()
            .filter_map(|(i, s)| s.join().unwrap().then_some(i as u32))
            .collect();
        closer.join().unwrap();
        taken.sort_unstable();
        assert_eq!(
            taken, accepted,
            "an accepted submission was lost or taken twice"
        );
        assert_eq!(last_seq as usize, accepted.len());
    });
}
