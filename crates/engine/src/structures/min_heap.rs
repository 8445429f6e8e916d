//! A 4-ary min-heap stored in a `Vec`.
//!
//! Layout: the element at index `i` has its children at `4i+1 ..= 4i+4` and
//! its parent at `(i-1)/4`. A 4-ary heap is half as deep as a binary heap, so
//! `push` climbs fewer levels and the four children of a node are adjacent in
//! memory (one or two cache lines for small elements).
//!
//! Invariant (the heap property): for every `i > 0`,
//! `data[(i - 1) / 4] <= data[i]`. Hence `data[0]` is a minimum.
//!
//! Sifting works on a [`Gap`]: the element being placed is read out of the
//! slice once, the parents (`sift_up`) or smallest children (`sift_down`) it
//! passes are each moved one slot with a single copy, and the element is
//! written once into its final slot. A `slice::swap` per level would cost
//! twice the memory traffic. Inner loops index without bounds checks (the
//! index arithmetic is checked once per call) and pick the smallest of four
//! children as a two-round tournament: two independent comparisons, then one,
//! instead of a chain of three dependent ones.
//!
//! `pop` moves the last element into the root and sifts it *to the bottom*
//! along the chain of smallest children without comparing it on the way (3
//! comparisons per level instead of 4), then sifts it back up, which is
//! usually zero or one level because it came from the bottom (Floyd's trick,
//! also used by `std::collections::BinaryHeap`). With four children the
//! saving is one comparison in four, and on the u64 and tuple benchmarks in
//! `benches/heaps.rs` it measured the same as a plain `sift_down` (within
//! noise); it is kept for `Ord`s that cost more than a few instructions.
//!
//! Panic safety: if a user `Ord` panics mid-sift, dropping the `Gap` writes
//! the element back into the current gap, so the vector still holds every
//! element exactly once (the heap property may then be broken, as with std).
//!
//! Equal elements may pop in any order; callers that need a deterministic
//! order make their `Ord` total over unique values (e.g. add a sequence).

use std::mem::ManuallyDrop;
use std::ptr;

/// Number of children per node.
const ARITY: usize = 4;

/// A 4-ary min-heap: `pop` returns the smallest element first.
#[derive(Clone, Debug)]
pub struct MinHeap4<T: Ord> {
    data: Vec<T>,
}

impl<T: Ord> Default for MinHeap4<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Ord> MinHeap4<T> {
    /// Creates an empty heap. O(1), does not allocate.
    #[must_use]
    pub fn new() -> Self {
        Self { data: Vec::new() }
    }

    /// Creates an empty heap with room for `capacity` elements. O(1).
    #[must_use]
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            data: Vec::with_capacity(capacity),
        }
    }

    /// Builds a heap from arbitrary elements in O(n) (bottom-up heapify).
    #[must_use]
    pub fn from_vec(data: Vec<T>) -> Self {
        let mut heap = Self { data };
        heap.heapify();
        heap
    }

    /// Adds an element. O(log4 n) comparisons, amortised O(1) allocation.
    pub fn push(&mut self, item: T) {
        self.data.push(item);
        let last = self.data.len() - 1;
        sift_up(&mut self.data, last);
    }

    /// Removes and returns the smallest element. O(log4 n) levels,
    /// about 3 comparisons per level.
    pub fn pop(&mut self) -> Option<T> {
        if self.data.is_empty() {
            return None;
        }
        // Move the last leaf into the root slot, take the old root out.
        let top = self.data.swap_remove(0);
        sift_down_to_bottom(&mut self.data);
        Some(top)
    }

    /// Returns the smallest element without removing it. O(1).
    #[must_use]
    pub fn peek(&self) -> Option<&T> {
        self.data.first()
    }

    /// Number of elements. O(1).
    #[must_use]
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// `true` when the heap holds no element. O(1).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Allocated capacity, in elements. O(1).
    #[must_use]
    pub fn capacity(&self) -> usize {
        self.data.capacity()
    }

    /// Removes every element, keeping the allocation. O(n) drops.
    pub fn clear(&mut self) {
        self.data.clear();
    }

    /// Keeps only the elements for which `keep` returns `true`, then restores
    /// the heap property. O(n) total: one filtering pass plus a bottom-up
    /// heapify (skipped when nothing was removed).
    pub fn retain<F: FnMut(&T) -> bool>(&mut self, keep: F) {
        let before = self.data.len();
        self.data.retain(keep);
        if self.data.len() != before {
            self.heapify();
        }
    }

    /// Iterates over all elements in unspecified (storage) order. O(1) to
    /// create, O(n) to exhaust.
    pub fn iter(&self) -> std::slice::Iter<'_, T> {
        self.data.iter()
    }

    /// Consumes the heap, returning its elements in unspecified order. O(1).
    #[must_use]
    pub fn into_vec(self) -> Vec<T> {
        self.data
    }

    /// Restores the heap property for the whole vector in O(n): sift down
    /// every internal node, from the last parent up to the root.
    fn heapify(&mut self) {
        let len = self.data.len();
        if len < 2 {
            return;
        }
        let last_parent = (len - 2) / ARITY;
        for pos in (0..=last_parent).rev() {
            sift_down(&mut self.data, pos);
        }
    }
}

/// One element lifted out of a slice, leaving its slot (`pos`) logically
/// empty. Moving another element into the gap moves the gap to that
/// element's old slot; dropping the `Gap` writes the lifted element into the
/// slot the gap has reached.
///
/// Invariants: `pos < slots.len()`; every slot except `pos` holds a valid
/// element that is owned by the slice; slot `pos` holds a bitwise copy that
/// is not owned by anyone (the owned value is `item`).
struct Gap<'a, T> {
    slots: &'a mut [T],
    item: ManuallyDrop<T>,
    pos: usize,
}

impl<'a, T> Gap<'a, T> {
    /// Lifts the element at `pos` out of `slots`. Panics if `pos` is out of
    /// bounds (callers check this once, before their loop).
    fn new(slots: &'a mut [T], pos: usize) -> Self {
        assert!(pos < slots.len());
        // SAFETY: `pos` is in bounds (asserted above), so the pointer is valid
        // for reads and properly aligned. The bitwise copy becomes the owned
        // value; the original in slot `pos` is never dropped or read again
        // before `Drop` overwrites it (or `fill_from` overwrites it first).
        let item = unsafe { ptr::read(slots.as_ptr().add(pos)) };
        Self {
            slots,
            item: ManuallyDrop::new(item),
            pos,
        }
    }

    /// The lifted element.
    #[inline(always)]
    fn item(&self) -> &T {
        &self.item
    }

    /// The element at `i`.
    ///
    /// # Safety
    /// `i < self.slots.len()` and `i != self.pos`.
    #[inline(always)]
    unsafe fn at(&self, i: usize) -> &T {
        debug_assert!(i < self.slots.len() && i != self.pos);
        // SAFETY: `i` is in bounds (caller's contract), and slot `i` holds a
        // valid element because only slot `pos` is the gap and `i != pos`.
        unsafe { self.slots.get_unchecked(i) }
    }

    /// Moves the element at `i` into the gap; the gap moves to `i`.
    ///
    /// # Safety
    /// `i < self.slots.len()` and `i != self.pos`.
    #[inline(always)]
    unsafe fn fill_from(&mut self, i: usize) {
        debug_assert!(i < self.slots.len() && i != self.pos);
        let base = self.slots.as_mut_ptr();
        // SAFETY: both indices are in bounds (`pos` by the struct invariant,
        // `i` by the caller), and distinct, so the two one-element ranges do
        // not overlap. After the copy slot `pos` owns the element that was at
        // `i`, and slot `i` is the new gap (its bits are a non-owning copy),
        // which keeps the invariant.
        unsafe { ptr::copy_nonoverlapping(base.add(i), base.add(self.pos), 1) };
        self.pos = i;
    }
}

impl<T> Drop for Gap<'_, T> {
    fn drop(&mut self) {
        // SAFETY: `pos` is in bounds (struct invariant) and slot `pos` holds
        // no owned value, so writing the lifted element there without
        // dropping the old bits neither leaks nor double-drops. `item` is not
        // used after this (we are in `drop`), so it is moved exactly once.
        unsafe {
            ptr::copy_nonoverlapping(&*self.item, self.slots.as_mut_ptr().add(self.pos), 1);
        }
    }
}

/// Index of the smallest of the four children `first..first + 4` of the gap.
/// Ties go to the lowest index.
///
/// # Safety
/// `first + 3 < gap.slots.len()` and `first > gap.pos`.
#[inline(always)]
unsafe fn min_of_four<T: Ord>(gap: &Gap<'_, T>, first: usize) -> usize {
    // SAFETY: all four indices are in bounds and above `gap.pos`, hence not
    // the gap (caller's contract).
    unsafe {
        let a = first + usize::from(gap.at(first + 1) < gap.at(first));
        let b = first + 2 + usize::from(gap.at(first + 3) < gap.at(first + 2));
        if gap.at(b) < gap.at(a) {
            b
        } else {
            a
        }
    }
}

/// Index of the smallest of the children `first..len` of the gap (any count).
/// Ties go to the lowest index.
///
/// # Safety
/// `first < len <= gap.slots.len()` and `first > gap.pos`.
#[inline(always)]
unsafe fn min_of_rest<T: Ord>(gap: &Gap<'_, T>, first: usize, len: usize) -> usize {
    let mut best = first;
    for child in first + 1..len {
        // SAFETY: `first <= best, child < len <= slots.len()`, and both are
        // above `gap.pos` (caller's contract), hence not the gap.
        if unsafe { gap.at(child) < gap.at(best) } {
            best = child;
        }
    }
    best
}

/// Number of nodes with all four children: nodes `0..full_nodes(len)`.
/// Node `p` has four children iff `4p + 4 <= len - 1`.
#[inline(always)]
fn full_nodes(len: usize) -> usize {
    if len > ARITY {
        (len - ARITY - 1) / ARITY + 1
    } else {
        0
    }
}

/// Number of nodes with at least one child: node `p` has a child iff
/// `4p + 1 <= len - 1`.
#[inline(always)]
fn parent_nodes(len: usize) -> usize {
    if len >= 2 {
        (len - 2) / ARITY + 1
    } else {
        0
    }
}

/// Moves the gap up from its position while its parent is greater than the
/// lifted element.
#[inline(always)]
fn climb<T: Ord>(gap: &mut Gap<'_, T>) {
    while gap.pos > 0 {
        let parent = (gap.pos - 1) / ARITY;
        // SAFETY: `parent < gap.pos < slots.len()`, so it is in bounds and
        // is not the gap.
        unsafe {
            if gap.item() >= gap.at(parent) {
                break;
            }
            gap.fill_from(parent);
        }
    }
}

/// Moves the element at `pos` towards the root while it is smaller than its
/// parent. No-op if `pos` is out of bounds.
fn sift_up<T: Ord>(data: &mut [T], pos: usize) {
    if pos >= data.len() {
        return;
    }
    climb(&mut Gap::new(data, pos));
}

/// Moves the element at `pos` down the chain of smallest children while one
/// of its children is smaller than it. No-op if `pos` is out of bounds.
fn sift_down<T: Ord>(data: &mut [T], pos: usize) {
    let len = data.len();
    if pos >= len {
        return;
    }
    let (full, parents) = (full_nodes(len), parent_nodes(len));
    let mut gap = Gap::new(data, pos);
    while gap.pos < full {
        let first = ARITY * gap.pos + 1;
        // SAFETY: `gap.pos < full_nodes(len)` gives `first + 3 < len`, and
        // `first > gap.pos`; so `child` is in bounds and not the gap.
        unsafe {
            let child = min_of_four(&gap, first);
            if gap.item() <= gap.at(child) {
                return;
            }
            gap.fill_from(child);
        }
    }
    if gap.pos < parents {
        // The last internal node: one to three children.
        let first = ARITY * gap.pos + 1;
        // SAFETY: `gap.pos < parent_nodes(len)` gives `first < len`, and
        // `first > gap.pos`; so `child` is in bounds and not the gap.
        unsafe {
            let child = min_of_rest(&gap, first, len);
            if gap.item() > gap.at(child) {
                gap.fill_from(child);
            }
        }
    }
}

/// Restores the heap after the root was replaced by an arbitrary element
/// (`pop`): moves the root's gap down the chain of smallest children to a
/// leaf without comparing against the lifted element, then lets the element
/// climb back up from there. Fewer comparisons than [`sift_down`] when the
/// element belongs near the bottom, which is the case in `pop`.
fn sift_down_to_bottom<T: Ord>(data: &mut [T]) {
    let len = data.len();
    if len < 2 {
        return;
    }
    let (full, parents) = (full_nodes(len), parent_nodes(len));
    let mut gap = Gap::new(data, 0);
    while gap.pos < full {
        let first = ARITY * gap.pos + 1;
        // SAFETY: as in `sift_down`, `first..first + 4` are in bounds and
        // above the gap.
        unsafe {
            let child = min_of_four(&gap, first);
            gap.fill_from(child);
        }
    }
    if gap.pos < parents {
        let first = ARITY * gap.pos + 1;
        // SAFETY: as in `sift_down`, `first..len` is non-empty, in bounds and
        // above the gap.
        unsafe {
            let child = min_of_rest(&gap, first, len);
            gap.fill_from(child);
        }
    }
    climb(&mut gap);
}

impl<T: Ord> From<Vec<T>> for MinHeap4<T> {
    /// Same as [`MinHeap4::from_vec`]: O(n).
    fn from(data: Vec<T>) -> Self {
        Self::from_vec(data)
    }
}

impl<T: Ord> FromIterator<T> for MinHeap4<T> {
    /// Collects then heapifies: O(n).
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        Self::from_vec(iter.into_iter().collect())
    }
}

impl<T: Ord> Extend<T> for MinHeap4<T> {
    /// Pushes each element: O(k log4 n).
    fn extend<I: IntoIterator<Item = T>>(&mut self, iter: I) {
        for item in iter {
            self.push(item);
        }
    }
}

#[cfg(test)]
mod tests;
