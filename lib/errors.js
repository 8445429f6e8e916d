'use strict'
// Error classes and the decoding of errors coming from the native binding.
// The binding encodes engine errors as "CODE\u0001Class\u0001message" (see src/errors.rs).

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

const SEP = '\u0001'

/** Turns an error thrown by the binding into the public error it stands for. */
function decode(e) {
  const msg = e && typeof e.message === 'string' ? e.message : String(e)
  const parts = msg.split(SEP)
  if (parts.length === 3) {
    const [code, cls, text] = parts
    if (cls === 'TypeError') return withCode(new TypeError(text), code)
    if (cls === 'RangeError') return withCode(new RangeError(text), code)
    return new QueueError(code, text)
  }
  // Not an engine error: a panic or a marshalling failure inside the binding.
  return new QueueError('ERR_INTERNAL', `internal error: ${msg}`)
}

module.exports = { QueueError, UnrecoverableError, typeError, rangeError, decode }
