'use strict'
// A Worker's leases: its lease options (BullMQ's lockDuration, lockRenewTime, stalledInterval,
// maxStalledCount, skipStalledCheck), the native lease holder its pulls carry (src/lease.rs), and
// its `stalled` event. In one process the engine holds a Worker's leases for as long as the
// Worker lives and stalls its jobs when it is gone; on PostgreSQL leases last lockDuration and are
// renewed every lockRenewTime by the process, and Workers look for expired ones every
// stalledInterval.

const { binding, fromBinding, native } = require('./native')
const v = require('./validate')
const { rangeError } = require('./errors')

/** The longest duration these options take, ms (a JS timer's limit). */
const MAX_MS = 2 ** 31 - 1

/** Checks the lease options of `o` and answers them with BullMQ's defaults filled in. */
function leaseOptions(o) {
  const lockDuration = o.lockDuration ?? 30_000
  v.integerIn('lockDuration', lockDuration, 1, MAX_MS)
  const lockRenewTime = o.lockRenewTime ?? Math.max(1, Math.floor(lockDuration / 2))
  v.integerIn('lockRenewTime', lockRenewTime, 1, MAX_MS)
  if (lockDuration > 1 && lockRenewTime >= lockDuration) {
    throw rangeError('lockRenewTime', `must be less than lockDuration (${lockDuration} ms) so that a lease is renewed before it ends, got ${lockRenewTime}`)
  }
  const stalledInterval = o.stalledInterval ?? 30_000
  v.integerIn('stalledInterval', stalledInterval, 1, MAX_MS)
  const maxStalledCount = o.maxStalledCount ?? 1
  v.integerIn('maxStalledCount', maxStalledCount, 0, MAX_MS)
  v.optionalBoolean('skipStalledCheck', o.skipStalledCheck)
  return { lockDuration, lockRenewTime, stalledInterval, maxStalledCount, skipStalledCheck: o.skipStalledCheck === true, name: o.name, listed: true }
}

/**
 * Opens the native lease holder of a Worker (on its queue handle). A Worker in a worker thread
 * of a threaded Worker (sandbox/thread-main.js) uses the holder its parent opened for that
 * thread instead (its class's `attachedHolder`): the parent outlives the thread, and settles the
 * thread's jobs if it dies.
 */
function openLease(worker, terms) {
  const attached = worker.constructor.attachedHolder
  if (attached !== undefined) return { id: attached, release: () => 0 }
  try {
    return binding.openLeaseHolder(worker._h, terms)
  } catch (e) {
    throw fromBinding(e)
  }
}

/** The Worker events that come from its queue's event stream. */
const HEARD = ['stalled', 'locksRenewed', 'lockRenewalFailed']

/**
 * Makes `worker` emit, once someone listens for one of them (its queue's events are heard only
 * then): `stalled(jobId, 'active')` for the stalled jobs of its queue, and for its own jobs on
 * PostgreSQL, after each lease renewal, `locksRenewed({ count, jobIds })` and
 * `lockRenewalFailed(jobIds)` (leases that had expired and were taken back), as BullMQ's.
 */
function hearQueueEvents(worker) {
  worker.on('newListener', (event) => {
    if (!HEARD.includes(event) || worker._queueListener || worker._closing) return
    const listener = {
      _deliver(name, payload) {
        try {
          if (name === 'stalled') worker.emit('stalled', payload.jobId, 'active')
          else if (!HEARD.includes(name) || !worker._ownsHolder(payload.holder)) return
          else if (name === 'locksRenewed') worker.emit(name, { count: payload.jobIds.length, jobIds: payload.jobIds })
          else worker.emit(name, payload.jobIds)
        } catch (err) {
          worker._emitError(err)
        }
      },
      _listenerFailed(err) {
        worker._emitError(err)
      },
    }
    worker._queueListener = listener
    worker._engine.listen(worker._h, worker._key, listener)
  })
}

/** Jobs that were active when a durable engine's last process died: `stalled` on `worker`, once. */
async function reportRecoveredStalls(worker) {
  let ids
  try {
    ids = await native(binding.takeStalled(worker._h))
  } catch (e) {
    return worker._emitError(fromBinding(e))
  }
  if (ids.length === 0) return
  setImmediate(() => {
    for (const id of ids) worker._emitSafe('stalled', id, 'active')
  })
}

/**
 * Keeps a running `worker` reachable and its process alive until its run ends, as BullMQ's
 * connection does, even while every slot awaits a promise that never settles (nothing else
 * would refer to it then, and a garbage collection would stall its jobs). Answers the timer.
 */
function holdWhileRunning(worker) {
  return setInterval(() => worker._running, 1 << 30)
}

/** Stops hearing the queue's events (see hearQueueEvents) and lets go of the lease holder. */
function closeLease(worker) {
  const listener = worker._queueListener
  if (listener) {
    worker._queueListener = null
    worker._engine.unlisten(worker._h, worker._key, listener)
  }
  try {
    worker._lease.release()
  } catch (e) {
    worker._emitError(fromBinding(e))
  }
}

module.exports = { leaseOptions, openLease, hearQueueEvents, reportRecoveredStalls, holdWhileRunning, closeLease }
