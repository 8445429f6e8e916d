'use strict'
// Worker: pulls batches of jobs (one sync try, then one async long-poll when the queue is empty),
// runs the user's processor on each, and acknowledges outcomes in one sync call per tick.

const { EventEmitter } = require('node:events')
const { binding, decode } = require('./native')
const { QueueError } = require('./errors')
const { Job } = require('./job')
const { openHandle, closeHandle, commitWait } = require('./queue')
const v = require('./validate')

let nextPuller = 1

function errorOf(thrown) {
  if (thrown instanceof Error) return thrown
  let text
  if (thrown === undefined) text = 'processor threw undefined (not an Error)'
  else if (thrown === null) text = 'processor threw null (not an Error)'
  else if (typeof thrown === 'string') text = thrown
  else {
    try {
      text = JSON.stringify(thrown) ?? String(thrown)
    } catch {
      text = String(thrown)
    }
  }
  const e = new Error(text)
  e.thrown = thrown
  return e
}

function isUnrecoverable(err) {
  return err && (err.name === 'UnrecoverableError' || err.constructor?.name === 'UnrecoverableError')
}

class Worker extends EventEmitter {
  /**
   * @param {string} name queue name
   * @param {(job, token, signal) => Promise<any>} processor
   * @param {{ concurrency?: number, autorun?: boolean, drainDelay?: number,
   *           removeOnComplete?: any, removeOnFail?: any }} [opts]
   */
  constructor(name, processor, opts) {
    super()
    if (typeof processor !== 'function') {
      throw Object.assign(new TypeError(`processor must be a function, got ${v.describe(processor)}`), {
        code: 'ERR_INVALID_OPTION',
      })
    }
    openHandle(this, name, opts)
    const o = this.opts
    const concurrency = o.concurrency ?? 1
    v.integerAtLeast('concurrency', concurrency, 1)
    if (o.autorun !== undefined && typeof o.autorun !== 'boolean') {
      throw Object.assign(new TypeError(`autorun must be a boolean, got ${v.describe(o.autorun)}`), {
        code: 'ERR_INVALID_OPTION',
      })
    }
    const drainDelay = o.drainDelay ?? 5
    v.number('drainDelay', drainDelay)
    if (!(drainDelay > 0 && drainDelay <= 3600)) {
      throw Object.assign(new RangeError(`drainDelay must be in (0, 3600] seconds, got ${drainDelay}`), {
        code: 'ERR_INVALID_OPTION',
      })
    }
    v.keepJobs('removeOnComplete', o.removeOnComplete)
    v.keepJobs('removeOnFail', o.removeOnFail)
    this.concurrency = concurrency
    this._processor = processor
    this._wantsSignal = processor.length >= 3
    this._pullTimeout = Math.round(drainDelay * 1000)
    this._keepDone = o.removeOnComplete === undefined ? '' : ',"keep":' + JSON.stringify(o.removeOnComplete)
    this._keepFail = o.removeOnFail === undefined ? '' : ',"keep":' + JSON.stringify(o.removeOnFail)
    this._puller = nextPuller++ // single-use once cancelled: see _cancelPulls
    this._active = new Map()
    this._acks = []
    this._ackJobs = []
    this._flushQueued = false
    this._running = false
    this._paused = false
    this._closing = null
    this._pulling = false
    this._worked = false
    this._wake = null
    this._idle = null
    this._runPromise = null
    this._emitting = new Set()
    if (o.autorun !== false) {
      queueMicrotask(() => {
        if (!this._running && !this._closing) this.run().catch((err) => this._emitError(err))
      })
    }
  }

  /** Jobs of a worker stay usable while it closes: a graceful close lets them finish. */
  _ensureOpen() {}

  _emitError(err) {
    if (this.listenerCount('error') > 0) this.emit('error', err)
  }

  /** Emits without letting a throwing listener break the worker's bookkeeping. */
  _emitSafe(event, a, b, c) {
    try {
      this.emit(event, a, b, c)
    } catch (err) {
      this._emitError(err)
    }
  }

  /** Starts processing; resolves when the worker is closed. */
  run() {
    if (this._running) return Promise.reject(new QueueError('ERR_WORKER_RUNNING', 'worker is already running'))
    if (this._closing) return Promise.reject(new QueueError('ERR_QUEUE_CLOSED', 'worker is closed'))
    this._running = true
    this._reportStalled()
    this._runPromise = this._loop().finally(() => {
      this._running = false
    })
    return this._runPromise
  }

  /** Jobs that were active when a durable engine's last process died: `stalled`, once. */
  _reportStalled() {
    let ids
    try {
      ids = binding.takeStalled(this._h)
    } catch (e) {
      return this._emitError(decode(e))
    }
    if (ids.length === 0) return
    setImmediate(() => {
      for (const id of ids) this._emitSafe('stalled', id, 'active')
    })
  }

  _sleep() {
    return new Promise((resolve) => {
      this._wake = resolve
    })
  }

  _wakeUp() {
    const w = this._wake
    if (w) {
      this._wake = null
      w()
    }
  }

  async _loop() {
    const h = this._h
    while (!this._closing) {
      if (this._paused || this._active.size >= this.concurrency) {
        await this._sleep()
        continue
      }
      const free = this.concurrency - this._active.size
      let text
      try {
        text = binding.tryPull(h, free)
      } catch (e) {
        this._emitError(decode(e))
        await new Promise((r) => setTimeout(r, 100))
        continue
      }
      if (text.length === 2) {
        if (this._active.size === 0 && this._emitting.size === 0) this._maybeDrained()
        this._pulling = true
        try {
          text = await binding.pull(h, this._puller, free, this._pullTimeout)
        } catch (e) {
          this._emitError(decode(e))
          text = '[]'
        } finally {
          this._pulling = false
        }
      }
      if (text.length === 2) continue
      const records = JSON.parse(text)
      if (this._closing) {
        // Taken while the worker was closing: give them back untouched for another worker.
        this._release(records)
        continue
      }
      for (let i = 0; i < records.length; i++) this._start(records[i])
    }
  }

  _maybeDrained() {
    if (this._worked) {
      this._worked = false
      this._emitSafe('drained')
    }
  }

  _start(record) {
    const job = Job.fromRecord(this, record)
    const controller = this._wantsSignal ? new AbortController() : undefined
    const entry = { job, controller }
    this._active.set(job.id, entry)
    this._worked = true
    this._emitSafe('active', job, 'waiting')
    let result
    try {
      result = this._processor(job, job.token, controller && controller.signal)
    } catch (err) {
      this._fail(entry, err)
      return
    }
    if (result !== null && typeof result === 'object' && typeof result.then === 'function') {
      result.then(
        (value) => this._complete(entry, value),
        (err) => this._fail(entry, err),
      )
    } else {
      this._complete(entry, result)
    }
  }

  _complete(entry, value) {
    let text
    try {
      text = v.toJson(value, 'returnvalue', 'null')
    } catch (err) {
      this._fail(entry, err)
      return
    }
    const job = entry.job
    job.returnvalue = value === undefined ? null : value
    this._queueAck(entry, `{"id":${JSON.stringify(job.id)},"token":${job.token},"ok":true,"value":${text}${this._keepDone}}`)
  }

  _fail(entry, thrown) {
    const err = errorOf(thrown)
    entry.error = err
    const job = entry.job
    job.failedReason = err.message
    const unrecoverable = isUnrecoverable(err)
    const stack = typeof err.stack === 'string' ? err.stack : null
    this._queueAck(
      entry,
      `{"id":${JSON.stringify(job.id)},"token":${job.token},"ok":false,"reason":${JSON.stringify(String(err.message))},"stack":${JSON.stringify(stack)},"unrecoverable":${unrecoverable}${this._keepFail}}`,
    )
  }

  _queueAck(entry, text) {
    this._acks.push(text)
    this._ackJobs.push(entry)
    if (!this._flushQueued) {
      this._flushQueued = true
      queueMicrotask(() => this._flush())
    }
  }

  _flush() {
    this._flushQueued = false
    const texts = this._acks
    const entries = this._ackJobs
    this._acks = []
    this._ackJobs = []
    if (texts.length === 0) return
    let results
    try {
      results = binding.ack(this._h, '[' + texts.join(',') + ']')
    } catch (e) {
      results = null
      this._emitError(decode(e))
    }
    const now = Date.now()
    for (let i = 0; i < entries.length; i++) {
      const entry = entries[i]
      const job = entry.job
      this._active.delete(job.id)
      const r = (entry.result = results ? results[i] : 3)
      if (r === 0) job.finishedOn = now
      else if (r === 1 || r === 2) {
        job.attemptsMade += 1
        if (r === 2) job.finishedOn = now
      }
    }
    const emit = () => {
      for (let i = 0; i < entries.length; i++) {
        const { job, result, error } = entries[i]
        if (result === 0) this._emitSafe('completed', job, job.returnvalue, 'active')
        else if (result === 1 || result === 2) this._emitSafe('failed', job, error, 'active')
      }
      if (this._active.size === 0 && this._pulling && this._emitting.size === 0) this._maybeDrained()
    }
    // Outcomes are reported only once they are durable (at once in memory).
    const wait = results ? commitWait(this) : null
    if (wait) {
      const p = wait.then(
        () => {
          this._emitting.delete(p)
          emit()
        },
        (err) => {
          this._emitting.delete(p)
          this._emitError(err)
        },
      )
      this._emitting.add(p)
    } else emit()
    if (this._active.size === 0) {
      const idle = this._idle
      if (idle) {
        this._idle = null
        idle()
      }
    }
    this._wakeUp()
  }

  /** Gives activated jobs back to waiting, unprocessed (no attempt counted). */
  _release(jobs) {
    if (jobs.length === 0) return
    const acks = jobs.map((j) => `{"id":${JSON.stringify(String(j.id))},"token":${j.token},"release":true}`)
    try {
      binding.ack(this._h, '[' + acks.join(',') + ']')
    } catch (e) {
      this._emitError(decode(e))
    }
  }

  /** Ends the pending pull (even one not yet registered natively); later pulls use a new id. */
  _cancelPulls() {
    if (!this._pulling) return
    try {
      binding.cancelPulls(this._h, this._puller)
    } catch (e) {
      this._emitError(decode(e))
    }
    this._puller = nextPuller++
  }

  _commitWait() {
    return commitWait(this)
  }

  /** Called by Job#updateProgress for jobs of this worker. */
  _onProgress(job, progress) {
    this.emit('progress', job, progress)
  }

  isRunning() {
    return this._running
  }

  isPaused() {
    return this._paused
  }

  _whenIdle() {
    if (this._active.size === 0) return Promise.resolve()
    return new Promise((resolve) => {
      const prev = this._idle
      this._idle = prev
        ? () => {
            prev()
            resolve()
          }
        : resolve
    })
  }

  /** Stops taking new jobs; resolves when active jobs are done (at once with doNotWaitActive). */
  async pause(doNotWaitActive = false) {
    if (this._paused) return
    this._paused = true
    this._cancelPulls()
    if (!doNotWaitActive) await this._whenIdle()
    this.emit('paused')
  }

  /** Takes jobs again after pause(). */
  resume() {
    if (!this._paused) return
    this._paused = false
    this._wakeUp()
    this.emit('resumed')
  }

  /**
   * Stops the worker. Waits for active jobs unless `force`; with `force`, aborts their signals
   * and puts them back to waiting so another worker can take them.
   */
  close(force = false) {
    if (this._closing) return this._closing
    this._closing = (async () => {
      this._cancelPulls()
      this._wakeUp()
      if (force) {
        const jobs = []
        for (const { job, controller } of this._active.values()) {
          if (controller) controller.abort(new QueueError('ERR_WORKER_CLOSED', 'worker closed with force'))
          jobs.push({ id: job.id, token: job.token })
        }
        this._active.clear()
        this._release(jobs)
      } else {
        await this._whenIdle()
      }
      if (this._runPromise) await this._runPromise
      if (!force) await this._whenIdle()
      while (this._emitting.size) await Promise.all([...this._emitting])
      await closeHandle(this)
      this.emit('closed')
    })()
    return this._closing
  }

  /** Resolves once the worker can be used (at once). */
  async waitUntilReady() {}
}

module.exports = { Worker }
