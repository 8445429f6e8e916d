'use strict'
// Cancelling running jobs: the job option `timeout` and Worker#cancelJob / cancelAllJobs. Both
// abort the processor's `signal` (its third argument, given to processors that declare it); a
// timeout also fails the job at once with reason `timeout` (retried if attempts remain), while a
// cancel leaves the outcome to the processor, as in BullMQ (it throws, usually an
// UnrecoverableError, when it sees the signal).

const { typeError } = require('./errors')

/** The error a timed-out job fails with (and its signal's reason): message `timeout`. */
function timeoutError(ms) {
  const e = new Error('timeout')
  e.name = 'TimeoutError'
  e.timeout = ms
  return e
}

/**
 * Starts the timer of a job run (`entry`, see Worker#_start) whose options set `timeout` (`ms`,
 * checked when the job was added); once it passes while the processor still runs, the signal
 * aborts and `worker` fails the job.
 */
function startTimeout(worker, entry, ms) {
  if (typeof ms !== 'number') return
  entry.timer = setTimeout(() => {
    entry.timer = undefined
    if (entry.done) return
    const e = timeoutError(ms)
    entry.timedOut = true // its history says so (the DLQ reason `timeout`)
    if (entry.controller) entry.controller.abort(e)
    worker._fail(entry, e)
  }, ms)
}

/** Stops a job run's timer, if any. */
function stopTimeout(entry) {
  if (entry.timer !== undefined) {
    clearTimeout(entry.timer)
    entry.timer = undefined
  }
}

/** Aborts the signal of the running job `jobId`; whether it runs here (BullMQ's answer). */
function cancelJob(active, jobId, reason) {
  if (typeof jobId !== 'string') throw typeError('jobId', `must be a string, got ${typeof jobId}`)
  for (const entry of active.values()) {
    if (entry.id !== jobId || entry.done) continue
    if (entry.controller && !entry.controller.signal.aborted) entry.controller.abort(reason)
    return true
  }
  return false
}

/** Aborts the signals of every job running here. */
function cancelAllJobs(active, reason) {
  for (const entry of active.values()) {
    if (!entry.done && entry.controller && !entry.controller.signal.aborted) entry.controller.abort(reason)
  }
}

module.exports = { startTimeout, stopTimeout, cancelJob, cancelAllJobs }
