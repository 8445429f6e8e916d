'use strict'
// The options of a Worker whose processor is a file (BullMQ's `useWorkerThreads`,
// `workerThreadsOptions`, `workerForkOptions`, and ferroqueue's `threads`: how many threads or
// child processes), checked when the Worker is built; and the error that fails a job whose thread
// or child process died (recorded as the attempt's kind `worker_lost`).

const os = require('node:os')
const { QueueError, typeError } = require('../errors')
const v = require('../validate')

const OPTIONS = ['useWorkerThreads', 'threads', 'workerThreadsOptions', 'workerForkOptions']

/** The most threads or child processes one Worker starts. */
const MAX_COPIES = 256

/** The worker_threads options ferroqueue sets itself. */
const OWN_THREAD_OPTIONS = ['workerData', 'eval', 'transferList']
/** The child_process.fork options ferroqueue sets itself. */
const OWN_FORK_OPTIONS = ['serialization']

/**
 * Checks the sandbox options of Worker options `o` (`file`: the processor file, or null for a
 * function); answers `{ threads, count, children, threadOptions, forkOptions }`, where
 * `children` is how many child processes this Worker pulls for (1 when none).
 */
function sandboxOptions(o, file) {
  if (file === null) {
    for (const name of OPTIONS) {
      if (o[name] !== undefined) throw typeError(name, 'takes effect only with a processor file: give the Worker a file path or URL instead of a function')
    }
    return { threads: false, count: 0, children: 1 }
  }
  v.optionalBoolean('useWorkerThreads', o.useWorkerThreads)
  const threads = o.useWorkerThreads === true
  const count = o.threads ?? os.availableParallelism()
  v.integerIn('threads', count, 1, MAX_COPIES)
  const threadOptions = plainOptions('workerThreadsOptions', o.workerThreadsOptions, OWN_THREAD_OPTIONS)
  const forkOptions = plainOptions('workerForkOptions', o.workerForkOptions, OWN_FORK_OPTIONS)
  if (threads && o.workerForkOptions !== undefined) throw typeError('workerForkOptions', 'is for child processes: leave it out with useWorkerThreads: true')
  if (!threads && o.workerThreadsOptions !== undefined) throw typeError('workerThreadsOptions', 'is for worker threads: give useWorkerThreads: true with it')
  if (threads && o.settings !== undefined && o.settings.backoffStrategy !== undefined) {
    const e = new TypeError('settings.backoffStrategy cannot run in worker threads (a function cannot be sent to a thread): use a built-in backoff, or child processes')
    e.code = 'ERR_UNSUPPORTED_OPTION'
    throw e
  }
  return { threads, count, children: threads ? 1 : count, threadOptions, forkOptions }
}

/** An options object passed through to node (its own copy), without the keys ferroqueue sets. */
function plainOptions(option, value, own) {
  if (value === undefined) return {}
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw typeError(option, `must be an object, got ${v.describe(value)}`)
  const copy = { ...value }
  for (const key of own) {
    if (copy[key] !== undefined) throw typeError(`${option}.${key}`, 'is set by ferroqueue; leave it out')
  }
  return copy
}

/** A job's thread or child process died while it ran: the job fails (retried if attempts remain). */
class WorkerLostError extends QueueError {
  constructor(message) {
    super('ERR_WORKER_LOST', message)
    this.name = 'WorkerLostError'
  }
}

function isWorkerLost(thrown) {
  try {
    return thrown instanceof WorkerLostError
  } catch {
    return false // a Proxy whose traps throw
  }
}

module.exports = { sandboxOptions, WorkerLostError, isWorkerLost }
