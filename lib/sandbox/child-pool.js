'use strict'
// The child processes of a Worker whose processor file runs in them (BullMQ's default for a
// processor file). A child process cannot share this process's engine, so the Worker pulls and
// acks as for a processor function, and this pool's `processor` hands each job to the child with
// the fewest running: records go out in batches, results and the processor's calls on its job
// come back in batches (child-main.js). A child that dies fails its jobs (WorkerLostError, kind
// `worker_lost`, retried if attempts remain) and is replaced.

const path = require('node:path')
const { fork } = require('node:child_process')
const { QueueError } = require('../errors')
const { recordOf, errorOut, errorIn, Batcher } = require('./relay')
const { CALLS, gettersOf } = require('./child-job')
const { WorkerLostError } = require('./sandbox-options')

const MAIN = path.join(__dirname, 'child-main.js')
/** A child that dies sooner than this after it started is replaced only after this long. */
const RESTART_DELAY_MS = 1000
/** How long a child may take to exit once asked before it is killed. */
const CLOSE_WAIT_MS = 10_000

class ChildPool {
  constructor(worker, file, sandbox) {
    this._worker = worker
    this._file = file
    this._count = sandbox.count
    this._forkOptions = sandbox.forkOptions
    /** One per child: { proc, out, jobs: Map(key -> pending job), ready, started, exited }. */
    this._children = []
    this._nextKey = 1
    this._closing = false
    /** Jobs waiting for a child (all of them are being replaced). */
    this._waiting = []
    // Three parameters: the Worker then gives each job an AbortSignal, passed on to the child.
    this.processor = (job, token, signal) => this._run(job, signal)
  }

  /** Starts the children; resolves when each has loaded the file, rejects with the first that could not. */
  async start() {
    const started = []
    for (let i = 0; i < this._count; i++) started.push(this._startChild(i))
    try {
      await Promise.all(started)
    } catch (e) {
      this._closing = true
      for (const c of this._children) if (c) c.proc.kill('SIGKILL')
      throw e
    }
  }

  _startChild(i) {
    const proc = fork(MAIN, [this._file], { ...this._forkOptions, serialization: 'json' })
    const child = { proc, jobs: new Map(), ready: false, loadError: null, started: Date.now(), exited: null }
    child.out = new Batcher((text) => {
      if (proc.connected) proc.send(text)
    })
    this._children[i] = child
    return new Promise((resolve, reject) => {
      proc.on('message', (text) => {
        for (const m of JSON.parse(text)) this._hear(child, m, resolve)
      })
      proc.on('error', (err) => {
        child.error = err
      })
      child.exited = new Promise((done) => {
        proc.on('exit', (code, signal) => {
          done()
          this._exited(i, child, code, signal, reject)
        })
      })
    })
  }

  _hear(child, m, ready) {
    switch (m[0]) {
      case 'ready':
        child.ready = true
        ready()
        this._drainWaiting()
        return
      case 'load-failed':
        child.loadError = errorIn(m[1])
        return
      case 'done': {
        const p = child.jobs.get(m[1])
        if (!p) return
        child.jobs.delete(m[1])
        p.resolve(JSON.parse(m[2]))
        return
      }
      case 'fail': {
        const p = child.jobs.get(m[1])
        if (!p) return
        child.jobs.delete(m[1])
        p.reject(errorIn(m[2]))
        return
      }
      case 'call':
        this._answer(child, m[1], m[2], m[3], m[4])
    }
  }

  /** Makes a processor's call on the real Job, and sends the answer back. */
  async _answer(child, k, n, method, args) {
    const p = child.jobs.get(k)
    let reply
    try {
      if (!p) throw new QueueError('ERR_JOB_FINISHED', `job method ${method} was called after the processor finished`)
      if (!CALLS.includes(method)) throw new QueueError('ERR_UNSUPPORTED', `job.${method} is not available in a child process`)
      const value = await p.job[method](...args)
      reply = ['reply', n, true, value === undefined ? null : value]
    } catch (e) {
      reply = ['reply', n, false, errorOut(e)]
    }
    child.out.push(reply)
  }

  /** Runs `job` in a child; settles with its return value or what it threw. */
  _run(job, signal) {
    return new Promise((resolve, reject) => {
      const pending = { job, signal, resolve, reject, key: this._nextKey++ }
      this._dispatch(pending)
    })
  }

  _dispatch(pending) {
    let best = null
    for (const c of this._children) {
      if (c && c.ready && c.proc.connected && (best === null || c.jobs.size < best.jobs.size)) best = c
    }
    if (best === null) {
      this._waiting.push(pending)
      return
    }
    best.jobs.set(pending.key, pending)
    const record = recordOf(pending.job)
    record.getters = gettersOf(pending.job)
    best.out.push(['run', pending.key, record])
    const signal = pending.signal
    if (signal) {
      const abort = () => {
        if (best.jobs.has(pending.key)) best.out.push(['abort', pending.key, errorOut(signal.reason)])
      }
      if (signal.aborted) abort()
      else signal.addEventListener('abort', abort, { once: true })
    }
  }

  _drainWaiting() {
    const waiting = this._waiting
    this._waiting = []
    for (const p of waiting) this._dispatch(p)
  }

  /** Child `i` exited: fails its jobs and replaces it (unless the pool closes). */
  async _exited(i, child, code, signal, failedToStart) {
    const how = signal ? `was killed by ${signal}` : `exited with code ${code}`
    // Its exit says what happened (an `error` before it, e.g. EPIPE on a send, is a symptom).
    const reason = `child process ${how}`
    for (const p of child.jobs.values()) p.reject(new WorkerLostError(reason))
    child.jobs.clear()
    if (!child.ready) {
      // The pool's start (or a replacement's) rejects.
      failedToStart(child.loadError ?? new QueueError('ERR_WORKER_LOST', `child process for processor file ${this._file} ${how} before it started`))
      return
    }
    if (this._closing) return
    this._worker._emitError(new QueueError('ERR_WORKER_LOST', `${reason}; its active jobs failed and a new child process takes its place`))
    this._replace(i, Date.now() - child.started < RESTART_DELAY_MS)
  }

  /** Starts child `i` again (after a pause when `soon`), and again while it fails to start. */
  async _replace(i, soon) {
    if (soon) await new Promise((r) => setTimeout(r, RESTART_DELAY_MS))
    if (this._closing) return
    this._startChild(i).catch((e) => {
      this._worker._emitError(e)
      this._replace(i, true)
    })
  }

  /** Ends the children: asked to exit once their jobs are done, or killed with `force`. */
  async close(force) {
    this._closing = true
    for (const p of this._waiting) p.reject(new QueueError('ERR_WORKER_CLOSED', 'worker closed before a child process could take the job'))
    this._waiting = []
    await Promise.all(
      this._children.map(async (c) => {
        if (!c || c.proc.exitCode !== null || c.proc.signalCode !== null) return
        if (force || !c.proc.connected) c.proc.kill('SIGKILL')
        else {
          c.out.push(['close'])
          c.out.flush()
          const timer = setTimeout(() => c.proc.kill('SIGKILL'), CLOSE_WAIT_MS)
          await c.exited
          clearTimeout(timer)
        }
        await c.exited
      }),
    )
  }
}

module.exports = { ChildPool }
