// Bad input: every wrong argument throws (constructors) or rejects (async methods) at once, with
// the right class, a stable code and a message naming the option, and changes nothing in the
// queue. Processors that throw non-Errors fail their job readably; a Rust panic becomes a JS error.
import { describe, it, expect, beforeEach, afterEach } from 'vitest'
import { Queue, Worker, QueueEvents, QueueError } from '../index.mjs'
import { uniqueName, once, collect, openTracker, rejectsAtOnce, thrown, expectError } from './helpers.mjs'


const { track, mkQueue, mkWorker, mkEvents } = openTracker('bad', { Queue, Worker, QueueEvents }, afterEach)

/** A snapshot of everything in a queue: counts, and each job's id/state/data/opts. */
async function snapshot(q) {
  const jobs = await q.getJobs()
  const rows = []
  for (const j of jobs) rows.push({ id: j.id, state: await q.getJobState(j.id), data: j.data, opts: j.opts })
  rows.sort((a, b) => (a.id < b.id ? -1 : 1))
  return { counts: await q.getJobCounts(), rows, paused: await q.isPaused() }
}

const fn = () => 1
const cyclic = () => {
  const o = { a: 1 }
  o.self = o
  return o
}

// [label, name, data, opts, Class, code, message pattern]
const BAD_ADDS = [
  ['job name a number', 42, {}, undefined, TypeError, 'ERR_INVALID_OPTION', /name/],
  ['job name undefined', undefined, {}, undefined, TypeError, 'ERR_INVALID_OPTION', /name/],
  ['job name an object', { n: 1 }, {}, undefined, TypeError, 'ERR_INVALID_OPTION', /name/],
  ['opts a string', 'n', {}, 'fast', TypeError, 'ERR_INVALID_OPTION', /opts/],
  ['opts a number', 'n', {}, 5, TypeError, 'ERR_INVALID_OPTION', /opts/],
  ['opts an array', 'n', {}, [{ priority: 1 }], TypeError, 'ERR_INVALID_OPTION', /opts/],
  ['priority -1', 'n', {}, { priority: -1 }, RangeError, 'ERR_INVALID_OPTION', /priority/],
  ['priority 2097153', 'n', {}, { priority: 2097153 }, RangeError, 'ERR_INVALID_OPTION', /priority/],
  ['priority 1.5', 'n', {}, { priority: 1.5 }, RangeError, 'ERR_INVALID_OPTION', /priority/],
  ["priority '3'", 'n', {}, { priority: '3' }, TypeError, 'ERR_INVALID_OPTION', /priority/],
  ['delay -1', 'n', {}, { delay: -1 }, RangeError, 'ERR_INVALID_OPTION', /delay/],
  ['delay NaN', 'n', {}, { delay: NaN }, RangeError, 'ERR_INVALID_OPTION', /delay/],
  ["delay 'x'", 'n', {}, { delay: 'x' }, TypeError, 'ERR_INVALID_OPTION', /delay/],
  ['attempts -1', 'n', {}, { attempts: -1 }, RangeError, 'ERR_INVALID_OPTION', /attempts/],
  ['attempts 2.5', 'n', {}, { attempts: 2.5 }, RangeError, 'ERR_INVALID_OPTION', /attempts/],
  ["attempts '3'", 'n', {}, { attempts: '3' }, TypeError, 'ERR_INVALID_OPTION', /attempts/],
  ["backoff type ''", 'n', {}, { backoff: { type: '' } }, RangeError, 'ERR_INVALID_OPTION', /backoff/],
  ['backoff without type', 'n', {}, { backoff: { delay: 10 } }, TypeError, 'ERR_INVALID_OPTION', /backoff/],
  ['backoff jitter 2', 'n', {}, { backoff: { type: 'fixed', delay: 10, jitter: 2 } }, RangeError, 'ERR_INVALID_OPTION', /jitter/],
  ['backoff -5', 'n', {}, { backoff: -5 }, RangeError, 'ERR_INVALID_OPTION', /backoff/],
  ["backoff 'slow'", 'n', {}, { backoff: 'slow' }, TypeError, 'ERR_INVALID_OPTION', /backoff/],
  ["removeOnComplete 'yes'", 'n', {}, { removeOnComplete: 'yes' }, TypeError, 'ERR_INVALID_OPTION', /removeOnComplete/],
  ['removeOnComplete -1', 'n', {}, { removeOnComplete: -1 }, RangeError, 'ERR_INVALID_OPTION', /removeOnComplete/],
  ['removeOnFail { count: -2 }', 'n', {}, { removeOnFail: { count: -2 } }, RangeError, 'ERR_INVALID_OPTION', /removeOnFail/],
  ["jobId '123' (an integer)", 'n', {}, { jobId: '123' }, RangeError, 'ERR_INVALID_OPTION', /jobId/],
  ["jobId '42'", 'n', {}, { jobId: '42' }, RangeError, 'ERR_INVALID_OPTION', /jobId/],
  ['an option that is no option', 'n', {}, { priorty: 1 }, TypeError, 'ERR_INVALID_OPTION', /priorty is not an option/],
  ['a BullMQ option not supported yet', 'n', {}, { debounce: { id: 'x' } }, TypeError, 'ERR_UNSUPPORTED_OPTION', /debounce/],
  ["jobId ''", 'n', {}, { jobId: '' }, RangeError, 'ERR_INVALID_OPTION', /jobId/],
  ['jobId a number', 'n', {}, { jobId: 7 }, TypeError, 'ERR_INVALID_OPTION', /jobId/],
  ['timestamp -5', 'n', {}, { timestamp: -5 }, RangeError, 'ERR_INVALID_OPTION', /timestamp/],
  ["lifo 'yes'", 'n', {}, { lifo: 'yes' }, TypeError, 'ERR_INVALID_OPTION', /lifo/],
  ['data with a function', 'n', { f: fn }, undefined, TypeError, 'ERR_INVALID_DATA', /data/],
  ['data with a nested function', 'n', { a: { b: [1, { c: fn }] } }, undefined, TypeError, 'ERR_INVALID_DATA', /data/],
  ['data a function', 'n', fn, undefined, TypeError, 'ERR_INVALID_DATA', /data/],
  ['data with a symbol', 'n', { s: Symbol('s') }, undefined, TypeError, 'ERR_INVALID_DATA', /data/],
  ['data with a BigInt', 'n', { big: 10n }, undefined, TypeError, 'ERR_INVALID_DATA', /data/],
  ['data a BigInt', 'n', 10n, undefined, TypeError, 'ERR_INVALID_DATA', /data/],
  ['data with a cycle', 'n', cyclic(), undefined, TypeError, 'ERR_INVALID_DATA', /data/],
]

describe('bad input to Queue.add / addBulk', () => {
  let q
  let before
  beforeEach(async () => {
    q = mkQueue()
    await q.add('seed', { v: 1 })
    await q.add('later', { v: 2 }, { delay: 60_000 })
    await q.add('custom', { v: 3 }, { jobId: 'custom-seed', priority: 4 })
    before = await snapshot(q)
  })

  for (const [label, name, data, opts, Class, code, pattern] of BAD_ADDS) {
    it(`add: ${label} -> ${Class.name} ${code}`, async () => {
      const err = await rejectsAtOnce(q.add(name, data, opts))
      expectError(err, Class, code, pattern)
      expect(await snapshot(q)).toEqual(before)
    })

    it(`addBulk: ${label} -> ${Class.name} ${code}, nothing added`, async () => {
      const err = await rejectsAtOnce(
        q.addBulk([
          { name: 'fine-1', data: { ok: true } },
          { name, data, opts },
          { name: 'fine-2', data: { ok: true } },
        ]),
      )
      expectError(err, Class, code, pattern)
      expect(await snapshot(q)).toEqual(before)
    })
  }

  it('no automatic id is used up by rejected adds', async () => {
    for (const [, name, data, opts] of BAD_ADDS) {
      await rejectsAtOnce(q.add(name, data, opts))
    }
    expect((await q.add('next', {})).id).toBe('3')
  })

  it('a bad option on a duplicate jobId rejects and leaves the existing job alone', async () => {
    const err = await rejectsAtOnce(q.add('dup', { v: 99 }, { jobId: 'custom-seed', priority: -1 }))
    expectError(err, RangeError, 'ERR_INVALID_OPTION', /priority/)
    expect(await snapshot(q)).toEqual(before)
  })

  it('addBulk with a non-array or a bad item shape rejects', async () => {
    expectError(await rejectsAtOnce(q.addBulk('jobs')), TypeError, 'ERR_INVALID_OPTION', /jobs/)
    expectError(await rejectsAtOnce(q.addBulk({ name: 'a' })), TypeError, 'ERR_INVALID_OPTION', /jobs/)
    expectError(await rejectsAtOnce(q.addBulk([{ name: 'a', data: {} }, 'b'])), TypeError, 'ERR_INVALID_OPTION', /jobs\[1\]/)
    expectError(await rejectsAtOnce(q.addBulk([null])), TypeError, 'ERR_INVALID_OPTION', /jobs\[0\]/)
    expect(await snapshot(q)).toEqual(before)
  })

  it('defaultJobOptions out of range throw at construction, naming the option', () => {
    let err
    try {
      track(new Queue(uniqueName('bad-defaults'), { defaultJobOptions: { priority: -1 } }))
    } catch (e) {
      err = e
    }
    expectError(err, RangeError, 'ERR_INVALID_OPTION', /defaultJobOptions\.priority/)
  })

  it('±Infinity for delay, priority, attempts or backoff rejects with RangeError', async () => {
    for (const [key, value] of [
      ['delay', Infinity],
      ['delay', -Infinity],
      ['priority', Infinity],
      ['attempts', Infinity],
      ['backoff', Infinity],
    ]) {
      const err = await rejectsAtOnce(q.add('inf', {}, { [key]: value }))
      expectError(err, RangeError, 'ERR_INVALID_OPTION', new RegExp(key))
    }
    expect(await snapshot(q)).toEqual(before)
  })
})

describe('payload checks', () => {
  it('finds a function deep in a payload too large to scan cheaply', async () => {
    const q = mkQueue()
    const big = { rows: Array.from({ length: 2000 }, (_, i) => ({ i })) }
    big.rows[1999].oops = () => 1
    const err = await q.add('x', big).catch((e) => e)
    expect(err).toBeInstanceOf(TypeError)
    expect(err.code).toBe('ERR_INVALID_DATA')
    expect(err.message).toMatch(/function at key "oops"/)
    expect(await q.count()).toBe(0)
  })

  it('names the key of a function or symbol, and refuses cycles', async () => {
    const q = mkQueue()
    const e1 = await q.add('x', { a: [1, { deep: Symbol('s') }] }).catch((e) => e)
    expect(e1.message).toMatch(/symbol at key "deep"/)
    const cyc = { a: {} }
    cyc.a.back = cyc
    const e2 = await q.add('x', cyc).catch((e) => e)
    expect(e2).toBeInstanceOf(TypeError)
    expect(e2.code).toBe('ERR_INVALID_DATA')
  })

  it('accepts shared references, dates and objects with prototype methods', async () => {
    const q = mkQueue()
    const shared = { v: 1 }
    const wide = { list: Array.from({ length: 5000 }, () => shared) }
    function Point(x) {
      this.x = x
    }
    Point.prototype.norm = function () {
      return Math.abs(this.x)
    }
    const t = Date.now()
    const job = await q.add('x', { wide, when: new Date(0), p: new Point(-2) })
    expect(Date.now() - t).toBeLessThan(1000)
    const back = await q.getJob(job.id)
    expect(back.data.wide.list).toHaveLength(5000)
    expect(back.data.when).toBe('1970-01-01T00:00:00.000Z')
    expect(back.data.p).toEqual({ x: -2 })
  })
})

describe('bad input to constructors', () => {
  it('Queue: name not a string -> TypeError; empty or with ":" -> RangeError', () => {
    expectError(thrown(() => new Queue(123)), TypeError, 'ERR_INVALID_OPTION', /name/)
    expectError(thrown(() => new Queue()), TypeError, 'ERR_INVALID_OPTION', /name/)
    expectError(thrown(() => new Queue(null)), TypeError, 'ERR_INVALID_OPTION', /name/)
    expectError(thrown(() => new Queue('')), RangeError, 'ERR_INVALID_OPTION', /name/)
    expectError(thrown(() => new Queue('a:b')), RangeError, 'ERR_INVALID_OPTION', /name/)
    expectError(thrown(() => new Queue(uniqueName(), 'opts')), TypeError, 'ERR_INVALID_OPTION', /opts/)
    expectError(
      thrown(() => new Queue(uniqueName(), { defaultJobOptions: { priority: 'high' } })),
      TypeError,
      'ERR_INVALID_OPTION',
      /defaultJobOptions\.priority/,
    )
    expectError(
      thrown(() => new Queue(uniqueName(), { defaultJobOptions: 'x' })),
      TypeError,
      'ERR_INVALID_OPTION',
      /defaultJobOptions/,
    )
  })

  it('QueueEvents: bad names throw like Queue', () => {
    expectError(thrown(() => new QueueEvents(5)), TypeError, 'ERR_INVALID_OPTION', /name/)
    expectError(thrown(() => new QueueEvents('')), RangeError, 'ERR_INVALID_OPTION', /name/)
    expectError(thrown(() => new QueueEvents('x:y')), RangeError, 'ERR_INVALID_OPTION', /name/)
  })

  it('Worker: bad processor, concurrency, autorun and other options throw; the queue is untouched', async () => {
    const q = mkQueue()
    await q.add('seed', { v: 1 })
    const before = await snapshot(q)
    const name = q.name
    const ok = () => 'ok'
    const cases = [
      [() => new Worker(name, 42), TypeError, /processor/],
      [() => new Worker(name, { process: ok }), TypeError, /processor/],
      [() => new Worker(name, ok, { concurrency: 0 }), RangeError, /concurrency/],
      [() => new Worker(name, ok, { concurrency: -1 }), RangeError, /concurrency/],
      [() => new Worker(name, ok, { concurrency: 1.5 }), RangeError, /concurrency/],
      [() => new Worker(name, ok, { concurrency: '2' }), TypeError, /concurrency/],
      [() => new Worker(name, ok, { prefetch: -1 }), RangeError, /prefetch/],
      [() => new Worker(name, ok, { prefetch: 0.5 }), RangeError, /prefetch/],
      [() => new Worker(name, ok, { prefetch: '4' }), TypeError, /prefetch/],
      [() => new Worker(name, ok, { concurrency: NaN }), RangeError, /concurrency/],
      [() => new Worker(name, ok, { autorun: 'yes' }), TypeError, /autorun/],
      [() => new Worker(name, ok, { drainDelay: 0 }), RangeError, /drainDelay/],
      [() => new Worker(name, ok, { drainDelay: 'x' }), TypeError, /drainDelay/],
      [() => new Worker(name, ok, { removeOnComplete: 'yes' }), TypeError, /removeOnComplete/],
      [() => new Worker(name, ok, { removeOnFail: -3 }), RangeError, /removeOnFail/],
      [() => new Worker(name, ok, 'opts'), TypeError, /opts/],
      [() => new Worker('', ok), RangeError, /name/],
      [() => new Worker(7, ok), TypeError, /name/],
    ]
    for (const [make, Class, pattern] of cases) {
      const err = thrown(() => {
        // If a case wrongly constructs, close the worker so the test can end.
        const w = make()
        track(w)
      })
      expectError(err, Class, 'ERR_INVALID_OPTION', pattern)
    }
    expect(await snapshot(q)).toEqual(before)
    expect(await q.getJobState('1')).toBe('waiting')
  })
})

describe('bad input to Queue and Job methods', () => {
  let q
  let job
  let before
  beforeEach(async () => {
    q = mkQueue()
    job = await q.add('seed', { v: 1 }, { priority: 2 })
    await q.add('later', { v: 2 }, { delay: 60_000 })
    before = await snapshot(q)
  })

  const cases = [
    ["getJobs('bogus')", () => q.getJobs('bogus'), RangeError, /bogus/],
    ["getJobs(['waiting', 'nope'])", () => q.getJobs(['waiting', 'nope']), RangeError, /nope/],
    ['getJobs(42)', () => q.getJobs(42), TypeError, /types/],
    ["getJobs('waiting', 1.5)", () => q.getJobs('waiting', 1.5), RangeError, /start/],
    ["getJobs('waiting', 0, 'x')", () => q.getJobs('waiting', 0, 'x'), TypeError, /end/],
    ["getJobCounts('bogus')", () => q.getJobCounts('bogus'), RangeError, /bogus/],
    ["getJobCountByTypes('waiting', 'bogus')", () => q.getJobCountByTypes('waiting', 'bogus'), RangeError, /bogus/],
    ["clean(0, 0, 'bogus')", () => q.clean(0, 0, 'bogus'), RangeError, /type/],
    ["clean(0, 0, 'waiting-children')", () => q.clean(0, 0, 'waiting-children'), RangeError, /type/],
    ["clean('1', 0)", () => q.clean('1', 0), TypeError, /grace/],
    ['clean(-1, 0)', () => q.clean(-1, 0), RangeError, /grace/],
    ['clean(0, -1)', () => q.clean(0, -1), RangeError, /^limit must be an integer in 0\.\.=\d+, got -1$/],
    ['clean(0, 1.5)', () => q.clean(0, 1.5), RangeError, /^limit must be an integer/],
    ['clean(NaN, 0)', () => q.clean(NaN, 0), RangeError, /grace/],
    ['getJob(1)', () => q.getJob(1), TypeError, /id/],
    ['getJobState(null)', () => q.getJobState(null), TypeError, /id/],
    ['remove(1)', () => q.remove(1), TypeError, /id/],
    ["obliterate('yes')", () => q.obliterate('yes'), TypeError, /opts/],
    ["job.changePriority({ priority: '1' })", () => job.changePriority({ priority: '1' }), TypeError, /priority/],
    ['job.changePriority({ priority: 2097153 })', () => job.changePriority({ priority: 2097153 }), RangeError, /priority/],
    ["job.changePriority({ priority: 1, lifo: 'y' })", () => job.changePriority({ priority: 1, lifo: 'y' }), TypeError, /lifo/],
    ['job.changeDelay(-1)', () => job.changeDelay(-1), RangeError, /delay/],
    ["job.changeDelay('x')", () => job.changeDelay('x'), TypeError, /delay/],
    ["job.retry('active')", () => job.retry('active'), RangeError, /state/],
    ['job.updateProgress(fn)', () => job.updateProgress({ f: fn }), TypeError, /progress/],
    ['job.updateData(cycle)', () => job.updateData(cyclic()), TypeError, /data/],
    ['job.updateData(BigInt)', () => job.updateData({ n: 1n }), TypeError, /data/],
    ['job.waitUntilFinished({})', () => job.waitUntilFinished({}), TypeError, /queueEvents/],
  ]

  for (const [label, call, Class, pattern] of cases) {
    it(`${label} -> ${Class.name}`, async () => {
      const err = await rejectsAtOnce(call())
      const code = /updateProgress|updateData/.test(label) ? 'ERR_INVALID_DATA' : 'ERR_INVALID_OPTION'
      expectError(err, Class, code, pattern)
      expect(await snapshot(q)).toEqual(before)
    })
  }

  it('job.waitUntilFinished(qe, -1) rejects (does not throw synchronously) naming ttl', async () => {
    const qe = mkEvents(q.name)
    let p
    expect(() => {
      p = job.waitUntilFinished(qe, -1)
    }).not.toThrow()
    const err = await rejectsAtOnce(p)
    expectError(err, RangeError, 'ERR_INVALID_OPTION', /ttl/)
  })

  it('methods on jobs in the wrong state reject with QueueError codes and change nothing', async () => {
    const err = await rejectsAtOnce(job.promote())
    expectError(err, QueueError, 'ERR_JOB_STATE', new RegExp(job.id))
    expectError(await rejectsAtOnce(job.retry()), QueueError, 'ERR_JOB_STATE', /retry/)
    await job.remove()
    before = await snapshot(q)
    expectError(await rejectsAtOnce(job.updateProgress(1)), QueueError, 'ERR_JOB_NOT_FOUND', new RegExp(job.id))
    expectError(await rejectsAtOnce(job.changeDelay(5)), QueueError, 'ERR_JOB_NOT_FOUND', /not found/)
    expectError(await rejectsAtOnce(job.updateData({ v: 2 })), QueueError, 'ERR_JOB_NOT_FOUND', /not found/)
    expect(await snapshot(q)).toEqual(before)
  })

  it('calls on a closed Queue reject with QueueError ERR_QUEUE_CLOSED; the jobs are untouched', async () => {
    await q.close()
    const calls = [
      () => q.add('x', {}),
      () => q.addBulk([{ name: 'x', data: {} }]),
      () => q.getJob(job.id),
      () => q.getJobs('waiting'),
      () => q.getJobCounts(),
      () => q.count(),
      () => q.pause(),
      () => q.drain(true),
      () => q.clean(0, 0, 'delayed'),
      () => q.obliterate({ force: true }),
      () => q.remove(job.id),
      () => job.changePriority({ priority: 1 }),
      () => job.remove(),
    ]
    for (const call of calls) {
      expectError(await rejectsAtOnce(call()), QueueError, 'ERR_QUEUE_CLOSED', /closed/)
    }
    const other = track(new Queue(q.name))
    expect(await snapshot(other)).toEqual(before)
  })
})

describe('processors that throw non-Errors', () => {
  it('fail the job with a readable failedReason and the worker goes on', async () => {
    const q = mkQueue()
    const throws = {
      str: () => {
        throw 'a plain string failure'
      },
      undef: () => {
        throw undefined
      },
      nul: () => {
        throw null
      },
      obj: () => {
        throw { code: 42, reason: 'quota exceeded' }
      },
      asyncStr: () => Promise.reject('rejected with a string'),
      bigReturn: () => ({ n: 10n }),
      ok: () => 'fine',
    }
    const w = mkWorker(q.name, (job) => throws[job.name]())
    const failed = collect(w, 'failed', 6)
    const done = once(w, 'completed')
    for (const name of Object.keys(throws)) await q.add(name, {})
    const events = await failed
    const [okJob, value] = await done
    expect(okJob.name).toBe('ok')
    expect(value).toBe('fine')

    for (const [job, err] of events) {
      expect(err).toBeInstanceOf(Error)
      expect(typeof err.message).toBe('string')
      expect(job.failedReason).toBe(err.message)
    }
    const reason = async (name) => {
      const [j] = (await q.getFailed()).filter((x) => x.name === name)
      expect(await q.getJobState(j.id)).toBe('failed')
      return j.failedReason
    }
    expect(await reason('str')).toContain('a plain string failure')
    expect(await reason('undef')).toContain('undefined')
    expect(await reason('nul')).toContain('null')
    expect(await reason('obj')).toContain('quota exceeded')
    expect(await reason('asyncStr')).toContain('rejected with a string')
    expect(await reason('bigReturn')).toMatch(/returnvalue/)
    expect(await q.getJobCounts('failed', 'completed', 'active', 'waiting')).toEqual({
      failed: 6,
      completed: 1,
      active: 0,
      waiting: 0,
    })
  })
})
