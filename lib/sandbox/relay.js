'use strict'
// What crosses between a Worker and the threads or child processes that run its processor file:
// jobs as their records (the fields of `job.asJSON()` and the activation's token) and errors as
// plain objects, rebuilt on the other side with their name, message, stack and code, so that
// the Worker recognises what a processor threw (UnrecoverableError, DelayedError, ...).

const { Job } = require('../job')
const { QueueError } = require('../errors')

/** A job's record, as a thread or child sends it. */
function recordOf(job) {
  const r = job.asJSON()
  r.token = job.token
  return r
}

/** A Job of `owner` (the Worker) from a record sent by a thread or child. */
function jobOf(owner, record) {
  return Job.fromRecord(owner, record)
}

/** An error as it crosses: never throws, whatever was thrown. */
function errorOut(thrown) {
  try {
    if (thrown instanceof Error || (thrown !== null && typeof thrown === 'object' && typeof thrown.message === 'string')) {
      const out = { name: String(thrown.name ?? 'Error'), message: String(thrown.message), stack: typeof thrown.stack === 'string' ? thrown.stack : undefined }
      if (thrown.code !== undefined) out.code = String(thrown.code)
      return out
    }
    return { thrown: typeof thrown === 'string' ? thrown : String(thrown) }
  } catch {
    return { thrown: 'a value that cannot be shown as text' }
  }
}

/** The error sent by `errorOut`, rebuilt (a QueueError as one). A thrown non-Error comes back as that value. */
function errorIn(e) {
  if (e.thrown !== undefined) return e.thrown
  // Ours keep their class (a load error is a QueueError with its code where it is caught).
  const err = e.name === 'QueueError' && e.code !== undefined ? new QueueError(e.code, e.message) : new Error(e.message)
  err.name = e.name
  if (e.stack !== undefined) err.stack = e.stack
  if (e.code !== undefined) err.code = e.code
  return err
}

/**
 * Batches messages to `send` (one call per macrotask, with a JSON array): a thread or child
 * posts one message per batch of events or results, not one per job.
 */
class Batcher {
  constructor(send) {
    this._send = send
    this._items = []
    this._queued = false
  }

  push(item) {
    this._items.push(item)
    if (!this._queued) {
      this._queued = true
      setImmediate(() => this.flush())
    }
  }

  /** Sends what is batched now. */
  flush() {
    this._queued = false
    if (this._items.length === 0) return
    const items = this._items
    this._items = []
    this._send(JSON.stringify(items))
  }
}

module.exports = { recordOf, jobOf, errorOut, errorIn, Batcher }
