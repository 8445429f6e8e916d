// Shared test helpers. Bun runs every file in one process, so each test uses its own queue name.
import { spawn } from 'node:child_process'
import { expect, it } from 'vitest'

/**
 * The backend this run tests: 'postgres' when FERROQUEUE_POSTGRES_URL is set (every queue opened
 * without `dataPath` or `connection` then lives in PostgreSQL: scripts/test.sh runs the suite
 * once more that way), else 'embedded'.
 */
export const backend = process.env.FERROQUEUE_POSTGRES_URL ? 'postgres' : 'embedded'

/**
 * `it`, or `it.skip` on `skipped` (a backend name), for a test that does not apply there;
 * `why` says why, where the test is read.
 */
export function itExcept(skipped, why) {
  if (typeof why !== 'string' || why.length === 0) throw new Error('say why the test does not apply')
  return backend === skipped ? it.skip : it
}

let n = 0
export function uniqueName(prefix = 'q') {
  n += 1
  return `${prefix}-${process.pid}-${n}-${Math.random().toString(36).slice(2, 8)}`
}

export const delay = (ms) => new Promise((r) => setTimeout(r, ms))

/** Polls `cond` until it is truthy or `timeout` ms pass. */
export async function waitFor(cond, timeout = 5000, step = 5) {
  const end = Date.now() + timeout
  for (;;) {
    const v = await cond()
    if (v) return v
    if (Date.now() > end) throw new Error(`waitFor timed out after ${timeout} ms`)
    await delay(step)
  }
}

/** Resolves with the args of the next `event` of `emitter`. */
export function once(emitter, event, timeout = 5000) {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`no '${event}' within ${timeout} ms`)), timeout)
    emitter.once(event, (...args) => {
      clearTimeout(t)
      resolve(args)
    })
  })
}

/** Collects `count` emissions of `event`. */
export function collect(emitter, event, count, timeout = 5000) {
  return new Promise((resolve, reject) => {
    const got = []
    const t = setTimeout(() => reject(new Error(`only ${got.length}/${count} '${event}' within ${timeout} ms`)), timeout)
    const on = (...args) => {
      got.push(args)
      if (got.length === count) {
        clearTimeout(t)
        emitter.off(event, on)
        resolve(got)
      }
    }
    emitter.on(event, on)
  })
}

/**
 * Tracks what a test opens and closes it after each test (workers with force, so a held job
 * cannot block). Returns makers that open and track in one step.
 */
export function openTracker(prefix, { Queue, Worker, QueueEvents }, afterEach) {
  let opened = []
  afterEach(async () => {
    const list = opened.reverse()
    opened = []
    for (const x of list) await x.close(true)
  })
  const track = (x) => {
    opened.push(x)
    return x
  }
  return {
    track,
    mkQueue: (opts, name = uniqueName(prefix)) => track(new Queue(name, opts)),
    mkWorker: (name, fn, opts) => track(new Worker(name, fn, opts)),
    mkEvents: (name) => track(new QueueEvents(name)),
  }
}

/** A promise a test resolves by hand (to hold a job active). */
export function gate() {
  let open
  const p = new Promise((r) => {
    open = r
  })
  return { p, open }
}

/** The error a promise rejects with; fails if it resolves. */
export async function rejection(p) {
  try {
    await p
  } catch (e) {
    return e
  }
  throw new Error('expected a rejection, but the promise resolved')
}

export const ids = (jobs) => jobs.map((j) => j.id)
export const names = (jobs) => jobs.map((j) => j.name)

/**
 * The error `p` rejects with. It must be a promise (not a synchronous throw, which escapes while
 * the argument is evaluated) that is already rejected by the next macrotask.
 */
export async function rejectsAtOnce(p) {
  expect(p).toBeInstanceOf(Promise)
  // On PostgreSQL the answer is a round trip away: it must reject, not throw, but not at once.
  if (backend === 'postgres') return rejection(p)
  let state = 'pending'
  let err
  p.then(
    () => {
      state = 'resolved'
    },
    (e) => {
      state = 'rejected'
      err = e
    },
  )
  await new Promise((r) => setTimeout(r, 0))
  expect(state).toBe('rejected')
  return err
}

/** The error a synchronous call throws. */
export function thrown(fn) {
  try {
    fn()
  } catch (e) {
    return e
  }
  throw new Error('expected a throw, but the call returned')
}

/** Checks class, code and message of an error. */
export function expectError(err, Class, code, pattern) {
  expect({ cls: err && err.constructor && err.constructor.name, code: err && err.code }).toEqual({
    cls: Class.name,
    code,
  })
  expect(err).toBeInstanceOf(Class)
  expect(err.message).toMatch(pattern)
}

/**
 * A child process running `script` with `args` on this runtime: `{ p, lines, stderr, exited }`,
 * `lines` the whole lines it printed so far (a cut last line is left out).
 */
export function spawnLines(script, args) {
  const p = spawn(process.execPath, [script, ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
  const proc = { p, lines: [], stderr: '', exited: null }
  let rest = ''
  p.stdout.on('data', (d) => {
    const parts = (rest + d).split('\n')
    rest = parts.pop()
    proc.lines.push(...parts)
  })
  p.stderr.on('data', (d) => (proc.stderr += d))
  proc.exited = new Promise((resolve) => p.on('exit', (code, signal) => resolve({ code, signal })))
  return proc
}
