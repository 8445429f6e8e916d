//! The delayed-job timer: one thread per engine sleeps on a condition variable until the earliest
//! run-at it was told of, promotes every due job, and sleeps again. Adding a delayed job that is
//! due earlier than the current target wakes it to re-aim. It never spins: with nothing delayed it
//! sleeps until told. The thread holds only a weak reference to the engine and ends with it.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::clock::Clock;

/// Longest sleep without news, a safety net only.
const IDLE_SLEEP: Duration = Duration::from_secs(60);

struct TimerState {
    /// Earliest run-at (ms since epoch) to wake for; `u64::MAX` when none.
    next: u64,
    stop: bool,
}

/// The timer's shared half.
pub struct Timer {
    state: Mutex<TimerState>,
    cv: Condvar,
}

impl Timer {
    pub fn new() -> Arc<Timer> {
        Arc::new(Timer {
            state: Mutex::new(TimerState {
                next: u64::MAX,
                stop: false,
            }),
            cv: Condvar::new(),
        })
    }

    /// Asks for a wake-up at `at` (ms since epoch); wakes the thread if that is earlier.
    pub fn schedule(&self, at: u64) {
        let mut s = self.state.lock();
        if at < s.next {
            s.next = at;
            self.cv.notify_one();
        }
    }

    /// Ends the thread.
    pub fn stop(&self) {
        self.state.lock().stop = true;
        self.cv.notify_one();
    }

    /// Starts the thread. `promote` promotes due jobs everywhere and returns the next run-at; it
    /// returns `None` from `upgrade` once the engine is gone.
    pub fn spawn<T: Send + Sync + 'static>(
        self: &Arc<Self>,
        target: Weak<T>,
        clock: Arc<dyn Clock>,
        promote: fn(&T) -> Option<u64>,
    ) -> std::io::Result<()> {
        let timer = self.clone();
        std::thread::Builder::new()
            .name("ferroqueue-timer".into())
            .spawn(move || timer.run(target, clock, promote))
            .map(|_| ())
    }

    fn run<T>(&self, target: Weak<T>, clock: Arc<dyn Clock>, promote: fn(&T) -> Option<u64>) {
        let mut s = self.state.lock();
        loop {
            if s.stop {
                return;
            }
            let now = clock.now_ms();
            if s.next <= now {
                s.next = u64::MAX;
                drop(s);
                let Some(engine) = target.upgrade() else {
                    return;
                };
                let next = promote(&engine);
                drop(engine);
                s = self.state.lock();
                if let Some(n) = next {
                    s.next = s.next.min(n);
                }
                continue;
            }
            let wait = if s.next == u64::MAX {
                IDLE_SLEEP
            } else {
                Duration::from_millis(s.next - now)
            };
            self.cv.wait_until(&mut s, Instant::now() + wait);
        }
    }
}
