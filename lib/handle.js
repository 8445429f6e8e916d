'use strict'
// QueueHandle: what Queue, Worker and QueueEvents share — one native queue handle on an engine of
// this process, the options every one of them takes (`dataPath`, `durability`, `prefix`), the
// wait for commits, and letting go of the engine. It is also the whole contract a Job needs from
// the object it came from (see job.js): `_h`, `_ensureOpen()`, `_commitWait()` and, optionally,
// `_onProgress(job, progress)`.

const { EventEmitter } = require('node:events')
const { acquireEngine, releaseEngine, openQueue, fromBinding, isPending, native } = require('./native')
const { QueueError, inputError } = require('./errors')
const { checkClassOptions } = require('./options')
const v = require('./validate')

/** BullMQ's default prefix: the namespace of plain queue names (see domain/queue_name.rs). */
const DEFAULT_PREFIX = 'bull'

class QueueHandle extends EventEmitter {
  /**
   * Checks the options `cls` takes (`check(opts)` checks the subclass's own first, on the
   * caller's own copy of them, so that a bad option throws before any engine is held), finds
   * the engine and opens the handle.
   */
  constructor(cls, name, opts, check) {
    super()
    v.queueName(name)
    this.name = name
    this.opts = v.ownOptions(opts)
    try {
      checkClassOptions(cls, this.opts)
    } catch (e) {
      throw inputError(e, 'opts')
    }
    if (check) check(this.opts)
    const prefix = this.opts.prefix
    // The queue's name inside the engine, as events carry it.
    this._key = prefix === undefined || prefix === DEFAULT_PREFIX ? name : `${prefix}:${name}`
    const { engine, durability } = acquireEngine(this.opts)
    try {
      this._h = openQueue(engine.id, name, prefix ?? null)
    } catch (e) {
      releaseEngine(engine).catch(() => {})
      throw e
    }
    this._engine = engine
    this._durability = durability
    this._closed = false
    this._released = false
  }

  /** BullMQ's key of the queue, `prefix:name` (what a child's `parent.queue` names). */
  get qualifiedName() {
    return this._key.includes(':') ? this._key : `${DEFAULT_PREFIX}:${this._key}`
  }

  /** Throws ERR_QUEUE_CLOSED once closed (a Worker overrides: its jobs finish while it closes). */
  _ensureOpen() {
    if (this._closed) throw new QueueError('ERR_QUEUE_CLOSED', `queue "${this.name}" is closed`)
  }

  _call(fn, ...args) {
    this._ensureOpen()
    try {
      return fn(this._h, ...args)
    } catch (e) {
      throw fromBinding(e)
    }
  }

  /**
   * Runs a changing call and resolves once its change is durable: its answer (at hand, or
   * pending: held back by the writer, or made after a file read), then the wait for this
   * thread's commit ticket (see QueueHandle#_commitWait).
   */
  async _change(fn, ...args) {
    let r = this._call(fn, ...args)
    if (isPending(r)) r = await native(r)
    const wait = this._commitWait()
    if (wait) await wait
    return r
  }

  /**
   * The wait for the changes this thread made so far to be durable: a promise on a durable
   * engine with durability 'commit' or 'fsync', null otherwise (in memory, or 'buffered').
   */
  _commitWait() {
    return this._durability === 'buffered' ? null : this._engine.commitBarrier()
  }

  /** Lets go of the engine once (the last user of a durable engine closes it). */
  _closeHandle() {
    if (this._released) return Promise.resolve()
    this._released = true
    return releaseEngine(this._engine)
  }
}

module.exports = { QueueHandle }
