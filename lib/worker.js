'use strict'
// Worker: pulls batches of jobs (one sync try, then one async long-poll when the queue is empty),
// runs the user's processor on each, and acknowledges outcomes in one sync call per tick.

const { binding, fromBinding, isPending, native } = require('./native')
const { QueueError, typeError, rangeError, textOf } = require('./errors')
const { Job } = require('./job')
const { QueueHandle } = require('./handle')
const { Completed, Retrying, Failed, Stale, first, failureOf, retentionJson, customBackoff, settleJob } = require('./outcome')
const v = require('./validate')

let nextPuller = 1

class Worker extends QueueHandle {
  /**
   * @param {string} name queue name
   * @param {(job, token, signal) => Promise<any>} processor
   * @param {{ concurrency?: number, autorun?: boolean, drainDelay?: number,
   *           removeOnComplete?: any, removeOnFail?: any, prefix?: string,
   *           settings?: { backoffStrategy?: Function } }} [opts]
   */
  constructor(name, processor, opts) {
    if (typeof processor !== 'function') throw typeError('processor', `must be a function, got ${v.describe(processor)}`)
    let keep
    super('Worker', name, opts, (o) => {
      v.concurrency(o.concurrency ?? 1)
      v.optionalBoolean('autorun', o.autorun)
      v.number('drainDelay', o.drainDelay ?? 5)
      if (!(o.drainDelay === undefined || (o.drainDelay > 0 && o.drainDelay <= 3600))) {
        throw rangeError('drainDelay', `must be in (0, 3600] seconds, got ${o.drainDelay}`)
      }
      keep = retentionJson(o)
    })
    const o = this.opts
    const concurrency = o.concurrency ?? 1
    const drainDelay = o.drainDelay ?? 5
    this._concurrency = concurrency
    this._processor = processor
    this._backoffStrategy = o.settings === undefined ? undefined : o.settings.backoffStrategy
    try {
      this._wantsSignal = processor.length >= 3
    } catch {
      this._wantsSignal = true // a Proxy that hides its arity: give it a signal
    }
    this._pullTimeout = Math.round(drainDelay * 1000)
    this._keepDone = keep.done
    this._keepFail = keep.fail
    this._puller = nextPuller++ // single-use once cancelled: see _cancelPulls
    this._active = new Map()
    // Jobs whose processor still runs. A slot frees when the processor is done, not when its
    // ack is answered: the next claim then goes with the ack (one round trip for both on
    // PostgreSQL), as BullMQ's moveToCompleted fetches the next job.
    this._processing = 0
    this._acks = []
    this._ackJobs = []
    this._flushQueued = false
    this._running = false
    this._paused = false
    this._closing = null
    this._pulling = false
    this._worked = false
    /** Releases of jobs given back, still in flight. */
    this._releasing = new Set()
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

  /** Jobs run at once (BullMQ's `concurrency`); setting it checks the value and takes effect at once. */
  get concurrency() {
    return this._concurrency
  }

  set concurrency(n) {
    v.concurrency(n)
    this._concurrency = n
    this._wakeUp()
  }

  /** Jobs of a worker stay usable while it closes: a graceful close lets them finish. */
  _ensureOpen() {}

  /** `error` to its listeners; with none, to console.error as BullMQ does (never dropped). */
  _emitError(err) {
    if (this.listenerCount('error') > 0) {
      try {
        this.emit('error', err)
        return
      } catch (thrown) {
        err = thrown
      }
    }
    console.error(err)
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
  async _reportStalled() {
    let ids
    try {
      ids = await native(binding.takeStalled(this._h))
    } catch (e) {
      return this._emitError(fromBinding(e))
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
      if (this._paused || this._processing >= this.concurrency) {
        await this._sleep()
        continue
      }
      const free = this.concurrency - this._processing
      let text
      try {
        text = binding.tryPull(h, free)
        if (isPending(text)) text = await native(text)
      } catch (e) {
        this._emitError(fromBinding(e))
        await new Promise((r) => setTimeout(r, 100))
        continue
      }
      if (text.length === 2) {
        if (this._active.size === 0 && this._emitting.size === 0) this._maybeDrained()
        // A pending try (a database round trip) lets close() or pause() run meanwhile: they
        // found no pull to cancel, so none may start now.
        if (this._closing || this._paused) continue
        this._pulling = true
        try {
          text = await binding.pull(h, this._puller, free, this._pullTimeout)
        } catch (e) {
          this._emitError(fromBinding(e))
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
    }
    // By token, not id: after obliterate() an id comes back while its old activation may still run.
    this._active.set(entry.token, entry)
    this._processing++
    this._worked = true
    this._emitSafe('active', job, 'waiting')
    try {
      const result = this._processor(job, job.token, controller && controller.signal)
      if (result !== null && typeof result === 'object' && typeof result.then === 'function') {
        // Promise.prototype.then over Promise.resolve: a foreign thenable cannot call back twice
        // or throw past us.
        Promise.prototype.then.call(
          result instanceof Promise ? result : Promise.resolve(result),
          (value) => this._complete(entry, value),
          (err) => this._fail(entry, err),
        )
      } else {
        this._complete(entry, result)
      }
    } catch (err) {
      this._fail(entry, err)
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
    entry.value = value === undefined ? null : value
    this._queueAck(entry, `{"id":${JSON.stringify(entry.id)},"token":${entry.token},"ok":true,"value":${text}${this._keepDone}}`)
  }

  /** Fails the job with whatever was thrown (see failureOf); never throws. */
  _fail(entry, thrown) {
    const f = failureOf(thrown)
    entry.error = f.error
    entry.reason = f.reason
    if (entry.backoff !== null && !f.unrecoverable && entry.attemptsMade + 1 < entry.attempts) {
      this._customBackoff(entry, f)
      return
    }
    this._queueAck(entry, this._failText(entry, f.reason, f.stack, f.unrecoverable, this._keepFail))
  }

  /**
   * A retry whose wait `settings.backoffStrategy` decides (BullMQ's custom backoff): called with
   * (attemptsMade, type, err, job), it returns (or resolves) the wait in ms, or -1 for no retry.
   * Without a strategy, or when it throws or answers something else, the job fails without retry
   * and the worker emits `error` (ERR_BACKOFF_STRATEGY) saying why.
   */
  _customBackoff(entry, f) {
    const type = entry.backoff
    const send = (delay, noRetry) => {
      this._queueAck(entry, this._failText(entry, f.reason, f.stack, noRetry, this._keepFail, delay))
    }
    const refuse = (message, cause) => {
      const e = new QueueError('ERR_BACKOFF_STRATEGY', `${message}; job ${entry.id} failed without retry`)
      if (cause !== undefined) e.cause = cause
      this._emitError(e)
      send(undefined, true)
    }
    const decide = (d) => {
      if (d === -1) send(undefined, true)
      else if (typeof d === 'number' && Number.isFinite(d) && d >= 0) send(Math.round(d), false)
      else refuse(`settings.backoffStrategy must return a number >= 0 (ms), or -1 for no retry, got ${v.describe(d)}`)
    }
    const strategy = this._backoffStrategy
    if (strategy === undefined) {
      refuse(`backoff type ${JSON.stringify(textOf(type))} is not built in ('fixed', 'exponential'): give the Worker settings.backoffStrategy`)
      return
    }
    let r
    try {
      r = strategy(entry.attemptsMade + 1, type, f.error, entry.job)
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

  _failText(entry, reason, stack, unrecoverable, keep, delay) {
    const wait = delay === undefined ? '' : `,"delay":${delay}`
    return `{"id":${JSON.stringify(entry.id)},"token":${entry.token},"ok":false,"reason":${JSON.stringify(reason)},"stack":${JSON.stringify(stack)},"unrecoverable":${unrecoverable}${wait}${keep}}`
  }

  _queueAck(entry, text) {
    if (entry.done) return
    entry.done = true
    this._processing--
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
    const results = this._ackAll(texts, entries)
    if (isPending(results)) {
      // Acks answered later (held back by the writer's backlog, or a database round trip):
      // settle the jobs when they are. If the answer fails (the storage failed, or the round
      // trip), the outcomes count as not recorded here; a durable backend delivers those jobs
      // again (at-least-once).
      // Out of `_emitting` before settling, so that the last ack can see the worker drained.
      const p = results.then(
        (r) => {
          this._emitting.delete(p)
          this._acked(entries, r)
        },
        (e) => {
          this._emitting.delete(p)
          this._emitError(fromBinding(e))
          this._acked(entries, new Array(entries.length).fill(Stale))
        },
      )
      this._emitting.add(p)
      // The slots are free already: the next pull goes while the acks are in flight.
      this._wakeUp()
      return
    }
    this._acked(entries, results)
  }

  /** Settles acked jobs with their outcomes and reports them once durable. */
  _acked(entries, results) {
    const now = Date.now()
    for (let i = 0; i < entries.length; i++) {
      const entry = entries[i]
      this._active.delete(entry.token)
      entry.result = results[i]
      settleJob(entry, now)
    }
    const emit = () => {
      for (let i = 0; i < entries.length; i++) {
        const { job, result, error, value } = entries[i]
        if (result === Completed) this._emitSafe('completed', job, value, 'active')
        else if (result === Retrying || result === Failed) this._emitSafe('failed', job, error, 'active')
      }
      if (this._active.size === 0 && this._pulling && this._emitting.size === 0) this._maybeDrained()
    }
    // Outcomes are reported only once they are durable (at once in memory).
    const wait = this._commitWait()
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

  /**
   * Sends a batch of acks; one AckOutcome per ack. Should
   * the batch be refused (a bug of ours), each ack goes alone, and one refused alone fails its
   * job with the reason instead, so that no job is left active.
   */
  _ackAll(texts, entries) {
    try {
      return binding.ack(this._h, '[' + texts.join(',') + ']')
    } catch (e) {
      this._emitError(fromBinding(e))
    }
    const results = new Array(texts.length).fill(Stale)
    for (let i = 0; i < texts.length; i++) {
      try {
        results[i] = first(binding.ack(this._h, '[' + texts[i] + ']'))
      } catch (e) {
        const err = fromBinding(e)
        this._emitError(err)
        const entry = entries[i]
        entry.error = err
        entry.reason = `ferroqueue could not record the outcome: ${err.message}`
        try {
          results[i] = first(binding.ack(this._h, '[' + this._failText(entry, entry.reason, null, false, '') + ']'))
        } catch (again) {
          this._emitError(fromBinding(again))
        }
      }
    }
    return results.some(isPending) ? Promise.all(results) : results
  }

  /** Gives activated jobs back to waiting, unprocessed (no attempt counted). */
  _release(jobs) {
    if (jobs.length === 0) return
    const acks = jobs.map((j) => `{"id":${JSON.stringify(String(j.id))},"token":${j.token},"release":true}`)
    try {
      const r = binding.ack(this._h, '[' + acks.join(',') + ']')
      // Held back (back-pressure) or a round trip: a failure is reported, never unhandled, and
      // close() waits for it (the engine must not close under it).
      if (isPending(r)) {
        const p = r.catch((e) => this._emitError(fromBinding(e))).finally(() => this._releasing.delete(p))
        this._releasing.add(p)
      }
    } catch (e) {
      this._emitError(fromBinding(e))
    }
  }

  /** Ends the pending pull (even one not yet registered natively); later pulls use a new id. */
  _cancelPulls() {
    if (!this._pulling) return
    try {
      binding.cancelPulls(this._h, this._puller)
    } catch (e) {
      this._emitError(fromBinding(e))
    }
    this._puller = nextPuller++
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

  /**
   * Takes jobs again after pause(); as in BullMQ 6, also starts a worker that is not running yet
   * (autorun: false). Resolves when done.
   */
  async resume() {
    if (this._closing || (this._running && !this._paused)) return
    this._paused = false
    if (this._running) this._wakeUp()
    else this.run().catch((err) => this._emitError(err))
    this._emitSafe('resumed')
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
        for (const { id, token, controller } of this._active.values()) {
          if (controller) controller.abort(new QueueError('ERR_WORKER_CLOSED', 'worker closed with force'))
          jobs.push({ id, token })
        }
        this._active.clear()
        this._release(jobs)
      } else {
        await this._whenIdle()
      }
      if (this._runPromise) await this._runPromise
      if (!force) await this._whenIdle()
      while (this._emitting.size) await Promise.all([...this._emitting])
      while (this._releasing.size) await Promise.all([...this._releasing])
      await this._closeHandle()
      this.emit('closed')
    })()
    return this._closing
  }

  /** Resolves once the worker can be used (at once). */
  async waitUntilReady() {}
}

module.exports = { Worker }
