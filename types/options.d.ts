// Option and data types of ferroqueue's public typings (index.d.ts re-exports them).

import type { Job } from '../index'


/** States a job can be in. */
export type JobState = 'waiting' | 'prioritized' | 'delayed' | 'active' | 'completed' | 'failed' | 'waiting-children'
/**
 * State names accepted by getters and counts (`wait` is `waiting`). `paused` is always empty, as in
 * BullMQ 5+: a paused queue's jobs stay `waiting` / `prioritized`.
 */
export type JobType = JobState | 'wait' | 'paused'
/** Job states that `clean` accepts. */
export type CleanType = 'completed' | 'failed' | 'delayed' | 'wait' | 'waiting' | 'prioritized' | 'paused' | 'active'

/** Retention of finished jobs: `true` removes at once, `false` keeps all, a number keeps the newest N. */
export type KeepJobs = boolean | number | { /** seconds */ age?: number; count?: number }

export interface BackoffOptions {
  /** Built-in types, or the name of a custom one computed by the Worker's `settings.backoffStrategy`. */
  type: 'fixed' | 'exponential' | (string & {})
  /** Base wait in ms. Exponential waits `delay * 2^(attemptsMade - 1)`. */
  delay?: number
  /** In [0, 1]: the wait is drawn uniformly from `[d * (1 - jitter), d]`. */
  jitter?: number
}

export interface JobsOptions {
  /** A custom id: a non-empty string (at most 1024 bytes) that is not an integer. Adding an existing id adds nothing. */
  jobId?: string
  /** Milliseconds to wait before the job can run. */
  delay?: number
  /** 0..2,097,152; lower runs first; 0 (none) runs before any priority. */
  priority?: number
  /** Put the job at the head of its priority instead of the tail. */
  lifo?: boolean
  /** Total tries (default 1). */
  attempts?: number
  /** A number (fixed wait in ms) or a backoff spec. */
  backoff?: number | BackoffOptions
  removeOnComplete?: KeepJobs
  removeOnFail?: KeepJobs
  /** Creation time in ms since the epoch (default: now); `delay` counts from it. */
  timestamp?: number
  /** Keep only the newest N log rows. */
  keepLogs?: number
  /**
   * Ms a worker lets the processor run (1..2^31-1): then its `signal` aborts (reason: an Error
   * named `TimeoutError`, message `timeout`) and the job fails with reason `timeout`, retried if
   * attempts remain. The worker's slot frees then, whatever the processor goes on doing.
   */
  timeout?: number
  /**
   * While a job added with this `id` holds its key, adds with the same id add nothing and
   * resolve with that job (QueueEvents `deduplicated`). Without `ttl` the key lives until the
   * job finishes (completed, or failed for good) or is removed; with `ttl` (ms) for that long
   * from the add, restarted by each duplicate with `extend`; `replace` (with `ttl`) swaps a
   * still-delayed holder for the new job.
   */
  deduplication?: DeduplicationOptions
  /**
   * The job's group (BullMQ Pro's groups): workers take ungrouped jobs first, then the groups in
   * round-robin, each group FIFO by `group.priority`; a group held by its limits or paused waits
   * while the others run. Not with `priority` (give `group.priority`).
   */
  group?: GroupOptions
  /**
   * Makes the job a child of an existing job (of this engine or PostgreSQL schema) that is not
   * finished: `queue` is the parent queue's key, `prefix:name` (`queue.qualifiedName`).
   */
  parent?: ParentOptions
  /** When this child fails for good, its parent fails too (reason `child <key> failed`). */
  failParentOnFailure?: boolean
  /** When this child fails for good, its parent goes on without it; see `getIgnoredChildrenFailures`. */
  ignoreDependencyOnFailure?: boolean
  /** When this child fails for good, it is no longer a dependency of its parent. */
  removeDependencyOnFailure?: boolean
  /** When this child fails for good, its parent runs at once; see `getFailedChildrenValues`. */
  continueParentOnFailure?: boolean
  /**
   * BullMQ's repeat: makes (or updates) the job scheduler keyed `name:jobId:endDate:tz:pattern|every`
   * (see `upsertJobScheduler`); the job returned is its pending job. Not in `addBulk` or flows.
   */
  repeat?: RepeatOptions
}

export interface ParentOptions {
  id: string
  /** The parent queue's key, `prefix:name` (`'bull:name'` for a plain name). */
  queue: string
}

/** A node of a flow to add: a job and its children, which may be in other queues of the same engine. */
export interface FlowJob {
  name: string
  queueName: string
  data?: any
  prefix?: string
  opts?: Omit<JobsOptions, 'parent' | 'deduplication'>
  children?: FlowJob[]
}

/** A job of a flow and its children. */
export interface JobNode {
  job: Job
  children?: JobNode[]
}

export interface FlowProducerOptions {
  dataPath?: string
  connection?: string | PostgresConnection
  durability?: Durability
  prefix?: string
}


/** A page of one kind of dependency: `cursor` (default 0) and `count` (default 20). */
export interface DependencyPage {
  cursor?: number
  count?: number
}

export interface Dependencies {
  processed?: Record<string, any>
  unprocessed?: string[]
  failed?: string[]
  ignored?: Record<string, string>
  nextProcessedCursor?: number
  nextUnprocessedCursor?: number
  nextFailedCursor?: number
  nextIgnoredCursor?: number
}

export interface GroupOptions {
  /** A non-empty string of at most 1024 bytes, or a safe integer (the same group as its text). */
  id: string | number
  /** 0..2,097,152 within the group: 0 (none) first, then lower numbers. */
  priority?: number
}

/** A Worker's defaults for groups without settings of their own. */
export interface WorkerGroupOptions {
  /** Jobs of one group active at once, across every worker of the queue. */
  concurrency?: number
  /** At most `max` jobs of one group start per `duration` ms (a token bucket per group). */
  limit?: RateLimiterOptions
}

export interface DeduplicationOptions {
  /** A non-empty string of at most 1024 bytes. */
  id: string
  ttl?: number
  extend?: boolean
  replace?: boolean
}

/** When a changing call's promise resolves on a durable queue. */
export type Durability = 'commit' | 'fsync' | 'buffered'

/** A PostgreSQL database to keep queues in, shared by any number of processes and machines. */
export interface PostgresConnection {
  /** `postgresql://user:password@host:5432/database` */
  connectionString: string
  /** The schema ferroqueue creates and migrates its tables in (default `'ferroqueue'`). */
  schema?: string
  /** Connections this process opens for its calls, 1..=64 (default 4). */
  max?: number
}

export interface QueueBaseOptions {
  /**
   * The SQLite file that makes the queue durable (default: env FERROQUEUE_DATA_PATH; without
   * either, in memory). Every object of a process on the same file shares one engine.
   */
  dataPath?: string
  /**
   * A PostgreSQL URL or connection (default: env FERROQUEUE_POSTGRES_URL): queues shared by
   * every process that connects to the same database and schema. Not with `dataPath`.
   */
  connection?: string | PostgresConnection
  /**
   * 'commit' (default): promises resolve once the change is committed (survives a process crash);
   * 'fsync': once it is fsynced (survives power loss); 'buffered': at once, committed right after.
   */
  durability?: Durability
  /**
   * BullMQ's namespace of queues: queues of the same name under different prefixes are different
   * queues. Default `'bull'`, the namespace of plain names.
   */
  prefix?: string
}

export interface QueueOptions extends QueueBaseOptions {
  defaultJobOptions?: JobsOptions
}

export interface WorkerOptions extends QueueBaseOptions {
  /** Jobs processed at once by this worker (default 1). */
  concurrency?: number
  /**
   * Jobs claimed beyond the free slots (ferroqueue's own option), so that the next claim's round
   * trip overlaps the jobs running. Claimed jobs count as active; they start (and `active` fires)
   * as slots free, in claim order; `pause()` and `close()` give back those not started. Left out:
   * adaptive on PostgreSQL (enough for two round trips at the rate jobs start, so a worker of
   * long jobs holds none back), 0 on the embedded engine, where a claim costs no round trip.
   */
  prefetch?: number
  /**
   * At most `max` jobs start per `duration` ms, counted for the whole queue (one budget shared
   * by every worker of the queue, as in BullMQ); a token bucket that starts full. The queue's
   * own rate limit (`setGlobalRateLimit`) overrides it.
   */
  limiter?: RateLimiterOptions
  /**
   * Defaults for every job group of the queue (BullMQ Pro's `group` option); a group's own
   * settings (`queue.setGroupConcurrency`, `setGroupRateLimit`) override them. Workers of one
   * queue should pass the same.
   */
  group?: WorkerGroupOptions
  /** Start processing in the constructor (default true); otherwise call `run()`. */
  autorun?: boolean
  /** Seconds a pull waits for a job before looping (default 5). */
  drainDelay?: number
  /** Retention for jobs that have no `removeOnComplete` of their own. */
  removeOnComplete?: KeepJobs
  /** Retention for jobs that have no `removeOnFail` of their own. */
  removeOnFail?: KeepJobs
  /**
   * The lease of each job this worker takes, ms (default 30,000). In one process the engine
   * holds a worker's leases for as long as the worker lives, however long a processor blocks the
   * event loop, and its jobs stall at once when it is gone (closed with jobs left, garbage
   * collected, its thread terminated). On PostgreSQL a lease lasts this long unless renewed:
   * the process renews it (not the event loop), so only a dead process or worker loses it.
   */
  lockDuration?: number
  /** How often the leases are renewed on PostgreSQL, ms (default half of `lockDuration`). */
  lockRenewTime?: number
  /**
   * How often this worker's process looks for expired leases on PostgreSQL, ms (default
   * 30,000; the elected process also looks every 5 s). In one process stalls are found at once.
   */
  stalledInterval?: number
  /**
   * Times a job may stall and still run again (default 1); past it the job fails with `job
   * stalled more than allowable limit`. It applies to the jobs this worker held (in one
   * process) or that this worker's process finds expired (PostgreSQL).
   */
  maxStalledCount?: number
  /** This worker's process does not look for expired leases for it (PostgreSQL). */
  skipStalledCheck?: boolean
  /** This worker's name (BullMQ's): every job it takes records it as `processedBy`. */
  name?: string
  /**
   * Record per-minute counts of the queue's completed and failed jobs (`queue.getMetrics`),
   * keeping the newest `maxDataPoints` minutes (default `MetricsTime.ONE_WEEK`, at most a year).
   */
  metrics?: MetricsOptions
  /**
   * With a processor file: run it in worker threads that pull from the engine themselves
   * (`true`), or in child processes fed by this worker (left out or `false`, BullMQ's default).
   */
  useWorkerThreads?: boolean
  /**
   * With a processor file: how many worker threads or child processes (ferroqueue's own option;
   * default: the number of cores). `concurrency` applies to each.
   */
  threads?: number
  /** Options passed to each `new worker_threads.Worker` (not `workerData`, `eval`, `transferList`). */
  workerThreadsOptions?: import('node:worker_threads').WorkerOptions
  /** Options passed to each `child_process.fork` (not `serialization`). */
  workerForkOptions?: import('node:child_process').ForkOptions
  settings?: {
    /**
     * Computes the wait before a retry for jobs whose backoff type is not built in: the wait in
     * ms, or -1 for no retry. `attemptsMade` counts the attempt that just failed.
     */
    backoffStrategy?: (attemptsMade: number, type: string, err: Error, job: Job) => number | Promise<number>
  }
}

/** A rate limit: at most `max` jobs (1..2^32-1) start per `duration` ms (1..2^53). */
export interface RateLimiterOptions {
  max: number
  duration: number
}

export interface QueueEventsOptions extends QueueBaseOptions {
  /** Start delivering events in the constructor (default true). */
  autorun?: boolean
  /** Only `'$'` (events from now on): events are delivered in-process and no history is kept. */
  lastEventId?: '$'
}

/** How a job scheduler repeats: `every` ms, or a cron `pattern` (5 fields, or 6 with seconds first). */
export interface RepeatOptions {
  every?: number
  pattern?: string
  /** IANA time zone of `pattern` (default UTC). */
  tz?: string
  startDate?: Date | string | number
  endDate?: Date | string | number
  /** Most jobs it makes. */
  limit?: number
  /** A pattern's first run is now. */
  immediately?: boolean
}

/** A job scheduler as BullMQ's `getJobScheduler` answers it. */
export interface JobSchedulerJson<DataType = any> {
  key: string
  id: string
  name: string
  iterationCount: number
  every?: number
  pattern?: string
  tz?: string
  startDate?: number
  endDate?: number
  limit?: number
  /** The slot (ms) of its pending job. */
  next?: number
  template: { data: DataType; opts?: JobsOptions }
}

export interface JobJson<DataType = any, ReturnType = any, NameType extends string = string> {
  id: string
  name: NameType
  data: DataType
  opts: JobsOptions
  progress: JobProgress
  returnvalue: ReturnType | null
  failedReason: string | undefined
  stacktrace: string[]
  attemptsMade: number
  attemptsStarted: number
  stalledCounter: number
  processedBy?: string
  timestamp: number
  processedOn: number | undefined
  finishedOn: number | undefined
  delay: number
  priority: number
}

export type JobProgress = number | string | boolean | object | null

/** Why a job is in the DLQ: how its final attempt ended (`ttl_expired` and `worker_lost` are not produced yet). */
export type DlqReason =
  | 'explicit_fail'
  | 'max_attempts_exceeded'
  | 'timeout'
  | 'stalled'
  | 'ttl_expired'
  | 'worker_lost'
  | 'unknown'

/** One failed attempt of a job. */
export interface DlqAttempt {
  /** Which attempt (counted from 1 again after a retry from the DLQ). */
  attempt: number
  startedAt: number
  failedAt: number
  /** `failedAt - startedAt` (ms). */
  duration: number
  error: string
  /** `worker_lost`: the worker thread or child process that ran it died. */
  kind: 'error' | 'timeout' | 'stalled' | 'unrecoverable' | 'worker_lost'
  /** The failure that sent the job to the DLQ. */
  final: boolean
}

/** Which DLQ entries a call is about. */
export interface DlqFilter {
  reason?: DlqReason
  /** Entries that entered at least this many ms ago. */
  olderThan?: number
  /** Entries that entered at most this many ms ago. */
  newerThan?: number
  offset?: number
  limit?: number
}

/** A queue's DLQ settings; durations in ms. */
export interface DlqConfig {
  /** Retry entries automatically (default false), after `autoRetryInterval` (default 1 h), doubled each time. */
  autoRetry: boolean
  autoRetryInterval: number
  /** Automatic retries of one entry at most (default 3, at most 50). */
  maxAutoRetries: number
  /** An entry leaves this long after it entered (default 7 days). */
  maxAge: number
  /** The oldest entries beyond this many leave (default 10,000). */
  maxEntries: number
}

export interface DlqStats {
  total: number
  byReason: Record<DlqReason, number>
  oldestEnteredAt: number | null
  newestEnteredAt: number | null
  /** Entries with an automatic retry to come, and the first one's time. */
  pendingAutoRetries: number
  nextAutoRetryAt: number | null
}

/** The Worker option `metrics`. */
export interface MetricsOptions {
  maxDataPoints?: number
}

/** BullMQ's `MetricsTime`: data points (minutes) in each span. */
export declare const MetricsTime: {
  readonly ONE_MINUTE: 1
  readonly FIVE_MINUTES: 5
  readonly FIFTEEN_MINUTES: 15
  readonly THIRTY_MINUTES: 30
  readonly ONE_HOUR: 60
  readonly ONE_WEEK: 10080
  readonly TWO_WEEKS: 20160
  readonly ONE_MONTH: 80640
}

/** `queue.getMetrics`'s answer, as BullMQ's. */
export interface Metrics {
  meta: { count: number; prevTS: number; prevCount: number }
  /** Counts per finished minute, newest first. */
  data: number[]
  /** How many finished minutes are kept. */
  count: number
}

/** A live Worker, as `queue.getWorkers` lists it (the fields of BullMQ's that apply; times in ms). */
export interface WorkerInfo {
  /** Unique among the Workers listed. */
  id: string
  /** The queue's name. */
  name: string
  /**
   * BullMQ's connection name of the Worker: `prefix:base64(queue)`, then `:w:` and its `name`
   * option if it has one.
   */
  rawname: string
  /** Where its process connects from (PostgreSQL), else `pid:<pid>`. */
  addr: string
  pid: number
  /** When it opened. */
  started: number
  /** Seconds since it opened, and since it was last known alive, as strings (BullMQ's). */
  age: string
  idle: string
}
