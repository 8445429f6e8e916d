'use strict'
// bull-board over ferroqueue queues: `new BullBoardAdapter(queue, options)` from
// `ferroqueue/bull-board`, given to bull-board's `createBullBoard({ queues: [...] })` as its own
// adapters are. It extends bull-board's BaseAdapter (from `@bull-board/api`, an optional peer
// dependency) and answers each of its calls with the queue's own methods, so every count and
// list on the board is the queue's. Why an adapter of our own rather than bull-board's
// BullMQAdapter: README, "bull-board".

const { Queue } = require('./queue')
const { FlowProducer } = require('./flow-producer')
const { QueueError, typeError } = require('./errors')

/** bull-board's BaseAdapter, or a clear error naming the package to install. */
function baseAdapter() {
  try {
    require.resolve('@bull-board/api')
  } catch {
    throw new QueueError('ERR_PEER_MISSING', 'ferroqueue/bull-board needs bull-board: npm install @bull-board/api and a server package such as @bull-board/express')
  }
  return require('@bull-board/api/dist/queueAdapters/base.js').BaseAdapter
}

/** The statuses a queue's jobs can be in (no `paused`: as in BullMQ 5+, a paused queue's jobs stay `waiting`). */
const JOB_STATUSES = ['active', 'waiting', 'waiting-children', 'prioritized', 'completed', 'failed', 'delayed']

/** The options of the queue that say where its engine is, for the FlowProducer that reads flows. */
const FLOW_OPTIONS = ['dataPath', 'connection', 'durability', 'prefix']

/** The id BullMQ and ferroqueue give a scheduler's job for the slot `millis`. */
const schedulerRunId = (id, millis) => `repeat:${id}:${millis}`

class BullBoardAdapter extends baseAdapter() {
  /**
   * @param {Queue} queue a ferroqueue Queue
   * @param {object} [options] bull-board's adapter options (`readOnlyMode`, `allowRetries`,
   *   `allowCompletedRetries`, `prefix`, `delimiter`, `description`, `displayName`,
   *   `externalJobUrl`, `jobDataSchema`)
   */
  constructor(queue, options = {}) {
    // bull-board shows BullMQ's features for 'bullmq'; it is the API this queue answers.
    super('bullmq', options)
    if (!(queue instanceof Queue)) {
      throw typeError('queue', 'must be a ferroqueue Queue (BullBoardAdapter is for ferroqueue queues; use bull-board\'s BullMQAdapter for BullMQ\'s)')
    }
    this.queue = queue
  }

  getName() {
    return `${this.prefix}${this.queue.name}`
  }

  /** No Redis behind this queue: bull-board then asks getDatastoreStats, which has none either. */
  async getRedisInfo() {
    return null
  }

  async getWorkers() {
    return this.normalizeWorkers(await this.queue.getWorkers(), ':w:')
  }

  async clean(status, graceTimeMs) {
    await this.queue.clean(graceTimeMs, 0, status)
  }

  addJob(name, data, options) {
    return this.queue.add(name, data, options)
  }

  getJob(id) {
    return this.queue.getJob(id)
  }

  async getJobs(statuses, start, end) {
    return (await this.queue.getJobs(statuses, start, end)).filter(Boolean)
  }

  getJobCounts() {
    return this.queue.getJobCounts(...JOB_STATUSES)
  }

  async getJobLogs(id) {
    return (await this.queue.getJobLogs(id)).logs
  }

  getMetrics(type, start, end) {
    return this.queue.getMetrics(type, start, end)
  }

  isPaused() {
    return this.queue.isPaused()
  }

  pause() {
    return this.queue.pause()
  }

  resume() {
    return this.queue.resume()
  }

  empty() {
    return this.queue.drain()
  }

  obliterate({ force = false } = {}) {
    return this.queue.obliterate({ force })
  }

  async promoteAll() {
    await this.queue.promoteJobs()
  }

  removeJobScheduler(id) {
    return this.queue.removeJobScheduler(id)
  }

  /** The scheduler whose pending run `job` is, if it is one (removing it would stop the scheduler). */
  async getArmedJobSchedulerId(job) {
    const { id, repeatJobKey } = job
    if (!id || !repeatJobKey) return null
    const scheduler = await this.queue.getJobScheduler(repeatJobKey).catch(() => null)
    return scheduler?.next && schedulerRunId(repeatJobKey, scheduler.next) === id ? repeatJobKey : null
  }

  async getJobSchedulers() {
    const schedulers = await this.queue.getJobSchedulers(0, -1)
    return Promise.all(
      schedulers.map(async (s) => ({
        id: s.key,
        name: s.name,
        pattern: s.pattern,
        every: s.every,
        tz: s.tz,
        limit: s.limit,
        startDate: s.startDate,
        endDate: s.endDate,
        next: s.next ?? undefined,
        iterationCount: s.iterationCount,
        template: s.template,
        ...(await this._runsOf(s)),
      })),
    )
  }

  /** The pending run of scheduler `s`, and when its previous one started (that run made it). */
  async _runsOf(s) {
    if (!s.next) return {}
    const pending = await this.queue.getJob(schedulerRunId(s.key, s.next))
    if (!pending) return {}
    if (!(s.iterationCount > 1)) return { nextRunJobId: pending.id }
    const previous = s.every ? await this.queue.getJob(schedulerRunId(s.key, s.next - s.every)) : null
    return { nextRunJobId: pending.id, lastRun: pending.timestamp, lastRunJobId: previous?.id }
  }

  getJobSchedulersCount() {
    return this.queue.getJobSchedulersCount()
  }

  get supportsJobSchedulerUpdate() {
    return true
  }

  get supportsJobSchedulerRun() {
    return true
  }

  async runJobSchedulerNow(id) {
    const s = await this.queue.getJobScheduler(id)
    if (!s) return 'not-found'
    return this.queue.add(s.name, s.template?.data, s.template?.opts)
  }

  async updateJobScheduler(id, repeat) {
    const s = await this.queue.getJobScheduler(id)
    if (!s) return 'not-found'
    try {
      await this.queue.upsertJobScheduler(id, repeat, { name: s.name, data: s.template?.data, opts: s.template?.opts })
    } catch (e) {
      // A pattern or date the engine refuses leaves the scheduler as it was.
      if (e && e.code === 'ERR_INVALID_OPTION') return 'invalid-schedule'
      throw e
    }
    return 'updated'
  }

  getStatuses() {
    return ['latest', ...JOB_STATUSES]
  }

  getJobStatuses() {
    return [...JOB_STATUSES]
  }

  async getGlobalConcurrency() {
    return this.queue.getGlobalConcurrency()
  }

  async setGlobalConcurrency(concurrency) {
    if (concurrency <= 0) await this.queue.removeGlobalConcurrency()
    else await this.queue.setGlobalConcurrency(concurrency)
  }

  get supportsGlobalRateLimit() {
    return true
  }

  getConfiguredRateLimit() {
    return this.queue.getGlobalRateLimit()
  }

  async setConfiguredRateLimit({ max, duration }) {
    await this.queue.setGlobalRateLimit(max, duration)
  }

  async removeConfiguredRateLimit() {
    await this.queue.removeGlobalRateLimit()
  }

  getActiveRateLimitTtl() {
    return this.queue.getRateLimitTtl()
  }

  /** Lifts a hold set by `rateLimit(ms)` (a rate limit's own wait runs out by itself). */
  async releaseActiveRateLimit() {
    await this.queue.rateLimit(0)
  }

  getQueueDefaultJobOptions() {
    return this.queue.opts.defaultJobOptions ?? {}
  }

  /** BullMQ's key of one of the queue's sets (`prefix:name:set`), as BullMQAdapter answers. */
  getQueueKey(set) {
    return this.queue.toKey(set)
  }

  getQueueName() {
    return this.queue.name
  }

  /**
   * What the board reads a job's flow with (`getFlow`): a FlowProducer on the queue's engine,
   * opened at the first flow shown and closed with the queue.
   */
  async getFlowProducer() {
    if (!this._flows) {
      const o = this.queue.opts
      const opts = Object.fromEntries(FLOW_OPTIONS.filter((k) => o[k] !== undefined).map((k) => [k, o[k]]))
      const producer = new FlowProducer(opts)
      this.queue._closeWith(producer)
      this._flows = producer
    }
    return this._flows
  }

  getQueueQualifiedName() {
    return this.queue.qualifiedName
  }
}

module.exports = { BullBoardAdapter }
