'use strict'
// The Job: BullMQ's fields and methods over a queue handle. A Job belongs to the Queue or Worker
// that produced it (`job.queue`), a QueueHandle (handle.js), whose native handle its methods use:
// that contract is all a Job knows of its owner, so this file needs neither queue.js nor worker.js.

const { binding, fromBinding, isPending, native } = require('./native')
const { QueueError, typeError, inputError } = require('./errors')
const v = require('./validate')
const moves = require('./job-moves')

function orUndefined(x) {
  return x === null ? undefined : x
}

/** `opts[key]`, or undefined where reading it throws (a getter of the caller's). */
function optionOf(opts, key) {
  try {
    return opts[key]
  } catch {
    return undefined
  }
}

/** The `parent` option when it names a parent (`{ id, queue }`), else undefined. */
function linkedParent(opts) {
  const p = optionOf(opts, 'parent')
  return p !== null && typeof p === 'object' && typeof p.queue === 'string' && p.id != null ? p : undefined
}

class Job {
  /**
   * @param queue the Queue (or Worker) the job belongs to
   * @param r internal: an engine record (parsed) to take the fields from (see fromRecord), or
   *   the timestamp of a job just added (saves a clock read per job in addBulk)
   */
  constructor(queue, name, data, opts, id, r) {
    opts = opts ?? {}
    this.queue = queue
    this.name = name
    this.data = data
    this.opts = opts
    this.id = id
    // Both branches set the same fields in the same order (one object shape for all jobs).
    if (r === undefined || typeof r === 'number') {
      let timestamp, delay, priority
      try {
        timestamp = opts.timestamp
        delay = opts.delay
        priority = opts.priority
      } catch (e) {
        throw inputError(e, 'opts')
      }
      this.progress = 0
      this.returnvalue = null
      this.failedReason = undefined
      this.stacktrace = []
      this.attemptsMade = 0
      this.attemptsStarted = 0
      this.stalledCounter = 0
      this.processedBy = undefined
      this.timestamp = timestamp ?? r ?? Date.now()
      this.processedOn = undefined
      this.finishedOn = undefined
      this.delay = delay ?? 0
      this.priority = priority ?? 0
      this.token = undefined
    } else {
      // Records handed to workers leave out fields at their defaults (see Job::write_json).
      this.progress = r.progress ?? 0
      this.returnvalue = r.returnvalue ?? null
      this.failedReason = orUndefined(r.failedReason ?? null)
      this.stacktrace = r.stacktrace ?? []
      this.attemptsMade = r.attemptsMade ?? 0
      this.attemptsStarted = r.attemptsStarted
      this.stalledCounter = r.stalledCounter ?? 0
      this.processedBy = r.processedBy
      this.timestamp = r.timestamp
      this.processedOn = orUndefined(r.processedOn ?? null)
      this.finishedOn = orUndefined(r.finishedOn ?? null)
      this.delay = r.delay ?? 0
      this.priority = r.priority ?? 0
      this.token = r.token === undefined ? undefined : String(r.token)
    }
  }

  /** Builds a Job from an engine record (already parsed). */
  static fromRecord(queue, r) {
    // Worker records carry auto ids as numbers (see Job::write_json).
    return new Job(queue, r.name, r.data, r.opts ?? {}, typeof r.id === 'number' ? String(r.id) : r.id, r)
  }

  /** The queue handle, once the job's queue and id are known to be usable. */
  get _h() {
    const q = this.queue
    // The QueueHandle contract (handle.js), checked by shape: a Job of another copy of this
    // module (a second install in node_modules) still works.
    if (q === null || typeof q !== 'object' || typeof q._ensureOpen !== 'function' || typeof q._commitWait !== 'function') {
      throw typeError('job.queue', `must be the Queue or Worker the job came from, got ${v.describe(q)}`)
    }
    v.name('job.id', this.id)
    q._ensureOpen()
    return q._h
  }

  _call(fn, ...args) {
    const h = this._h
    try {
      return fn(h, this.id, ...args)
    } catch (e) {
      throw fromBinding(e)
    }
  }

  /**
   * Runs a changing call and resolves once its change is durable: its answer (at hand, or
   * pending: the backend fetched the job first, or held the change back), then the wait for
   * this thread's commit ticket.
   */
  async _change(fn, ...args) {
    let r = this._call(fn, ...args)
    if (isPending(r)) r = await native(r)
    const wait = this.queue._commitWait()
    if (wait) await wait
    return r
  }

  /**
   * Completes the job its holder took with `token` (manual processing); with `fetchNext`
   * (BullMQ's default true) resolves with the holder's next job, taken with the same token, or
   * undefined. Rejects with ERR_LOCK_MISMATCH when `token` no longer holds the job.
   */
  moveToCompleted(returnValue, token, fetchNext) {
    return moves.moveToCompleted(this, returnValue, token, fetchNext)
  }

  /** Fails the job (retried if attempts remain), as `moveToCompleted`; `fetchNext` defaults to false. */
  moveToFailed(err, token, fetchNext) {
    return moves.moveToFailed(this, err, token, fetchNext)
  }

  /** A step: delays the running job until `timestamp` (ms), no attempt spent; then throw `DelayedError`. */
  moveToDelayed(timestamp, token) {
    return moves.moveToDelayed(this, timestamp, token)
  }

  /** A step: puts the running job back to waiting, no attempt spent; resolves with the queue's rate-limit TTL. */
  moveToWait(token) {
    return moves.moveToWait(this, token)
  }

  /** A step: the running job waits for its pending children (true), or has none (false, still running). */
  moveToWaitingChildren(token, opts) {
    return moves.moveToWaitingChildren(this, token, opts)
  }

  /** Extends the lock `token` holds to `duration` ms from now: 1, or 0 when it holds no lock. */
  extendLock(token, duration) {
    return moves.extendLock(this, token, duration)
  }

  /** Stores progress (any JSON value) and emits `progress`. */
  async updateProgress(progress) {
    const text = v.toJson(progress, 'progress', 'null')
    await this._change(binding.updateProgress, text)
    this.progress = progress
    if (this.queue._onProgress) this.queue._onProgress(this, progress)
  }

  /** Appends a row to the job's log; returns the number of rows. */
  async log(row) {
    v.name('row', row)
    let keep
    try {
      keep = this.opts.keepLogs ?? 0
    } catch (e) {
      throw inputError(e, 'job.opts')
    }
    v.integerIn('job.opts.keepLogs', keep, 0, 2 ** 32 - 1)
    return this._change(binding.addLog, row, keep)
  }

  // BullMQ's fields of the options a job was added with, read from them when asked: set in the
  // constructor they cost every job, where almost none is ever read.

  /** The `deduplication.id` the job was added with. */
  get deduplicationId() {
    const d = optionOf(this.opts, 'deduplication')
    return d !== null && typeof d === 'object' && typeof d.id === 'string' ? d.id : undefined
  }

  /** A flow child's parent: its id and queue key (`prefix:name`). */
  get parent() {
    const p = linkedParent(this.opts)
    return p && { id: String(p.id), queueKey: p.queue }
  }

  /** A flow child's parent's key: `prefix:name:id`. */
  get parentKey() {
    const p = linkedParent(this.opts)
    return p && `${p.queue}:${p.id}`
  }

  /** The name of the job's queue (BullMQ's field). */
  /** The id of the job scheduler that made this job (BullMQ's `repeatJobKey`), else undefined. */
  get repeatJobKey() {
    const id = this.id
    if (typeof id !== 'string' || !id.startsWith('repeat:')) return undefined
    const at = id.lastIndexOf(':')
    return at > 7 && /^[0-9]+$/.test(id.slice(at + 1)) ? id.slice(7, at) : undefined
  }

  get queueName() {
    return this.queue.name
  }

  /** BullMQ's key of the job's queue: `prefix:name`. */
  get queueQualifiedName() {
    return this.queue.qualifiedName
  }

  /** The values of the children that completed, by child key (`prefix:queue:id`). */
  async getChildrenValues() {
    const d = await this._dependencies()
    return d === null ? {} : d.processed
  }

  /** The failure reasons of children that failed under failParentOnFailure or continueParentOnFailure. */
  async getFailedChildrenValues() {
    const d = await this._dependencies()
    return d === null ? {} : d.failed
  }

  /** The failure reasons of children that failed under ignoreDependencyOnFailure. */
  async getIgnoredChildrenFailures() {
    const d = await this._dependencies()
    return d === null ? {} : d.ignored
  }

  /**
   * The job's children by what became of them: `{ processed, unprocessed, failed, ignored }`
   * (processed and ignored by child key; unprocessed and failed as keys). With `opts` (BullMQ's
   * `{ processed?: { cursor?, count? }, unprocessed?: …, failed?: …, ignored?: … }`) only the
   * kinds asked for, a page each, with `next<Kind>Cursor` (0: no more).
   */
  async getDependencies(opts) {
    const d = (await this._dependencies()) ?? { processed: {}, unprocessed: [], failed: {}, ignored: {} }
    const all = {
      processed: Object.entries(d.processed),
      unprocessed: d.unprocessed,
      failed: Object.keys(d.failed),
      ignored: Object.entries(d.ignored),
    }
    const shaped = (kind, items) => (kind === 'processed' || kind === 'ignored' ? Object.fromEntries(items) : items)
    if (opts === undefined || opts === null) {
      return Object.fromEntries(Object.entries(all).map(([k, items]) => [k, shaped(k, items)]))
    }
    if (!v.isRecord(opts)) throw typeError('opts', `must be an object, got ${v.describe(opts)}`)
    const out = {}
    for (const [kind, page] of Object.entries(opts)) {
      if (!(kind in all)) throw typeError(`opts.${kind}`, 'is not an option; expected processed, unprocessed, failed, ignored')
      if (page === undefined) continue
      const { cursor = 0, count = 20 } = v.isRecord(page) ? page : {}
      v.integerIn(`opts.${kind}.cursor`, cursor, 0, 2 ** 53)
      v.integerIn(`opts.${kind}.count`, count, 1, 2 ** 32 - 1)
      const items = all[kind]
      out[kind] = shaped(kind, items.slice(cursor, cursor + count))
      const next = cursor + count
      out[`next${kind[0].toUpperCase()}${kind.slice(1)}Cursor`] = next < items.length ? next : 0
    }
    return out
  }

  /** How many children are in each kind (all kinds, or those `opts` sets true). */
  async getDependenciesCount(opts) {
    const d = (await this._dependencies()) ?? { processed: {}, unprocessed: [], failed: {}, ignored: {} }
    const counts = {
      processed: Object.keys(d.processed).length,
      unprocessed: d.unprocessed.length,
      failed: Object.keys(d.failed).length,
      ignored: Object.keys(d.ignored).length,
    }
    if (opts === undefined || opts === null) return counts
    if (!v.isRecord(opts)) throw typeError('opts', `must be an object, got ${v.describe(opts)}`)
    const out = {}
    for (const [kind, on] of Object.entries(opts)) {
      if (!(kind in counts)) throw typeError(`opts.${kind}`, 'is not an option; expected processed, unprocessed, failed, ignored')
      if (on) out[kind] = counts[kind]
    }
    return out
  }

  async _dependencies() {
    let text = this._call(binding.getDependencies)
    if (isPending(text)) text = await native(text)
    return text === null ? null : JSON.parse(text)
  }

  /** The job's current state, or 'unknown' once it is gone. */
  async getState() {
    void this._h
    return native(this._call(binding.getState))
  }

  /** Replaces the job's data. */
  async updateData(data) {
    const text = v.toJson(data)
    await this._change(binding.updateData, text)
    this.data = data
  }

  /** Changes the priority (and with `lifo` puts the job first within it). */
  async changePriority(opts) {
    const o = v.ownOptions(opts)
    const priority = o.priority ?? 0
    v.number('priority', priority)
    v.optionalBoolean('opts.lifo', o.lifo)
    await this._change(binding.changePriority, priority, o.lifo === true)
    this.priority = priority
  }

  /** Reschedules a delayed job to run `delay` ms from now. */
  async changeDelay(delay) {
    v.number('delay', delay)
    await this._change(binding.changeDelay, delay)
    this.delay = delay
  }

  /** Moves a delayed job to waiting now. */
  async promote() {
    await this._change(binding.promote)
    this.delay = 0
  }

  /** Moves a failed (or, with state 'completed', a completed) job back to waiting. */
  async retry(state = 'failed', opts = {}) {
    if (state !== 'failed' && state !== 'completed') {
      const e = new RangeError(`state must be 'failed' or 'completed', got ${v.describe(state)}`)
      e.code = 'ERR_INVALID_OPTION'
      throw e
    }
    const o = v.ownOptions(opts)
    const reset = !!(o.resetAttemptsMade || o.resetAttemptsStarted)
    await this._change(binding.retryJob, state, reset)
    this.failedReason = undefined
    this.finishedOn = undefined
    this.processedOn = undefined
    this.returnvalue = null
    if (reset) this.attemptsMade = 0
  }

  /**
   * Removes the deduplication key of this job's `deduplication.id` if this job holds it;
   * resolves whether it did.
   */
  async removeDeduplicationKey() {
    if (this.deduplicationId === undefined) return false
    const h = this._h
    let r
    try {
      r = binding.removeDeduplicationKey(h, this.deduplicationId, this.id)
    } catch (e) {
      throw fromBinding(e)
    }
    if (isPending(r)) r = await native(r)
    const wait = this.queue._commitWait()
    if (wait) await wait
    return r
  }

  /** Removes the job; throws ERR_JOB_LOCKED while a worker holds it. */
  async remove() {
    await this._change(binding.removeJob)
  }

  async isCompleted() {
    return (await this.getState()) === 'completed'
  }
  async isFailed() {
    return (await this.getState()) === 'failed'
  }
  async isDelayed() {
    return (await this.getState()) === 'delayed'
  }
  async isActive() {
    return (await this.getState()) === 'active'
  }
  async isWaiting() {
    const s = await this.getState()
    return s === 'waiting' || s === 'prioritized'
  }

  /**
   * Resolves with the return value once the job completes, rejects with its failure reason once
   * it fails for good, or with ERR_TIMEOUT after `ttl` ms.
   */
  waitUntilFinished(queueEvents, ttl) {
    try {
      if (queueEvents === null || typeof queueEvents !== 'object' || typeof queueEvents._waitFor !== 'function') {
        throw typeError('queueEvents', `must be a QueueEvents instance, got ${v.describe(queueEvents)}`)
      }
      // setTimeout's longest delay (~24.8 days): a longer one would fire at once.
      if (ttl !== undefined) v.integerIn('ttl', ttl, 0, 2 ** 31 - 1)
      void this._h
    } catch (e) {
      return Promise.reject(inputError(e, 'queueEvents'))
    }
    return new Promise((resolve, reject) => {
      let timer
      const stop = queueEvents._waitFor(this.id, (name, payload) => {
        clearTimeout(timer)
        if (name === 'completed') resolve(payload.returnvalue)
        else reject(new Error(payload.failedReason))
      })
      if (ttl) {
        timer = setTimeout(() => {
          stop()
          reject(new QueueError('ERR_TIMEOUT', `job ${this.id} did not finish within ${ttl} ms`))
        }, ttl)
      }
      // The job may have finished before we started listening.
      const check = async () => {
        const state = await native(this._call(binding.getState))
        if (state !== 'completed' && state !== 'failed') return
        const record = JSON.parse(await native(this._call(binding.getJob)))
        stop()
        clearTimeout(timer)
        if (state === 'completed') resolve(record.returnvalue)
        else reject(new Error(record.failedReason))
      }
      check().catch((e) => {
        stop()
        clearTimeout(timer)
        reject(e)
      })
    })
  }

  /** A plain object of the job's fields. */
  asJSON() {
    return {
      id: this.id,
      name: this.name,
      data: this.data,
      opts: this.opts,
      progress: this.progress,
      returnvalue: this.returnvalue,
      failedReason: this.failedReason,
      stacktrace: this.stacktrace,
      attemptsMade: this.attemptsMade,
      attemptsStarted: this.attemptsStarted,
      stalledCounter: this.stalledCounter,
      processedBy: this.processedBy,
      timestamp: this.timestamp,
      processedOn: this.processedOn,
      finishedOn: this.finishedOn,
      delay: this.delay,
      priority: this.priority,
    }
  }

  toJSON() {
    return this.asJSON()
  }
}

module.exports = { Job }
