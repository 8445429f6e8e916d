'use strict'
// Argument checks at the public boundary: wrong types throw TypeError, values out of range
// RangeError, both with code ERR_INVALID_OPTION and a message naming the option. Ranges of job
// options are checked again by the engine, which is the authority. Reading the caller's values
// may run their code (getters, Proxy traps, toJSON); whatever that throws is turned into one of
// our errors by the checks here (see inputError).

const { typeError, rangeError, inputError, textOf } = require('./errors')

/** Largest count `removeOnComplete` / `removeOnFail` take (the engine's bound). */
const MAX_KEEP_COUNT = 9e15
/** Largest u32: concurrency, keepLogs. */
const MAX_U32 = 2 ** 32 - 1

function describe(v) {
  try {
    if (v === null) return 'null'
    if (Array.isArray(v)) return 'an array'
    if (typeof v === 'string') return `string ${JSON.stringify(v.length > 40 ? v.slice(0, 40) + '…' : v)}`
    if (typeof v === 'number' || typeof v === 'boolean' || typeof v === 'bigint') return `${typeof v} ${String(v)}`
    if (typeof v === 'object') {
      const proto = Object.getPrototypeOf(v)
      if (proto === null) return 'an object without prototype'
      if (proto !== Object.prototype && typeof proto.constructor === 'function') return `a ${String(proto.constructor.name).slice(0, 40)}`
    }
  } catch {}
  return typeof v
}

function isPlainObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v)
}

/** An object literal (or null-prototype object): not an array, Date, Map or class instance. */
function isRecord(v) {
  if (!isPlainObject(v)) return false
  const proto = Object.getPrototypeOf(v)
  return proto === Object.prototype || proto === null
}

/**
 * A string that names something (a queue, a job, an id, a log row). It must be well-formed
 * Unicode: the binding turns a lone surrogate into U+FFFD, so 'x\ud800' would silently name
 * what 'x\ufffd' names.
 */
function name(option, v, what = '') {
  if (typeof v !== 'string') throw typeError(option, `${what}must be a string, got ${describe(v)}`)
  if (!v.isWellFormed()) throw rangeError(option, `${what}must be well-formed Unicode (it has a lone surrogate)`)
}

function queueName(v) {
  name('name', v, '(queue name) ')
}

function jobName(v) {
  name('name', v, '(job name) ')
}

function optionalObject(option, v) {
  if (v !== undefined && v !== null && !isPlainObject(v)) {
    throw typeError(option, `must be an object, got ${describe(v)}`)
  }
}

function optionalBoolean(option, v) {
  if (v !== undefined && typeof v !== 'boolean') throw typeError(option, `must be a boolean, got ${describe(v)}`)
}

function number(option, v) {
  if (typeof v !== 'number') throw typeError(option, `must be a number, got ${describe(v)}`)
  if (!Number.isFinite(v)) throw rangeError(option, `must be a finite number, got ${v}`)
}

function integerAtLeast(option, v, min) {
  number(option, v)
  if (!Number.isInteger(v) || v < min) throw rangeError(option, `must be an integer >= ${min}, got ${v}`)
}

function integerIn(option, v, min, max) {
  number(option, v)
  if (!Number.isInteger(v) || v < min || v > max) {
    throw rangeError(option, `must be an integer in ${min}..=${max}, got ${v}`)
  }
}

/** A worker's concurrency: an integer in 1..=2^32-1 (what one pull can ask for). */
function concurrency(v) {
  integerIn('concurrency', v, 1, MAX_U32)
}

/** A worker's prefetch: jobs claimed beyond its free slots, an integer in 0..=2^32-1. */
function prefetch(v) {
  integerIn('prefetch', v, 0, MAX_U32)
}

/** Longest rate-limit window: 2^53 ms (see limits.rs `MAX_DURATION`). */
const MAX_DURATION = 2 ** 53

/** `max` jobs per `duration` ms: integers in 1..=2^32-1 and 1..=2^53, named `{option}.max` / `.duration`. */
function rate(option, max, duration) {
  integerIn(`${option}.max`, max, 1, MAX_U32)
  integerIn(`${option}.duration`, duration, 1, MAX_DURATION)
}

/** A group id as the engine takes it: a non-empty string, or a safe integer (as its text). */
function groupId(v) {
  if (typeof v === 'number' && Number.isSafeInteger(v)) return String(v)
  if (typeof v !== 'string') throw typeError('groupId', `must be a string or a safe integer, got ${describe(v)}`)
  return v
}

/** A Worker's `limiter`: `{ max, duration }` and nothing else. */
function limiter(v) {
  if (v === undefined) return
  if (!isRecord(v)) throw typeError('limiter', `must be { max, duration }, got ${describe(v)}`)
  for (const k of Object.keys(v)) {
    if (k !== 'max' && k !== 'duration') throw typeError(`limiter.${k}`, 'is not an option; expected max, duration')
  }
  rate('limiter', v.max, v.duration)
}

/** `removeOnComplete` / `removeOnFail`, by the engine's rules (see options.rs `parse_keep`). */
function keepJobs(option, v) {
  if (v === undefined || typeof v === 'boolean') return
  if (typeof v === 'number') return integerIn(option, v, 0, MAX_KEEP_COUNT)
  if (!isRecord(v)) throw typeError(option, `must be a boolean, a number or { age, count }, got ${describe(v)}`)
  if (v.age !== undefined) {
    number(`${option}.age`, v.age)
    if (v.age < 0) throw rangeError(`${option}.age`, `must be a finite number >= 0 (seconds), got ${v.age}`)
  }
  if (v.count !== undefined) integerIn(`${option}.count`, v.count, 0, MAX_KEEP_COUNT)
}

/**
 * Checks the types of job options (BullMQ's JobsOptions that ferroqueue models). Errors name
 * `option`; an error thrown while reading them (a getter, a Proxy) becomes ERR_INVALID_OPTION.
 */
function jobOptions(opts, option = 'opts') {
  try {
    checkJobOptions(opts, option)
  } catch (e) {
    throw inputError(e, option)
  }
}

function checkJobOptions(opts, option) {
  optionalObject(option, opts)
  if (!opts) return
  const o = opts
  if (o.jobId !== undefined) name(`${option}.jobId`, o.jobId)
  for (const k of ['delay', 'priority', 'attempts', 'timestamp', 'timeout']) {
    if (o[k] !== undefined) number(`${option}.${k}`, o[k])
  }
  if (o.timestamp !== undefined && !(o.timestamp >= 0 && Number.isFinite(o.timestamp))) {
    throw rangeError(`${option}.timestamp`, `must be a finite number >= 0, got ${o.timestamp}`)
  }
  optionalBoolean(`${option}.lifo`, o.lifo)
  if (typeof o.backoff === 'number') number(`${option}.backoff`, o.backoff)
  else if (o.backoff !== undefined) {
    if (!isRecord(o.backoff)) {
      throw typeError(`${option}.backoff`, `must be a number or { type, delay, jitter? }, got ${describe(o.backoff)}`)
    }
    if (typeof o.backoff.type !== 'string') {
      throw typeError(`${option}.backoff.type`, `must be 'fixed' or 'exponential', got ${describe(o.backoff.type)}`)
    }
    if (o.backoff.delay !== undefined) number(`${option}.backoff.delay`, o.backoff.delay)
    if (o.backoff.jitter !== undefined) number(`${option}.backoff.jitter`, o.backoff.jitter)
  }
  keepJobs(`${option}.removeOnComplete`, o.removeOnComplete)
  keepJobs(`${option}.removeOnFail`, o.removeOnFail)
  if (o.keepLogs !== undefined) integerIn(`${option}.keepLogs`, o.keepLogs, 0, MAX_U32)
}

/**
 * A plain copy of an options object's own enumerable properties (`{}` for undefined or null).
 * Inherited properties are not options: JSON, which carries options to the engine, ignores them
 * too, so what the caller is shown is exactly what was applied.
 */
function ownOptions(opts, option = 'opts') {
  try {
    optionalObject(option, opts)
    return opts ? { ...opts } : {}
  } catch (e) {
    throw inputError(e, option)
  }
}

/** Job options as an own copy (see ownOptions), checked (see jobOptions). */
function ownJobOptions(opts, option = 'opts') {
  if (opts === undefined || opts === null) return {}
  const own = ownOptions(opts, option)
  jobOptions(own, option)
  return own
}

/** JSON text of (already checked) options; what cannot be serialised is ERR_INVALID_OPTION. */
function optionsJson(opts, option = 'opts') {
  let text
  try {
    text = JSON.stringify(opts)
  } catch (e) {
    throw typeError(option, `are not JSON-serialisable: ${textOf(e)}`)
  }
  return text
}

function rejectFunctions(key, value) {
  const t = typeof value
  if (t === 'function' || t === 'symbol') {
    throw typeError('data', `is not JSON-serialisable: ${t} at key ${JSON.stringify(key)}`, 'ERR_INVALID_DATA')
  }
  return value
}

/** Objects a scan looks at before it hands over to the (slower) replacer path. */
const SCAN_BUDGET = 256

/**
 * Looks for values JSON.stringify would drop or turn into null silently (functions, symbols) in
 * plain data. Returns `[key, type]` of the first one, `undefined` when there is none, and `null`
 * when the value is too large or cyclic to scan cheaply (then the replacer path decides).
 * Iterative and budgeted, so shared or cyclic references cannot blow it up.
 */
function scan(root) {
  const stack = [root]
  let budget = SCAN_BUDGET
  while (stack.length > 0) {
    const v = stack.pop()
    if (--budget < 0) return null
    if (typeof v.toJSON === 'function') continue
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) {
        const x = v[i]
        const t = typeof x
        if (t === 'object') {
          if (x !== null) stack.push(x)
        } else if (t === 'function' || t === 'symbol') return [String(i), t]
      }
    } else {
      const keys = Object.keys(v)
      for (let i = 0; i < keys.length; i++) {
        const x = v[keys[i]]
        const t = typeof x
        if (t === 'object') {
          if (x !== null) stack.push(x)
        } else if (t === 'function' || t === 'symbol') return [keys[i], t]
      }
    }
  }
  return undefined
}

/**
 * Serialises a value to JSON text for the engine. Functions and symbols (which JSON.stringify
 * would drop silently), BigInt and cycles throw a TypeError with code ERR_INVALID_DATA.
 * `undefined` becomes `fallback`. Plain data is checked by a cheap scan and then serialised
 * without a replacer (a replacer costs JSON.stringify its fast path: ~0.4 µs per 200 bytes).
 */
function toJson(value, what = 'data', fallback = '{}') {
  if (value === undefined) return fallback
  let text
  try {
    let replacer
    if (typeof value === 'object' && value !== null) {
      const found = scan(value)
      if (found === null) replacer = rejectFunctions
      else if (found !== undefined) {
        throw typeError(what, `is not JSON-serialisable: ${found[1]} at key ${JSON.stringify(found[0])}`, 'ERR_INVALID_DATA')
      }
    }
    text = replacer ? JSON.stringify(value, replacer) : JSON.stringify(value)
  } catch (e) {
    if (e && e.code === 'ERR_INVALID_DATA' && e instanceof TypeError) {
      e.message = e.message.replace(/^data/, what)
      throw e
    }
    throw typeError(what, `is not JSON-serialisable: ${textOf(e)}`, 'ERR_INVALID_DATA')
  }
  if (text === undefined) throw typeError(what, `is not JSON-serialisable: ${typeof value}`, 'ERR_INVALID_DATA')
  return text
}

/**
 * Checks one value cheaply: throws ERR_INVALID_DATA for a function or symbol found by the scan,
 * returns true when a plain JSON.stringify of it is safe, false when it was too large or cyclic to
 * scan (the caller must use the replacer path, `toJson`).
 */
function plainJsonSafe(value, what = 'data') {
  try {
    return scanOne(value, what)
  } catch (e) {
    throw inputError(e, what, 'ERR_INVALID_DATA')
  }
}

function scanOne(value, what) {
  if (value === null || typeof value !== 'object') {
    const t = typeof value
    if (t === 'function' || t === 'symbol') {
      throw typeError(what, `is not JSON-serialisable: ${t}`, 'ERR_INVALID_DATA')
    }
    return true
  }
  const found = scan(value)
  if (found === null) return false
  if (found !== undefined) {
    throw typeError(what, `is not JSON-serialisable: ${found[1]} at key ${JSON.stringify(found[0])}`, 'ERR_INVALID_DATA')
  }
  return true
}

/** Inclusive page bounds as BullMQ takes them. */
function range(start, end) {
  if (start !== undefined) integerAtLeast('start', start, -Number.MAX_SAFE_INTEGER)
  if (end !== undefined) integerAtLeast('end', end, -Number.MAX_SAFE_INTEGER)
}

module.exports = {
  describe,
  isRecord,
  groupId,
  isPlainObject,
  name,
  queueName,
  jobName,
  optionalObject,
  optionalBoolean,
  number,
  integerAtLeast,
  integerIn,
  concurrency,
  prefetch,
  rate,
  limiter,
  MAX_U32,
  keepJobs,
  jobOptions,
  ownOptions,
  ownJobOptions,
  optionsJson,
  toJson,
  plainJsonSafe,
  range,
}
