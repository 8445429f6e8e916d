import { describe, it, expect, afterEach } from 'vitest'
import { Queue, Worker, QueueEvents, UnrecoverableError } from '../index.mjs'
import { uniqueName, delay, waitFor, once, collect, openTracker } from './helpers.mjs'

const { track } = openTracker('t', { Queue, Worker, QueueEvents }, afterEach)

function setup(prefix) {
  const name = uniqueName(prefix)
  return { name, queue: track(new Queue(name)) }
}

describe('Worker', () => {
  it('processes jobs and reports the return value', async () => {
    const { name, queue } = setup('w-basic')
    await queue.add('double', { n: 21 })
    const worker = track(new Worker(name, async (job) => job.data.n * 2))
    const [job, result, prev] = await once(worker, 'completed')
    expect(result).toBe(42)
    expect(prev).toBe('active')
    expect(job.returnvalue).toBe(42)
    expect(job.finishedOn).toBeGreaterThan(0)
    const stored = await queue.getJob(job.id)
    expect(stored.returnvalue).toBe(42)
    expect(await queue.getJobState(job.id)).toBe('completed')
  })

  it('passes a token and an AbortSignal to a processor that declares them', async () => {
    const { name, queue } = setup('w-args')
    await queue.add('x', {})
    let seen
    const worker = track(
      new Worker(name, async (job, token, signal) => {
        seen = { token, aborted: signal.aborted, isSignal: signal instanceof AbortSignal }
      }),
    )
    await once(worker, 'completed')
    expect(typeof seen.token).toBe('string')
    expect(seen.isSignal).toBe(true)
    expect(seen.aborted).toBe(false)
  })

  it('never runs more than `concurrency` jobs at once', async () => {
    const { name, queue } = setup('w-conc')
    await queue.addBulk(Array.from({ length: 40 }, (_, i) => ({ name: 'j', data: { i } })))
    let running = 0
    let peak = 0
    const worker = track(
      new Worker(
        name,
        async () => {
          running++
          peak = Math.max(peak, running)
          await delay(5)
          running--
        },
        { concurrency: 4 },
      ),
    )
    await collect(worker, 'completed', 40, 10_000)
    expect(peak).toBe(4)
    const counts = await queue.getJobCounts('completed', 'active', 'waiting')
    expect(counts).toEqual({ completed: 40, active: 0, waiting: 0 })
  })

  it('retries with a fixed backoff, emitting failed for each attempt', async () => {
    const { name, queue } = setup('w-fixed')
    const job = await queue.add('flaky', {}, { attempts: 3, backoff: { type: 'fixed', delay: 60 } })
    const times = []
    const worker = track(
      new Worker(name, async (j) => {
        times.push(Date.now())
        if (j.attemptsMade < 2) throw new Error(`fail ${j.attemptsMade}`)
        return 'ok'
      }),
    )
    const failures = []
    worker.on('failed', (j, err) => failures.push([j.attemptsMade, err.message]))
    const [, result] = await once(worker, 'completed', 5000)
    expect(result).toBe('ok')
    expect(failures).toEqual([
      [1, 'fail 0'],
      [2, 'fail 1'],
    ])
    expect(times).toHaveLength(3)
    expect(times[1] - times[0]).toBeGreaterThanOrEqual(55)
    expect(times[2] - times[1]).toBeGreaterThanOrEqual(55)
    const stored = await queue.getJob(job.id)
    expect(stored.attemptsMade).toBe(3) // two failures and the success, as BullMQ 6 counts
    expect(stored.attemptsStarted).toBe(3)
  })

  it('retries with an exponential backoff: delay * 2^(attemptsMade-1)', async () => {
    const { name, queue } = setup('w-exp')
    await queue.add('flaky', {}, { attempts: 3, backoff: { type: 'exponential', delay: 50 } })
    const times = []
    const worker = track(
      new Worker(name, async () => {
        times.push(Date.now())
        throw new Error('always')
      }),
    )
    const [job, err] = await once(worker, 'failed')
    expect(err.message).toBe('always')
    expect(job.attemptsMade).toBe(1)
    expect(await queue.getJobState(job.id)).toBe('delayed')
    await waitFor(async () => (await queue.getJobState(job.id)) === 'failed', 5000)
    expect(times).toHaveLength(3)
    // first retry waits 50 ms, the second 100 ms
    expect(times[1] - times[0]).toBeGreaterThanOrEqual(45)
    expect(times[2] - times[1]).toBeGreaterThanOrEqual(95)
    const stored = await queue.getJob(job.id)
    expect(stored.failedReason).toBe('always')
    expect(stored.attemptsMade).toBe(3)
    expect(stored.stacktrace.length).toBe(3)
  })

  it('retries without backoff go straight back to waiting', async () => {
    const { name, queue } = setup('w-nobackoff')
    await queue.add('flaky', {}, { attempts: 2 })
    const worker = track(
      new Worker(name, async (j) => {
        if (j.attemptsMade === 0) throw new Error('once')
        return j.attemptsMade
      }),
    )
    const [, result] = await once(worker, 'completed')
    expect(result).toBe(1)
  })

  it('UnrecoverableError fails at once whatever attempts remain', async () => {
    const { name, queue } = setup('w-unrec')
    const job = await queue.add('x', {}, { attempts: 5, backoff: 10 })
    let calls = 0
    const worker = track(
      new Worker(name, async () => {
        calls++
        throw new UnrecoverableError('give up')
      }),
    )
    const [, err] = await once(worker, 'failed')
    expect(err).toBeInstanceOf(UnrecoverableError)
    await delay(60)
    expect(calls).toBe(1)
    expect(await queue.getJobState(job.id)).toBe('failed')
    expect((await queue.getJob(job.id)).failedReason).toBe('give up')
  })

  it('a non-serialisable return value fails the job with a readable reason', async () => {
    const { name, queue } = setup('w-badret')
    const job = await queue.add('x', {})
    const worker = track(
      new Worker(name, async () => {
        const a = {}
        a.self = a
        return a
      }),
    )
    const [, err] = await once(worker, 'failed')
    expect(err.message).toMatch(/returnvalue is not JSON-serialisable/)
    expect(await queue.getJobState(job.id)).toBe('failed')
  })

  it('a synchronous processor and a throwing one both work', async () => {
    const { name, queue } = setup('w-sync')
    await queue.add('ok', { v: 1 })
    await queue.add('bad', { v: 2 })
    const worker = track(
      new Worker(name, (job) => {
        if (job.name === 'bad') throw new Error('sync throw')
        return job.data.v
      }),
    )
    const failed = once(worker, 'failed')
    const [, result] = await once(worker, 'completed')
    expect(result).toBe(1)
    expect((await failed)[1].message).toBe('sync throw')
  })

  it('emits active and progress with the job', async () => {
    const { name, queue } = setup('w-progress')
    const added = await queue.add('p', {})
    const worker = track(
      new Worker(name, async (job) => {
        await job.updateProgress(50)
        await job.updateProgress({ step: 'done' })
      }),
    )
    const active = once(worker, 'active')
    const progress = collect(worker, 'progress', 2)
    const [job, prev] = await active
    expect(job.id).toBe(added.id)
    expect(prev).toBe('waiting')
    const got = await progress
    expect(got.map(([, p]) => p)).toEqual([50, { step: 'done' }])
    await once(worker, 'completed')
    expect((await queue.getJob(added.id)).progress).toEqual({ step: 'done' })
  })

  it('hands the processor string ids, automatic and custom', async () => {
    const { name, queue } = setup('w-ids')
    const auto = await queue.add('a', {})
    await queue.add('c', {}, { jobId: 'order-42' })
    const seen = []
    const worker = track(new Worker(name, async (job) => void seen.push(job.id)))
    await collect(worker, 'completed', 2)
    expect(seen).toEqual([auto.id, 'order-42'])
    expect(seen.map((id) => typeof id)).toEqual(['string', 'string'])
  })

  it('delivers non-ASCII data and names intact to the processor, getters and events', async () => {
    const { name, queue } = setup('w-unicode')
    const events = track(new QueueEvents(name))
    await events.waitUntilReady()
    const data = { s: 'héllo ✓ 😀 日本', esc: 'tab\tquote"', plain: 'ascii' }
    const seen = []
    const ascii = await queue.add('ascii', { plain: 'only' })
    const added = await queue.add('名前', data)
    const completed = collect(events, 'completed', 2)
    const worker = track(new Worker(name, async (job) => {
      seen.push([job.name, job.data])
      return job.data.s ?? 'none'
    }))
    await collect(worker, 'completed', 2)
    expect(seen).toEqual([['ascii', { plain: 'only' }], ['名前', data]])
    const done = await queue.getJobs(['completed'], 0, -1, true)
    expect(done.map((j) => [j.name, j.data, j.returnvalue])).toEqual([
      ['ascii', { plain: 'only' }, 'none'],
      ['名前', data, data.s],
    ])
    const evs = await completed
    expect(evs.map(([e]) => [e.jobId, e.returnvalue])).toEqual([[ascii.id, 'none'], [added.id, data.s]])
  })

  it('keeps U+0000 and U+0001 in names, data, failure reasons, stack traces and logs', async () => {
    // PostgreSQL's text cannot hold U+0000; its backend must still store these exactly.
    const { name, queue } = setup('w-nul')
    const events = track(new QueueEvents(name))
    await events.waitUntilReady()
    const odd = 'a\u0000b\u0001c'
    const failedEvent = once(events, 'failed')
    const added = await queue.add(`\u0001${odd}`, { s: odd })
    const worker = track(new Worker(name, async (job) => {
      await job.log(odd)
      await job.log('\u0001\u0000')
      throw new Error(odd)
    }))
    const [job, err] = await once(worker, 'failed')
    expect([job.name, job.data.s, err.message]).toEqual([`\u0001${odd}`, odd, odd])
    const stored = await queue.getJob(added.id)
    expect([stored.name, stored.data.s, stored.failedReason]).toEqual([`\u0001${odd}`, odd, odd])
    expect(stored.stacktrace[0]).toContain(odd)
    expect(await queue.getJobLogs(added.id)).toEqual({ logs: [odd, '\u0001\u0000'], count: 2 })
    const [ev] = await failedEvent
    expect(ev).toMatchObject({ jobId: added.id, failedReason: odd })
    // Ids are not free text: a custom id with U+0000 is refused on every backend, and looked up,
    // matches nothing.
    await expect(queue.add('x', {}, { jobId: 'a\u0000' })).rejects.toMatchObject({ code: 'ERR_INVALID_OPTION' })
    expect(await queue.getJob('a\u0000')).toBeUndefined()
    expect(await queue.remove('a\u0000')).toBe(0)
  })

  it('emits drained once the queue is empty after work', async () => {
    const { name, queue } = setup('w-drained')
    await queue.addBulk([1, 2, 3].map((i) => ({ name: 'j', data: { i } })))
    let completed = 0
    const worker = track(new Worker(name, async () => {}, { concurrency: 2 }))
    worker.on('completed', () => completed++)
    await once(worker, 'drained')
    expect(completed).toBe(3)
    // more work, another drained
    await queue.add('j', {})
    await once(worker, 'drained')
    expect(completed).toBe(4)
  })

  it('pause stops taking jobs and resume continues', async () => {
    const { name, queue } = setup('w-pause')
    const worker = track(new Worker(name, async (job) => job.data.i))
    await worker.pause()
    expect(worker.isPaused()).toBe(true)
    await queue.add('j', { i: 1 })
    await delay(80)
    expect(await queue.getJobCounts('waiting', 'completed')).toEqual({ waiting: 1, completed: 0 })
    const done = once(worker, 'completed')
    worker.resume()
    expect(worker.isPaused()).toBe(false)
    expect((await done)[1]).toBe(1)
  })

  it('autorun false waits for run(); run twice rejects', async () => {
    const { name, queue } = setup('w-autorun')
    await queue.add('j', {})
    const worker = track(new Worker(name, async () => 'x', { autorun: false }))
    await delay(50)
    expect(await queue.getJobCounts('waiting')).toEqual({ waiting: 1 })
    expect(worker.isRunning()).toBe(false)
    const completed = once(worker, 'completed')
    const running = worker.run()
    expect(worker.isRunning()).toBe(true)
    await expect(worker.run()).rejects.toMatchObject({ code: 'ERR_WORKER_RUNNING' })
    await completed
    await worker.close()
    await running
    expect(worker.isRunning()).toBe(false)
  })

  it('close() waits for active jobs to finish', async () => {
    const { name, queue } = setup('w-close')
    const job = await queue.add('slow', {})
    let finished = false
    const worker = new Worker(name, async (j) => {
      await delay(120)
      await j.updateProgress(100) // the job stays usable while its worker closes
      await j.log('finishing')
      finished = true
      return 'done'
    })
    await once(worker, 'active')
    const closed = once(worker, 'closed')
    await worker.close()
    expect(finished).toBe(true)
    await closed
    expect(await queue.getJobState(job.id)).toBe('completed')
    expect((await queue.getJob(job.id)).progress).toBe(100)
  })

  it('close() does not return while a job it pulled at that moment still runs', async () => {
    const { name, queue } = setup('w-close-race')
    let running = 0
    const worker = new Worker(name, async () => {
      running++
      await delay(30)
      running--
      return 'ok'
    })
    await delay(20) // the worker is parked in its long-poll
    const job = await queue.add('x', {})
    await worker.close()
    expect(running).toBe(0)
    expect(['completed', 'waiting']).toContain(await queue.getJobState(job.id))
  })

  it('close(true) returns at once, aborts the signal and puts the job back to waiting', async () => {
    const { name, queue } = setup('w-force')
    const job = await queue.add('slow', {})
    let aborted = false
    const worker = new Worker(name, async (_job, _token, signal) => {
      signal.addEventListener('abort', () => (aborted = true))
      await delay(300)
      return 'late'
    })
    await once(worker, 'active')
    const t = Date.now()
    await worker.close(true)
    expect(Date.now() - t).toBeLessThan(200)
    expect(aborted).toBe(true)
    expect(await queue.getJobState(job.id)).toBe('waiting')
    // another worker picks it up; the first worker's late ack is ignored
    const next = track(new Worker(name, async () => 'second'))
    const [, result] = await once(next, 'completed')
    expect(result).toBe('second')
    await delay(350)
    expect((await queue.getJob(job.id)).returnvalue).toBe('second')
  })

  it('a throwing event listener goes to error and the worker keeps going', async () => {
    const { name, queue } = setup('w-throwing-listener')
    const worker = track(new Worker(name, async (job) => job.data.i))
    const errors = []
    worker.on('error', (e) => errors.push(e.message))
    const all = collect(worker, 'completed', 3)
    worker.on('completed', (job) => {
      if (job.data.i === 1) throw new Error('listener bug')
    })
    await queue.addBulk([1, 2, 3].map((i) => ({ name: 'j', data: { i } })))
    await all
    expect(errors).toEqual(['listener bug'])
    expect(await queue.getJobCounts('completed', 'active')).toEqual({ completed: 3, active: 0 })
  })

  it('two workers share a queue without processing a job twice', async () => {
    const { name, queue } = setup('w-two')
    const n = 500
    await queue.addBulk(Array.from({ length: n }, (_, i) => ({ name: 'j', data: { i } })))
    const seen = new Map()
    const mk = (tag) =>
      track(
        new Worker(
          name,
          async (job) => {
            seen.set(job.id, (seen.get(job.id) || 0) + 1)
            if (job.data.i % 7 === 0) await delay(1)
            return tag
          },
          { concurrency: 8 },
        ),
      )
    const a = mk('a')
    const b = mk('b')
    let done = 0
    await new Promise((resolve) => {
      const on = () => ++done === n && resolve()
      a.on('completed', on)
      b.on('completed', on)
    })
    expect(seen.size).toBe(n)
    expect([...seen.values()].every((c) => c === 1)).toBe(true)
  })
})

describe('Worker lifecycle events and job fields', () => {
  it('emits ready once created, and closing before closed', async () => {
    const { name, queue } = setup('w-events')
    const worker = new Worker(name, async (job) => job.queueName)
    const seen = []
    worker.on('ready', () => seen.push('ready'))
    worker.on('closing', (msg) => seen.push(`closing: ${msg}`))
    worker.on('closed', () => seen.push('closed'))
    await waitFor(() => seen.includes('ready'))
    await queue.add('x', {})
    const [job, value] = await once(worker, 'completed')
    expect([job.queueName, value]).toEqual([name, name])
    await worker.close()
    expect(seen).toEqual(['ready', 'closing: closing worker', 'closed'])
    expect((await queue.getJob(job.id)).queueName).toBe(name)
  })

  it("a Worker's name is each job's processedBy, kept when it finishes; a Worker without one sets none", async () => {
    const { name, queue } = setup('w-named')
    expect(() => new Worker(name, () => {}, { name: 5, autorun: false })).toThrow(/^name \(worker name\) must be a string/)
    const seenInside = []
    const named = track(new Worker(name, async (job) => seenInside.push(job.processedBy), { name: 'mailer-1' }))
    const first = await queue.add('a', {})
    await once(named, 'completed')
    await named.close()
    const plain = track(new Worker(name, async (job) => seenInside.push(job.processedBy)))
    const second = await queue.add('b', {})
    await once(plain, 'completed')
    expect(seenInside).toEqual(['mailer-1', undefined])
    expect((await queue.getJob(first.id)).processedBy).toBe('mailer-1')
    expect((await queue.getJob(second.id)).processedBy).toBeUndefined()
  })
})
