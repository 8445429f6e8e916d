'use strict'
// The one place that loads the native binding. It owns the engines of this process (in memory,
// or one per SQLite file), reference-counts them, waits for their commits and fans their events
// out to QueueEvents instances (one native callback per batch of events or commits).

const path = require('node:path')
// A copy of the addon's exports: the module object napi fills holds its 60-odd functions as a
// dictionary, so each `binding.fn(...)` was a hash look-up (about 0.1 µs on Node); the copy has
// fast properties that the JIT reads inline.
const binding = { ...require('../binding.js') }
const { fromBinding, QueueError, typeError, rangeError, textOf, isOurs } = require('./errors')
const { describe } = require('./validate')
const { postgresConnection } = require('./options')

// Engine errors of kind Queue are built as this thread's QueueError.
binding.setErrorClass(QueueError)

const DURABILITY = ['commit', 'fsync', 'buffered']
/** engineId -> Engine */
const engines = new Map()
let eventSeq = 0

function keepAlive() {}

/** One engine of this process as JS sees it. */
class Engine {
  /**
   * `durable`: changes are committed after their answer (a SQLite file), so callers wait for
   * commit tickets. `closable`: closed when its last user lets go (a SQLite file, PostgreSQL).
   * `shared`: other processes change it too (PostgreSQL), so a QueueEvents listening to it keeps
   * the process alive until closed, as BullMQ's does: its events can come from elsewhere at any
   * time. (On an engine of this process alone, events come only from what keeps it alive anyway.)
   */
  constructor(id, durable, closable = durable, shared = false) {
    this.id = id
    this.durable = durable
    this.closable = closable
    this.shared = shared
    this.listening = 0
    this.listenTimer = null
    this.refs = 0
    this.listeners = new Map() // queueName -> Set<listener>
    this.waits = [] // { seq, resolve, reject }, in seq order
    this.barrier = null
    this.committed = 0
    this.closed = false
    this.closing = null
    this.closeError = null
    this.timer = null
    // Events are drained by one JS thread per engine: the one that most recently began to
    // listen. A thread that only adds or processes (a worker thread) must not take them from
    // the thread that listens.
    this.eventsWired = false
    if (durable) binding.setCommitCallback(id, () => this._onCommit())
  }

  _dispatch() {
    let batch
    try {
      batch = JSON.parse(binding.drainEvents(this.id))
    } catch (e) {
      // A bug of ours (the engine's JSON) or a closed engine: the batch is gone, so every
      // listener hears of it rather than missing events silently.
      const err = isOurs(e) ? e : new QueueError('ERR_INTERNAL', `events could not be delivered: ${textOf(e)}`)
      for (const set of this.listeners.values()) for (const l of set) l._listenerFailed(err)
      return
    }
    for (const [queue, name, payload] of batch) {
      const set = this.listeners.get(queue)
      if (!set) continue
      const id = String(++eventSeq)
      for (const l of set) {
        // A throwing listener must not cost the other listeners (or later batches) their events.
        try {
          l._deliver(name, payload, id)
        } catch (err) {
          l._listenerFailed(err)
        }
      }
    }
  }

  /**
   * A promise that resolves once every change this thread made so far is committed (null on an
   * in-memory engine: nothing to wait for). All callers in the same tick share one wait, on the
   * thread's commit ticket read once at the end of the tick.
   */
  commitBarrier() {
    if (!this.durable) return null
    if (this.barrier) return this.barrier.promise
    const b = {}
    b.promise = new Promise((resolve, reject) => {
      b.resolve = resolve
      b.reject = reject
    })
    this.barrier = b
    queueMicrotask(() => {
      this.barrier = null
      // The engine is closing: its close commits everything submitted, or fails.
      if (this.closing) return this.closing.then(b.resolve, b.reject)
      let seq
      let committed
      try {
        seq = binding.ticket(this.id)
        committed = binding.committedSeq(this.id)
        binding.checkStorage(this.id) // after reading `committed`: a failure in between is seen
      } catch (e) {
        return b.reject(fromBinding(e))
      }
      if (seq <= committed) return b.resolve()
      this.waits.push({ seq, resolve: b.resolve, reject: b.reject })
      if (!this.timer) this.timer = setInterval(keepAlive, 1 << 30) // stay alive until committed
    })
    return b.promise
  }

  _onCommit() {
    let failure = null
    if (this.closed) {
      // closing committed everything that was submitted, unless it failed
      this.committed = Infinity
      failure = this.closeError
    } else {
      try {
        this.committed = binding.takeCommitNotice(this.id)
        binding.checkStorage(this.id)
      } catch (e) {
        failure = fromBinding(e)
      }
    }
    let i = 0
    while (i < this.waits.length && (failure || this.waits[i].seq <= this.committed)) {
      const w = this.waits[i++]
      if (failure) w.reject(failure)
      else w.resolve()
    }
    if (i > 0) this.waits.splice(0, i)
    if (this.waits.length === 0 && this.timer) {
      clearInterval(this.timer)
      this.timer = null
    }
  }

  listen(handle, queueName, listener) {
    let set = this.listeners.get(queueName)
    if (!set) this.listeners.set(queueName, (set = new Set()))
    set.add(listener)
    if (!this.eventsWired) {
      binding.setEventCallback(this.id, () => this._dispatch())
      this.eventsWired = true
    }
    binding.subscribe(handle)
    if (this.shared && this.listening++ === 0) this.listenTimer = setInterval(keepAlive, 1 << 30)
  }

  unlisten(handle, queueName, listener) {
    const set = this.listeners.get(queueName)
    if (set && set.delete(listener)) {
      try {
        binding.unsubscribe(handle)
      } catch {}
      if (this.shared && --this.listening === 0) {
        clearInterval(this.listenTimer)
        this.listenTimer = null
      }
    }
  }
}

/**
 * Finds (or opens) the engine for an object's options and counts one more user of it.
 * Options: `connection` (a PostgreSQL URL or `{ connectionString, schema?, max? }`, already
 * checked by options.js), else `dataPath`; else env FERROQUEUE_POSTGRES_URL or
 * FERROQUEUE_DATA_PATH (not both); in memory without any. `durability` ('commit' by default,
 * 'fsync', 'buffered'). Env FERROQUEUE_FINISHED_IN_MEMORY bounds the finished jobs per state a
 * new durable engine keeps in memory.
 */
function acquireEngine(opts) {
  if (opts[VIEW]) return acquireView(opts.dataPath)
  let dataPath = opts.dataPath
  let connection = opts.connection
  if (dataPath === undefined && connection === undefined) {
    const url = process.env.FERROQUEUE_POSTGRES_URL
    const file = process.env.FERROQUEUE_DATA_PATH
    if (url && file) {
      throw rangeError('FERROQUEUE_POSTGRES_URL', 'and FERROQUEUE_DATA_PATH are both set: a queue lives in one place, unset one of them')
    }
    if (url) connection = postgresConnection(url)
    else if (file) dataPath = file
  }
  if (dataPath !== undefined && dataPath !== null && typeof dataPath !== 'string') {
    throw typeError('dataPath', `must be a string, got ${describe(dataPath)}`)
  }
  if (dataPath === '') throw rangeError('dataPath', 'must not be empty (leave it out for an in-memory queue)')
  const durability = opts.durability ?? 'commit'
  if (!DURABILITY.includes(durability)) {
    throw rangeError('durability', `must be one of ${DURABILITY.map((d) => `'${d}'`).join(', ')}, got ${describe(durability)}`)
  }
  if (connection !== undefined) return acquirePostgres(connection, durability)
  let finished = null
  const bound = process.env.FERROQUEUE_FINISHED_IN_MEMORY
  if (dataPath && bound !== undefined && bound !== '') {
    finished = Number(bound)
    if (!Number.isInteger(finished) || finished < 1 || finished > 2 ** 32 - 1) {
      throw rangeError('FERROQUEUE_FINISHED_IN_MEMORY', `must be an integer in 1..=4294967295, got ${describe(bound)}`)
    }
  }
  let id
  try {
    id = binding.openEngine(dataPath ? path.resolve(dataPath) : null, durability === 'fsync', finished)
  } catch (e) {
    throw fromBinding(e)
  }
  return use(id, () => new Engine(id, !!dataPath), durability)
}

/**
 * An option only ferroqueue's own tools set (the CLI, bin/ferroqueue.js): the queue reads a
 * view of its SQLite file (`dataPath`), taken without the file's lock while an app may hold
 * it, in memory; nothing it does reaches the file. A symbol, so no user option can name it.
 */
const VIEW = Symbol('ferroqueue.view')

/** Open views by file: the objects of one command share one view. */
const views = new Map()

/** A view of the SQLite file at `dataPath`, shared while used, closed with its last user. */
function acquireView(dataPath) {
  if (typeof dataPath !== 'string' || dataPath === '') throw typeError('dataPath', `must be a file path for a view, got ${describe(dataPath)}`)
  const file = path.resolve(dataPath)
  const open = views.get(file)
  if (open !== undefined && engines.has(open)) return use(open, null, 'buffered')
  let id
  try {
    id = binding.openView(file)
  } catch (e) {
    throw fromBinding(e)
  }
  views.set(file, id)
  return use(id, () => new Engine(id, false, true), 'buffered')
}

/**
 * The PostgreSQL backend of a connection. Every answer of it comes after its commit, so there
 * is no commit to wait for; 'buffered' (answers before the commit) is refused rather than
 * ignored. The server's own settings decide fsync.
 */
function acquirePostgres(connection, durability) {
  if (durability === 'buffered') {
    throw rangeError('durability', "'buffered' is not available on PostgreSQL: every answer comes after its commit; leave durability out")
  }
  let id
  try {
    id = binding.openPostgres(connection.connectionString, connection.schema ?? null, connection.max ?? null)
  } catch (e) {
    throw fromBinding(e)
  }
  return use(id, () => new Engine(id, false, true, true), 'commit')
}

/** Counts one more user of engine `id`, creating its JS side with `make` on first use. */
function use(id, make, durability) {
  let engine = engines.get(id)
  if (!engine) {
    engine = make()
    engines.set(id, engine)
  }
  engine.refs++
  return { engine, durability }
}

/**
 * Whether this JS thread only borrows its engines: a worker thread of a threaded Worker
 * (sandbox/thread-main.js), whose parent uses the same engine and outlives it. Its last user
 * letting go then does not close the engine under the parent.
 */
let borrowing = false

function borrowEngines() {
  borrowing = true
}

/** Counts one user less; a durable engine nobody uses is closed (flushed, file released). */
async function releaseEngine(engine) {
  engine.refs--
  if (engine.refs > 0 || !engine.closable || borrowing) return
  // Detach now, so a new object on the same file gets a fresh engine (after this close is
  // done) rather than this closing one.
  engines.delete(engine.id)
  try {
    binding.detachEngine(engine.id)
  } catch {}
  engine.closing = (async () => {
    try {
      await binding.closeEngine(engine.id)
    } catch (e) {
      engine.closeError = fromBinding(e)
    } finally {
      engine.closed = true
      engine._onCommit()
    }
    if (engine.closeError) throw engine.closeError
  })()
  await engine.closing
}

/**
 * Whether a binding call answered with a promise (the backend needs a round trip) rather than
 * with the value itself.
 */
function isPending(r) {
  return r !== null && typeof r === 'object' && typeof r.then === 'function'
}

/** Awaits a binding call's answer (a value or a promise); errors come out as ours. */
async function native(p) {
  try {
    return await p
  } catch (e) {
    throw fromBinding(e)
  }
}

/** Opens a queue handle on an engine; throws the decoded error for a bad name or prefix. */
function openQueue(engineId, name, prefix) {
  try {
    return binding.openQueue(engineId, name, prefix)
  } catch (e) {
    throw fromBinding(e)
  }
}

module.exports = { binding, fromBinding, acquireEngine, releaseEngine, borrowEngines, openQueue, isPending, native, QueueError, VIEW }
