'use strict'
// A retry whose wait the Worker's `settings.backoffStrategy` decides (BullMQ's custom backoff).

const { QueueError, textOf } = require('./errors')
const v = require('./validate')

/**
 * Asks `strategy` (attemptsMade, type, err, job) for the wait of a failed job's retry: it returns
 * (or resolves) the wait in ms, or -1 for no retry. `send(delay, noRetry)` gets the decision.
 * Without a strategy, or when it throws or answers something else, the job fails without retry
 * and `report` gets an ERR_BACKOFF_STRATEGY error saying why.
 */
function decideBackoff(strategy, entry, error, send, report) {
  const type = entry.backoff
  const refuse = (message, cause) => {
    const e = new QueueError('ERR_BACKOFF_STRATEGY', `${message}; job ${entry.id} failed without retry`)
    if (cause !== undefined) e.cause = cause
    report(e)
    send(undefined, true)
  }
  const decide = (d) => {
    if (d === -1) send(undefined, true)
    else if (typeof d === 'number' && Number.isFinite(d) && d >= 0) send(Math.round(d), false)
    else refuse(`settings.backoffStrategy must return a number >= 0 (ms), or -1 for no retry, got ${v.describe(d)}`)
  }
  if (strategy === undefined) {
    refuse(`backoff type ${JSON.stringify(textOf(type))} is not built in ('fixed', 'exponential'): give the Worker settings.backoffStrategy`)
    return
  }
  let r
  try {
    r = strategy(entry.attemptsMade + 1, type, error, entry.job)
  } catch (e) {
    refuse(`settings.backoffStrategy threw: ${textOf(e)}`, e)
    return
  }
  if (r !== null && typeof r === 'object' && typeof r.then === 'function') {
    Promise.prototype.then.call(r instanceof Promise ? r : Promise.resolve(r), decide, (e) =>
      refuse(`settings.backoffStrategy rejected: ${textOf(e)}`, e),
    )
  } else decide(r)
}

module.exports = { decideBackoff }
