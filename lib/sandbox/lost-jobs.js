'use strict'
// The jobs a dead worker thread held. Its Worker pulled with a lease holder its parent opened
// (threaded-worker.js), so the parent finds them by that holder once the thread has exited:
// it ends the thread's pending pull (which would take jobs for nobody), then fails the jobs the
// holder still holds (kind `worker_lost`, retried if attempts remain) and emits `failed` for
// each, or, when the parent closed with force, gives them back to waiting.

const { binding, fromBinding, isPending, native } = require('../native')
const { Job } = require('../job')
const { Retrying, Failed, Stale } = require('../outcome')
const { failedText, releasedText, sendAcks } = require('../ack-wire')
const { WorkerLostError } = require('./sandbox-options')

/** Settles the jobs of lease holder `holder` of Worker `w`: given back with `giveBack`, else failed with `reason`. */
async function settleHeld(w, holder, giveBack, reason) {
  const h = w._h
  let held
  try {
    binding.cancelHolderPulls(h, holder)
    held = binding.heldJobs(h, holder)
  } catch (e) {
    w._emitError(fromBinding(e))
    return
  }
  if (held.length === 0) return
  if (giveBack) {
    // Each goes to the head of waiting: sent last first, they keep their order.
    const texts = held.reverse().map((j) => releasedText(j.id, j.token, false))
    try {
      await native(binding.ack(h, '[' + texts.join(',') + ']'))
    } catch (e) {
      w._emitError(e)
    }
    return
  }
  const entries = held.map((j) => ({ id: j.id, token: j.token, lost: true }))
  const texts = entries.map((e) => failedText(e, reason, null, false, w._keepFail))
  let results = sendAcks(h, texts, entries, (e) => w._emitError(e))
  if (isPending(results)) {
    try {
      results = await results
    } catch (e) {
      w._emitError(fromBinding(e))
      results = entries.map(() => Stale)
    }
  }
  const wait = w._commitWait()
  if (wait) await wait
  const error = new WorkerLostError(reason)
  for (let i = 0; i < entries.length; i++) {
    if (results[i] !== Retrying && results[i] !== Failed) continue
    try {
      const text = await native(binding.getJob(h, entries[i].id))
      if (text) w._emitSafe('failed', Job.fromRecord(w, JSON.parse(text)), error, 'active')
    } catch (e) {
      w._emitError(e)
    }
  }
}

module.exports = { settleHeld }
