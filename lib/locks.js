'use strict'
// Locks of manually fetched jobs (BullMQ's manual processing: `worker.getNextJob(token)`): the
// token the caller chose, and the engine's lock it stands for. A job's moves (`job-moves.js`)
// find the lock here by (queue handle, job id), whichever Job object of that queue they are
// called on; a processor's job has no entry: its token is the engine's lock itself.

const { QueueError } = require('./errors')

/** `${handle}:${jobId}` -> { token, lock, worker } */
const locks = new Map()

function keyOf(h, id) {
  return `${h}:${id}`
}

/** Records that job `id` of queue handle `h` was fetched by `worker` with `token`. */
function remember(h, id, token, lock, worker) {
  locks.set(keyOf(h, id), { token, lock, worker })
  worker._fetched.add(keyOf(h, id))
}

/** The job's lock is gone (it moved on, or stalled). */
function forget(h, id) {
  const key = keyOf(h, id)
  const entry = locks.get(key)
  if (entry) {
    locks.delete(key)
    entry.worker._fetched.delete(key)
  }
}

/** A closed Worker's fetched jobs are no longer its to move. */
function forgetWorker(worker) {
  for (const key of worker._fetched) locks.delete(key)
  worker._fetched.clear()
}

/** BullMQ's error for a move whose token does not hold the job. */
function lockMismatch(id, command) {
  return new QueueError('ERR_LOCK_MISMATCH', `Missing lock for job ${id}. ${command}: the token does not hold it (it was never taken with it, or it moved on, stalled or was taken again)`)
}

/**
 * The engine lock that `token` stands for on job `id` of handle `h` (and the Worker that fetched
 * it manually, if one did); throws ERR_LOCK_MISMATCH when the token cannot hold it.
 */
function lockOf(h, id, token, command) {
  const entry = locks.get(keyOf(h, id))
  if (entry) {
    if (String(token) !== entry.token) throw lockMismatch(id, command)
    return entry
  }
  // A processor's token is the engine's lock, as a decimal string.
  if ((typeof token === 'string' && /^[0-9]{1,15}$/.test(token)) || (Number.isSafeInteger(token) && token >= 0)) {
    return { token: String(token), lock: Number(token), worker: null }
  }
  throw lockMismatch(id, command)
}

module.exports = { remember, forget, forgetWorker, lockOf, lockMismatch }
