'use strict'
// Queue#addBulk: many jobs in few native calls, all validated before any is added.
//
// A batch of up to BULK_SLICE jobs is one JSON text and one native call. A larger batch is cut
// into slices of BULK_SLICE jobs with a turn of the event loop between slices, so that adding a
// million jobs never blocks the loop for long (~30 ms per slice here, instead of seconds):
// every slice is checked first (types in JS; ranges by the engine's own rules, without adding),
// and only then are the slices added, one native call each. So the batch is still all or none,
// but a large one becomes visible to workers slice by slice. On PostgreSQL each slice is its own
// transaction: a failure of the database between slices leaves the earlier slices added.

const { binding, fromBinding, isPending, native } = require('./native')
const { typeError, inputError, textOf, isOurs } = require('./errors')
const { Job } = require('./job')
const v = require('./validate')

/** What an addBulk code means when it is not an automatic id (see src/queue.rs). */
const { CustomId, Duplicate, Deduplicated } = binding.AddOutcome

/** Jobs per native call (and per turn of the event loop) of a large addBulk. */
const BULK_SLICE = 10_000

const turn = () => new Promise((resolve) => setImmediate(resolve))

/**
 * The batch's JSON text. Each payload was scanned on its own (cheap), so a `plain` batch needs no
 * replacer; when serialising fails anyway (a BigInt or a cycle in options, a throwing toJSON),
 * the job and field at fault are found and named.
 */
function batchJson(wire, plain, from) {
  try {
    return plain ? JSON.stringify(wire) : v.toJson(wire, 'jobs')
  } catch (e) {
    for (let i = 0; i < wire.length; i++) {
      v.optionsJson(wire[i].opts, `jobs[${from + i}].opts`)
      v.toJson(wire[i].data, `jobs[${from + i}].data`)
    }
    throw isOurs(e) ? e : typeError('jobs', `are not JSON-serialisable: ${textOf(e)}`, 'ERR_INVALID_DATA')
  }
}

/** Checks and serialises `jobs[from..to)`: `{ wire, text, withOptions }`. */
function prepare(queue, jobs, from, to) {
  const wire = new Array(to - from)
  let plain = true
  let withOptions = false
  try {
    for (let i = from; i < to; i++) {
      const j = jobs[i]
      if (!v.isPlainObject(j)) throw typeError(`jobs[${i}]`, `must be { name, data, opts? }, got ${v.describe(j)}`)
      const { name, data } = j
      v.jobName(name)
      const o = queue._merge(j.opts, `jobs[${i}].opts`)
      if (!v.plainJsonSafe(data, `jobs[${i}].data`)) plain = false
      if (!withOptions) for (const _ in o) withOptions = true
      wire[i - from] = { name, data, opts: o, timestamp: o.timestamp }
    }
  } catch (e) {
    throw inputError(e, 'jobs')
  }
  return { wire, text: batchJson(wire, plain, from), withOptions }
}

function call(fn, ...args) {
  try {
    return fn(...args)
  } catch (e) {
    throw fromBinding(e)
  }
}

/** Adds `jobs` to `queue` (see the module doc); resolves with their Jobs in order. */
async function addBulk(queue, jobs) {
  queue._ensureOpen()
  let n
  try {
    if (!Array.isArray(jobs)) throw typeError('jobs', `must be an array, got ${v.describe(jobs)}`)
    n = jobs.length
  } catch (e) {
    throw inputError(e, 'jobs')
  }
  const now = Date.now()
  const slices = []
  for (let from = 0; from < n || from === 0; from += BULK_SLICE) {
    if (from > 0) await turn()
    slices.push(prepare(queue, jobs, from, Math.min(n, from + BULK_SLICE)))
  }
  if (slices.length > 1) {
    for (const s of slices) {
      if (!s.withOptions) continue
      await turn()
      call(binding.checkBulk, s.text)
    }
  }
  const codes = []
  for (let i = 0; i < slices.length; i++) {
    if (i > 0) await turn()
    queue._ensureOpen()
    let c = call(binding.addBulk, queue._h, slices[i].text, now)
    // A database round trip: the next slice goes once this one is in, so that ids follow the
    // order of the batch (each slice is its own transaction there).
    if (isPending(c) && i + 1 < slices.length) c = await native(c)
    // A pending answer is awaited below, after other awaits: mark it handled now, so that its
    // failure (the storage failed meanwhile) is never reported as an unhandled rejection.
    if (isPending(c)) c.catch(() => {})
    codes.push(c)
  }
  const wait = queue._commitWait()
  if (wait) await wait
  const out = new Array(n)
  for (let s = 0; s < slices.length; s++) {
    if (s > 0) await turn()
    const { wire } = slices[s]
    const c = isPending(codes[s]) ? await native(codes[s]) : codes[s]
    for (let i = 0; i < wire.length; i++) {
      const w = wire[i]
      const k = s * BULK_SLICE + i
      if (c[i] === Duplicate) out[k] = await queue.getJob(w.opts.jobId)
      else if (c[i] === Deduplicated) {
        const holder = await queue.getDeduplicationJobId(w.opts.deduplication.id)
        out[k] = holder === null ? undefined : await queue.getJob(holder)
      } else out[k] = new Job(queue, w.name, w.data, w.opts, c[i] === CustomId ? w.opts.jobId : String(c[i]), now)
    }
  }
  return out
}

module.exports = { addBulk, BULK_SLICE }
