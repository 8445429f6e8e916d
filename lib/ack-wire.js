'use strict'
// The acks a Worker sends, as the binding reads them (src/worker.rs `RawAck`): one JSON object
// per outcome, many per call, and the one call that sends a batch (falling back to one ack at a
// time, so that a refused batch leaves no job active).

const { binding, fromBinding, isPending } = require('./native')
const { Stale, first } = require('./outcome')

/** A completion with its return value (JSON text) and the worker's retention (`,"keep":…` or ''). */
function completedText(entry, value, keep) {
  return `{"id":${JSON.stringify(entry.id)},"token":${entry.token},"ok":true,"value":${value}${keep}}`
}

/**
 * A failed attempt; `delay`: the wait before a retry as a custom backoff decided it. An entry
 * whose `timeout` ran out says so (`entry.timedOut`, cancel.js), and one whose thread or child
 * process died (`entry.lost`, sandbox/).
 */
function failedText(entry, reason, stack, unrecoverable, keep, delay) {
  const wait = delay === undefined ? '' : `,"delay":${delay}`
  const timedOut = entry.timedOut === true ? ',"timeout":true' : ''
  const lost = entry.lost === true ? ',"lost":true' : ''
  return `{"id":${JSON.stringify(entry.id)},"token":${entry.token},"ok":false,"reason":${JSON.stringify(reason)},"stack":${JSON.stringify(stack)},"unrecoverable":${unrecoverable}${timedOut}${lost}${wait}${keep}}`
}

/** A job given back to waiting, no attempt spent; `unstarted`: its processor never ran. */
function releasedText(id, token, unstarted) {
  return `{"id":${JSON.stringify(String(id))},"token":${token},"release":true${unstarted ? ',"unstarted":true' : ''}}`
}

/**
 * Sends a batch of acks of queue handle `h`; one AckOutcome per ack (now or later). Should the
 * batch be refused (a bug of ours), each ack goes alone, and one refused alone fails its job
 * with the reason instead, so that no job is left active. Errors go to `onError`.
 */
function sendAcks(h, texts, entries, onError) {
  try {
    return binding.ack(h, '[' + texts.join(',') + ']')
  } catch (e) {
    onError(fromBinding(e))
  }
  const results = new Array(texts.length).fill(Stale)
  for (let i = 0; i < texts.length; i++) {
    try {
      results[i] = first(binding.ack(h, '[' + texts[i] + ']'))
    } catch (e) {
      const err = fromBinding(e)
      onError(err)
      const entry = entries[i]
      entry.error = err
      entry.reason = `ferroqueue could not record the outcome: ${err.message}`
      try {
        results[i] = first(binding.ack(h, '[' + failedText(entry, entry.reason, null, false, '') + ']'))
      } catch (again) {
        onError(fromBinding(again))
      }
    }
  }
  return results.some(isPending) ? Promise.all(results) : results
}

module.exports = { completedText, failedText, releasedText, sendAcks }
