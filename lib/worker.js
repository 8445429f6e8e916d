'use strict'
// Worker: pulls batches of jobs (worker-loop.js: one sync try, then one async long-poll when the
// queue is empty; its free slots plus its prefetch, see prefetch.js), runs the user's processor on
// each as slots free, and acknowledges outcomes in one sync call per tick (worker-acks.js).
// Without a processor it hands out jobs one at a time (manual.js).

const { binding, fromBinding, isPending } = require('./native')
const { QueueError, RateLimitError, typeError, rangeError } = require('./errors')
const { Prefetch } = require('./prefetch')
const { QueueHandle } = require('./handle')
const { retentionJson } = require('./outcome')
const { releasedText } = require('./ack-wire')
const v = require('./validate')
const { checkGroup, pullLimits } = require('./pull-limits')
const { stopTimeout, cancelJob, cancelAllJobs } = require('./cancel')
const { flushAcks } = require('./worker-acks')
const { leaseOptions, openLease, hearQueueEvents, reportRecoveredStalls, holdWhileRunning, closeLease } = require('./lease')
const { getNextJob, extendJobLocks, forgetWorker } = require('./manual')
const { pullLoop } = require('./worker-loop')
const { isProcessorFile, processorPath } = require('./sandbox/processor-file')
const { sandboxOptions } = require('./sandbox/sandbox-options')
const { startJob, completeJob, failJob } = require('./worker-jobs')
const { metricsPoints } = require('./metrics')

class Worker extends QueueHandle {
  /**
   * @param {string} name queue name
   * @param {((job, token, signal) => Promise<any>) | string | URL} processor a function, or a
   *   file whose default export is one (run in child processes, or worker threads with
   *   `useWorkerThreads`: sandbox/)
   * @param {{ concurrency?: number, autorun?: boolean, drainDelay?: number,
   *           removeOnComplete?: any, removeOnFail?: any, prefix?: string,
   *           settings?: { backoffStrategy?: Function } }} [opts]
   */
  constructor(name, processor, opts) {
    const file = isProcessorFile(processor) ? processorPath(processor) : null
    // null or undefined: manual processing (getNextJob), as in BullMQ.
    if (file === null && processor != null && typeof processor !== 'function') {
      throw typeError('processor', `must be a function, a file path or URL (or null for manual processing with getNextJob), got ${v.describe(processor)}`)
    }
    // Worker threads pull on their own: a Worker of its own kind (sandbox/threaded-worker.js).
    if (file !== null && new.target === Worker && wantsThreads(opts)) {
      const { ThreadedWorker } = require('./sandbox/threaded-worker')
      return new ThreadedWorker(name, file, opts)
    }
    let keep, lease, sandbox, points
    super('Worker', name, opts, (o) => {
      sandbox = sandboxOptions(o, file)
      v.concurrency(o.concurrency ?? 1)
      if (o.prefetch !== undefined) v.prefetch(o.prefetch)
      v.limiter(o.limiter)
      checkGroup(o.group)
      v.optionalBoolean('autorun', o.autorun)
      v.number('drainDelay', o.drainDelay ?? 5)
      if (!(o.drainDelay === undefined || (o.drainDelay > 0 && o.drainDelay <= 3600))) {
        throw rangeError('drainDelay', `must be in (0, 3600] seconds, got ${o.drainDelay}`)
      }
      keep = retentionJson(o)
      lease = leaseOptions(o)
      if (o.name !== undefined) v.name('name', o.name, '(worker name) ')
      points = metricsPoints(o.metrics)
    })
    const o = this.opts
    // Child processes: this Worker pulls for them, `concurrency` jobs for each (sandbox/).
    this._copies = sandbox.children
    const concurrency = (o.concurrency ?? 1) * this._copies
    const drainDelay = o.drainDelay ?? 5
    this._concurrency = concurrency
    this._prefetch = new Prefetch(o.prefetch, this._engine.shared)
    // `limiter` and `group`, checked by the engine at each pull (pull-limits.js).
    this._limits = binding.pullLimits(pullLimits(o))
    // Holds the leases of the jobs it takes; its end (close, GC, thread gone) stalls those left.
    try {
      this._lease = openLease(this, lease)
    } catch (e) {
      this._closeHandle().catch(() => {})
      throw e
    }
    this._holder = this._lease.id
    if (points > 0) this._keepMetrics(points)
    this._file = file
    this._children = null
    if (file !== null && !sandbox.threads) {
      const { ChildPool } = require('./sandbox/child-pool')
      this._children = new ChildPool(this, file, sandbox)
      processor = this._children.processor
    }
    this._queueListener = null
    hearQueueEvents(this)
    /** Claimed jobs (records) not started yet: they start as slots free, in claim order. */
    this._buffer = []
    this._head = 0 // the next record of _buffer to start: slots freeing one by one copy nothing
    this._processor = processor ?? null
    /** Keys of the jobs fetched with getNextJob (locks.js). */
    this._fetched = new Set()
    this._backoffStrategy = o.settings === undefined ? undefined : o.settings.backoffStrategy
    try {
      this._wantsSignal = this._processor !== null && processor.length >= 3
    } catch {
      this._wantsSignal = true // a Proxy that hides its arity: give it a signal
    }
    this._pullTimeout = Math.round(drainDelay * 1000)
    this._keepDone = keep.done
    this._keepFail = keep.fail
    this._puller = binding.newPuller(this._holder) // single-use once cancelled: see _cancelPulls
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
    // BullMQ's `ready`: the worker can take jobs (its engine or connection is open already).
    queueMicrotask(() => {
      if (!this._closing) this._emitSafe('ready')
    })
    if (o.autorun !== false && this._processor !== null) {
      queueMicrotask(() => {
        if (!this._running && !this._closing) this.run().catch((err) => this._emitError(err))
      })
    }
  }

  /** Jobs run at once (BullMQ's `concurrency`); setting it checks the value and takes effect at once. */
  get concurrency() {
    return this._concurrency / this._copies
  }

  set concurrency(n) {
    v.concurrency(n)
    this._concurrency = n * this._copies
    this._wakeUp()
  }

  /** BullMQ's `Worker.RateLimitError()`: throw it from a processor after `rateLimit(ms)`. */
  static RateLimitError() {
    return new RateLimitError()
  }

  /**
   * No job of this queue starts, in any worker, for `expireTimeMs` ms (BullMQ's manual rate
   * limit, e.g. after an API answered 429); then throw `Worker.RateLimitError()` from the
   * processor to put the job back.
   */
  async rateLimit(expireTimeMs) {
    v.integerIn('expireTimeMs', expireTimeMs, 0, Number.MAX_SAFE_INTEGER)
    await this._change(binding.holdQueue, expireTimeMs)
  }

  /** Its queue records per-minute counts for `points` minutes (the option `metrics`). */
  _keepMetrics(points) {
    let kept
    try {
      kept = binding.keepMetrics(this._h, points)
    } catch (e) {
      throw fromBinding(e)
    }
    if (isPending(kept)) kept.catch((e) => this._emitError(fromBinding(e)))
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
    if (this._processor === null) {
      return Promise.reject(new QueueError('ERR_NO_PROCESSOR', 'No process function is defined: a Worker created without a processor hands out jobs with getNextJob(token)'))
    }
    this._running = true
    reportRecoveredStalls(this)
    const keepAlive = holdWhileRunning(this)
    const loop = this._children ? this._children.start().then(() => this._loop()) : this._loop()
    this._runPromise = loop.finally(() => {
      clearInterval(keepAlive)
      this._running = false
    })
    return this._runPromise
  }

  /** Claimed jobs not started yet. */
  get _held() {
    return this._buffer.length - this._head
  }

  /** Starts claimed jobs while slots are free. */
  _startBuffered() {
    if (this._paused || this._closing) return
    const buffer = this._buffer
    let head = this._head
    while (head < buffer.length && this._processing < this._concurrency) {
      this._start(buffer[head++])
      // A processor that paused or closed the worker at once has given the rest back already.
      if (this._buffer !== buffer) return
      this._head = head
      if (this._paused || this._closing) return
    }
    if (head === buffer.length) {
      this._buffer = []
      this._head = 0
    }
  }

  /** Gives the claimed jobs that have not started back to waiting. */
  _releaseBuffer() {
    const held = this._buffer.slice(this._head)
    this._buffer = []
    this._head = 0
    this._release(held, true)
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

  _loop() {
    return pullLoop(this)
  }

  _maybeDrained() {
    if (this._worked && !this._heldBack()) {
      this._worked = false
      this._emitSafe('drained')
    }
  }

  /** Whether ready jobs wait only for the queue's limits (then it is not drained). */
  _heldBack() {
    try {
      return binding.heldBack(this._h, this._limits)
    } catch (e) {
      this._emitError(fromBinding(e))
      return false
    }
  }

  _start(record) {
    startJob(this, record)
  }

  _complete(entry, value) {
    completeJob(this, entry, value)
  }

  /** Fails the job with whatever was thrown (see failureOf); never throws. */
  _fail(entry, thrown) {
    failJob(this, entry, thrown)
  }

  _queueAck(entry, text) {
    if (entry.done) return
    entry.done = true
    if (entry.timer !== undefined) stopTimeout(entry)
    this._processing--
    this._acks.push(text)
    this._ackJobs.push(entry)
    if (!this._flushQueued) {
      this._flushQueued = true
      queueMicrotask(() => this._flush())
    }
  }

  _flush() {
    flushAcks(this)
  }

  /**
   * Gives activated jobs back to waiting, unprocessed (no attempt counted); `unstarted`: their
   * processor never ran, so their start does not count either (`attemptsStarted`). Each goes to
   * the head of waiting, so they are sent last first: they keep their order there.
   */
  _release(jobs, unstarted = false) {
    if (jobs.length === 0) return
    const acks = []
    for (let i = jobs.length - 1; i >= 0; i--) acks.push(releasedText(jobs[i].id, jobs[i].token, unstarted))
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
    this._puller = binding.newPuller(this._holder)
  }

  /** Whether jobs taken for lease holder `id` are this Worker's (its threads' too: sandbox/). */
  _ownsHolder(id) {
    return id === this._holder
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
    this._releaseBuffer()
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
    this._emitSafe('closing', 'closing worker')
    this._closing = (async () => {
      this._cancelPulls()
      this._wakeUp()
      if (force) {
        const jobs = []
        for (const entry of this._active.values()) {
          stopTimeout(entry)
          if (entry.controller) entry.controller.abort(new QueueError('ERR_WORKER_CLOSED', 'worker closed with force'))
          jobs.push({ id: entry.id, token: entry.token })
        }
        this._active.clear()
        this._release(jobs)
      } else {
        await this._whenIdle()
      }
      if (this._runPromise) await this._runPromise.catch(() => {})
      if (!force) await this._whenIdle()
      if (this._children) await this._children.close(force)
      while (this._emitting.size) await Promise.all([...this._emitting])
      while (this._releasing.size) await Promise.all([...this._releasing])
      forgetWorker(this)
      closeLease(this)
      await this._closeHandle()
      this.emit('closed')
    })()
    return this._closing
  }

  /**
   * Aborts the signal of job `jobId` if it runs in this worker (the processor decides what
   * follows, as in BullMQ); whether it does. `reason` becomes the signal's reason.
   */
  cancelJob(jobId, reason) {
    return cancelJob(this._active, jobId, reason)
  }

  /** Aborts the signals of every job running in this worker. */
  cancelAllJobs(reason) {
    cancelAllJobs(this._active, reason)
  }

  /**
   * Manual processing: the next job, taken with `token` (waits up to `drainDelay` unless
   * `{ block: false }`); undefined when none came. Move it on with the same token
   * (`job.moveToCompleted(value, token)`, `moveToFailed(err, token)`).
   */
  getNextJob(token, opts) {
    return getNextJob(this, token, opts)
  }

  /** Extends the locks of jobs `jobIds` held with `tokens` (same order) to `duration` ms; answers how many are held. */
  extendJobLocks(jobIds, tokens, duration) {
    return extendJobLocks(this, jobIds, tokens, duration)
  }

  /** Resolves once the worker can be used (at once). */
  async waitUntilReady() {}
}

/** Whether a Worker's options ask for worker threads (read once, as the constructor checks them). */
function wantsThreads(opts) {
  try {
    return opts !== null && typeof opts === 'object' && opts.useWorkerThreads === true
  } catch {
    return false
  }
}

module.exports = { Worker }
