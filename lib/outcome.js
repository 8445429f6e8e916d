'use strict'
// Outcomes of processing, as the Worker records them: what a processor's throw means, the
// worker's retention options checked once, which backoff the worker computes, the answer of a
// one-ack call, and the acknowledged outcome written back into the Job.

const { binding, fromBinding, isPending } = require('./native')
const { textOf, inputError } = require('./errors')
const v = require('./validate')

/** What an ack did (the binding's AckOutcome enum). */
const { Completed, Retrying, Failed, Stale } = binding.AckOutcome

/** The one outcome of a one-ack call, now or later. */
function first(r) {
  return isPending(r) ? r.then((a) => a[0]) : r[0]
}

/**
 * What a processor's throw (or rejection) means for its job: the error to report, the reason and
 * stack to store, and whether it is unrecoverable. Never throws, whatever was thrown: a value that
 * is not an Error is wrapped in one (with `thrown` set), and one that cannot be shown as text
 * (e.g. a null-prototype object with a cycle) gets a reason that says so.
 */
function failureOf(thrown) {
  let isError = false
  let reason
  let stack = null
  let unrecoverable = false
  try {
    isError = thrown instanceof Error
    if (isError) {
      const message = thrown.message
      reason = typeof message === 'string' ? message : textOf(message)
      if (typeof thrown.stack === 'string') stack = thrown.stack
      unrecoverable = thrown.name === 'UnrecoverableError' || thrown.constructor?.name === 'UnrecoverableError'
    }
  } catch {}
  if (reason === undefined) {
    if (thrown === undefined) reason = 'processor threw undefined (not an Error)'
    else if (thrown === null) reason = 'processor threw null (not an Error)'
    else reason = textOf(thrown)
  }
  let error = thrown
  if (!isError) {
    error = new Error(reason)
    error.thrown = thrown
    stack = null
  }
  // Stored as text, so lone surrogates become U+FFFD (the error object keeps the original).
  return { error, reason: reason.toWellFormed(), stack: stack && stack.toWellFormed(), unrecoverable: unrecoverable === true }
}

/**
 * Checks a worker's `removeOnComplete` / `removeOnFail` once, by the rules of job options (the
 * engine's included), so that no job can fail to finish over them later. Returns their JSON.
 */
function retentionJson(o) {
  try {
    v.keepJobs('removeOnComplete', o.removeOnComplete)
    v.keepJobs('removeOnFail', o.removeOnFail)
  } catch (e) {
    throw inputError(e, 'opts')
  }
  const done = o.removeOnComplete === undefined ? '' : v.optionsJson(o.removeOnComplete, 'removeOnComplete')
  const fail = o.removeOnFail === undefined ? '' : v.optionsJson(o.removeOnFail, 'removeOnFail')
  const fields = []
  if (done) fields.push(`"removeOnComplete":${done}`)
  if (fail) fields.push(`"removeOnFail":${fail}`)
  try {
    binding.checkJobOptions(`{${fields.join(',')}}`)
  } catch (e) {
    throw fromBinding(e)
  }
  return { done: done && `,"keep":${done}`, fail: fail && `,"keep":${fail}` }
}

/** A job's backoff type when it is not built in (the worker's strategy decides), else null. */
function customBackoff(opts) {
  const b = opts.backoff
  if (b === undefined || b === null || typeof b !== 'object') return null
  const t = b.type
  return t === 'fixed' || t === 'exponential' ? null : t
}

/**
 * Writes an acknowledged outcome into the Job the processor had in hand (a job it froze keeps
 * its fields: the outcome itself is recorded and reported all the same).
 */
function settleJob(entry, now) {
  const { job, result } = entry
  try {
    if (result === Completed) {
      job.returnvalue = entry.value
      job.finishedOn = now
      job.attemptsMade += 1
    } else if (result === Retrying || result === Failed) {
      job.failedReason = entry.reason
      job.attemptsMade += 1
      if (result === Failed) job.finishedOn = now
    }
  } catch {}
}

module.exports = { Completed, Retrying, Failed, Stale, first, failureOf, retentionJson, customBackoff, settleJob }
