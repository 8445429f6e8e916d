'use strict'
// A Worker's pull loop: while the worker runs, it starts claimed jobs as slots free and claims
// more (one sync try, then one async long-poll when the queue is empty) for its free slots plus
// its prefetch. A function of the Worker `w` (worker.js), which keeps the state.

const { binding, fromBinding, isPending, native } = require('./native')

/** The most jobs one pull asks for (a u32 of the binding). */
const MAX_PULL = 2 ** 32 - 1

/**
 * The longest the loop runs on answers at hand before it lets timers and I/O run, ms. In memory
 * a pull answers at once and synchronous processors finish at once, so with jobs always ready
 * (a scheduler every millisecond, a producer in another thread) the loop would go on in
 * microtasks for ever and starve the event loop.
 */
const YIELD_EVERY_MS = 20

/** Runs until the worker closes; then gives back the claimed jobs that did not start. */
async function pullLoop(w) {
  const h = w._h
  let since = performance.now()
  while (!w._closing) {
    if (w._paused) {
      await w._sleep()
      continue
    }
    w._startBuffered()
    // Free slots, plus the jobs to hold ready beyond them; a claim goes once half the held
    // jobs have started, so that it is back before they run out.
    const want = Math.min(w._concurrency - w._processing + w._prefetch.size - w._held, MAX_PULL)
    if (want <= 0 || w._held * 2 > w._prefetch.size) {
      await w._sleep()
      continue
    }
    let text
    try {
      const sent = performance.now()
      if (sent - since > YIELD_EVERY_MS) {
        await new Promise((r) => setImmediate(r))
        since = performance.now()
        if (w._closing || w._paused) continue
      }
      text = binding.tryPull(h, want, w._limits, w._holder)
      if (isPending(text)) {
        text = await native(text)
        since = performance.now()
        w._prefetch.adapt(since - sent, w._concurrency)
      }
    } catch (e) {
      w._emitError(fromBinding(e))
      await new Promise((r) => setTimeout(r, 100))
      continue
    }
    if (text.length === 2) {
      if (w._active.size === 0 && w._emitting.size === 0 && w._held === 0) w._maybeDrained()
      // A pending try (a database round trip) lets close() or pause() run meanwhile: they
      // found no pull to cancel, so none may start now.
      if (w._closing || w._paused) continue
      w._pulling = true
      try {
        text = await binding.pull(h, w._puller, want, w._limits, w._holder, w._pullTimeout)
      } catch (e) {
        w._emitError(fromBinding(e))
        text = '[]'
      } finally {
        w._pulling = false
        since = performance.now()
      }
    }
    if (text.length === 2) continue
    const records = JSON.parse(text)
    if (w._closing || w._paused) {
      // Taken while the worker was closing or pausing: give them back untouched for another
      // worker.
      w._release(records, true)
      continue
    }
    w._buffer = w._held === 0 ? records : w._buffer.slice(w._head).concat(records)
    w._head = 0
  }
  w._releaseBuffer()
}

module.exports = { pullLoop }
