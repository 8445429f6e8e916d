//! The synchronization primitives of the hand-made concurrency protocols (the event hub, the
//! commit notice, the writer hand-off): `parking_lot` and `std` in every build, `loom`'s
//! model-checked ones when built with `RUSTFLAGS="--cfg loom"`, so the same code is what the
//! loom models in `loom_models.rs` explore. One API for both: a `Condvar` wait takes and returns
//! the guard, as `std` and `loom` do.

#[cfg(not(loom))]
mod imp {
    pub use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
    pub use std::sync::Arc;

    pub type MutexGuard<'a, T> = parking_lot::MutexGuard<'a, T>;

    /// A mutex (`parking_lot`).
    #[derive(Default)]
    pub struct Mutex<T>(parking_lot::Mutex<T>);

    impl<T> Mutex<T> {
        pub fn new(v: T) -> Mutex<T> {
            Mutex(parking_lot::Mutex::new(v))
        }

        #[inline]
        pub fn lock(&self) -> MutexGuard<'_, T> {
            self.0.lock()
        }
    }

    /// A condition variable (`parking_lot`).
    #[derive(Default)]
    pub struct Condvar(parking_lot::Condvar);

    impl Condvar {
        pub fn new() -> Condvar {
            Condvar(parking_lot::Condvar::new())
        }

        pub fn wait<'a, T>(&self, mut guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
            self.0.wait(&mut guard);
            guard
        }

        pub fn notify_one(&self) {
            self.0.notify_one();
        }
    }

    /// A reader-writer lock (`parking_lot`).
    #[derive(Default)]
    pub struct RwLock<T>(parking_lot::RwLock<T>);

    impl<T> RwLock<T> {
        pub fn new(v: T) -> RwLock<T> {
            RwLock(parking_lot::RwLock::new(v))
        }

        #[inline]
        pub fn read(&self) -> parking_lot::RwLockReadGuard<'_, T> {
            self.0.read()
        }

        pub fn write(&self) -> parking_lot::RwLockWriteGuard<'_, T> {
            self.0.write()
        }
    }
}

#[cfg(loom)]
mod imp {
    pub use loom::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
    pub use loom::sync::Arc;

    pub type MutexGuard<'a, T> = loom::sync::MutexGuard<'a, T>;

    /// A mutex (`loom`); poisoning cannot happen in the models.
    #[derive(Default)]
    pub struct Mutex<T>(loom::sync::Mutex<T>);

    impl<T> Mutex<T> {
        pub fn new(v: T) -> Mutex<T> {
            Mutex(loom::sync::Mutex::new(v))
        }

        pub fn lock(&self) -> MutexGuard<'_, T> {
            self.0.lock().unwrap_or_else(|p| p.into_inner())
        }
    }

    /// A condition variable (`loom`).
    #[derive(Default)]
    pub struct Condvar(loom::sync::Condvar);

    impl Condvar {
        pub fn new() -> Condvar {
            Condvar(loom::sync::Condvar::new())
        }

        pub fn wait<'a, T>(&self, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
            self.0.wait(guard).unwrap_or_else(|p| p.into_inner())
        }

        pub fn notify_one(&self) {
            self.0.notify_one();
        }
    }

    /// A reader-writer lock (`loom`).
    #[derive(Default)]
    pub struct RwLock<T>(loom::sync::RwLock<T>);

    impl<T> RwLock<T> {
        pub fn new(v: T) -> RwLock<T> {
            RwLock(loom::sync::RwLock::new(v))
        }

        pub fn read(&self) -> loom::sync::RwLockReadGuard<'_, T> {
            self.0.read().unwrap_or_else(|p| p.into_inner())
        }

        pub fn write(&self) -> loom::sync::RwLockWriteGuard<'_, T> {
            self.0.write().unwrap_or_else(|p| p.into_inner())
        }
    }
}

pub use imp::*;
