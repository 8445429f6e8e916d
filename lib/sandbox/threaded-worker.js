'use strict'
// A Worker whose processor file runs in worker threads (`useWorkerThreads: true`). Each thread
// runs a Worker of its own on the same engine (thread-main.js): it pulls, processes and acks
// there, so no job crosses a message. This Worker starts the threads, relays their events
// (batched), forwards pause / resume / close / cancel to them, and replaces a thread that dies,
// after failing the jobs it held (lost-jobs.js).

const path = require('node:path')
const { Worker: Thread } = require('node:worker_threads')
const { Worker } = require('../worker')
const { QueueError } = require('../errors')
const { openLease, reportRecoveredStalls, holdWhileRunning, closeLease } = require('../lease')
const { jobOf, errorIn } = require('./relay')
const { settleHeld } = require('./lost-jobs')
const { sandboxOptions } = require('./sandbox-options')

/** The Worker events a thread relays when this Worker has listeners for them. */
const RELAYED = ['active', 'completed', 'failed', 'progress']
/** Options that concern this Worker, not the Workers of its threads. */
const PARENT_ONLY = ['useWorkerThreads', 'threads', 'workerThreadsOptions', 'workerForkOptions', 'autorun', 'settings']
/** A thread that dies sooner than this after it started is replaced only after this long. */
const RESTART_DELAY_MS = 1000
/** How long a thread may take to close its Worker once asked before it is terminated. */
const CLOSE_WAIT_MS = 30_000

class ThreadedWorker extends Worker {
  constructor(name, file, opts) {
    super(name, file, opts)
    const o = this.opts
    const sandbox = sandboxOptions(o, file)
    this._count = sandbox.count
    this._threadOptions = sandbox.threadOptions
    this._leaseTerms = leaseTermsOf(this)
    this._threadOpts = Object.fromEntries(Object.entries(o).filter(([k]) => !PARENT_ONLY.includes(k)))
    /** One slot per thread: { thread, lease, active: Set of job ids, stopping, exited }. */
    this._slots = []
    this._calls = new Map()
    this._nextCall = 1
    this._endRun = null
    this._listenQueued = false
    const changed = (event) => {
      if (RELAYED.includes(event)) this._listenersChanged()
    }
    this.on('newListener', changed)
    this.on('removeListener', changed)
  }

  set concurrency(n) {
    super.concurrency = n
    this._broadcast('concurrency', [n]).catch((e) => this._emitError(e))
  }

  get concurrency() {
    return super.concurrency
  }

  _ownsHolder(id) {
    return id === this._holder || this._slots.some((s) => s.lease.id === id)
  }

  run() {
    if (this._running) return Promise.reject(new QueueError('ERR_WORKER_RUNNING', 'worker is already running'))
    if (this._closing) return Promise.reject(new QueueError('ERR_QUEUE_CLOSED', 'worker is closed'))
    this._running = true
    reportRecoveredStalls(this)
    const keepAlive = holdWhileRunning(this)
    this._runPromise = this._runThreads().finally(() => {
      clearInterval(keepAlive)
      this._running = false
    })
    return this._runPromise
  }

  /** Starts the threads; resolves when the Worker closes, rejects when the file cannot be loaded. */
  async _runThreads() {
    const ended = new Promise((resolve) => {
      this._endRun = resolve
    })
    const started = []
    for (let i = 0; i < this._count; i++) started.push(this._startSlot(i))
    try {
      await Promise.all(started)
    } catch (e) {
      this.close(true).catch(() => {})
      throw e
    }
    await ended
  }

  /** Starts thread `i`; resolves once its processor is loaded and its Worker runs. */
  _startSlot(i) {
    const lease = openLease(this, this._leaseTerms)
    const thread = new Thread(path.join(__dirname, 'thread-main.js'), {
      ...this._threadOptions,
      workerData: { name: this.name, file: this._file, opts: this._threadOpts, holder: lease.id },
    })
    const slot = { thread, lease, active: new Set(), stopping: null, started: false, ready: false, error: null, loadError: null, since: Date.now(), exited: null }
    this._slots[i] = slot
    let ready, failed
    const whenReady = new Promise((resolve, reject) => {
      ready = resolve
      failed = (err) => (err ? reject(err) : resolve())
    })
    thread.on('message', (m) => this._hear(slot, m, ready))
    thread.on('error', (err) => {
      slot.error = err
    })
    slot.exited = new Promise((resolve) => {
      thread.on('exit', (code) => resolve(this._exited(i, slot, code, failed)))
    })
    return whenReady
  }

  _hear(slot, m, ready) {
    switch (m.t) {
      case 'events':
        return this._relayed(slot, JSON.parse(m.text))
      case 'loaded':
        slot.thread.postMessage({ t: 'start', events: this._listened(), paused: this._paused })
        // Calls from now on reach its Worker after it started (messages keep their order).
        slot.started = true
        return
      case 'ready':
        slot.ready = true
        return ready()
      case 'load-failed':
        slot.loadError = errorIn(m.error)
        return
      case 'reply': {
        const call = this._calls.get(m.n)
        if (!call) return
        this._calls.delete(m.n)
        if (m.ok) call.resolve()
        else call.reject(errorIn(m.error))
      }
    }
  }

  /** Emits a batch of a thread's events, with Jobs of this Worker. */
  _relayed(slot, batch) {
    for (const e of batch) {
      switch (e[0]) {
        case 'start':
          slot.active.add(e[1])
          break
        case 'end':
          slot.active.delete(e[1])
          break
        case 'active':
          this._emitSafe('active', jobOf(this, e[1]), 'waiting')
          break
        case 'completed': {
          const job = jobOf(this, e[1])
          this._emitSafe('completed', job, job.returnvalue, 'active')
          break
        }
        case 'failed':
          this._emitSafe('failed', e[1] && jobOf(this, e[1]), errorIn(e[2]), 'active')
          break
        case 'progress':
          this._emitSafe('progress', jobOf(this, e[1]), e[2])
          break
        case 'drained':
          // One `drained` for the Worker: when no thread has a job left.
          if (this._slots.every((s) => s.active.size === 0)) this._emitSafe('drained')
          break
        case 'error':
          this._emitError(errorIn(e[1]))
          break
      }
    }
  }

  /** Thread `i` exited: settles its jobs, lets its holder go, and replaces it if it died. */
  async _exited(i, slot, code, failedToStart) {
    for (const [n, call] of this._calls) {
      if (call.slot === slot) {
        this._calls.delete(n)
        call.resolve()
      }
    }
    const died = slot.stopping === null || (slot.stopping === 'close' && !slot.closed)
    const reason = slot.error ? `worker thread died: ${slot.error.message}` : `worker thread exited with code ${code}`
    await settleHeld(this, slot.lease.id, slot.stopping === 'force', reason)
    try {
      slot.lease.release()
    } catch (e) {
      this._emitError(e)
    }
    if (!slot.ready && slot.stopping !== null) return failedToStart(null) // closed while it started
    if (!slot.ready) {
      const cause = slot.loadError ?? slot.error
      const err = slot.loadError ?? new QueueError('ERR_WORKER_LOST', `worker thread for processor file ${this._file} exited before it started (code ${code})${cause ? `: ${cause.message}` : ''}`)
      failedToStart(err)
      return
    }
    if (!died || this._closing || !this._running) return
    this._emitError(new QueueError('ERR_WORKER_LOST', `${reason}; its active jobs failed and a new thread takes its place`))
    this._replace(i, Date.now() - slot.since < RESTART_DELAY_MS)
  }

  /** Starts thread `i` again (after a pause when `soon`), and again while it fails to start. */
  async _replace(i, soon) {
    if (soon) await new Promise((r) => setTimeout(r, RESTART_DELAY_MS))
    if (this._closing || !this._running) return
    this._startSlot(i).catch((e) => {
      this._emitError(e)
      this._replace(i, true)
    })
  }

  /** Calls method `m` of the Worker in every thread; resolves when all answered (or exited). */
  _broadcast(m, a) {
    return Promise.all(this._slots.filter((s) => s.started && s.stopping === null).map((s) => this._callSlot(s, m, a)))
  }

  _callSlot(slot, m, a) {
    const n = this._nextCall++
    return new Promise((resolve, reject) => {
      this._calls.set(n, { slot, resolve, reject })
      try {
        slot.thread.postMessage({ t: 'call', n, m, a })
      } catch (e) {
        this._calls.delete(n)
        reject(e)
      }
    })
  }

  _listened() {
    return RELAYED.filter((e) => this.listenerCount(e) > 0)
  }

  _listenersChanged() {
    if (this._listenQueued) return
    this._listenQueued = true
    // After the listener is added or removed (newListener fires before).
    queueMicrotask(() => {
      this._listenQueued = false
      const events = this._listened()
      for (const s of this._slots) {
        if (s && s.stopping === null) s.thread.postMessage({ t: 'listen', events })
      }
    })
  }

  async pause(doNotWaitActive = false) {
    if (this._paused) return
    this._paused = true
    await this._broadcast('pause', [doNotWaitActive])
    this.emit('paused')
  }

  async resume() {
    if (this._closing || (this._running && !this._paused)) return
    this._paused = false
    if (this._running) await this._broadcast('resume', [])
    else this.run().catch((err) => this._emitError(err))
    this._emitSafe('resumed')
  }

  cancelJob(jobId, reason) {
    const slot = this._slots.find((s) => s && s.active.has(String(jobId)))
    if (!slot) return false
    this._callSlot(slot, 'cancel', [String(jobId), reason]).catch((e) => this._emitError(e))
    return true
  }

  cancelAllJobs(reason) {
    this._broadcast('cancelAll', [reason]).catch((e) => this._emitError(e))
  }

  getNextJob() {
    return Promise.reject(sandboxed('getNextJob'))
  }

  extendJobLocks() {
    return Promise.reject(sandboxed('extendJobLocks'))
  }

  /**
   * Stops the threads: each closes its Worker (waiting for its jobs) and exits; with `force`
   * they are terminated and their jobs go back to waiting.
   */
  close(force = false) {
    if (this._closing) return this._closing
    this._emitSafe('closing', 'closing worker')
    this._closing = (async () => {
      await Promise.all(this._slots.map((s) => s && this._stopSlot(s, force)))
      if (this._endRun) this._endRun()
      if (this._runPromise) await this._runPromise.catch(() => {})
      while (this._emitting.size) await Promise.all([...this._emitting])
      closeLease(this)
      await this._closeHandle()
      this.emit('closed')
    })()
    return this._closing
  }

  async _stopSlot(slot, force) {
    if (slot.stopping === null) {
      slot.stopping = force || !slot.ready ? 'force' : 'close'
      if (slot.stopping === 'force') {
        slot.thread.terminate()
      } else {
        const timer = setTimeout(() => slot.thread.terminate(), CLOSE_WAIT_MS)
        this._callSlot(slot, 'close', [false]).then(
          () => {
            slot.closed = true
          },
          (e) => this._emitError(e),
        ).finally(() => clearTimeout(timer))
      }
    } else if (force && slot.stopping === 'close') {
      slot.stopping = 'force'
      slot.thread.terminate()
    }
    await slot.exited
  }
}

/**
 * The lease terms of its threads' holders: its own (its options, checked already), unlisted by
 * getWorkers, which lists this Worker once.
 */
function leaseTermsOf(w) {
  const { leaseOptions } = require('../lease')
  return { ...leaseOptions(w.opts), listed: false }
}

function sandboxed(method) {
  return new QueueError('ERR_SANDBOXED', `${method} is for a Worker without a processor (manual processing); this one runs its processor file in worker threads`)
}

module.exports = { ThreadedWorker }
