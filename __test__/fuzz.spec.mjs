// Seeded property-based fuzz test of the public API (fast-check), run by vitest and by bun test.
//
// Each run builds a "world": a fresh queue name on the in-memory engine or (one run in four) on a
// SQLite file in a temp dir, half of those with an engine that keeps only one finished job per
// state in memory (so the read-from-file paths run too). It runs a random sequence of up to
// MAX_COMMANDS calls over every public entry point with valid or hostile arguments, then checks:
//   - every awaited call settles within HANG_MS, and whatever it throws or rejects with is a
//     TypeError, RangeError or QueueError whose `code` starts with ERR_ and is not ERR_INTERNAL
//     (so are a Worker's 'error' events and errors of job methods called inside processors);
//   - nothing escapes: no uncaught exception, no unhandled rejection, no process warning (such
//     as a TimeoutOverflowWarning: a timer silently cut to 1 ms);
//   - a running, unpaused Worker takes a ready job; a graceful close() of every Worker resolves
//     and leaves no job active; getJobCounts() are non-negative integers that add up to what
//     getJobs() lists; a normal job still runs end to end on a fresh Worker; every close() resolves.
// A failure prints the seed and the shrunk call sequence. FUZZ_SEED=<int> picks other runs;
// FUZZ_PATH=<path from the report> replays just the failing run (and shrinks it again).
import { describe, it, beforeAll, afterAll } from 'vitest'
import fc from 'fast-check'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Queue, Worker, QueueEvents, Job, QueueError } from '../index.mjs'
import { uniqueName, delay, waitFor } from './helpers.mjs'

const SEED = Number(process.env.FUZZ_SEED ?? 20260611)
if (!Number.isSafeInteger(SEED)) throw new Error(`FUZZ_SEED must be an integer, got ${process.env.FUZZ_SEED}`)
const NUM_RUNS = 3000 // ~30 s on the 2-core dev machine
const TIME_LIMIT_MS = 55_000 // bounds slower machines, and the shrinking of a failure
const HANG_MS = 5_000 // an awaited call that takes longer has hung
const MAX_COMMANDS = 30
let TMP // temp dir of the durable runs (and of the hostile data paths)

// ---------------------------------------------------------------------------------------------
// Hostile values, keyed by the source text that reports show. Each use builds a fresh one.

/**
 * The engine that options choose (as lib/native.js does): `connection`, else a given `dataPath`
 * (`null`: in memory, whatever the environment says), else the environment's default.
 */
function engineOf(o) {
  if (o.connection) return `pg:${o.connection.connectionString ?? o.connection}`
  if (o.dataPath !== undefined) return o.dataPath || 'memory'
  if (process.env.FERROQUEUE_POSTGRES_URL) return `pg:${process.env.FERROQUEUE_POSTGRES_URL}`
  return process.env.FERROQUEUE_DATA_PATH || 'memory'
}

class Hostile extends Error {} // what hostile traps, getters and toJSON throw
const boom = () => {
  throw new Hostile('hostile')
}
const TRAPS = { get: boom, set: boom, has: boom, ownKeys: boom, getPrototypeOf: boom, getOwnPropertyDescriptor: boom, defineProperty: boom, deleteProperty: boom }
const cyclic = (o) => ((o.self = o), o)

const HOSTILE = {
  NaN: () => NaN,
  Infinity: () => Infinity,
  '-Infinity': () => -Infinity,
  '-0': () => -0,
  '-1': () => -1,
  '1.5': () => 1.5,
  '2 ** 32': () => 2 ** 32,
  '2 ** 53': () => 2 ** 53,
  '1e308': () => 1e308,
  '1n': () => 1n,
  "Symbol('s')": () => Symbol('s'),
  '() => 1': () => () => 1,
  null: () => null,
  undefined: () => undefined,
  'cyclic({ a: 1 })': () => cyclic({ a: 1 }),
  'Object.create(null)': () => Object.assign(Object.create(null), { a: 1 }),
  'cyclic(Object.create(null))': () => cyclic(Object.create(null)),
  'new Proxy({}, THROWING_TRAPS)': () => new Proxy({}, TRAPS),
  '{ get x() { throw } }': () => ({ get x() { return boom() } }),
  '{ toJSON() { throw } }': () => ({ toJSON: boom }),
  'new Date(0)': () => new Date(0),
  'new Array(100_000).fill(7)': () => new Array(100_000).fill(7),
  "[1, 'a', [null]]": () => [1, 'a', [null]],
  "'x'.repeat(100_000)": () => 'x'.repeat(100_000),
  "''": () => '',
  "'a:b'": () => 'a:b',
  "'\\u0000\\n\\u007f\\ud800'": () => '\u0000\n\u007f\ud800',
  "'123'": () => '123',
  'Object.create({ delay: 60000 })': () => Object.create({ delay: 60_000 }),
  'JSON.parse(\'{"__proto__": { "delay": 60000 }}\')': () => JSON.parse('{"__proto__": { "delay": 60000 }}'),
}

// ---------------------------------------------------------------------------------------------
// Argument specs: plain data that fast-check can print and shrink; World#build makes the value
// (a Proxy or a cycle could be neither printed nor shared between runs). Kinds:
//   ['v', literal]  ['h', hostile key]  ['o', { key: spec }]  ['proto', { key: spec }] (inherited)
//   ['array', [spec]]  ['ref', list, i] (an object the world holds)  ['name'] (the world's queue)
//   ['dataPath'] (the world's file, or undefined)  ['tmp', file] (in TMP)  ['proc', behaviours]

const lit = (arb) => arb.map((v) => ['v', v])
const hostile = fc.constantFrom(...Object.keys(HOSTILE)).map((k) => ['h', k])
/** A valid value, or (one time in `odds + 1`) a hostile one. */
const arg = (valid, odds = 3) => fc.oneof({ weight: odds, arbitrary: lit(valid) }, { weight: 1, arbitrary: hostile })
/** A field of an options object: hostile one time in ten (objects have many fields). */
const field = (valid) => arg(valid, 9)
/** An options argument: absent, some of `shape`'s fields as own or as inherited ones, or hostile. */
const options = (shape, requiredKeys = []) =>
  fc.oneof(
    { weight: 2, arbitrary: fc.constant(['v', undefined]) },
    { weight: 6, arbitrary: fc.record(shape, { requiredKeys }).map((o) => ['o', o]) },
    { weight: 1, arbitrary: fc.record(shape, { requiredKeys }).map((o) => ['proto', o]) },
    { weight: 1, arbitrary: hostile },
  )
const ref = (list) => fc.nat(3).map((i) => ['ref', list, i])

const json = fc.jsonValue({ maxDepth: 2 })
// Data: JSON, hostile, or JSON with hostile values inside.
const data = fc.oneof(
  { weight: 3, arbitrary: arg(json) },
  { weight: 1, arbitrary: fc.record({ a: arg(json), b: arg(json) }).map((o) => ['o', o]) },
  { weight: 1, arbitrary: fc.array(arg(json), { maxLength: 3 }).map((xs) => ['array', xs]) },
)
const jobName = arg(fc.constantFrom('a', 'b'), 6)
const jobId = arg(fc.constantFrom('1', '2', '3', 'j1', 'nope'))
const int = arg(fc.integer({ min: -2, max: 4 }))
const bool = arg(fc.boolean())
const flag = field(fc.boolean())
const STATE = fc.constantFrom('waiting', 'wait', 'active', 'completed', 'failed', 'delayed', 'prioritized', 'paused', 'waiting-children', 'bogus')
const state = arg(STATE)
const keep = fc.oneof(field(fc.constantFrom(true, false, 0, 2)), options({ age: field(fc.constantFrom(1, 3600)), count: field(fc.constantFrom(1, 5)) }))
const jobOpts = options({
  jobId: field(fc.constantFrom('j1', 'j2')),
  delay: field(fc.constantFrom(0, 20, 60_000)),
  priority: field(fc.integer({ min: 0, max: 3 })),
  lifo: flag,
  attempts: field(fc.integer({ min: 1, max: 3 })),
  backoff: fc.oneof(field(fc.constant(5)), options({ type: field(fc.constantFrom('fixed', 'exponential')), delay: field(fc.constant(5)), jitter: field(fc.constant(0.5)) }, ['type'])),
  removeOnComplete: keep,
  removeOnFail: keep,
  timestamp: field(fc.constantFrom(0, 1_700_000_000_000)),
  keepLogs: field(fc.integer({ min: 1, max: 3 })),
  foo: field(json), // an option ferroqueue does not know
})
// Options of Queue, Worker and QueueEvents. Hostile paths stay in TMP (a relative string would
// create files in the working directory).
const baseOpts = (more) =>
  options(
    {
      dataPath: fc.oneof(
        { weight: 8, arbitrary: fc.constant(['dataPath']) },
        { weight: 1, arbitrary: fc.constantFrom(...Object.keys(HOSTILE).filter((k) => typeof HOSTILE[k]() !== 'string')).map((k) => ['h', k]) },
        { weight: 1, arbitrary: fc.constantFrom('missing/x.db', '.', 'foreign.db').map((f) => ['tmp', f]) },
      ),
      durability: field(fc.constantFrom('commit', 'fsync', 'buffered')),
      ...more,
    },
    ['dataPath'],
  )
const queueName = fc.oneof({ weight: 9, arbitrary: fc.constant(['name']) }, { weight: 1, arbitrary: hostile })
// A processor takes its behaviours in turn, one per job; `sleep` is the brief hang.
const behaviour = fc.oneof(
  fc.tuple(fc.constantFrom('return', 'updateProgress', 'log'), data),
  fc.tuple(fc.constantFrom('throw', 'reject'), fc.oneof(data, hostile)), // mostly hostile
  fc.tuple(fc.constant('sleep'), fc.integer({ min: 0, max: 30 })),
)
const processor = fc.oneof({ weight: 9, arbitrary: fc.array(behaviour, { minLength: 1, maxLength: 3 }).map((b) => ['proc', b]) }, { weight: 1, arbitrary: hostile })
const bulk = fc.oneof(
  { weight: 6, arbitrary: fc.array(options({ name: jobName, data, opts: jobOpts }, ['name', 'data']), { maxLength: 4 }).map((items) => ['array', items]) },
  { weight: 1, arbitrary: hostile },
)

const SHOW = {
  v: (x) => fc.stringify(x),
  h: (x) => x,
  o: (x) => `{ ${Object.entries(x).map(([k, s]) => `${k}: ${show(s)}`).join(', ')} }`,
  proto: (x) => `Object.create(${SHOW.o(x)})`,
  array: (x) => `[${x.map(show).join(', ')}]`,
  ref: (x, i) => `${x}[${i}]`,
  name: () => 'NAME',
  dataPath: () => 'DATA_PATH',
  tmp: (x) => `TMP/${x}`,
  proc: (x) => `job => [${x.map(([k, s]) => `${k} ${typeof s === 'number' ? s : show(s)}`).join(', ')}][n++]`,
}
const show = ([kind, x, i]) => SHOW[kind](x, i)

/** Specs as an argument list: trailing absent ones are left out (of the call, and of reports). */
function trim(specs) {
  let n = specs.length
  while (n > 0 && specs[n - 1][0] === 'v' && specs[n - 1][1] === undefined) n--
  return specs.slice(0, n)
}

// ---------------------------------------------------------------------------------------------
// Checks.

const TIMEOUT = Symbol('timeout')
/** `p`, or a rejection with TIMEOUT after `ms`. */
function within(p, ms) {
  let timer
  const t = new Promise((_, reject) => (timer = setTimeout(() => reject(TIMEOUT), ms)))
  return Promise.race([p, t]).finally(() => clearTimeout(timer))
}

/** A thrown value as text, for reports. */
function describeThrown(e) {
  try {
    const name = e === null || (typeof e !== 'object' && typeof e !== 'function') ? typeof e : e.constructor?.name
    return `${name} (code ${e?.code}): ${String(e?.message ?? e).slice(0, 300)}`
  } catch {
    return 'an unprintable value'
  }
}

/** What is wrong with a thrown value: null for one of ours with a stable code. */
function badError(e) {
  try {
    const ours = e instanceof TypeError || e instanceof RangeError || e instanceof QueueError
    if (ours && typeof e.code === 'string' && e.code.startsWith('ERR_') && e.code !== 'ERR_INTERNAL') return null
  } catch {}
  return describeThrown(e)
}

// Uncaught exceptions, unhandled rejections and warnings while the fuzz runs, recorded by our
// listeners alone (the runner's are set aside meanwhile). bun test fails the test on its own
// before any process listener hears of an uncaught error: there the seed is printed up front.
const crashes = []
const EVENTS = { uncaughtException: 'uncaught exception', unhandledRejection: 'unhandled rejection', warning: 'process warning' }
function recordCrashes() {
  const saved = {}
  for (const [event, what] of Object.entries(EVENTS)) {
    saved[event] = process.listeners(event)
    process.removeAllListeners(event)
    process.on(event, (e) => crashes.push(`${what}: ${event === 'warning' ? `${e.name}: ${e.message}` : describeThrown(e)}`))
  }
  return () => {
    for (const event of Object.keys(EVENTS)) {
      process.removeAllListeners(event)
      for (const l of saved[event]) process.on(event, l)
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The world of one run: what its calls made, and the checks.

class World {
  /** `engine`: 'memory', 'file' or 'evicting' (a file; 1 finished job per state in memory). */
  constructor(engine) {
    crashes.length = 0
    this.name = uniqueName('fuzz')
    this.dataPath = engine === 'memory' ? undefined : join(TMP, `${this.name}.db`)
    this.base = { dataPath: this.dataPath }
    process.env.FERROQUEUE_FINISHED_IN_MEMORY = engine === 'evicting' ? '1' : '' // read as an engine opens
    this.queues = [new Queue(this.name, this.base)]
    this.workers = []
    this.events = [new QueueEvents(this.name, this.base)]
    this.jobs = []
    this.probed = new Set() // the Workers of this queue and engine: a ready job must reach one
    this.late = [] // violations seen outside an awaited call
  }

  get owners() {
    return [...this.queues, ...this.workers]
  }

  build([kind, x, i]) {
    if (kind === 'v') return x
    if (kind === 'h') return HOSTILE[x]()
    if (kind === 'o') return Object.fromEntries(Object.entries(x).map(([k, s]) => [k, this.build(s)]))
    if (kind === 'proto') return Object.create(this.build(['o', x]))
    if (kind === 'array') return x.map((s) => this.build(s))
    if (kind === 'ref') return this[x][i % this[x].length]
    if (kind === 'name') return this.name
    if (kind === 'dataPath') return this.dataPath
    if (kind === 'tmp') return join(TMP, x)
    return this.processor(x) // 'proc'
  }

  processor(behaviours) {
    let n = 0
    return (job) => {
      this.keep(job)
      const [kind, spec] = behaviours[n++ % behaviours.length]
      if (kind === 'sleep') return delay(spec).then(() => 'slept')
      if (kind === 'return') return this.build(spec)
      if (kind === 'throw') throw this.build(spec)
      if (kind === 'reject') return delay(0).then(() => Promise.reject(this.build(spec)))
      // updateProgress or log, from inside the processor
      const text = `job.${kind}(${show(spec)}) in a processor`
      return this.call(text, () => job[kind](this.build(spec))).catch((e) => this.late.push(e.message))
    }
  }

  /** Keeps a few of the Jobs a call returned, for later Job method calls. */
  keep(out) {
    for (const j of Array.isArray(out) ? out.slice(0, 3) : [out]) {
      if (j instanceof Job && this.jobs.length < 40) this.jobs.push(j)
    }
  }

  /**
   * Runs one call; throws if it ends wrongly, else returns its result (undefined after a good
   * error). `background`: not awaited (run() resolves only at close), a rejection is checked
   * later. `settleMs`/`mayHang`: a wait that may legitimately last (waitUntilFinished).
   * `jobFailure`: a plain Error is a job's failure reason. `mustResolve`: any rejection is wrong.
   */
  async call(text, fn, { background = false, settleMs = HANG_MS, mayHang = false, jobFailure = false, mustResolve = false } = {}) {
    try {
      const out = fn()
      if (background) {
        Promise.resolve(out).catch((e) => {
          const bad = badError(e)
          if (bad) this.late.push(`${text} rejected later with ${bad}`)
        })
        return
      }
      return out !== null && typeof out === 'object' && typeof out.then === 'function' ? await within(out, settleMs) : out
    } catch (e) {
      if (e === TIMEOUT) {
        if (mayHang) return
        throw new Error(`${text} did not settle within ${settleMs} ms`)
      }
      if (jobFailure && e instanceof Error && e.constructor === Error) return
      const bad = mustResolve ? describeThrown(e) : badError(e)
      if (bad) throw new Error(`${text} threw ${bad}`)
    }
  }

  /** Takes in an object a constructor call made. */
  adopt(list, obj, specs) {
    this[list].push(obj)
    if (!(obj instanceof Worker)) return
    obj.on('error', (e) => {
      const bad = badError(e)
      if (bad) this.late.push(`Worker 'error' event: ${bad}`)
    })
    // `worker.opts` are the options it applied; the probe needs a Worker on the world's engine.
    if (specs[0][0] === 'name' && engineOf(obj.opts) === engineOf(this.base)) this.probed.add(obj)
  }

  checkLate() {
    const msg = this.late[0] ?? crashes[0]
    if (msg) throw new Error(msg)
  }

  /** The checks at the end of a run, made with fresh objects. */
  async finish() {
    const q = new Queue(this.name, this.base)
    this.queues.push(q)
    await this.call('queue.resume()', () => q.resume())

    // A running, unpaused Worker of this queue takes a ready job.
    if ([...this.probed].some((w) => w.isRunning() && !w.isPaused())) {
      const probe = await q.add('probe', {}, { lifo: true })
      const taken = await waitFor(async () => !['waiting', 'prioritized'].includes(await q.getJobState(probe.id)), HANG_MS).catch(() => false)
      if (!taken) throw new Error(`no running Worker took a ready job within ${HANG_MS} ms`)
    }

    // A graceful close() of every Worker resolves and leaves no job active.
    for (const w of this.workers) await this.call('worker.close()', () => w.close(), { mustResolve: true })
    const active = await q.getActiveCount()
    if (active !== 0) throw new Error(`${active} job(s) still active after every Worker closed gracefully`)

    // The counts are non-negative integers and add up to the jobs listed.
    const [counts, jobs] = await Promise.all([q.getJobCounts(), q.getJobs()])
    for (const [k, n] of Object.entries(counts)) {
      if (!Number.isInteger(n) || n < 0) throw new Error(`getJobCounts().${k} is ${n}`)
    }
    const sum = ['waiting', 'prioritized', 'delayed', 'active', 'completed', 'failed'].reduce((s, k) => s + counts[k], 0)
    if (sum !== jobs.length) throw new Error(`getJobCounts() adds up to ${sum}, getJobs() lists ${jobs.length}: ${JSON.stringify(counts)}`)

    // A normal job runs end to end on a fresh Worker.
    const fresh = new Worker(this.name, (job) => job.data.n + 1, this.base)
    this.workers.push(fresh)
    const completed = new Promise((resolve) => fresh.on('completed', (job, value) => job.name === 'e2e' && resolve(value)))
    await q.add('e2e', { n: 41 }, { lifo: true })
    const value = await within(completed, HANG_MS).catch(() => 'nothing')
    if (value !== 42) throw new Error(`a normal job did not complete on a fresh Worker within ${HANG_MS} ms (got ${value})`)

    // Every close() resolves.
    for (const x of [fresh, ...this.events, ...this.queues]) await this.call(`${x.constructor.name}.close()`, () => x.close(), { mustResolve: true })
  }

  /** Closes whatever is left (Workers with force), removes the queue's jobs and file; never throws. */
  async dispose() {
    for (const x of [...this.workers, ...this.events, ...this.queues]) {
      await within(Promise.resolve().then(() => x.close(true)), HANG_MS).catch(() => {})
    }
    try {
      const q = new Queue(this.name, this.base)
      await q.obliterate({ force: true })
      await q.close()
    } catch {}
    if (this.dataPath) for (const suffix of ['', '-wal', '-shm']) rmSync(this.dataPath + suffix, { force: true })
    await delay(1) // lets a late error of this run surface before the last check
  }
}

// ---------------------------------------------------------------------------------------------
// Commands: one call each, shown in reports as the call it makes.

/** A fast-check command that runs `exec(world)` (no model: the checks are on the real thing). */
const command = (text, exec) => ({
  check: () => true,
  run: async (_model, world) => {
    await exec(world)
    world.checkLate()
  },
  toString: () => text,
})

/** `list[i].name(...args)` on the i-th (modulo their count) object of a list the world holds. */
function method(list, name, args, weight = 1, how = undefined) {
  const arbitrary = fc.tuple(fc.nat(3), ...args).map(([i, ...specs]) => {
    const text = `${list}[${i}].${name}(${trim(specs).map(show).join(', ')})`
    return command(text, async (w) => {
      const target = w[list][i % w[list].length] // none while the list is empty
      if (target) w.keep(await w.call(text, () => target[name](...trim(specs).map((s) => w.build(s))), how))
    })
  })
  return { weight, arbitrary }
}

/** `new Class(...args)`; what it makes joins the world's `list`. */
function construct(list, Class, args, weight) {
  const arbitrary = fc.tuple(...args).map((specs) => {
    const text = `new ${Class.name}(${trim(specs).map(show).join(', ')})`
    return command(text, async (w) => {
      const obj = await w.call(text, () => new Class(...trim(specs).map((s) => w.build(s))))
      if (obj) w.adopt(list, obj, specs)
    })
  })
  return { weight, arbitrary }
}

const noArgs = (list, names) => names.map((n) => method(list, n, []))
const COMMANDS = fc.oneof(
  construct('queues', Queue, [queueName, baseOpts({ defaultJobOptions: jobOpts })], 2),
  construct('workers', Worker, [queueName, processor, baseOpts({ concurrency: field(fc.integer({ min: 1, max: 3 })), autorun: flag, drainDelay: field(fc.constantFrom(0.05, 1, 5)), removeOnComplete: keep, removeOnFail: keep })], 6),
  construct('events', QueueEvents, [queueName, baseOpts({ autorun: flag })], 1),
  construct('jobs', Job, [ref('owners'), jobName, data, jobOpts, jobId], 2),
  // Queue
  method('queues', 'add', [jobName, data, jobOpts], 10),
  method('queues', 'addBulk', [bulk], 3),
  ...['getJob', 'getJobState', 'remove'].map((n) => method('queues', n, [jobId])),
  method('queues', 'getJobs', [arg(fc.oneof(STATE, fc.array(STATE, { maxLength: 3 }))), int, int, bool]),
  ...['getWaiting', 'getPrioritized', 'getDelayed', 'getActive', 'getCompleted', 'getFailed'].map((n) => method('queues', n, [int, int])),
  method('queues', 'getJobCounts', [state, state]),
  method('queues', 'getJobCountByTypes', [state, state]),
  ...noArgs('queues', ['getWaitingCount', 'getPrioritizedCount', 'getDelayedCount', 'getActiveCount', 'getCompletedCount', 'getFailedCount', 'count', 'pause', 'resume', 'isPaused', 'close', 'waitUntilReady']),
  method('queues', 'drain', [bool]),
  method('queues', 'clean', [arg(fc.constantFrom(0, 10, 60_000)), arg(fc.constantFrom(0, 1, 10)), arg(fc.constantFrom('completed', 'failed', 'delayed', 'wait', 'active', 'bogus'))]),
  method('queues', 'obliterate', [options({ force: flag })]),
  method('queues', 'getJobLogs', [jobId, int, int, bool]),
  // Worker
  method('workers', 'pause', [bool]),
  method('workers', 'close', [bool]),
  method('workers', 'run', [], 1, { background: true }),
  ...noArgs('workers', ['resume', 'isRunning', 'isPaused', 'waitUntilReady']),
  // QueueEvents
  ...noArgs('events', ['close', 'waitUntilReady']),
  method('events', 'run', [], 1, { background: true }),
  // Job
  method('jobs', 'updateProgress', [arg(fc.oneof(fc.integer({ min: 0, max: 100 }), json))], 2),
  method('jobs', 'log', [arg(fc.string({ maxLength: 20 }))], 2),
  method('jobs', 'updateData', [data]),
  method('jobs', 'changePriority', [options({ priority: field(fc.integer({ min: 0, max: 3 })), lifo: flag })], 2),
  method('jobs', 'changeDelay', [arg(fc.constantFrom(0, 10, 60_000))], 2),
  method('jobs', 'retry', [arg(fc.constantFrom('failed', 'completed')), options({ resetAttemptsMade: flag })], 2),
  ...noArgs('jobs', ['getState', 'promote', 'remove', 'isCompleted', 'isFailed', 'isDelayed', 'isActive', 'isWaiting']),
  // A job may never finish (a ttl of 0 waits for ever): a wait past 150 ms is no hang here.
  method('jobs', 'waitUntilFinished', [fc.oneof({ weight: 5, arbitrary: ref('events') }, { weight: 1, arbitrary: hostile }), arg(fc.constantFrom(1, 20, 100))], 2, {
    settleMs: 150,
    mayHang: true,
    jobFailure: true,
  }),
)

// ---------------------------------------------------------------------------------------------

const property = fc.asyncProperty(
  fc.oneof({ weight: 6, arbitrary: fc.constant('memory') }, fc.constant('file'), fc.constant('evicting')),
  fc.commands([COMMANDS], { maxCommands: MAX_COMMANDS, size: 'max' }),
  async (engine, cmds) => {
    const world = new World(engine)
    try {
      await fc.asyncModelRun(() => ({ model: {}, real: world }), cmds)
      await world.finish()
    } finally {
      await world.dispose()
    }
    world.checkLate()
  },
)

describe('fuzz: random call sequences with hostile arguments', () => {
  const bound = process.env.FERROQUEUE_FINISHED_IN_MEMORY
  let restoreListeners
  beforeAll(() => {
    TMP = mkdtempSync(join(tmpdir(), 'ferroqueue-fuzz-'))
    writeFileSync(join(TMP, 'foreign.db'), 'not a database\n'.repeat(1000))
    restoreListeners = recordCrashes()
  })
  afterAll(() => {
    restoreListeners()
    if (bound === undefined) delete process.env.FERROQUEUE_FINISHED_IN_MEMORY
    else process.env.FERROQUEUE_FINISHED_IN_MEMORY = bound
    rmSync(TMP, { recursive: true, force: true })
  })

  it(
    'keeps every invariant',
    async () => {
      if (process.versions.bun) console.log(`fuzz: FUZZ_SEED=${SEED}`)
      // Only the run's index: the shrink steps of a command sequence replay only with its replayPath.
      const path = process.env.FUZZ_PATH?.split(':')[0]
      try {
        await fc.assert(property, { seed: SEED, numRuns: NUM_RUNS, interruptAfterTimeLimit: TIME_LIMIT_MS, markInterruptAsFailure: false, ...(path && { path }) })
      } catch (e) {
        console.error(`fuzz failed: replay with FUZZ_SEED=${SEED} (and FUZZ_PATH=<path> from the report)`)
        throw e
      }
    },
    TIME_LIMIT_MS + 6 * HANG_MS,
  )
})
