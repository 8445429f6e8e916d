'use strict'
// Which option names each class takes. No option is silently ignored: a BullMQ option that
// ferroqueue does not implement yet is refused with ERR_UNSUPPORTED_OPTION, any other name that is
// not an option with ERR_INVALID_OPTION (a typo must not pass unnoticed). Job options are checked
// by the engine (crates/engine/src/domain/options.rs), which every backend shares.

const { typeError, rangeError } = require('./errors')
const v = require('./validate')
const { describe } = v

/** Options every Queue, Worker and QueueEvents takes. */
const COMMON = ['dataPath', 'durability', 'prefix', 'connection']
/** BullMQ's connection-level options: about Redis, which ferroqueue does not use. */
const REDIS_ONLY = ['blockingConnection', 'skipVersionCheck', 'skipWaitingForReady', 'telemetry']

const CLASSES = {
  Queue: {
    known: [...COMMON, 'defaultJobOptions'],
    unsupported: [...REDIS_ONLY, 'streams', 'skipMetasUpdate', 'settings'],
  },
  Worker: {
    known: [
      ...COMMON,
      'concurrency',
      'prefetch',
      'limiter',
      'group',
      'autorun',
      'drainDelay',
      'removeOnComplete',
      'removeOnFail',
      'settings',
      'lockDuration',
      'lockRenewTime',
      'stalledInterval',
      'maxStalledCount',
      'skipStalledCheck',
      'name',
      'useWorkerThreads',
      'threads',
      'workerThreadsOptions',
      'workerForkOptions',
      'metrics',
    ],
    unsupported: [
      ...REDIS_ONLY,
      'maximumRateLimitDelay',
      'maxStartedAttempts',
      'skipLockRenewal',
      'runRetryDelay',
    ],
  },
  FlowProducer: {
    known: COMMON,
    unsupported: REDIS_ONLY,
  },
  QueueEvents: {
    known: [...COMMON, 'autorun', 'lastEventId'],
    unsupported: [...REDIS_ONLY, 'blockingTimeout'],
  },
}

/** Keys of a Worker's `settings` (BullMQ's AdvancedOptions). */
const SETTINGS = { known: ['backoffStrategy'], unsupported: ['repeatStrategy', 'repeatKeyHashAlgorithm'] }

function unsupported(option, what) {
  const e = new TypeError(`${option} ${what}`)
  e.code = 'ERR_UNSUPPORTED_OPTION'
  return e
}

function refuse(option, name, { known, unsupported: later }) {
  if (later.includes(name)) return unsupported(`${option}${name}`, 'is a BullMQ option that ferroqueue does not support yet')
  const shown = name.length > 60 ? name.slice(0, 60) + '…' : name
  return typeError(`${option}${shown}`, `is not an option; expected one of ${known.join(', ')}`)
}

/** Throws for the first own option name of `opts` that `spec` does not take. */
function checkNames(opts, spec, option = '') {
  for (const name of Object.keys(opts)) {
    if (!spec.known.includes(name)) throw refuse(option, name, spec)
  }
}

/** Whether a `connection` value is what BullMQ takes: ioredis options, a URL or a client. */
function looksLikeRedis(c) {
  if (typeof c === 'string') return /^rediss?:\/\//i.test(c) || /^valkeys?:\/\//i.test(c)
  if (c === null || typeof c !== 'object') return false
  return ['host', 'port', 'path', 'sentinels', 'maxRetriesPerRequest', 'status', 'options', 'db', 'password', 'username', 'tls'].some(
    (k) => k in c,
  )
}

/** Whether `url` is a PostgreSQL URL. */
function isPostgresUrl(url) {
  return typeof url === 'string' && /^postgres(ql)?:\/\//i.test(url)
}

const PG_KEYS = { known: ['connectionString', 'schema', 'max'], unsupported: ['ssl', 'host', 'user', 'password', 'database'] }

/**
 * A PostgreSQL connection as `{ connectionString, schema?, max? }` from what the user gave: a
 * URL, or that object. Anything else is refused, naming `connection`.
 */
function postgresConnection(c) {
  if (typeof c === 'string') {
    if (!isPostgresUrl(c)) throw unsupported('connection', `must be a PostgreSQL URL (postgresql://user@host:5432/db) or { connectionString, schema?, max? }, got ${describe(c)}`)
    return { connectionString: c }
  }
  if (c === null || typeof c !== 'object' || Array.isArray(c) || typeof c.connectionString !== 'string') {
    throw unsupported('connection', `is not supported (got ${describe(c)}): give a PostgreSQL URL (postgresql://user@host:5432/db) or { connectionString, schema?, max? }, or leave it out`)
  }
  checkNames(c, PG_KEYS, 'connection.')
  if (!isPostgresUrl(c.connectionString)) {
    throw typeError('connection.connectionString', `must be a PostgreSQL URL (postgresql://user@host:5432/db), got ${describe(c.connectionString)}`)
  }
  if (c.schema !== undefined && typeof c.schema !== 'string') throw typeError('connection.schema', `must be a string, got ${describe(c.schema)}`)
  if (c.max !== undefined && (!Number.isInteger(c.max) || c.max < 1 || c.max > 64)) {
    throw rangeError('connection.max', `must be an integer in 1..=64, got ${describe(c.max)}`)
  }
  return { connectionString: c.connectionString, schema: c.schema, max: c.max }
}

/**
 * Checks the option names a class takes (`cls`: 'Queue', 'Worker' or 'QueueEvents') and the
 * options that are the same for all of them (`prefix`, `connection`), on the caller's own copy.
 */
function checkClassOptions(cls, o) {
  checkNames(o, CLASSES[cls])
  if (o.connection !== undefined) {
    if (looksLikeRedis(o.connection)) {
      throw unsupported(
        'connection',
        'looks like a Redis connection: ferroqueue needs no Redis. Leave connection out for an in-memory queue, give dataPath for one in a SQLite file, or a PostgreSQL URL (postgresql://user@host:5432/db) to share queues between processes',
      )
    }
    o.connection = postgresConnection(o.connection)
    if (o.dataPath !== undefined) throw typeError('connection', 'cannot be given with dataPath: a queue lives either in a SQLite file or in PostgreSQL')
  }
  if (o.prefix !== undefined) v.name('prefix', o.prefix)
  if (cls === 'Worker' && o.settings !== undefined) {
    const s = o.settings
    if (s === null || typeof s !== 'object' || Array.isArray(s)) {
      throw typeError('settings', `must be an object, got ${describe(s)}`)
    }
    checkNames(s, SETTINGS, 'settings.')
    if (s.backoffStrategy !== undefined && typeof s.backoffStrategy !== 'function') {
      throw typeError('settings.backoffStrategy', `must be a function, got ${describe(s.backoffStrategy)}`)
    }
  }
  if (cls === 'QueueEvents' && o.lastEventId !== undefined && o.lastEventId !== '$') {
    throw unsupported(
      'lastEventId',
      `must be '$' (events from now on): ferroqueue delivers events in-process and keeps no history to replay, got ${describe(o.lastEventId)}`,
    )
  }
}

module.exports = { checkClassOptions, postgresConnection }
