'use strict'
// How a Worker's finished jobs reach the engine and come back as events: the acks of one tick
// go in one native call (ack-wire.js), and each job is settled with its outcome, reported once
// durable (at once in memory). Functions of the Worker `w` (worker.js), which keeps the state.

const { fromBinding, isPending } = require('./native')
const { Completed, Retrying, Failed, Stale, settleJob } = require('./outcome')
const { sendAcks } = require('./ack-wire')

/** Sends the acks queued this tick (Worker#_queueAck). */
function flushAcks(w) {
  w._flushQueued = false
  const texts = w._acks
  const entries = w._ackJobs
  w._acks = []
  w._ackJobs = []
  if (texts.length === 0) return
  const results = sendAcks(w._h, texts, entries, (e) => w._emitError(e))
  if (isPending(results)) {
    w._startBuffered()
    // Acks answered later (held back by the writer's backlog, or a database round trip):
    // settle the jobs when they are. If the answer fails (the storage failed, or the round
    // trip), the outcomes count as not recorded here; a durable backend delivers those jobs
    // again (at-least-once).
    // Out of `_emitting` before settling, so that the last ack can see the worker drained.
    const p = results.then(
      (r) => {
        w._emitting.delete(p)
        settleAcked(w, entries, r)
      },
      (e) => {
        w._emitting.delete(p)
        w._emitError(fromBinding(e))
        // The database is out of reach: jobs held ahead would run in the dark and their acks
        // fail too (each would run again after its lease), so they go back, or, if that fails
        // too, wait out their lease unstarted.
        w._releaseBuffer()
        settleAcked(w, entries, new Array(entries.length).fill(Stale))
      },
    )
    w._emitting.add(p)
    // The slots are free already: the next pull goes while the acks are in flight.
    w._wakeUp()
    return
  }
  settleAcked(w, entries, results)
  w._startBuffered()
}

/** Settles acked jobs with their outcomes and reports them once durable. */
function settleAcked(w, entries, results) {
  const now = Date.now()
  for (let i = 0; i < entries.length; i++) {
    const entry = entries[i]
    w._active.delete(entry.token)
    entry.result = results[i]
    settleJob(entry, now)
  }
  const emit = () => {
    for (let i = 0; i < entries.length; i++) {
      const { job, result, error, value } = entries[i]
      if (result === Completed) w._emitSafe('completed', job, value, 'active')
      else if (result === Retrying || result === Failed) w._emitSafe('failed', job, error, 'active')
    }
    if (w._active.size === 0 && w._pulling && w._emitting.size === 0 && w._held === 0) w._maybeDrained()
  }
  // Outcomes are reported only once they are durable (at once in memory).
  const wait = w._commitWait()
  if (wait) {
    const p = wait.then(
      () => {
        w._emitting.delete(p)
        emit()
      },
      (err) => {
        w._emitting.delete(p)
        w._emitError(err)
      },
    )
    w._emitting.add(p)
  } else emit()
  if (w._active.size === 0) {
    const idle = w._idle
    if (idle) {
      w._idle = null
      idle()
    }
  }
  w._wakeUp()

}

module.exports = { flushAcks, settleAcked }
