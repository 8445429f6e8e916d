'use strict'
// A Worker's jobs from start to outcome: a claimed record becomes a Job and runs the processor
// (with its `timeout` and AbortSignal), and what the processor returned or threw becomes the ack
// the Worker sends (worker-acks.js). Functions of the Worker `w` (worker.js), which keeps the
// state.

const { Job } = require('./job')
const { isRateLimitError, isStepError } = require('./errors')
const { decideBackoff } = require('./backoff')
const { Stale, failureOf, customBackoff } = require('./outcome')
const { completedText, failedText, releasedText } = require('./ack-wire')
const v = require('./validate')
const { startTimeout } = require('./cancel')
const { isWorkerLost } = require('./sandbox/sandbox-options')

function startJob(w, record) {
  const job = Job.fromRecord(w, record)
  const controller = w._wantsSignal ? new AbortController() : undefined
  // The id and token are kept apart from the Job, which the processor may change.
  const entry = {
    job,
    id: job.id,
    token: job.token,
    controller,
    done: false,
    value: null,
    error: undefined,
    reason: undefined,
    result: Stale,
    // What a custom backoff strategy needs, read before the processor can change the job.
    backoff: customBackoff(job.opts),
    attemptsMade: job.attemptsMade,
    attempts: job.opts.attempts ?? 1,
    timer: undefined, // of the job's `timeout` (cancel.js)
    timedOut: false, // its timeout ran out (cancel.js)
  }
  // By token, not id: after obliterate() an id comes back while its old activation may still run.
  w._active.set(entry.token, entry)
  w._processing++
  w._prefetch.starts++
  w._worked = true
  w._emitSafe('active', job, 'waiting')
  const timeout = job.opts.timeout
  if (timeout !== undefined) startTimeout(w, entry, timeout)
  try {
    const result = w._processor(job, job.token, controller && controller.signal)
    if (result !== null && typeof result === 'object' && typeof result.then === 'function') {
      // Promise.prototype.then over Promise.resolve: a foreign thenable cannot call back twice
      // or throw past us.
      Promise.prototype.then.call(
        result instanceof Promise ? result : Promise.resolve(result),
        (value) => w._complete(entry, value),
        (err) => w._fail(entry, err),
      )
    } else {
      w._complete(entry, result)
    }
  } catch (err) {
    w._fail(entry, err)
  }
}

function completeJob(w, entry, value) {
  if (entry.done) return // timed out already
  let text
  try {
    text = v.toJson(value, 'returnvalue', 'null')
  } catch (err) {
    w._fail(entry, err)
    return
  }
  entry.value = value === undefined ? null : value
  w._queueAck(entry, completedText(entry, text, w._keepDone))
}

/** Fails the job with whatever was thrown (see failureOf); never throws. */
function failJob(w, entry, thrown) {
  if (entry.done) return // timed out already
  if (isRateLimitError(thrown) || isStepError(thrown)) {
    // Back to waiting, no attempt spent: it runs once the queue takes jobs again. A step job
    // that moved itself first (moveToDelayed, moveToWaitingChildren, moveToWait) is found
    // moved: the release changes nothing.
    w._queueAck(entry, releasedText(entry.id, entry.token, false))
    return
  }
  const f = failureOf(thrown)
  if (isWorkerLost(thrown)) entry.lost = true
  entry.error = f.error
  entry.reason = f.reason
  if (entry.backoff !== null && !f.unrecoverable && entry.attemptsMade + 1 < entry.attempts) {
    const send = (delay, noRetry) => {
      w._queueAck(entry, failedText(entry, f.reason, f.stack, noRetry, w._keepFail, delay))
    }
    decideBackoff(w._backoffStrategy, entry, f.error, send, (e) => w._emitError(e))
    return
  }
  w._queueAck(entry, failedText(entry, f.reason, f.stack, f.unrecoverable, w._keepFail))
}

module.exports = { startJob, completeJob, failJob }
