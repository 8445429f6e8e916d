'use strict'
// Job schedulers (BullMQ v5): `upsertJobScheduler` and its getters, and the `repeat` job option
// mapped onto them. The engine decides the slots (crates/engine/src/domain/scheduler.rs) and
// keeps one job pending per scheduler (domain/queue/schedulers.rs); this only checks and
// marshals. Functions of a Queue `q` (queue.js).

const { binding, fromBinding, isPending, native } = require('./native')
const { typeError, rangeError } = require('./errors')
const v = require('./validate')

const REPEAT_KNOWN = ['every', 'pattern', 'tz', 'startDate', 'endDate', 'limit', 'immediately']
/** BullMQ repeat options ferroqueue does not implement yet. */
const REPEAT_LATER = ['offset', 'utc', 'count', 'prevMillis', 'key', 'jobId', 'cron']
const TEMPLATE_KNOWN = ['name', 'data', 'opts']

function unsupported(option) {
  const e = new TypeError(`${option} is a BullMQ option that ferroqueue does not support yet`)
  e.code = 'ERR_UNSUPPORTED_OPTION'
  return e
}

/** A date option (a Date, a date string or ms) as ms. */
function dateMs(option, d) {
  const ms = d instanceof Date ? d.getTime() : typeof d === 'string' ? Date.parse(d) : d
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) {
    throw rangeError(option, `must be a Date, a date string or ms since the epoch, got ${v.describe(d)}`)
  }
  return Math.floor(ms)
}

/** The repeat options as the engine reads them (JSON), checked for what is JS's to check. */
function repeatJson(repeat, option = 'repeat') {
  const o = v.ownOptions(repeat, option)
  for (const k of Object.keys(o)) {
    if (REPEAT_LATER.includes(k)) throw unsupported(`${option}.${k}`)
    if (!REPEAT_KNOWN.includes(k)) throw typeError(`${option}.${k}`, `is not an option; expected ${REPEAT_KNOWN.join(', ')}`)
  }
  const out = {}
  if (o.every !== undefined) {
    v.integerIn(`${option}.every`, o.every, 1, 2 ** 31 - 1)
    out.every = o.every
  }
  if (o.pattern !== undefined) {
    if (typeof o.pattern !== 'string') throw typeError(`${option}.pattern`, `must be a cron pattern string, got ${v.describe(o.pattern)}`)
    out.pattern = o.pattern
  }
  if (o.tz !== undefined) {
    if (typeof o.tz !== 'string') throw typeError(`${option}.tz`, `must be a time zone name, got ${v.describe(o.tz)}`)
    out.tz = o.tz
  }
  if (o.startDate !== undefined) out.startDate = dateMs(`${option}.startDate`, o.startDate)
  if (o.endDate !== undefined) out.endDate = dateMs(`${option}.endDate`, o.endDate)
  if (o.limit !== undefined) {
    v.integerIn(`${option}.limit`, o.limit, 1, 2 ** 32 - 1)
    out.limit = o.limit
  }
  v.optionalBoolean(`${option}.immediately`, o.immediately)
  if (o.immediately) out.immediately = true
  return JSON.stringify(out)
}

/** Creates or updates scheduler `id`; resolves with its pending job. */
async function upsertJobScheduler(q, id, repeat, template) {
  q._ensureOpen()
  if (typeof id !== 'string' || id.length === 0) throw typeError('jobSchedulerId', `must be a non-empty string, got ${v.describe(id)}`)
  v.name('jobSchedulerId', id)
  const repeatText = repeatJson(repeat)
  const t = v.ownOptions(template, 'jobTemplate')
  for (const k of Object.keys(t)) {
    if (!TEMPLATE_KNOWN.includes(k)) throw typeError(`jobTemplate.${k}`, `is not an option; expected ${TEMPLATE_KNOWN.join(', ')}`)
  }
  if (t.name !== undefined) v.jobName(t.name)
  const data = v.toJson(t.data ?? {}, 'jobTemplate.data')
  const opts = q._merge(t.opts, 'jobTemplate.opts')
  let optsText = null
  for (const _ in opts) {
    optsText = v.optionsJson(opts, 'jobTemplate.opts')
    break
  }
  let r
  try {
    r = binding.upsertJobScheduler(q._h, id, repeatText, t.name ?? null, data, optsText)
  } catch (e) {
    throw fromBinding(e)
  }
  if (isPending(r)) r = await native(r)
  const wait = q._commitWait()
  if (wait) await wait
  const { Job } = require('./job')
  return Job.fromRecord(q, JSON.parse(r))
}

/** BullMQ's `repeat` job option: the scheduler its key names (as BullMQ builds the key). */
function addRepeated(q, name, data, opts) {
  const { repeat, jobId, ...rest } = opts
  const key = [name, jobId ?? '', repeat?.endDate ?? '', repeat?.tz ?? '', repeat?.pattern ?? repeat?.every ?? ''].join(':')
  return upsertJobScheduler(q, key, repeat, { name, data, opts: rest })
}

async function call(q, fn, ...args) {
  let r = q._call(fn, ...args)
  if (isPending(r)) r = await native(r)
  return r
}

async function getJobScheduler(q, id) {
  v.name('jobSchedulerId', id)
  const text = await call(q, binding.getJobScheduler, id)
  return text === null ? undefined : JSON.parse(text)
}

async function getJobSchedulers(q, start = 0, end = -1, asc = false) {
  v.integerIn('start', start, -(2 ** 53), 2 ** 53)
  v.integerIn('end', end, -(2 ** 53), 2 ** 53)
  return JSON.parse(await call(q, binding.getJobSchedulers, start, end, !!asc))
}

async function removeJobScheduler(q, id) {
  v.name('jobSchedulerId', id)
  const r = q._call(binding.removeJobScheduler, id)
  const removed = isPending(r) ? await native(r) : r
  const wait = q._commitWait()
  if (wait) await wait
  return removed
}

module.exports = { upsertJobScheduler, addRepeated, getJobScheduler, getJobSchedulers, removeJobScheduler, call }
