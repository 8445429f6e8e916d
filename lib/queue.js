'use strict'
// Queue: BullMQ's producer and admin API over one native queue handle.

const { binding, fromBinding, isPending, native } = require('./native')
const { QueueHandle } = require('./handle')
const { typeError, inputError } = require('./errors')
const { Job } = require('./job')
const { addBulk } = require('./bulk')
const v = require('./validate')
const schedulers = require('./schedulers')
const { dlqMethods } = require('./dlq')
const { metricsMethods } = require('./metrics')

/** What an add code means when it is not an automatic id (see src/queue.rs), read once: the
 * binding object is large, and a property read from it per add costs about 0.1 µs. */
const { CustomId, Duplicate, Deduplicated } = binding.AddOutcome

const ALL_TYPES = ['waiting', 'active', 'completed', 'failed', 'delayed', 'prioritized', 'waiting-children', 'paused']
const CLEAN_TYPES = ['completed', 'failed', 'delayed', 'wait', 'waiting', 'prioritized', 'paused', 'active']

function checkTypes(types) {
  try {
    const list = types === undefined ? [] : Array.isArray(types) ? types.flat() : [types]
    for (const t of list) {
      if (typeof t !== 'string') throw typeError('types', `must be state names, got ${v.describe(t)}`)
    }
    return list
  } catch (e) {
    throw inputError(e, 'types')
  }
}

function checkId(id) {
  v.name('id', id)
}

/** The options of retryJobs / promoteJobs, checked: only `known` names, `count` in 1..=2^32-1. */
function bulkOptions(opts, known) {
  const o = v.ownOptions(opts)
  for (const k of Object.keys(o)) {
    if (!known.includes(k)) throw typeError(`opts.${k}`, `is not an option; expected ${known.join(', ')}`)
  }
  if (o.count !== undefined) v.integerIn('count', o.count, 1, 2 ** 32 - 1)
  return o
}

class Queue extends QueueHandle {
  /**
   * @param {string} name
   * @param {{ defaultJobOptions?: object }} [opts]
   */
  constructor(name, opts) {
    let defaults
    super('Queue', name, opts, (o) => {
      defaults = v.ownJobOptions(o.defaultJobOptions, 'defaultJobOptions')
      if (!o.defaultJobOptions) return
      const text = v.optionsJson(defaults, 'defaultJobOptions')
      try {
        binding.checkJobOptions(text)
      } catch (e) {
        const err = fromBinding(e)
        err.message = `defaultJobOptions.${err.message}`
        throw err
      }
    })
    this.defaultJobOptions = defaults
    /** Objects closed with it (see _closeWith). */
    this._helpers = null
  }

  /** Resolves once the queue can be used (at once: nothing to connect to). */
  async waitUntilReady() {
    this._ensureOpen()
  }

  /** The caller's own options (checked) over the queue's defaults, as a new object. */
  _merge(opts, option = 'opts') {
    const own = v.ownJobOptions(opts, option)
    const d = this.defaultJobOptions
    for (const _ in d) return { ...d, ...own }
    return own
  }

  /** Adds a job; resolves with it. A `jobId` that exists returns the existing job. */
  async add(name, data, opts) {
    this._ensureOpen()
    v.jobName(name)
    const merged = this._merge(opts)
    // BullMQ's `repeat`: the job scheduler it names makes the jobs.
    if (merged.repeat !== undefined) return schedulers.addRepeated(this, name, data, merged)
    const text = v.toJson(data)
    const timestamp = merged.timestamp ?? Date.now()
    let optsText = null
    for (const _ in merged) {
      optsText = v.optionsJson(merged)
      break
    }
    let code
    try {
      code = binding.add(this._h, name, text, optsText, timestamp)
    } catch (e) {
      throw fromBinding(e)
    }
    if (isPending(code)) code = await native(code)
    if (code === Duplicate) {
      // The existing job may be an add still on its way to the file: wait for it too.
      const wait = this._commitWait()
      if (wait) await wait
      return this.getJob(merged.jobId)
    }
    if (code === Deduplicated) return this._deduplicated(name, data, opts, merged)
    const job = new Job(this, name, data, merged, code === CustomId ? merged.jobId : String(code), timestamp)
    const wait = this._commitWait()
    if (wait) await wait
    this.emit('waiting', job)
    return job
  }

  /**
   * The job that holds the deduplication key an add found (BullMQ resolves with it). Should the
   * key be gone already (its job just finished), the add is made again: it would succeed now.
   */
  async _deduplicated(name, data, opts, merged) {
    const wait = this._commitWait()
    if (wait) await wait
    const holder = await this.getDeduplicationJobId(merged.deduplication.id)
    const job = holder === null ? undefined : await this.getJob(holder)
    return job ?? this.add(name, data, opts)
  }

  /** The id of the job holding the deduplication key of `id`, or null. */
  async getDeduplicationJobId(id) {
    v.name('id', id)
    return native(this._call(binding.getDeduplicationJobId, id))
  }

  /** Removes the deduplication key of `id` (adds with it are no longer held back); 1 if a live key was removed, else 0. */
  async removeDeduplicationKey(id) {
    v.name('id', id)
    return (await this._change(binding.removeDeduplicationKey, id, null)) ? 1 : 0
  }

  /** Adds jobs, all or none (see bulk.js); resolves with them in order. */
  async addBulk(jobs) {
    return addBulk(this, jobs)
  }

  /** The job with that id, or undefined. */
  async getJob(id) {
    checkId(id)
    this._ensureOpen()
    const text = await native(this._call(binding.getJob, id))
    return text === null ? undefined : Job.fromRecord(this, JSON.parse(text))
  }

  /** The state of a job: waiting, prioritized, delayed, active, completed, failed or unknown. */
  async getJobState(id) {
    checkId(id)
    this._ensureOpen()
    return native(this._call(binding.getState, id))
  }

  /** Jobs in the given states, `start`..`end` inclusive (-1: last), newest first unless `asc`. */
  async getJobs(types, start = 0, end = -1, asc = false) {
    const list = checkTypes(types)
    v.range(start, end)
    const types_ = list.length ? list : ALL_TYPES.filter((t) => t !== 'paused')
    const text = await native(this._call(binding.getJobs, types_, start, end, !!asc))
    return JSON.parse(text).map((r) => Job.fromRecord(this, r))
  }

  getWaiting(start = 0, end = -1) {
    return this.getJobs(['waiting'], start, end, true)
  }
  getPrioritized(start = 0, end = -1) {
    return this.getJobs(['prioritized'], start, end, true)
  }
  getDelayed(start = 0, end = -1) {
    return this.getJobs(['delayed'], start, end, true)
  }
  getActive(start = 0, end = -1) {
    return this.getJobs(['active'], start, end, true)
  }
  getCompleted(start = 0, end = -1) {
    return this.getJobs(['completed'], start, end, false)
  }
  getFailed(start = 0, end = -1) {
    return this.getJobs(['failed'], start, end, false)
  }

  /** `{ state: count }` for the asked states, all when none is asked. */
  async getJobCounts(...types) {
    const list = checkTypes(types)
    return JSON.parse(await native(this._call(binding.getCounts, list)))
  }

  /** Sum of the counts of the given states. */
  async getJobCountByTypes(...types) {
    const counts = await this.getJobCounts(...types)
    let n = 0
    for (const k in counts) n += counts[k]
    return n
  }

  getWaitingCount() {
    return this.getJobCountByTypes('waiting')
  }
  getPrioritizedCount() {
    return this.getJobCountByTypes('prioritized')
  }
  getDelayedCount() {
    return this.getJobCountByTypes('delayed')
  }
  getActiveCount() {
    return this.getJobCountByTypes('active')
  }
  getCompletedCount() {
    return this.getJobCountByTypes('completed')
  }
  getFailedCount() {
    return this.getJobCountByTypes('failed')
  }

  /** Waiting + prioritized + delayed (+ waiting-children). */
  async count() {
    return native(this._call(binding.count))
  }

  /** Stops workers from taking jobs; adds still land. */
  async pause() {
    await this._change(binding.pause)
    this.emit('paused')
  }

  /** Lets workers take jobs again. */
  async resume() {
    await this._change(binding.resume)
    this.emit('resumed')
  }

  async isPaused() {
    return native(this._call(binding.isPaused))
  }

  /**
   * The queue's own rate limit: at most `max` jobs start per `duration` ms across every worker
   * (a token bucket: it overrides the workers' `limiter`; durable queues keep it).
   */
  async setGlobalRateLimit(max, duration) {
    v.integerIn('max', max, 1, v.MAX_U32)
    v.integerIn('duration', duration, 1, 2 ** 53)
    await this._change(binding.setRateLimit, max, duration)
  }

  /** `{ max, duration }` of the queue's own rate limit, or null. */
  async getGlobalRateLimit() {
    const l = await native(this._call(binding.getLimits))
    return l.rateMax == null ? null : { max: l.rateMax, duration: l.rateDuration }
  }

  /** Removes the queue's own rate limit (the workers' `limiter` applies again). */
  async removeGlobalRateLimit() {
    await this._change(binding.setRateLimit, null, null)
  }

  /** Never more than `concurrency` jobs of this queue active at once, across every worker. */
  async setGlobalConcurrency(concurrency) {
    v.integerIn('concurrency', concurrency, 1, v.MAX_U32)
    await this._change(binding.setConcurrencyLimit, concurrency)
  }

  /** The queue's cap on active jobs, or null. */
  async getGlobalConcurrency() {
    const l = await native(this._call(binding.getLimits))
    return l.concurrency ?? null
  }

  /** Removes the queue's cap on active jobs. */
  async removeGlobalConcurrency() {
    await this._change(binding.setConcurrencyLimit, null)
  }

  // Groups (BullMQ Pro's, see README "Groups"): a group's own settings override the workers'
  // `group` defaults; durable queues keep them.

  /** At most `concurrency` jobs of group `groupId` active at once, across every worker. */
  async setGroupConcurrency(groupId, concurrency) {
    const id = v.groupId(groupId)
    v.integerIn('concurrency', concurrency, 1, v.MAX_U32)
    await this._change(binding.setGroupConcurrency, id, concurrency)
  }

  /** The group's own concurrency, or null (the workers' default applies). */
  async getGroupConcurrency(groupId) {
    return (await this._group(groupId)).concurrency ?? null
  }

  /** Removes the group's own concurrency (the workers' default applies again). */
  async removeGroupConcurrency(groupId) {
    await this._change(binding.setGroupConcurrency, v.groupId(groupId), null)
  }

  /** At most `max` jobs of group `groupId` start per `duration` ms (a token bucket). */
  async setGroupRateLimit(groupId, max, duration) {
    const id = v.groupId(groupId)
    v.integerIn('max', max, 1, v.MAX_U32)
    v.integerIn('duration', duration, 1, 2 ** 53)
    await this._change(binding.setGroupRateLimit, id, max, duration)
  }

  /** `{ max, duration }` of the group's own rate limit, or null. */
  async getGroupRateLimit(groupId) {
    const g = await this._group(groupId)
    return g.rateMax == null ? null : { max: g.rateMax, duration: g.rateDuration }
  }

  /** Removes the group's own rate limit (the workers' default applies again). */
  async removeGroupRateLimit(groupId) {
    await this._change(binding.setGroupRateLimit, v.groupId(groupId), null, null)
  }

  /** No job of the group starts until it is resumed; false if it was paused already. */
  async pauseGroup(groupId) {
    return this._change(binding.pauseGroup, v.groupId(groupId), true)
  }

  /** Lets the group's jobs start again; false if it was not paused. */
  async resumeGroup(groupId) {
    return this._change(binding.pauseGroup, v.groupId(groupId), false)
  }

  /** Whether the group is paused. */
  async isGroupPaused(groupId) {
    return (await this._group(groupId)).paused
  }

  /** The group's waiting jobs, `start..end` (inclusive; -1: the last), in the order they run. */
  async getGroupJobs(groupId, start = 0, end = -1) {
    const id = v.groupId(groupId)
    v.integerIn('start', start, 0, v.MAX_U32)
    v.integerIn('end', end, -(2 ** 53), 2 ** 53)
    const text = await native(this._call(binding.getGroupJobs, id, start, end))
    return JSON.parse(text).map((r) => Job.fromRecord(this, r))
  }

  /** How many jobs of the group wait (waiting or prioritized). */
  async getGroupJobsCount(groupId) {
    return (await this._group(groupId)).waiting
  }

  /** How many jobs of the group are active. */
  async getGroupActiveCount(groupId) {
    return (await this._group(groupId)).active
  }

  /**
   * How many jobs wait in groups, all groups together. `maxGroups` (BullMQ Pro's batch size of
   * its scan) is checked and changes nothing: the engine counts in one step.
   */
  async getGroupsJobsCount(maxGroups = 1000) {
    v.integerIn('maxGroups', maxGroups, 1, v.MAX_U32)
    return native(this._call(binding.getGroupedCount))
  }

  async _group(groupId) {
    return native(this._call(binding.getGroup, v.groupId(groupId)))
  }

  /** No job of this queue starts for `expireTimeMs` ms (0 lifts it), as Worker#rateLimit. */
  async rateLimit(expireTimeMs) {
    v.integerIn('expireTimeMs', expireTimeMs, 0, Number.MAX_SAFE_INTEGER)
    await this._change(binding.holdQueue, expireTimeMs)
  }

  /** Ms until the queue takes jobs again by its own rate limit or `rateLimit(ms)` (0: now). */
  async getRateLimitTtl() {
    return (await native(this._call(binding.getLimits))).ttl
  }

  /** Removes waiting and prioritized jobs, and delayed ones too with `delayed = true`. */
  async drain(delayed = false) {
    await this._change(binding.drain, !!delayed)
  }

  /** Removes a job unless it is active; resolves 1 if removed, 0 if not. */
  async remove(id) {
    checkId(id)
    try {
      return (await this._change(binding.removeJob, id)) ? 1 : 0
    } catch (e) {
      if (e.code === 'ERR_JOB_LOCKED') return 0
      throw e
    }
  }

  /** Removes up to `limit` (0: all) jobs of `type` older than `grace` ms; resolves their ids. */
  async clean(grace, limit, type = 'completed') {
    v.number('grace', grace)
    v.integerIn('limit', limit, 0, Number.MAX_SAFE_INTEGER)
    if (!CLEAN_TYPES.includes(type)) {
      throw Object.assign(new RangeError(`type must be one of ${CLEAN_TYPES.join(', ')}, got ${v.describe(type)}`), {
        code: 'ERR_INVALID_OPTION',
      })
    }
    const ids = await this._change(binding.clean, grace, limit, type)
    this.emit('cleaned', ids, type)
    return ids
  }

  /**
   * Moves every job of `state` ('failed', the default, or 'completed') that finished before
   * `timestamp` (default: now) back to waiting, oldest first, `count` (default 1,000) per step.
   */
  async retryJobs(opts) {
    const o = bulkOptions(opts, ['count', 'state', 'timestamp'])
    const state = o.state ?? 'failed'
    if (state !== 'failed' && state !== 'completed') {
      throw Object.assign(new RangeError(`state must be 'failed' or 'completed', got ${v.describe(state)}`), { code: 'ERR_INVALID_OPTION' })
    }
    const before = o.timestamp ?? Date.now()
    v.integerIn('timestamp', before, 0, Number.MAX_SAFE_INTEGER)
    const count = o.count ?? 1000
    while ((await this._change(binding.retryJobs, state, count, before)) >= count);
  }

  /** Moves every delayed job to waiting, earliest due first, `count` (default 1,000) per step. */
  async promoteJobs(opts) {
    const count = bulkOptions(opts, ['count']).count ?? 1000
    while ((await this._change(binding.promoteJobs, count)) >= count);
  }

  /**
   * Creates or updates job scheduler `id` (BullMQ v5): `repeat` is `{ every }` (ms) or
   * `{ pattern, tz? }` (cron, 5 or 6 fields), with `startDate`, `endDate`, `limit`,
   * `immediately`; `template` is `{ name?, data?, opts? }`. Resolves with its pending job.
   */
  upsertJobScheduler(id, repeat, template) {
    return schedulers.upsertJobScheduler(this, id, repeat, template)
  }

  /** Scheduler `id` (BullMQ's JobSchedulerJson), or undefined. */
  getJobScheduler(id) {
    return schedulers.getJobScheduler(this, id)
  }

  /** Schedulers by next run (`asc`: soonest first; default latest first), `start..=end`. */
  getJobSchedulers(start, end, asc) {
    return schedulers.getJobSchedulers(this, start, end, asc)
  }

  /** How many schedulers the queue has. */
  getJobSchedulersCount() {
    return schedulers.call(this, binding.getJobSchedulersCount)
  }

  /** Removes scheduler `id` and its pending job; resolves whether it existed. */
  removeJobScheduler(id) {
    return schedulers.removeJobScheduler(this, id)
  }

  /** Removes the whole queue; refuses while jobs are active unless `{ force: true }`. */
  async obliterate(opts) {
    const force = !!v.ownOptions(opts).force
    await this._change(binding.obliterate, force)
  }

  /** A page of a job's log rows and their total. */
  async getJobLogs(id, start = 0, end = -1, asc = true) {
    checkId(id)
    v.range(start, end)
    return JSON.parse(await native(this._call(binding.getLogs, id, start, end, !!asc)))
  }

  /** Closes this Queue object (the jobs stay). Later calls throw ERR_QUEUE_CLOSED. */
  async close() {
    this._closed = true
    const helpers = this._helpers
    this._helpers = null
    if (helpers) await Promise.all([...helpers].map((h) => h.close()))
    await this._closeHandle()
  }

  /** An object opened on this queue's behalf (the bull-board adapter's FlowProducer): closed with it. */
  _closeWith(helper) {
    this._ensureOpen()
    ;(this._helpers ??= new Set()).add(helper)
  }
}

// The dead-letter queue's methods (getDlq, retryDlq, setDlqConfig, …).
Object.assign(Queue.prototype, dlqMethods, metricsMethods)

module.exports = { Queue, ALL_TYPES }
