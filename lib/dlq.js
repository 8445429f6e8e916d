'use strict'
// The dead-letter queue (`queue.getDlq()` and friends): a queue's failed jobs with their
// attempt history, reason and expiry. The engine builds entries, filters and maintenance
// (crates/engine/src/application/dlq.rs); this checks what is JS's to check and marshals.
// Methods of Queue (installed by queue.js).

const { binding, native } = require('./native')
const { Job } = require('./job')
const { typeError } = require('./errors')
const v = require('./validate')

/**
 * An options object as JSON text of its own defined fields. The engine checks names and values
 * (crates/engine/src/domain/dlq.rs, dlq_view.rs); this refuses what JSON cannot carry.
 */
function optionsJson(opts, option) {
  const o = v.ownOptions(opts, option)
  const out = {}
  for (const [k, val] of Object.entries(o)) {
    if (val === undefined) continue
    if (['bigint', 'function', 'symbol'].includes(typeof val)) {
      throw typeError(`${option}.${k}`, `must be a boolean, a number or a string, got ${v.describe(val)}`)
    }
    out[k] = val
  }
  return JSON.stringify(out)
}

/** An entry as `getDlq` resolves it: its job a Job of `q`. */
function entryOf(q, e) {
  return { ...e, job: Job.fromRecord(q, e.job) }
}

/** The Queue methods of the DLQ (installed on Queue.prototype by queue.js). */
const dlqMethods = {
  /**
   * The DLQ (the failed jobs) as entries `{ job, reason, error, attempts, enteredAt, expiresAt,
   * nextRetryAt, retries }`, newest first; `filter`: `{ reason, olderThan, newerThan, offset,
   * limit }` (ages in ms).
   */
  async getDlq(filter) {
    const text = await native(this._call(binding.getDlq, optionsJson(filter, 'filter')))
    return JSON.parse(text).map((e) => entryOf(this, e))
  },

  /** DLQ totals by reason, the oldest and newest entry, automatic retries pending. */
  async getDlqStats() {
    return JSON.parse(await native(this._call(binding.getDlqStats)))
  },

  /** Retries DLQ entry `id`, or every entry; resolves how many went back to waiting. */
  async retryDlq(id) {
    if (id === undefined) return this._change(binding.retryDlq, '{}', null)
    v.name('id', id)
    return this._change(binding.retryDlq, null, id)
  },

  /** Retries the DLQ entries `filter` selects (see getDlq); resolves how many. */
  async retryDlqByFilter(filter) {
    return this._change(binding.retryDlq, optionsJson(filter, 'filter'), null)
  },

  /** Removes every DLQ entry; resolves how many. */
  async purgeDlq() {
    return this._change(binding.purgeDlq)
  },

  /** Removes DLQ entry `id`; resolves whether it was one. */
  async removeDlqJob(id) {
    v.name('id', id)
    return this._change(binding.removeDlqJob, id)
  },

  /** Changes the DLQ settings given (see getDlqConfig); resolves all of them. */
  async setDlqConfig(config) {
    return JSON.parse(await this._change(binding.setDlqConfig, optionsJson(config, 'dlqConfig')))
  },

  /** `{ autoRetry, autoRetryInterval, maxAutoRetries, maxAge, maxEntries }` (ms, counts). */
  async getDlqConfig() {
    return JSON.parse(await native(this._call(binding.getDlqConfig)))
  },
}

module.exports = { dlqMethods }
