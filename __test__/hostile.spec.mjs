// What a fuzzer found (issue 14), one regression test each: hostile throws never strand a job or
// stop a worker, options are checked once at the boundary by the engine's rules, every error
// carries a code, and nothing is accepted silently. The fuzzer itself is fuzz.spec.mjs.
import { describe, it, expect, afterEach, beforeAll, afterAll } from 'vitest'
import { createRequire } from 'node:module'
import { Queue, Worker, QueueEvents, Job } from '../index.mjs'
import { uniqueName, once, collect, openTracker, rejectsAtOnce, thrown, expectError, waitFor, delay, itExcept } from './helpers.mjs'

const { fromBinding } = createRequire(import.meta.url)('../lib/errors.js')
const { track, mkQueue, mkWorker } = openTracker('hostile', { Queue, Worker, QueueEvents }, afterEach)

/** A null-prototype object with a cycle: neither JSON nor String() can show it. */
function unprintable() {
  const e = Object.create(null)
  e.self = e
  return e
}

// Unhandled rejections or exceptions during these tests are failures.
const escaped = []
const onEscape = (e) => escaped.push(e)
beforeAll(() => {
  process.on('unhandledRejection', onEscape)
  process.on('uncaughtException', onEscape)
})
afterAll(() => {
  process.off('unhandledRejection', onEscape)
  process.off('uncaughtException', onEscape)
})
afterEach(() => expect(escaped.splice(0)).toEqual([]))

describe('a processor that throws anything', () => {
  const THROWERS = [
    ['an unprintable value, rejected', async () => Promise.reject(unprintable()), /cannot be shown as text/],
    ['an unprintable value, thrown synchronously', () => { throw unprintable() }, /cannot be shown as text/],
    ['a Proxy whose traps throw', () => { throw new Proxy({}, { get() { throw new Error('trap') }, getPrototypeOf() { throw new Error('trap') } }) }, /./],
    ['an Error whose message getter throws', () => { const e = new Error('x'); Object.defineProperty(e, 'message', { get() { throw new Error('no') } }); throw e }, /./],
    ['a symbol', () => { throw Symbol('s') }, /Symbol\(s\)/],
    ['a BigInt', () => { throw 10n }, /10/],
    ['a thenable whose then getter throws', () => ({ get then() { throw new Error('then getter') } }), /then getter/],
    ['a thenable that calls back twice', () => ({ then(ok, bad) { bad(new Error('first')); ok(1) } }), /first/],
  ]
  for (const [label, processor, reason] of THROWERS) {
    it(`fails its job readably on ${label}; later jobs run; close resolves`, async () => {
      const q = mkQueue()
      let calls = 0
      const w = mkWorker(q.name, (job) => (++calls === 1 ? processor(job) : 'fine'))
      const failed = once(w, 'failed')
      const first = await q.add('bad', {})
      const [job, err] = await failed
      expect(job.id).toBe(first.id)
      expect(err).toBeInstanceOf(Error)
      expect(typeof job.failedReason).toBe('string')
      expect(job.failedReason).toMatch(reason)
      const done = once(w, 'completed')
      await q.add('good', {})
      expect((await done)[1]).toBe('fine')
      expect(await q.getJobState(first.id)).toBe('failed')
      expect((await q.getJob(first.id)).failedReason).toBe(job.failedReason)
      await w.close()
      expect(await q.getActiveCount()).toBe(0)
    })
  }

  it('a processor that freezes its job or changes its id still finishes it', async () => {
    const q = mkQueue()
    const w = mkWorker(q.name, (job) => {
      if (job.name === 'freeze') Object.freeze(job)
      else job.id = { not: 'an id' }
      return 'done'
    })
    const seen = collect(w, 'completed', 2)
    const a = await q.add('freeze', {})
    const b = await q.add('rename', {})
    await seen
    expect([await q.getJobState(a.id), await q.getJobState(b.id)]).toEqual(['completed', 'completed'])
  })
})

describe('worker options are checked once, by the rules of job options', () => {
  const BAD = [
    [{ removeOnComplete: { age: -1 } }, RangeError, /removeOnComplete\.age/],
    [{ removeOnComplete: { count: 1.5 } }, RangeError, /removeOnComplete\.count/],
    [{ removeOnComplete: 1e16 }, RangeError, /removeOnComplete/],
    [{ removeOnFail: new Date() }, TypeError, /removeOnFail .*a Date/],
    [{ removeOnFail: { count: 10n } }, TypeError, /removeOnFail\.count/],
    [{ concurrency: 2 ** 32 }, RangeError, /concurrency .*1\.\.=4294967295/],
    [{ concurrency: 2 ** 53 }, RangeError, /concurrency/],
    [{ concurrency: 1e308 }, RangeError, /concurrency/],
    [{ concurrency: Infinity }, RangeError, /concurrency/],
    [{ concurrency: 0 }, RangeError, /concurrency/],
    [{ autorun: 'no' }, TypeError, /autorun/],
  ]
  for (const [opts, Class, pattern] of BAD) {
    it(`new Worker(…, ${JSON.stringify(opts, (k, x) => (typeof x === 'bigint' ? `${x}n` : x))}) throws ${Class.name}`, () => {
      expectError(thrown(() => track(new Worker(uniqueName('w'), () => 1, opts))), Class, 'ERR_INVALID_OPTION', pattern)
    })
  }

  it('setting concurrency checks it too, and the largest value works', async () => {
    const q = mkQueue()
    const w = mkWorker(q.name, () => 'ok', { concurrency: 2 ** 32 - 1 })
    expectError(thrown(() => (w.concurrency = 2 ** 32)), RangeError, 'ERR_INVALID_OPTION', /concurrency/)
    expect(w.concurrency).toBe(2 ** 32 - 1)
    const done = once(w, 'completed')
    await q.add('a', {})
    await done
    w.concurrency = 3
    expect(w.concurrency).toBe(3)
  })

  it('QueueEvents checks autorun like Worker', () => {
    expectError(thrown(() => track(new QueueEvents(uniqueName('e'), { autorun: 'no' }))), TypeError, 'ERR_INVALID_OPTION', /autorun/)
  })
})

describe('every error carries a code', () => {
  it('options that are not JSON: add and addBulk agree (ERR_INVALID_OPTION)', async () => {
    const q = mkQueue()
    const cyclic = {}
    cyclic.self = cyclic
    for (const opts of [{ foo: 1n }, { foo: cyclic }]) {
      expectError(await rejectsAtOnce(q.add('n', {}, opts)), TypeError, 'ERR_INVALID_OPTION', /^opts /)
      const err = await rejectsAtOnce(q.addBulk([{ name: 'a', data: {} }, { name: 'n', data: {}, opts }]))
      expectError(err, TypeError, 'ERR_INVALID_OPTION', /^jobs\[1\]\.opts /)
    }
    expect(await q.count()).toBe(0)
  })

  it('options whose getters or Proxy traps throw', async () => {
    const q = mkQueue()
    const getter = Object.defineProperty({}, 'delay', { enumerable: true, get() { throw new Error('getter') } })
    const proxy = new Proxy({}, { ownKeys() { throw new Error('trap') } })
    for (const opts of [getter, proxy]) {
      expectError(await rejectsAtOnce(q.add('n', {}, opts)), TypeError, 'ERR_INVALID_OPTION', /opts could not be read/)
    }
    const data = { toJSON() { throw new Error('toJSON') } }
    expectError(await rejectsAtOnce(q.add('n', data)), TypeError, 'ERR_INVALID_DATA', /data .*toJSON/)
  })

  it('constructors: durability 1n, defaultJobOptions { foo: 1n }', () => {
    for (const make of [
      () => new Queue(uniqueName('c'), { durability: 1n }),
      () => new Worker(uniqueName('c'), () => 1, { durability: 1n }),
      () => new QueueEvents(uniqueName('c'), { durability: 1n }),
    ]) {
      expectError(thrown(make), RangeError, 'ERR_INVALID_OPTION', /durability .*bigint 1/)
    }
    expectError(thrown(() => new Queue(uniqueName('c'), { defaultJobOptions: { foo: 1n } })), TypeError, 'ERR_INVALID_OPTION', /defaultJobOptions/)
  })

  it('job methods: changePriority(null), log of a non-string, getJobLogs of a non-string id', async () => {
    const q = mkQueue()
    const job = await q.add('n', {}, { priority: 5 })
    await job.changePriority(null)
    expect(job.priority).toBe(0)
    expect(await q.getJobState(job.id)).toBe('waiting')
    for (const row of [Object.create(null), 42, undefined]) {
      expectError(await rejectsAtOnce(job.log(row)), TypeError, 'ERR_INVALID_OPTION', /row must be a string/)
    }
    for (const id of [Object.create(null), 42]) {
      expectError(await rejectsAtOnce(q.getJobLogs(id)), TypeError, 'ERR_INVALID_OPTION', /id must be a string/)
    }
    expect(await q.getJobLogs(job.id)).toEqual({ logs: [], count: 0 })
  })

  it('a Job built with a non-string id: a short TypeError, not ERR_INTERNAL', async () => {
    const q = mkQueue()
    for (const id of [42, new Array(300_000).fill(7)]) {
      const err = await rejectsAtOnce(new Job(q, 'n', {}, {}, id).remove())
      expectError(err, TypeError, 'ERR_INVALID_OPTION', /job\.id must be a string/)
      expect(err.message.length).toBeLessThan(300)
    }
    expectError(await rejectsAtOnce(new Job({}, 'n', {}, {}, 'x').remove()), TypeError, 'ERR_INVALID_OPTION', /job\.queue/)
  })

  it('an internal error quotes at most 200 characters of what the binding said', () => {
    const err = fromBinding(new Error(`failed to convert: ${'7,'.repeat(1_000_000)}`))
    expect(err.code).toBe('ERR_INTERNAL')
    expect(err.message.length).toBeLessThan(260)
  })
})

describe('nothing accepted silently', () => {
  it('keepLogs is checked when the job is added', async () => {
    const q = mkQueue()
    for (const keepLogs of ['x', -1, 1.5]) {
      const err = await rejectsAtOnce(q.add('n', {}, { keepLogs }))
      expect(err.code).toBe('ERR_INVALID_OPTION')
      expect(err.message).toMatch(/keepLogs/)
    }
    const job = await q.add('n', {}, { keepLogs: 2 })
    for (const row of ['a', 'b', 'c']) await job.log(row)
    expect(await q.getJobLogs(job.id)).toEqual({ logs: ['b', 'c'], count: 2 })
  })

  it("dataPath '' is refused (an in-memory queue is the default, not an empty path)", () => {
    expectError(thrown(() => new Queue(uniqueName('p'), { dataPath: '' })), RangeError, 'ERR_INVALID_OPTION', /dataPath/)
  })

  it('inherited options are not options: the job shows what was applied', async () => {
    const q = mkQueue()
    const job = await q.add('n', {}, Object.create({ delay: 60_000 }))
    expect(job.opts).toEqual({})
    expect(job.delay).toBe(0)
    expect(await q.getJobState(job.id)).toBe('waiting')
    const [bulk] = await q.addBulk([{ name: 'b', data: {}, opts: Object.create({ priority: 3 }) }])
    expect([bulk.opts, bulk.priority, await q.getJobState(bulk.id)]).toEqual([{}, 0, 'waiting'])
  })
})

describe('found by the fuzz test itself', () => {
  it('waitUntilFinished refuses a ttl setTimeout cannot wait (it would time out at once)', async () => {
    const q = mkQueue()
    const events = track(new QueueEvents(q.name))
    const job = await q.add('n', {})
    for (const ttl of [2 ** 31, 2 ** 53, 1e308]) {
      expectError(await rejectsAtOnce(job.waitUntilFinished(events, ttl)), RangeError, 'ERR_INVALID_OPTION', /ttl/)
    }
  })

  it('an id reused after obliterate({ force: true }) does not strand either activation', async () => {
    const q = mkQueue()
    // The old job is held active until the new one has started; its stale ack then comes while
    // the new activation runs. (Polling its state raced a 30 ms processor: a poll answered late
    // on a new PostgreSQL connection saw it completed and never active.)
    let release
    const held = new Promise((r) => (release = r))
    const w = mkWorker(q.name, (job) => (job.name === 'old' ? held : delay(30)), { concurrency: 3 })
    const oldStarted = once(w, 'active')
    const old = await q.add('old', {})
    await oldStarted
    expect(await q.getJobState(old.id)).toBe('active')
    await q.obliterate({ force: true })
    const started = once(w, 'active')
    const reborn = await q.add('new', {})
    expect(reborn.id).toBe(old.id)
    expect((await started)[0].name).toBe('new')
    release()
    // A graceful close waits for the new activation too (the old one's stale ack used to drop it).
    await w.close()
    expect(await q.getJobCounts('active', 'waiting', 'completed')).toEqual({ active: 0, waiting: 0, completed: 1 })
  })

  it('names and ids must be well-formed Unicode (a lone surrogate would name another)', async () => {
    const q = mkQueue()
    const lone = 'x\ud800'
    expectError(thrown(() => track(new Queue(lone))), RangeError, 'ERR_INVALID_OPTION', /well-formed/)
    expectError(await rejectsAtOnce(q.add(lone, {})), RangeError, 'ERR_INVALID_OPTION', /name .*well-formed/)
    expectError(await rejectsAtOnce(q.add('n', {}, { jobId: lone })), RangeError, 'ERR_INVALID_OPTION', /jobId .*well-formed/)
    expectError(await rejectsAtOnce(q.getJob(lone)), RangeError, 'ERR_INVALID_OPTION', /id .*well-formed/)
    const job = await q.add('n', { text: lone })
    expect((await q.getJob(job.id)).data).toEqual({ text: lone }) // data is JSON: kept exactly
    expectError(await rejectsAtOnce(job.log(lone)), RangeError, 'ERR_INVALID_OPTION', /row .*well-formed/)
  })

  it('a processor error with a lone surrogate fails its job with that reason (U+FFFD in its place)', async () => {
    const q = mkQueue()
    const w = mkWorker(q.name, () => {
      throw new Error('bad \ud800 text')
    })
    const failed = once(w, 'failed')
    const job = await q.add('n', {})
    const [, err] = await failed
    expect(err.message).toBe('bad \ud800 text')
    expect((await q.getJob(job.id)).failedReason).toBe('bad \ufffd text')
  })
})

describe('a large addBulk', () => {
  it('yields to the event loop between slices and stays all or none', async () => {
    const q = mkQueue()
    const n = 25_000 // three slices of at most 10,000
    const jobs = Array.from({ length: n }, (_, i) => ({ name: 'n', data: { i }, opts: i % 2 ? { priority: 1 } : undefined }))
    let ticks = 0
    const timer = setInterval(() => ticks++, 0)
    const added = await q.addBulk(jobs)
    clearInterval(timer)
    expect(ticks).toBeGreaterThan(0)
    expect(added.map((j) => j.id)).toEqual(Array.from({ length: n }, (_, i) => String(i + 1)))
    expect(await q.count()).toBe(n)
    // A bad option in the last slice: nothing of the batch is added.
    jobs[n - 1] = { name: 'bad', data: {}, opts: { priority: -1 } }
    expectError(await q.addBulk(jobs).catch((e) => e), RangeError, 'ERR_INVALID_OPTION', /priority/)
    expect(await q.count()).toBe(n)
  })
})

describe('memory', () => {
  // napi-rs's Float64Array::new never freed its buffer: addBulk leaked 8 bytes per job.
  // The leak was in the binding's answer at hand (a Float64Array); on PostgreSQL the answer is
  // a promise of an array, and 100,000s of round trips would only measure the database.
  itExcept('postgres', 'measures the answer at hand, which PostgreSQL does not give')('addBulk then drain leaves no memory behind', async () => {
    // vitest runs this file with --expose-gc (see vitest.config.mjs); Bun.gc(true) is synchronous.
    const gc = globalThis.Bun ? () => Bun.gc(true) : globalThis.gc
    expect(typeof gc).toBe('function')
    const q = mkQueue()
    const batch = Array.from({ length: 10_000 }, (_, i) => ({ name: 'n', data: i }))
    const round = async (jobs) => {
      for (let n = 0; n < jobs; n += batch.length) {
        await q.addBulk(batch)
        await q.drain()
      }
      gc()
      await delay(10)
      gc()
      return process.memoryUsage().rss
    }
    await round(500_000) // warm up: the allocator and the JIT settle
    // The leak grew RSS by 16 MB over every 2,000,000 jobs, so it fails each try. A heap that
    // grows once (Bun, late in the full suite, grew 15 MB in one try) passes on the next.
    let growth = Infinity
    for (let tries = 0; tries < 3 && growth >= 6; tries++) {
      const before = await round(500_000)
      growth = ((await round(2_000_000)) - before) / 1e6
    }
    expect(growth).toBeLessThan(6)
  })
})

describe('sanity', () => {
  it('a normal job still runs end to end', async () => {
    const q = mkQueue()
    const w = mkWorker(q.name, (job) => job.data.x * 2)
    const done = once(w, 'completed')
    await q.add('n', { x: 21 })
    expect((await done)[1]).toBe(42)
    await waitFor(async () => (await q.getCompletedCount()) === 1)
  })
})
