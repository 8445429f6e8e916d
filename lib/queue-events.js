'use strict'
// QueueEvents: the engine's transitions of one queue as BullMQ's events, delivered in-process in
// batches (no polling). Listeners get (payload, eventId).

const { EventEmitter } = require('node:events')
const { openHandle, closeHandle } = require('./queue')
const v = require('./validate')

class QueueEvents extends EventEmitter {
  /**
   * @param {string} name queue name
   * @param {{ autorun?: boolean }} [opts]
   */
  constructor(name, opts) {
    super()
    openHandle(this, name, opts, (o) => v.optionalBoolean('autorun', o.autorun))
    this._waiters = new Map()
    this._running = false
    if (this.opts.autorun !== false) this.run()
  }

  /** Starts delivering events (called by the constructor unless autorun is false). */
  run() {
    if (this._running || this._closed) return
    this._running = true
    this._engine.listen(this._h, this.name, this)
  }

  _deliver(name, payload, id) {
    if (name === 'completed' || name === 'failed') {
      const set = this._waiters.get(payload.jobId)
      if (set) {
        this._waiters.delete(payload.jobId)
        for (const cb of set) cb(name, payload)
      }
    }
    this.emit(name, payload, id)
  }

  /** A listener threw: `error` if someone listens for it, else rethrown outside the dispatch. */
  _listenerFailed(err) {
    if (this.listenerCount('error') > 0) this.emit('error', err)
    else
      process.nextTick(() => {
        throw err
      })
  }

  /** Calls `cb(name, payload)` once when job `jobId` completes or fails; returns a canceller. */
  _waitFor(jobId, cb) {
    let set = this._waiters.get(jobId)
    if (!set) this._waiters.set(jobId, (set = new Set()))
    set.add(cb)
    return () => {
      set.delete(cb)
      if (set.size === 0 && this._waiters.get(jobId) === set) this._waiters.delete(jobId)
    }
  }

  _ensureOpen() {
    if (this._closed) {
      const { QueueError } = require('./errors')
      throw new QueueError('ERR_QUEUE_CLOSED', `queue events of "${this.name}" are closed`)
    }
  }

  /** Resolves once events flow (at once). */
  async waitUntilReady() {}

  /** Stops delivering events; releases the native subscription. */
  async close() {
    if (this._closed) return
    this._closed = true
    if (this._running) this._engine.unlisten(this._h, this.name, this)
    this._running = false
    await closeHandle(this)
    this.emit('closed')
  }
}

module.exports = { QueueEvents }
