'use strict'
// A job's moves by its holder, as BullMQ's Job methods: finishing a manually fetched job
// (`moveToCompleted`, `moveToFailed`), the steps of a step job (`moveToDelayed`, `moveToWait`,
// `moveToWaitingChildren`) and `extendLock`. Each names the token its job was taken with (a
// manual token, see locks.js, or a processor's); one whose token no longer holds the job
// (stalled, moved on, taken again) is rejected with ERR_LOCK_MISMATCH and changes nothing.

const { binding, fromBinding, isPending, native } = require('./native')
const { AckOutcome } = binding
const { failureOf, settleJob } = require('./outcome')
const { lockOf, lockMismatch, forget } = require('./locks')
const { typeError } = require('./errors')
const v = require('./validate')

/** The longest lock extension, ms (a JS timer's limit). */
const MAX_MS = 2 ** 31 - 1

/** Sends one ack of `job` (its JSON after `"token":lock`) and answers its AckOutcome once durable. */
async function send(job, h, lock, rest) {
  let r
  try {
    r = binding.ack(h, `[{"id":${JSON.stringify(job.id)},"token":${lock}${rest}}]`)
  } catch (e) {
    throw fromBinding(e)
  }
  if (isPending(r)) r = await native(r)
  const wait = job.queue._commitWait()
  if (wait) await wait
  return r[0]
}

/** The Worker that fetches the next job for `fetchNext`, if there is one. */
function fetcherOf(job, held) {
  const w = held.worker ?? job.queue
  return w !== null && typeof w === 'object' && typeof w.getNextJob === 'function' ? w : null
}

/** Settles `job` with an outcome, as a processor's job is (outcome.js). */
function settle(job, result, fields) {
  settleJob({ job, result, ...fields }, Date.now())
}

async function moveToCompleted(job, returnValue, token, fetchNext = true) {
  const command = 'moveToCompleted'
  const h = job._h
  const held = lockOf(h, job.id, token, command)
  const value = v.toJson(returnValue, 'returnValue', 'null')
  const keep = typeof job.queue._keepDone === 'string' ? job.queue._keepDone : ''
  const r = await send(job, h, held.lock, `,"ok":true,"value":${value}${keep}`)
  if (r === AckOutcome.Stale) throw lockMismatch(job.id, command)
  forget(h, job.id)
  settle(job, r, { value: returnValue === undefined ? null : returnValue })
  return nextJob(job, held, token, fetchNext)
}

async function moveToFailed(job, err, token, fetchNext = false) {
  const command = 'moveToFailed'
  const h = job._h
  const held = lockOf(h, job.id, token, command)
  const f = failureOf(err)
  const keep = typeof job.queue._keepFail === 'string' ? job.queue._keepFail : ''
  const rest = `,"ok":false,"reason":${JSON.stringify(f.reason)},"stack":${JSON.stringify(f.stack)},"unrecoverable":${f.unrecoverable}${keep}`
  const r = await send(job, h, held.lock, rest)
  if (r === AckOutcome.Stale) throw lockMismatch(job.id, command)
  forget(h, job.id)
  settle(job, r, { reason: f.reason })
  if (typeof f.stack === 'string') job.stacktrace = [...(job.stacktrace ?? []), f.stack].slice(-10)
  return nextJob(job, held, token, fetchNext)
}

/** `fetchNext`: the holder's next job (no wait), taken with the same token; else undefined. */
async function nextJob(job, held, token, fetchNext) {
  if (!fetchNext) return undefined
  const w = fetcherOf(job, held)
  return w ? w.getNextJob(String(token), { block: false }) : undefined
}

async function moveToDelayed(job, timestamp, token) {
  const command = 'moveToDelayed'
  v.integerIn('timestamp', timestamp, 0, Number.MAX_SAFE_INTEGER)
  const h = job._h
  const held = lockOf(h, job.id, token, command)
  const r = await send(job, h, held.lock, `,"delayUntil":${timestamp}`)
  if (r !== AckOutcome.Delayed) throw lockMismatch(job.id, command)
  forget(h, job.id)
  job.delay = Math.max(0, timestamp - Date.now())
}

async function moveToWait(job, token) {
  const command = 'moveToWait'
  const h = job._h
  const held = lockOf(h, job.id, token, command)
  const r = await send(job, h, held.lock, ',"release":true')
  if (r !== AckOutcome.Released) throw lockMismatch(job.id, command)
  forget(h, job.id)
  // BullMQ answers the queue's rate-limit TTL: how long before the job can start again.
  try {
    const limits = binding.getLimits(h)
    return (isPending(limits) ? await native(limits) : limits).ttl
  } catch (e) {
    throw fromBinding(e)
  }
}

async function moveToWaitingChildren(job, token, opts) {
  const command = 'moveToWaitingChildren'
  if (opts !== undefined && (opts === null || typeof opts !== 'object' || Object.keys(opts).length > 0)) {
    throw typeError('opts', `is not supported by moveToWaitingChildren yet (it waits for every pending child), got ${v.describe(opts)}`, 'ERR_UNSUPPORTED_OPTION')
  }
  const h = job._h
  const held = lockOf(h, job.id, token, command)
  const r = await send(job, h, held.lock, ',"waitChildren":true')
  if (r === AckOutcome.StillActive) return false
  if (r !== AckOutcome.WaitingChildren) throw lockMismatch(job.id, command)
  forget(h, job.id)
  return true
}

/** 1 when `token` still holds the job (its lease now lasts at least `duration` ms), else 0. */
async function extendLock(job, token, duration) {
  v.integerIn('duration', duration, 1, MAX_MS)
  const h = job._h
  let held
  try {
    held = lockOf(h, job.id, token, 'extendLock')
  } catch {
    return 0
  }
  let r
  try {
    r = binding.extendLock(h, job.id, held.lock, duration)
  } catch (e) {
    throw fromBinding(e)
  }
  if (isPending(r)) r = await native(r)
  return r ? 1 : 0
}

module.exports = { moveToCompleted, moveToFailed, moveToDelayed, moveToWait, moveToWaitingChildren, extendLock }
