'use strict'
// Manual processing (BullMQ's pattern): a Worker created without a processor hands out jobs one
// at a time with `getNextJob(token)`; the caller moves each on with the same token
// (job-moves.js). A fetched job is held by the Worker's lease like a processed one: it never
// stalls while the Worker lives, and stalls once the Worker is closed or gone.

const { binding, fromBinding, isPending, native } = require('./native')
const { Job } = require('./job')
const { remember, forgetWorker } = require('./locks')
const { typeError } = require('./errors')
const v = require('./validate')

/**
 * The Worker's next job, taken with `token` (a string of the caller's): waits up to the Worker's
 * `drainDelay` for one with `block` (default true); undefined when none came or the worker closes.
 */
async function getNextJob(w, token, opts = {}) {
  if (typeof token !== 'string' || token.length === 0) throw typeError('token', `must be a non-empty string, got ${v.describe(token)}`)
  if (opts === null || typeof opts !== 'object') throw typeError('opts', `must be an object, got ${v.describe(opts)}`)
  v.optionalBoolean('opts.block', opts.block)
  if (w._closing) return undefined
  const h = w._h
  let text
  try {
    text = binding.tryPull(h, 1, w._limits, w._holder)
    if (isPending(text)) text = await native(text)
    if (text.length === 2 && opts.block !== false && !w._closing) {
      w._pulling = true
      try {
        text = await binding.pull(h, w._puller, 1, w._limits, w._holder, w._pullTimeout)
      } finally {
        w._pulling = false
      }
    }
  } catch (e) {
    throw fromBinding(e)
  }
  if (text.length === 2) return undefined
  const [record] = JSON.parse(text)
  const job = Job.fromRecord(w, record)
  remember(h, job.id, token, record.token, w)
  job.token = token
  return job
}

/**
 * Extends the locks of jobs `jobIds`, each held with the token at the same index of `tokens`, to
 * `duration` ms from now; answers how many are still held.
 */
async function extendJobLocks(w, jobIds, tokens, duration) {
  if (!Array.isArray(jobIds)) throw typeError('jobIds', `must be an array, got ${v.describe(jobIds)}`)
  if (!Array.isArray(tokens) || tokens.length !== jobIds.length) {
    throw typeError('tokens', `must be an array as long as jobIds (${jobIds.length}), got ${v.describe(tokens)}`)
  }
  let held = 0
  for (let i = 0; i < jobIds.length; i++) {
    const job = new Job(w, '', null, {}, String(jobIds[i]))
    held += await job.extendLock(tokens[i], duration)
  }
  return held
}

module.exports = { getNextJob, extendJobLocks, forgetWorker }
