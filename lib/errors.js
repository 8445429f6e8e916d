'use strict'
// Error classes. The binding builds engine errors itself with these classes and a `code` (see
// src/errors.rs); `fromBinding` only tells them from a bug of ours.

/** An error of ferroqueue with a stable `code` (e.g. ERR_QUEUE_CLOSED). */
class QueueError extends Error {
  constructor(code, message) {
    super(message)
    this.name = 'QueueError'
    this.code = code
  }
}

/** Thrown by a processor to fail its job at once, whatever attempts remain. */
class UnrecoverableError extends Error {
  constructor(message) {
    super(message)
    this.name = 'UnrecoverableError'
  }
}

/** BullMQ's message of a RateLimitError: a processor that throws one gives its job back. */
const RATE_LIMIT_ERROR = 'bullmq:rateLimitExceeded'

/**
 * Thrown by a processor (after `worker.rateLimit(ms)`) to put its job back to waiting: no attempt
 * is spent and no `failed` event fires; it runs once the queue takes jobs again.
 */
class RateLimitError extends Error {
  constructor(message = RATE_LIMIT_ERROR) {
    super(message)
    this.name = 'RateLimitError'
  }
}

/** Whether a processor's throw is a RateLimitError (ours, or any error with BullMQ's message). */
function isRateLimitError(thrown) {
  try {
    return thrown instanceof RateLimitError || (thrown instanceof Error && thrown.message === RATE_LIMIT_ERROR)
  } catch {
    return false
  }
}

/** BullMQ's messages of the errors a step job throws after moving itself. */
const DELAYED_ERROR = 'bullmq:movedToDelayed'
const WAITING_CHILDREN_ERROR = 'bullmq:movedToWaitingChildren'

/**
 * Thrown by a processor after `job.moveToDelayed(timestamp, token)`: the job is delayed already,
 * so the worker records nothing (no attempt spent, no `failed`).
 */
class DelayedError extends Error {
  constructor(message = DELAYED_ERROR) {
    super(message)
    this.name = 'DelayedError'
  }
}

/**
 * Thrown by a processor after `job.moveToWaitingChildren(token)` answered true: the job waits for
 * its children already, so the worker records nothing.
 */
class WaitingChildrenError extends Error {
  constructor(message = WAITING_CHILDREN_ERROR) {
    super(message)
    this.name = 'WaitingChildrenError'
  }
}

/**
 * Whether a processor's throw says its job moved itself (a step job): a DelayedError or
 * WaitingChildrenError (ours, BullMQ's by name, or any error with BullMQ's message).
 */
function isStepError(thrown) {
  try {
    if (!(thrown instanceof Error)) return false
    const { name, message } = thrown
    return name === 'DelayedError' || name === 'WaitingChildrenError' || message === DELAYED_ERROR || message === WAITING_CHILDREN_ERROR
  } catch {
    return false
  }
}

function withCode(err, code) {
  err.code = code
  return err
}

/** A TypeError with code ERR_INVALID_OPTION naming the option. */
function typeError(option, message, code = 'ERR_INVALID_OPTION') {
  return withCode(new TypeError(`${option} ${message}`), code)
}

/** A RangeError with code ERR_INVALID_OPTION naming the option. */
function rangeError(option, message, code = 'ERR_INVALID_OPTION') {
  return withCode(new RangeError(`${option} ${message}`), code)
}

/** Longest piece of a value or foreign message an error message quotes. */
const QUOTE_LIMIT = 200

function cap(text) {
  return text.length > QUOTE_LIMIT ? text.slice(0, QUOTE_LIMIT) + '…' : text
}

/**
 * Text for any value, capped, that never throws: a string as is, an Error's message, JSON for
 * plain data, `String()` otherwise, and a description of the type when even that throws (a
 * null-prototype object, a cycle, a Proxy whose traps throw, a throwing toString).
 */
function textOf(value) {
  try {
    if (typeof value === 'string') return cap(value)
    if (value instanceof Error && typeof value.message === 'string') return cap(value.message)
    if (value !== null && typeof value === 'object') {
      try {
        const json = JSON.stringify(value)
        if (typeof json === 'string') return cap(json)
      } catch {}
    }
    return cap(String(value))
  } catch {}
  try {
    return cap(`a value that cannot be shown as text (${Object.prototype.toString.call(value)})`)
  } catch {
    return `a value that cannot be shown as text (${typeof value})`
  }
}

/** Whether `e` is an error of ours: TypeError, RangeError or QueueError with an ERR_ code. */
function isOurs(e) {
  try {
    return (
      (e instanceof TypeError || e instanceof RangeError || e instanceof QueueError) &&
      typeof e.code === 'string' &&
      e.code.startsWith('ERR_')
    )
  } catch {
    return false
  }
}

/**
 * An error raised while reading the caller's input (a throwing getter, Proxy trap or toJSON) as
 * one of ours: a TypeError with `code` naming `what`, the original as `cause`. Ours pass through.
 */
function inputError(e, what, code = 'ERR_INVALID_OPTION') {
  if (isOurs(e)) return e
  const err = withCode(new TypeError(`${what} could not be read: ${textOf(e)}`), code)
  err.cause = e
  return err
}

/**
 * The public error for one thrown by the binding. Engine errors arrive built (TypeError,
 * RangeError or QueueError with `code`, see src/errors.rs) and pass through; anything else is a
 * panic or a marshalling failure inside the binding: a bug of ours, ERR_INTERNAL.
 */
function fromBinding(e) {
  if (isOurs(e)) return e
  return new QueueError('ERR_INTERNAL', `internal error: ${textOf(e)}`)
}

module.exports = {
  QueueError,
  UnrecoverableError,
  RateLimitError,
  DelayedError,
  WaitingChildrenError,
  isStepError,
  isRateLimitError,
  typeError,
  rangeError,
  fromBinding,
  textOf,
  isOurs,
  inputError,
}
