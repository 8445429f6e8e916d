//! Pure, allocation-friendly data structures used by the engine.
//!
//! Nothing in here knows about jobs or queues; these are the building blocks:
//!
//! * [`fnv1a`] — 32-bit FNV-1a hash (used for stable shard selection).
//! * [`MinHeap4`] — a 4-ary min-heap stored in a `Vec`.
//! * `IndexedHeap` (feature `indexed-heap`) — a keyed priority queue with O(1) removal by key
//!   (generation-based lazy deletion on top of [`MinHeap4`]); not used by the engine itself.
//! * [`DelayedHeap`] — a keyed timer heap ordered by `(run_at, insertion)`,
//!   with O(1) removal by key and a bounded number of stale entries.

pub mod delayed_heap;
pub mod fnv1a;
#[cfg(feature = "indexed-heap")]
pub mod indexed_heap;
pub mod min_heap;

pub use delayed_heap::DelayedHeap;
pub use fnv1a::fnv1a;
#[cfg(feature = "indexed-heap")]
pub use indexed_heap::IndexedHeap;
pub use min_heap::MinHeap4;
