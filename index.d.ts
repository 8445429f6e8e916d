// Public typings of ferroqueue (hand-written; the generated binding.d.ts is internal).

import { EventEmitter } from 'node:events'

// Option and data types, and the error classes, live beside this file (types/); the classes here.
export * from './types/options'
export * from './types/errors'
import type {
  JobState,
  JobType,
  CleanType,
  JobsOptions,
  FlowJob,
  JobNode,
  FlowProducerOptions,
  DependencyPage,
  Dependencies,
  QueueOptions,
  WorkerOptions,
  RateLimiterOptions,
  QueueEventsOptions,
  RepeatOptions,
  JobSchedulerJson,
  JobJson,
  JobProgress,
  DlqAttempt,
  DlqConfig,
  DlqFilter,
  DlqReason,
  DlqStats,
  Metrics,
  WorkerInfo,
} from './types/options'
import type { RateLimitError } from './types/errors'

/**
 * BullMQ's FlowProducer: adds trees of jobs (children may be in other queues of the same engine),
 * all or nothing; a parent waits in `waiting-children` until its children are done. Not on
 * PostgreSQL yet (ERR_UNSUPPORTED_OPTION).
 */
export class FlowProducer extends EventEmitter {
  constructor(opts?: FlowProducerOptions)
  readonly opts: FlowProducerOptions
  /** `queuesOptions` gives a queue's options (its `defaultJobOptions` apply); another engine is refused (ERR_FLOW_CROSS_ENGINE). */
  add(flow: FlowJob, opts?: { queuesOptions?: Record<string, QueueOptions> }): Promise<JobNode>
  addBulk(flows: FlowJob[], opts?: { queuesOptions?: Record<string, QueueOptions> }): Promise<JobNode[]>
  /** The tree under a job, `depth` levels down (default 10), at most `maxChildren` children each. */
  getFlow(opts: { id: string; queueName: string; prefix?: string; depth?: number; maxChildren?: number }): Promise<JobNode | undefined>
  close(): Promise<void>
}

export class Job<DataType = any, ReturnType = any, NameType extends string = string> {
  constructor(queue: Queue<DataType, ReturnType, NameType> | Worker<DataType, ReturnType, NameType>, name: NameType, data: DataType, opts?: JobsOptions, id?: string)
  readonly queue: Queue<DataType, ReturnType, NameType> | Worker<DataType, ReturnType, NameType>
  id: string
  name: NameType
  data: DataType
  opts: JobsOptions
  progress: JobProgress
  returnvalue: ReturnType | null
  failedReason: string | undefined
  stacktrace: string[]
  /** Finished attempts so far (failed ones and the successful one), as BullMQ 6 counts them. */
  attemptsMade: number
  /** Activations so far. */
  attemptsStarted: number
  /** How many times the job stalled: its process stopped (or its lease expired) while it ran. */
  stalledCounter: number
  /** The `name` of the Worker that last took the job, if that Worker had one (BullMQ's `processedBy`). */
  processedBy: string | undefined
  timestamp: number
  processedOn: number | undefined
  finishedOn: number | undefined
  delay: number
  priority: number
  /** The lock token of the current activation (jobs given to a processor). */
  token: string | undefined
  /** `opts.deduplication.id`, if the job was added with one (read from `opts`). */
  readonly deduplicationId: string | undefined
  /** A flow child's parent: its id and queue key (read from `opts.parent`). */
  readonly parent: { id: string; queueKey: string } | undefined
  /** A flow child's parent key, `prefix:queue:id` (read from `opts.parent`). */
  readonly parentKey: string | undefined
  /** The job scheduler that made it (from its id `repeat:{scheduler}:{slot}`), else undefined. */
  readonly repeatJobKey: string | undefined
  /** The name of the job's queue. */
  readonly queueName: string
  /** The key of the job's queue, `prefix:name`. */
  readonly queueQualifiedName: string

  updateProgress(progress: JobProgress): Promise<void>
  log(row: string): Promise<number>
  getState(): Promise<JobState | 'unknown'>
  updateData(data: DataType): Promise<void>
  changePriority(opts: { priority?: number; lifo?: boolean }): Promise<void>
  changeDelay(delay: number): Promise<void>
  promote(): Promise<void>
  retry(state?: 'failed' | 'completed', opts?: { resetAttemptsMade?: boolean; resetAttemptsStarted?: boolean }): Promise<void>
  remove(): Promise<void>
  /**
   * Completes the job held with `token` (manual processing, or a processor's own token). With
   * `fetchNext` (default true, as BullMQ) resolves with the holder's next job, taken with the
   * same token, or undefined. Rejects with `ERR_LOCK_MISMATCH` when `token` does not hold the job.
   */
  moveToCompleted(returnValue: ReturnType, token: string, fetchNext?: boolean): Promise<Job<DataType, ReturnType, NameType> | undefined>
  /** Fails the job held with `token` (retried if attempts remain); `fetchNext` defaults to false. */
  moveToFailed(err: Error, token: string, fetchNext?: boolean): Promise<Job<DataType, ReturnType, NameType> | undefined>
  /** A step: delays the running job until `timestamp` (ms), no attempt spent; then throw `DelayedError`. */
  moveToDelayed(timestamp: number, token: string): Promise<void>
  /** A step: back to waiting, no attempt spent; resolves with the queue's rate-limit TTL (ms). */
  moveToWait(token: string): Promise<number>
  /** A step: waits for its pending children (true; then throw `WaitingChildrenError`), or has none (false). */
  moveToWaitingChildren(token: string, opts?: Record<string, never>): Promise<boolean>
  /** Extends the lock `token` holds to at least `duration` ms from now: 1, or 0 when it holds none. */
  extendLock(token: string, duration: number): Promise<number>
  /** Removes the key of `deduplicationId` if this job holds it; resolves whether it did. */
  removeDeduplicationKey(): Promise<boolean>
  /** The return values of the children that completed, by child key (`prefix:queue:id`). */
  getChildrenValues<T = any>(): Promise<Record<string, T>>
  /** Failure reasons of children that failed under failParentOnFailure or continueParentOnFailure. */
  getFailedChildrenValues(): Promise<Record<string, string>>
  /** Failure reasons of children that failed under ignoreDependencyOnFailure. */
  getIgnoredChildrenFailures(): Promise<Record<string, string>>
  /** The children by kind; with `opts`, a page of each kind asked for and its next cursor (0: no more). */
  getDependencies(opts?: { processed?: DependencyPage; unprocessed?: DependencyPage; failed?: DependencyPage; ignored?: DependencyPage }): Promise<Dependencies>
  getDependenciesCount(opts?: { processed?: boolean; unprocessed?: boolean; failed?: boolean; ignored?: boolean }): Promise<{ processed?: number; unprocessed?: number; failed?: number; ignored?: number }>
  isCompleted(): Promise<boolean>
  isFailed(): Promise<boolean>
  isDelayed(): Promise<boolean>
  isActive(): Promise<boolean>
  isWaiting(): Promise<boolean>
  /** Resolves with the return value when the job completes; rejects when it fails for good or after `ttl` ms. */
  waitUntilFinished(queueEvents: QueueEvents, ttl?: number): Promise<ReturnType>
  asJSON(): JobJson<DataType, ReturnType, NameType>
  toJSON(): JobJson<DataType, ReturnType, NameType>
}

export interface QueueListener<DataType, ReturnType, NameType extends string> {
  waiting: (job: Job<DataType, ReturnType, NameType>) => void
  paused: () => void
  resumed: () => void
  cleaned: (jobs: string[], type: string) => void
  error: (err: Error) => void
}

export type JobCounts = Partial<Record<JobType, number>>

export class Queue<DataType = any, ReturnType = any, NameType extends string = string> extends EventEmitter {
  constructor(name: string, opts?: QueueOptions)
  readonly name: string
  readonly opts: QueueOptions
  /** The queue's key, `prefix:name` (what a child's `parent.queue` names). */
  readonly qualifiedName: string
  defaultJobOptions: JobsOptions

  waitUntilReady(): Promise<void>
  add(name: NameType, data: DataType, opts?: JobsOptions): Promise<Job<DataType, ReturnType, NameType>>
  addBulk(jobs: { name: NameType; data: DataType; opts?: JobsOptions }[]): Promise<Job<DataType, ReturnType, NameType>[]>
  getJob(id: string): Promise<Job<DataType, ReturnType, NameType> | undefined>
  getJobState(id: string): Promise<JobState | 'unknown'>
  /** Inclusive `start`..`end` (-1: last); newest first unless `asc`. */
  getJobs(types?: JobType | JobType[], start?: number, end?: number, asc?: boolean): Promise<Job<DataType, ReturnType, NameType>[]>
  getWaiting(start?: number, end?: number): Promise<Job<DataType, ReturnType, NameType>[]>
  getPrioritized(start?: number, end?: number): Promise<Job<DataType, ReturnType, NameType>[]>
  getDelayed(start?: number, end?: number): Promise<Job<DataType, ReturnType, NameType>[]>
  getActive(start?: number, end?: number): Promise<Job<DataType, ReturnType, NameType>[]>
  getCompleted(start?: number, end?: number): Promise<Job<DataType, ReturnType, NameType>[]>
  getFailed(start?: number, end?: number): Promise<Job<DataType, ReturnType, NameType>[]>
  getJobCounts(...types: JobType[]): Promise<JobCounts>
  getJobCountByTypes(...types: JobType[]): Promise<number>
  getWaitingCount(): Promise<number>
  getPrioritizedCount(): Promise<number>
  getDelayedCount(): Promise<number>
  getActiveCount(): Promise<number>
  getCompletedCount(): Promise<number>
  getFailedCount(): Promise<number>
  /** Waiting + prioritized + delayed + waiting-children. */
  count(): Promise<number>
  pause(): Promise<void>
  resume(): Promise<void>
  isPaused(): Promise<boolean>
  /**
   * The queue's own rate limit: at most `max` jobs start per `duration` ms across every worker
   * (a token bucket; it overrides the workers' `limiter`). Durable queues keep it.
   */
  setGlobalRateLimit(max: number, duration: number): Promise<void>
  /** The queue's own rate limit, or null. */
  getGlobalRateLimit(): Promise<RateLimiterOptions | null>
  removeGlobalRateLimit(): Promise<void>
  /** Never more than `concurrency` jobs of this queue active at once, across every worker. */
  setGlobalConcurrency(concurrency: number): Promise<void>
  /** The queue's cap on active jobs, or null. */
  getGlobalConcurrency(): Promise<number | null>
  removeGlobalConcurrency(): Promise<void>
  /** No job of this queue starts for `expireTimeMs` ms (0 lifts it), as `Worker#rateLimit`. */
  rateLimit(expireTimeMs: number): Promise<void>
  /** Ms until the queue starts jobs again by its own rate limit or `rateLimit(ms)` (0: now). */
  getRateLimitTtl(): Promise<number>
  /** At most `concurrency` jobs of the group active at once across every worker (overrides the workers' `group.concurrency`). */
  setGroupConcurrency(groupId: string | number, concurrency: number): Promise<void>
  /** The group's own concurrency, or null. */
  getGroupConcurrency(groupId: string | number): Promise<number | null>
  removeGroupConcurrency(groupId: string | number): Promise<void>
  /** At most `max` jobs of the group start per `duration` ms (overrides the workers' `group.limit`). */
  setGroupRateLimit(groupId: string | number, max: number, duration: number): Promise<void>
  /** The group's own rate limit, or null. */
  getGroupRateLimit(groupId: string | number): Promise<RateLimiterOptions | null>
  removeGroupRateLimit(groupId: string | number): Promise<void>
  /** No job of the group starts until it is resumed (a group that has no jobs yet too); false if it was paused already. */
  pauseGroup(groupId: string | number): Promise<boolean>
  /** False if the group was not paused. */
  resumeGroup(groupId: string | number): Promise<boolean>
  isGroupPaused(groupId: string | number): Promise<boolean>
  /** The group's waiting jobs, `start..end` inclusive (-1: the last), in the order they run. */
  getGroupJobs(groupId: string | number, start?: number, end?: number): Promise<Job[]>
  /** Waiting (and prioritized) jobs of the group. */
  getGroupJobsCount(groupId: string | number): Promise<number>
  getGroupActiveCount(groupId: string | number): Promise<number>
  /** Waiting jobs in every group together. `maxGroups` is BullMQ Pro's scan batch size: checked, it changes nothing. */
  getGroupsJobsCount(maxGroups?: number): Promise<number>
  /** The id of the job holding the deduplication key of `id`, or null. */
  getDeduplicationJobId(id: string): Promise<string | null>
  /** Removes the deduplication key of `id` (adds with it go through again): 1 if a live key was removed, else 0. */
  removeDeduplicationKey(id: string): Promise<number>
  drain(delayed?: boolean): Promise<void>
  /** 1 if removed, 0 if absent or active. */
  remove(id: string): Promise<number>
  clean(grace: number, limit: number, type?: CleanType): Promise<string[]>
  /**
   * Moves every job of `state` (default 'failed') that finished before `timestamp` (default: now)
   * back to waiting, oldest first, `count` (default 1,000) per step.
   */
  retryJobs(opts?: { count?: number; state?: 'failed' | 'completed'; timestamp?: number }): Promise<void>
  /** Moves every delayed job to waiting, earliest due first, `count` (default 1,000) per step. */
  promoteJobs(opts?: { count?: number }): Promise<void>
  /**
   * Creates or updates job scheduler `id` (BullMQ v5): `repeat` is `{ every }` (ms, the first run
   * at once) or `{ pattern, tz? }` (cron, 5 or 6 fields), with `startDate`, `endDate`, `limit`,
   * `immediately`; `template` its jobs' name (default: the id), data and options. Resolves with
   * its pending job.
   */
  upsertJobScheduler(id: string, repeat: RepeatOptions, template?: { name?: NameType; data?: DataType; opts?: Omit<JobsOptions, 'jobId' | 'delay' | 'repeat' | 'parent'> }): Promise<Job<DataType, ReturnType, NameType>>
  /** Scheduler `id`, or undefined. */
  getJobScheduler(id: string): Promise<JobSchedulerJson<DataType> | undefined>
  /** Schedulers by next run (`asc`: soonest first; default latest first), `start..=end`. */
  getJobSchedulers(start?: number, end?: number, asc?: boolean): Promise<JobSchedulerJson<DataType>[]>
  /** How many schedulers the queue has. */
  getJobSchedulersCount(): Promise<number>
  /** Removes scheduler `id` and its pending job; resolves whether it existed. */
  removeJobScheduler(id: string): Promise<boolean>
  /**
   * The dead-letter queue: the queue's failed jobs as entries with their attempt history, newest
   * first, those `filter` selects (`reason`, ages in ms, `offset`/`limit`).
   */
  getDlq(filter?: DlqFilter): Promise<DlqEntry<DataType, ReturnType, NameType>[]>
  /** DLQ totals by reason, the oldest and newest entry, automatic retries pending. */
  getDlqStats(): Promise<DlqStats>
  /** Retries DLQ entry `id` (or every entry), its attempts counted from 0 again; resolves how many went back. */
  retryDlq(id?: string): Promise<number>
  /** Retries the DLQ entries `filter` selects; resolves how many. */
  retryDlqByFilter(filter: DlqFilter): Promise<number>
  /** Removes every DLQ entry; resolves how many. */
  purgeDlq(): Promise<number>
  /** Removes DLQ entry `id`; resolves whether it was one. */
  removeDlqJob(id: string): Promise<boolean>
  /** Changes the DLQ settings given (stored with the queue); resolves all of them. */
  setDlqConfig(config: Partial<DlqConfig>): Promise<DlqConfig>
  getDlqConfig(): Promise<DlqConfig>
  /**
   * Completed (or failed) jobs per minute, newest finished minute first (`data`, items
   * `start..end` as Redis's LRANGE), as BullMQ's: counted once a Worker of the queue has the
   * option `metrics`. `meta.count` is the total counted, `meta.count - meta.prevCount` this
   * minute's, `count` how many finished minutes are kept.
   */
  getMetrics(type: 'completed' | 'failed', start?: number, end?: number): Promise<Metrics>
  /** The queue's live Workers: of this process (embedded engine), of every process (PostgreSQL). */
  getWorkers(): Promise<WorkerInfo[]>
  getWorkersCount(): Promise<number>
  /** BullMQ's key of one of the queue's structures: `prefix:name:type`. */
  toKey(type: string): string
  /**
   * Prometheus text: BullMQ's `bullmq_job_count{queue,state}` gauge, then this process's
   * `ferroqueue_jobs_finished_total{queue,outcome}`, `ferroqueue_job_processing_seconds`
   * (histogram) and, for a durable engine, `ferroqueue_commit_seconds` (histogram).
   * `globalVariables` become labels of every sample.
   */
  exportPrometheusMetrics(globalVariables?: Record<string, string>): Promise<string>
  obliterate(opts?: { force?: boolean }): Promise<void>
  getJobLogs(id: string, start?: number, end?: number, asc?: boolean): Promise<{ logs: string[]; count: number }>
  close(): Promise<void>

  on<U extends keyof QueueListener<DataType, ReturnType, NameType>>(event: U, listener: QueueListener<DataType, ReturnType, NameType>[U]): this
  on(event: string | symbol, listener: (...args: any[]) => void): this
  once<U extends keyof QueueListener<DataType, ReturnType, NameType>>(event: U, listener: QueueListener<DataType, ReturnType, NameType>[U]): this
  once(event: string | symbol, listener: (...args: any[]) => void): this
}

/** A DLQ entry: a failed job and what its history says. */
export interface DlqEntry<DataType = any, ReturnType = any, NameType extends string = string> {
  job: Job<DataType, ReturnType, NameType>
  reason: DlqReason
  /** The job's `failedReason`. */
  error: string | null
  /** Its failed attempts, oldest first (the newest 100). */
  attempts: DlqAttempt[]
  /** When it failed for good (ms), its `finishedOn`. */
  enteredAt: number
  /** When it leaves the DLQ (`enteredAt + maxAge`). */
  expiresAt: number
  /** When it is retried automatically, or null (off, or its retries spent). */
  nextRetryAt: number | null
  /** How many times it went back from the DLQ before. */
  retries: number
}

export type Processor<DataType = any, ReturnType = any, NameType extends string = string> = (
  job: Job<DataType, ReturnType, NameType>,
  token?: string,
  signal?: AbortSignal,
) => Promise<ReturnType> | ReturnType

export interface WorkerListener<DataType, ReturnType, NameType extends string> {
  active: (job: Job<DataType, ReturnType, NameType>, prev: string) => void
  progress: (job: Job<DataType, ReturnType, NameType>, progress: JobProgress) => void
  completed: (job: Job<DataType, ReturnType, NameType>, result: ReturnType, prev: string) => void
  failed: (job: Job<DataType, ReturnType, NameType> | undefined, error: Error, prev: string) => void
  drained: () => void
  error: (failedReason: Error) => void
  /** The worker can take jobs (emitted once, right after it is created). */
  ready: () => void
  /** `close()` began (message: `closing worker`); `closed` follows once it is done. */
  closing: (msg: string) => void
  /**
   * A job of this queue stalled: its worker was gone (or, on PostgreSQL, its lease expired) while
   * it ran; also a job that was active when the process using the file died (reported once,
   * after restart).
   */
  stalled: (jobId: string, prev: string) => void
  /** PostgreSQL: this worker's leases were renewed (after each renewal, every `lockRenewTime`). */
  locksRenewed: (data: { count: number; jobIds: string[] }) => void
  /** PostgreSQL: these jobs' leases had expired and were taken back: this worker lost them. */
  lockRenewalFailed: (jobIds: string[]) => void
  paused: () => void
  resumed: () => void
  closed: () => void
}

export class Worker<DataType = any, ReturnType = any, NameType extends string = string> extends EventEmitter {
  /**
   * `processor` null or left out: manual processing with `getNextJob(token)`. A file path or
   * `file:` URL: a module whose default export (or `module.exports`) is the processor, run in
   * child processes, or in worker threads with `useWorkerThreads: true` (`threads` of them,
   * default the number of cores); a missing file throws `ERR_PROCESSOR_FILE` here, one that
   * cannot be loaded rejects `run()` with `ERR_PROCESSOR_LOAD`.
   */
  constructor(name: string, processor?: Processor<DataType, ReturnType, NameType> | string | URL | null, opts?: WorkerOptions)
  /**
   * Manual processing: the next job, taken with `token`; waits up to `drainDelay` unless
   * `{ block: false }`. Undefined when none came.
   */
  getNextJob(token: string, opts?: { block?: boolean }): Promise<Job<DataType, ReturnType, NameType> | undefined>
  /** Extends the locks of `jobIds` held with `tokens` (same order) to `duration` ms; answers how many are held. */
  extendJobLocks(jobIds: string[], tokens: string[], duration: number): Promise<number>
  readonly name: string
  readonly opts: WorkerOptions
  concurrency: number

  waitUntilReady(): Promise<void>
  /** Starts processing (autorun does it for you); resolves when the worker closes. */
  run(): Promise<void>
  /** Stops taking jobs; resolves when active jobs are done unless `doNotWaitActive`. */
  pause(doNotWaitActive?: boolean): Promise<void>
  /** Takes jobs again after `pause()`; starts a worker that was not running (autorun: false). */
  resume(): Promise<void>
  isRunning(): boolean
  isPaused(): boolean
  /**
   * No job of this queue starts, in any worker, for `expireTimeMs` ms; then throw
   * `Worker.RateLimitError()` from the processor to put its job back (BullMQ's manual rate limit).
   */
  rateLimit(expireTimeMs: number): Promise<void>
  /** A `RateLimitError`, as BullMQ's `Worker.RateLimitError()`. */
  static RateLimitError(): RateLimitError
  /** Waits for active jobs; with `force`, aborts their signals and puts them back to waiting. */
  close(force?: boolean): Promise<void>
  /**
   * Aborts the signal of job `jobId` if it runs in this worker (`reason` becomes the signal's
   * reason); the processor decides what follows, as in BullMQ. Whether the job runs here.
   */
  cancelJob(jobId: string, reason?: unknown): boolean
  /** Aborts the signals of every job running in this worker. */
  cancelAllJobs(reason?: unknown): void

  on<U extends keyof WorkerListener<DataType, ReturnType, NameType>>(event: U, listener: WorkerListener<DataType, ReturnType, NameType>[U]): this
  on(event: string | symbol, listener: (...args: any[]) => void): this
  once<U extends keyof WorkerListener<DataType, ReturnType, NameType>>(event: U, listener: WorkerListener<DataType, ReturnType, NameType>[U]): this
  once(event: string | symbol, listener: (...args: any[]) => void): this
}

export interface QueueEventsListener {
  added: (args: { jobId: string; name: string }, id: string) => void
  waiting: (args: { jobId: string; prev?: string }, id: string) => void
  /** `delay` is the timestamp (ms since the epoch) at which the job becomes ready, as in BullMQ. */
  delayed: (args: { jobId: string; delay: number }, id: string) => void
  active: (args: { jobId: string; prev?: string }, id: string) => void
  progress: (args: { jobId: string; data: JobProgress }, id: string) => void
  completed: (args: { jobId: string; returnvalue: any; prev?: string }, id: string) => void
  failed: (args: { jobId: string; failedReason: string; prev?: string }, id: string) => void
  'retries-exhausted': (args: { jobId: string; attemptsMade: number }, id: string) => void
  removed: (args: { jobId: string; prev: string }, id: string) => void
  duplicated: (args: { jobId: string }, id: string) => void
  /** A flow parent was added waiting for its children. */
  'waiting-children': (args: { jobId: string }, id: string) => void
  /** An active job lost its worker (or its lease expired); `waiting` or `failed` follows. */
  stalled: (args: { jobId: string }, id: string) => void
  /** An add found `jobId` holding the key of `deduplicationId` (with `replace`, `jobId` is the new job); `deduplicatedJobId` is the job not kept. */
  deduplicated: (args: { jobId: string; deduplicationId: string; deduplicatedJobId: string }, id: string) => void
  cleaned: (args: { count: number }, id: string) => void
  drained: (id: string) => void
  paused: (args: {}, id: string) => void
  resumed: (args: {}, id: string) => void
  closed: () => void
}

export class QueueEvents extends EventEmitter {
  constructor(name: string, opts?: QueueEventsOptions)
  readonly name: string
  waitUntilReady(): Promise<void>
  /** Starts delivering events (autorun does it for you); resolves when closed. */
  run(): Promise<void>
  close(): Promise<void>

  on<U extends keyof QueueEventsListener>(event: U, listener: QueueEventsListener[U]): this
  /** Per-job events: `completed:42`, `failed:42`, … get the same arguments as their event. */
  on(event: `${keyof QueueEventsListener}:${string}`, listener: (args: { jobId: string; [key: string]: any }, id: string) => void): this
  on(event: string | symbol, listener: (...args: any[]) => void): this
  once<U extends keyof QueueEventsListener>(event: U, listener: QueueEventsListener[U]): this
  once(event: string | symbol, listener: (...args: any[]) => void): this
}
