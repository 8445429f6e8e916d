// BullMQ conformance: what a BullMQ user expects and ferroqueue got wrong before (issue 8, §5).
import { describe, it, expect, afterEach, vi } from 'vitest'
import { createRequire } from 'node:module'
import { Queue, Worker, QueueEvents, QueueError } from '../index.mjs'
import { uniqueName, delay, once, waitFor, openTracker, thrown, expectError, rejection, collect, itExcept } from './helpers.mjs'

const { track, mkQueue, mkWorker } = openTracker('conf', { Queue, Worker, QueueEvents }, afterEach)

describe('no option is silently ignored', () => {
  it('refuses BullMQ options ferroqueue does not support yet, naming them', () => {
    const cases = [
      [() => new Queue(uniqueName(), { streams: { events: { maxLen: 10 } } }), /^streams /],
      [() => new Queue(uniqueName(), { telemetry: {} }), /^telemetry /],
      [() => new Worker(uniqueName(), () => {}, { skipLockRenewal: true }), /^skipLockRenewal /],
      [() => new Worker(uniqueName(), () => {}, { maxStartedAttempts: 2 }), /^maxStartedAttempts /],
      [() => new Worker(uniqueName(), () => {}, { runRetryDelay: 10 }), /^runRetryDelay /],
      [() => new Worker(uniqueName(), () => {}, { settings: { repeatStrategy: () => 1 } }), /^settings\.repeatStrategy /],
      [() => new QueueEvents(uniqueName(), { blockingTimeout: 1000 }), /^blockingTimeout /],
      [() => new QueueEvents(uniqueName(), { lastEventId: '0' }), /^lastEventId .*no history/],
    ]
    for (const [make, pattern] of cases) expectError(thrown(make), TypeError, 'ERR_UNSUPPORTED_OPTION', pattern)
  })

  it('refuses names that are no option at all (a typo must not pass)', () => {
    expectError(thrown(() => new Queue(uniqueName(), { defaultJobOption: {} })), TypeError, 'ERR_INVALID_OPTION', /defaultJobOption is not an option/)
    expectError(thrown(() => new Worker(uniqueName(), () => {}, { concurency: 2 })), TypeError, 'ERR_INVALID_OPTION', /concurency is not an option/)
    expectError(thrown(() => new QueueEvents(uniqueName(), { autoRun: false })), TypeError, 'ERR_INVALID_OPTION', /autoRun/)
    expectError(
      thrown(() => new Queue(uniqueName(), { defaultJobOptions: { atempts: 3 } })),
      TypeError,
      'ERR_INVALID_OPTION',
      /defaultJobOptions\.atempts is not an option/,
    )
  })

  it('refuses job options that are not supported yet or unknown, in add and addBulk, adding nothing', async () => {
    const q = mkQueue()
    for (const [opts, code, pattern] of [
      [{ debounce: { id: 'x' } }, 'ERR_UNSUPPORTED_OPTION', /^debounce /],
      [{ stackTraceLimit: 5 }, 'ERR_UNSUPPORTED_OPTION', /^stackTraceLimit /],
      [{ telemetry: { traceparent: 'x' } }, 'ERR_UNSUPPORTED_OPTION', /^telemetry /],
      [{ sizeLimit: 100 }, 'ERR_UNSUPPORTED_OPTION', /^sizeLimit /],
      [{ delai: 5 }, 'ERR_INVALID_OPTION', /^delai is not an option/],
    ]) {
      expectError(await rejection(q.add('n', {}, opts)), TypeError, code, pattern)
      expectError(await rejection(q.addBulk([{ name: 'a', data: {} }, { name: 'n', data: {}, opts }])), TypeError, code, pattern)
    }
    expect(await q.count()).toBe(0)
  })

  it('tells a Redis connection apart: ferroqueue needs no Redis', () => {
    for (const connection of [{ host: 'localhost', port: 6379 }, 'redis://localhost:6379', { maxRetriesPerRequest: null }]) {
      expectError(thrown(() => new Queue(uniqueName(), { connection })), TypeError, 'ERR_UNSUPPORTED_OPTION', /needs no Redis/)
      expectError(thrown(() => new Worker(uniqueName(), () => {}, { connection })), TypeError, 'ERR_UNSUPPORTED_OPTION', /needs no Redis/)
    }
    expectError(thrown(() => new QueueEvents(uniqueName(), { connection: 42 })), TypeError, 'ERR_UNSUPPORTED_OPTION', /^connection /)
  })
})

describe('prefix', () => {
  it('namespaces queues: the same name under two prefixes is two queues; bull is the default', async () => {
    const name = uniqueName('pfx')
    const plain = mkQueue(undefined, name)
    const bull = mkQueue({ prefix: 'bull' }, name)
    const other = mkQueue({ prefix: '{tenant}:a' }, name)
    await plain.add('p', {})
    await other.add('o1', {})
    await other.add('o2', {})
    expect(await bull.getWaitingCount()).toBe(1)
    expect(await other.getWaitingCount()).toBe(2)
    expect((await other.getJob('1')).name).toBe('o1')
    expect((await bull.getJob('1')).name).toBe('p')
  })

  it('routes workers and events by prefix', async () => {
    const name = uniqueName('pfx-ev')
    const a = mkQueue({ prefix: 'a' }, name)
    const b = mkQueue({ prefix: 'b' }, name)
    const eventsB = track(new QueueEvents(name, { prefix: 'b' }))
    const added = []
    eventsB.on('added', ({ name: n }) => added.push(n))
    const done = []
    mkWorker(name, (job) => done.push(job.name), { prefix: 'b' })
    await a.add('for-a', {})
    await b.add('for-b', {})
    await waitFor(() => done.length === 1 && added.length === 1)
    await delay(20)
    expect(done).toEqual(['for-b'])
    expect(added).toEqual(['for-b'])
    expect(await a.getWaitingCount()).toBe(1)
  })

  it('refuses a prefix that is not a name', () => {
    expectError(thrown(() => new Queue(uniqueName(), { prefix: '' })), RangeError, 'ERR_INVALID_OPTION', /^prefix /)
    expectError(thrown(() => new Queue(uniqueName(), { prefix: 7 })), TypeError, 'ERR_INVALID_OPTION', /^prefix /)
  })
})

describe('QueueEvents as BullMQ emits them', () => {
  it('emits per-job events as `${event}:${jobId}` and drained with the event id only', async () => {
    const name = uniqueName('perjob')
    const q = mkQueue(undefined, name)
    const events = track(new QueueEvents(name))
    const job = await q.add('x', {}, { jobId: 'order:17' })
    const completed = once(events, `completed:${job.id}`)
    const active = once(events, `active:${job.id}`)
    const drained = once(events, 'drained')
    mkWorker(name, () => 'ok')
    const [payload, id] = await completed
    expect(payload).toEqual({ jobId: 'order:17', returnvalue: 'ok', prev: 'active' })
    expect(typeof id).toBe('string')
    expect((await active)[0].jobId).toBe('order:17')
    const args = await drained
    expect(args).toHaveLength(1)
    expect(typeof args[0]).toBe('string')
  })

  it('run() resolves when closed and refuses a second run', async () => {
    const events = new QueueEvents(uniqueName(), { autorun: false, lastEventId: '$' })
    const running = events.run()
    expect(running).toBeInstanceOf(Promise)
    const again = await rejection(events.run())
    expect(again).toBeInstanceOf(QueueError)
    expect(again.code).toBe('ERR_QUEUE_EVENTS_RUNNING')
    let settled = false
    running.then(() => (settled = true))
    await delay(10)
    expect(settled).toBe(false)
    await events.close()
    await running
    expect((await rejection(events.run())).code).toBe('ERR_QUEUE_CLOSED')
  })
})

describe('Worker as BullMQ 6 behaves', () => {
  it('resume() returns a promise and starts a worker that was not running', async () => {
    const q = mkQueue()
    const done = []
    const w = mkWorker(q.name, (job) => done.push(job.id), { autorun: false })
    await q.add('x', {})
    const r = w.resume()
    expect(r).toBeInstanceOf(Promise)
    await r
    await waitFor(() => done.length === 1)
    expect(w.isRunning()).toBe(true)
    await w.pause()
    const resumed = once(w, 'resumed')
    await w.resume()
    await resumed
    expect(w.isPaused()).toBe(false)
  })

  it('an error with no listener goes to console.error, never dropped', async () => {
    const q = mkQueue()
    const spy = vi.spyOn(console, 'error').mockImplementation(() => {})
    try {
      mkWorker(q.name, () => {
        throw new Error('boom')
      })
      await q.add('x', {}, { attempts: 2, backoff: { type: 'mystery' } })
      await waitFor(() => spy.mock.calls.length > 0)
      const [err] = spy.mock.calls[0]
      expect(err).toBeInstanceOf(QueueError)
      expect(err.code).toBe('ERR_BACKOFF_STRATEGY')
    } finally {
      spy.mockRestore()
    }
  })
})

describe('job ids and attempts', () => {
  it('a custom jobId may contain ":" (only integers are reserved)', async () => {
    const q = mkQueue()
    const job = await q.add('x', { a: 1 }, { jobId: 'user:42:welcome' })
    expect(job.id).toBe('user:42:welcome')
    expect((await q.getJob('user:42:welcome')).data).toEqual({ a: 1 })
    expect((await q.add('x', {}, { jobId: 'user:42:welcome' })).id).toBe('user:42:welcome')
    expect(await q.getWaitingCount()).toBe(1)
    expect(await q.remove('user:42:welcome')).toBe(1)
  })

  it('attemptsMade counts the successful attempt too', async () => {
    const q = mkQueue()
    const w = mkWorker(q.name, () => 'ok')
    const completed = once(w, 'completed')
    const job = await q.add('x', {})
    const [done] = await completed
    expect(done.attemptsMade).toBe(1)
    expect((await q.getJob(job.id)).attemptsMade).toBe(1)
  })
})

describe('custom backoff: settings.backoffStrategy', () => {
  it('is called with (attemptsMade, type, err, job) and its wait is applied', async () => {
    const q = mkQueue()
    const calls = []
    const started = []
    const w = mkWorker(
      q.name,
      (job) => {
        started.push(Date.now())
        if (job.attemptsMade < 2) throw new Error(`fail ${job.attemptsMade}`)
        return 'done'
      },
      {
        settings: {
          backoffStrategy: (attemptsMade, type, err, job) => {
            calls.push([attemptsMade, type, err.message, job.data.k])
            return attemptsMade === 1 ? 80 : Promise.resolve(0)
          },
        },
      },
    )
    const completed = once(w, 'completed')
    const job = await q.add('x', { k: 'v' }, { attempts: 3, backoff: { type: 'linear', delay: 5 } })
    await completed
    expect(calls).toEqual([
      [1, 'linear', 'fail 0', 'v'],
      [2, 'linear', 'fail 1', 'v'],
    ])
    expect(started[1] - started[0]).toBeGreaterThanOrEqual(75)
    expect((await q.getJob(job.id)).attemptsMade).toBe(3)
  })

  it('-1 means no retry; a bad answer or no strategy fails the job for good with an error event', async () => {
    const q = mkQueue()
    const answers = [-1, 'soon', Number.NaN]
    const w = mkWorker(
      q.name,
      () => {
        throw new Error('nope')
      },
      { settings: { backoffStrategy: () => answers.shift() } },
    )
    const errors = []
    w.on('error', (e) => errors.push(e))
    const failed = collect(w, 'failed', 3)
    for (let i = 0; i < 3; i++) await q.add('x', {}, { attempts: 5, backoff: { type: 'custom' } })
    await failed
    await waitFor(async () => (await q.getFailedCount()) === 3)
    expect(errors.map((e) => e.code)).toEqual(['ERR_BACKOFF_STRATEGY', 'ERR_BACKOFF_STRATEGY'])
    expect(errors[0].message).toMatch(/settings\.backoffStrategy must return/)
    for (const j of await q.getFailed()) expect(j.attemptsMade).toBe(1)

    const q2 = mkQueue()
    const w2 = mkWorker(q2.name, () => {
      throw new Error('nope')
    })
    const err = once(w2, 'error')
    await q2.add('x', {}, { attempts: 5, backoff: { type: 'custom' } })
    const [e] = await err
    expect(e.code).toBe('ERR_BACKOFF_STRATEGY')
    expect(e.message).toMatch(/not built in/)
    await waitFor(async () => (await q2.getFailedCount()) === 1)
  })
})

describe('a typed boundary', () => {
  const binding = createRequire(import.meta.url)('../binding.js')
  // These call the binding directly and expect answers at hand; on PostgreSQL every answer is a
  // promise (a round trip), which the JS layer awaits the same way.
  const itEmbedded = itExcept('postgres', 'the binding answers with promises there')

  itEmbedded('the binding throws engine errors built with their class and code (nothing to decode)', async () => {
    const q = mkQueue()
    const h = q._h
    expectError(thrown(() => binding.add(h, 'n', '{}', '{"repeat":{}}', 0)), TypeError, 'ERR_UNSUPPORTED_OPTION', /^repeat /)
    expectError(thrown(() => binding.add(h, 'n', '{}', '{"priority":-1}', 0)), RangeError, 'ERR_INVALID_OPTION', /^priority /)
    const w = mkWorker(q.name, () => new Promise(() => {}))
    const active = once(w, 'active')
    await q.add('held', {})
    await active
    const locked = thrown(() => binding.removeJob(h, '1'))
    expectError(locked, QueueError, 'ERR_JOB_LOCKED', /active/)
    expect(locked.message).not.toMatch(/\u0001/)
  })

  itEmbedded('ack outcomes are a native enum', () => {
    expect(binding.AckOutcome).toMatchObject({ Completed: 0, Retrying: 1, Failed: 2, Stale: 3, Released: 4 })
    const q = mkQueue()
    expect(binding.ack(q._h, '[{"id":"1","token":1,"ok":true}]')).toEqual([binding.AckOutcome.Stale])
  })

  itEmbedded('add answers an automatic id, or a native AddOutcome', () => {
    expect(binding.AddOutcome).toMatchObject({ CustomId: 0, Duplicate: -1 })
    const q = mkQueue()
    expect(binding.add(q._h, 'n', '{}', null, 0)).toBe(1)
    expect(binding.add(q._h, 'n', '{}', '{"jobId":"x"}', 0)).toBe(binding.AddOutcome.CustomId)
    expect(binding.add(q._h, 'n', '{}', '{"jobId":"x"}', 0)).toBe(binding.AddOutcome.Duplicate)
    const codes = binding.addBulk(q._h, '[{"name":"a"},{"name":"b","opts":{"jobId":"x"}}]', 0)
    expect([...codes]).toEqual([2, binding.AddOutcome.Duplicate])
  })
})
