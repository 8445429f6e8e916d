'use strict'
// QueueEvents: the engine's transitions of one queue as BullMQ's events, delivered in-process in
// batches (no polling). Listeners get (payload, eventId), `drained` gets (eventId); every event
// about a job is emitted a second time as `${event}:${jobId}`, as BullMQ does.

const { QueueHandle } = require('./handle')
const { QueueError } = require('./errors')
const v = require('./validate')

/** Whether an event name is a per-job one (`completed:42`). */
function perJob(event) {
  return typeof event === 'string' && event.includes(':')
}

class QueueEvents extends QueueHandle {
  /**
   * @param {string} name queue name
   * @param {{ autorun?: boolean, lastEventId?: '$', prefix?: string }} [opts]
   */
  constructor(name, opts) {
    super('QueueEvents', name, opts, (o) => v.optionalBoolean('autorun', o.autorun))
    this._waiters = new Map()
    this._running = false
    this._stopped = null
    // Listeners of per-job events: only while there are some is each event emitted twice.
    this._perJob = 0
    this.on('newListener', (event) => {
      if (perJob(event)) this._perJob++
    })
    this.on('removeListener', (event) => {
      if (perJob(event)) this._perJob--
    })
    if (this.opts.autorun !== false) this.run().catch((err) => this.emit('error', err))
  }

  /**
   * Starts delivering events (called by the constructor unless autorun is false); resolves once
   * the QueueEvents is closed, as BullMQ's does. Rejects if it runs already or was closed.
   */
  run() {
    if (this._closed) return Promise.reject(new QueueError('ERR_QUEUE_CLOSED', `queue events of "${this.name}" are closed`))
    if (this._running) return Promise.reject(new QueueError('ERR_QUEUE_EVENTS_RUNNING', `queue events of "${this.name}" are already running`))
    this._running = true
    this._engine.listen(this._h, this._key, this)
    return new Promise((resolve) => {
      this._stopped = resolve
    })
  }

  _deliver(name, payload, id) {
    // A Worker's own lock events (lease.js) are not queue events.
    if (name === 'locksRenewed' || name === 'lockRenewalFailed') return
    if (name === 'drained') {
      this.emit(name, id)
      return
    }
    const jobId = payload.jobId
    if (name === 'completed' || name === 'failed') {
      const set = this._waiters.get(jobId)
      if (set) {
        this._waiters.delete(jobId)
        for (const cb of set) cb(name, payload)
      }
    }
    this.emit(name, payload, id)
    if (this._perJob > 0 && jobId !== undefined) this.emit(`${name}:${jobId}`, payload, id)
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
    if (this._closed) throw new QueueError('ERR_QUEUE_CLOSED', `queue events of "${this.name}" are closed`)
  }

  /** Resolves once events flow (at once). */
  async waitUntilReady() {}

  /** Stops delivering events; releases the native subscription. */
  async close() {
    if (this._closed) return
    this._closed = true
    if (this._running) this._engine.unlisten(this._h, this._key, this)
    this._running = false
    await this._closeHandle()
    if (this._stopped) this._stopped()
    this.emit('closed')
  }
}

module.exports = { QueueEvents }
