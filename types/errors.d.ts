// Error classes of ferroqueue's public typings (index.d.ts re-exports them).
/** An error of ferroqueue with a stable code. */
export class QueueError extends Error {
  constructor(code: string, message: string)
  /**
   * ERR_QUEUE_CLOSED, ERR_JOB_NOT_FOUND, ERR_JOB_STATE, ERR_JOB_LOCKED, ERR_QUEUE_ACTIVE,
   * ERR_WORKER_RUNNING, ERR_WORKER_CLOSED, ERR_QUEUE_EVENTS_RUNNING, ERR_BACKOFF_STRATEGY,
   * ERR_TIMEOUT, ERR_PROCESSOR_FILE, ERR_PROCESSOR_LOAD, ERR_WORKER_LOST, ERR_SANDBOXED,
   * ERR_STORAGE_LOCKED, ERR_STORAGE_FOREIGN, ERR_STORAGE_VERSION,
   * ERR_STORAGE_CORRUPT, ERR_STORAGE_IO, ERR_INTERNAL
   */
  code: string
}

/** Thrown by a processor to fail the job at once, without retries. */
export class UnrecoverableError extends Error {
  constructor(message?: string)
}

/**
 * Thrown by a processor (after `worker.rateLimit(ms)`) to put its job back to waiting: no attempt
 * is spent and no `failed` event fires. Its message is BullMQ's `'bullmq:rateLimitExceeded'`.
 */
export class RateLimitError extends Error {
  constructor(message?: string)
}

/**
 * Thrown by a step job's processor after `job.moveToDelayed(timestamp, token)`: the worker
 * records nothing more (no attempt spent, no `failed`). Message: BullMQ's `'bullmq:movedToDelayed'`.
 */
export class DelayedError extends Error {
  constructor(message?: string)
}

/**
 * Thrown by a step job's processor after `job.moveToWaitingChildren(token)` answered true.
 * Message: BullMQ's `'bullmq:movedToWaitingChildren'`.
 */
export class WaitingChildrenError extends Error {
  constructor(message?: string)
}
