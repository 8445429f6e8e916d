// Flow limits: a rate limit shared by every worker of a queue (the Worker's `limiter`, or the
// queue's own, setGlobalRateLimit), a cap on active jobs across workers (setGlobalConcurrency),
// and the manual hold (rateLimit(ms) + Worker.RateLimitError()). Runs on every backend.
import { describe, it, expect, afterEach, beforeAll, afterAll } from 'vitest'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Queue, Worker, QueueEvents, RateLimitError } from '../index.mjs'
import { uniqueName, delay, waitFor, rejection, openTracker, itExcept } from './helpers.mjs'

const { track, mkQueue, mkWorker } = openTracker('lim', { Queue, Worker, QueueEvents }, afterEach)

async function filled(n, prefix) {
  const queue = mkQueue(undefined, uniqueName(prefix))
  await queue.addBulk(Array.from({ length: n }, (_, i) => ({ name: 'j', data: { i } })))
  return queue
}

/** Resolves once `n` jobs completed over all `workers`. */
function completions(workers, n) {
  let seen = 0
  return new Promise((resolve) => {
    for (const w of workers) w.on('completed', () => ++seen === n && resolve())
  })
}

/**
 * The token bucket's promise: over any span of `t` ms from one start, at most
 * `max + max * t / duration` jobs start. `slack` ms: starts are seen in the processor, after the
 * pull's answer crosses back to JS, so under load (CI runs test files in parallel on 2 cores) one
 * start can be seen tens of ms late, making a span look shorter than the engine's (seen: 39
 * starts in 3,385 ms against a bound of 38 with 15 ms). A limiter off by even one token per
 * window still fails this.
 */
function assertWithinBucket(starts, max, duration, slack = 60) {
  starts.sort((a, b) => a - b)
  for (let i = 0; i < starts.length; i++) {
    for (let j = i; j < starts.length; j++) {
      const span = Math.max(0, starts[j] - starts[i] + slack)
      const allowed = max + Math.floor((max * span) / duration)
      if (j - i + 1 > allowed) throw new Error(`${j - i + 1} starts within ${starts[j] - starts[i]} ms: more than ${allowed}`)
    }
  }
}

describe('rate limit', () => {
  it('max 5 per 500 ms holds over 50 jobs across two workers', async () => {
    const queue = await filled(50, 'rate')
    const starts = []
    const limiter = { max: 5, duration: 500 }
    const processor = async () => {
      starts.push(performance.now())
    }
    const workers = [
      mkWorker(queue.name, processor, { concurrency: 10, limiter }),
      mkWorker(queue.name, processor, { concurrency: 10, limiter }),
    ]
    const t0 = performance.now()
    await completions(workers, 50)
    const took = performance.now() - t0
    expect(starts.length).toBe(50)
    assertWithinBucket(starts, 5, 500)
    // A full bucket of 5, then one job every 100 ms: 45 more take 4.5 s.
    expect(took).toBeGreaterThan(4_400)
    expect(took).toBeLessThan(7_000)
  }, 15_000)

  it("a queue's own rate limit overrides the workers' limiter, and can be read and removed", async () => {
    const queue = await filled(14, 'global-rate')
    expect(await queue.getGlobalRateLimit()).toBe(null)
    await queue.setGlobalRateLimit(2, 200)
    expect(await queue.getGlobalRateLimit()).toEqual({ max: 2, duration: 200 })
    const starts = []
    const w = mkWorker(queue.name, async () => starts.push(performance.now()), { concurrency: 5, limiter: { max: 1000, duration: 1000 } })
    await waitFor(() => starts.length >= 6)
    assertWithinBucket(starts, 2, 200)
    await queue.removeGlobalRateLimit()
    expect(await queue.getGlobalRateLimit()).toBe(null)
    // The worker's own limiter (1,000 per second) applies again: the rest go at once.
    const at = performance.now()
    await waitFor(() => starts.length === 14)
    expect(performance.now() - at).toBeLessThan(150)
    await w.close()
  })

  it("a worker waiting for tokens is not drained: 'drained' comes once, when the queue is empty", async () => {
    const queue = await filled(6, 'drained')
    const done = []
    let drained = 0
    const w = mkWorker(queue.name, async (job) => done.push(job.id), { concurrency: 1, limiter: { max: 2, duration: 200 } })
    w.on('drained', () => drained++)
    await waitFor(() => done.length === 6)
    await waitFor(() => drained === 1)
    await delay(100)
    expect(drained).toBe(1)
  })

  it('getRateLimitTtl says how long an emptied bucket takes to give the next token', async () => {
    const queue = await filled(3, 'ttl')
    expect(await queue.getRateLimitTtl()).toBe(0)
    await queue.setGlobalRateLimit(1, 1_000)
    const done = []
    mkWorker(queue.name, async (job) => done.push(job.id), { concurrency: 3 })
    await waitFor(() => done.length === 1)
    const ttl = await queue.getRateLimitTtl()
    expect(ttl).toBeGreaterThan(800)
    expect(ttl).toBeLessThanOrEqual(1_000)
    await delay(50)
    expect(done.length).toBe(1)
  })
})

describe('global concurrency', () => {
  it('3 across three workers of concurrency 10 never exceeds 3 active', async () => {
    const queue = await filled(45, 'gconc')
    await queue.setGlobalConcurrency(3)
    expect(await queue.getGlobalConcurrency()).toBe(3)
    let running = 0
    let most = 0
    const processor = async () => {
      running++
      most = Math.max(most, running)
      await delay(15)
      running--
    }
    const workers = [0, 1, 2].map(() => mkWorker(queue.name, processor, { concurrency: 10 }))
    const sampled = []
    const sampling = (async () => {
      while (sampled.length < 1_000) {
        sampled.push((await queue.getJobCounts('active')).active)
        if (running === 0 && (await queue.count()) === 0) break
        await delay(5)
      }
    })()
    await completions(workers, 45)
    await sampling
    expect(most).toBe(3)
    expect(Math.max(...sampled)).toBeLessThanOrEqual(3)
    await queue.removeGlobalConcurrency()
    expect(await queue.getGlobalConcurrency()).toBe(null)
  })

  it('raising the cap lets waiting workers start more at once', async () => {
    const queue = await filled(6, 'graise')
    await queue.setGlobalConcurrency(1)
    let running = 0
    let most = 0
    const release = []
    mkWorker(
      queue.name,
      async () => {
        running++
        most = Math.max(most, running)
        await new Promise((r) => release.push(r))
        running--
      },
      { concurrency: 10 },
    )
    await waitFor(() => running === 1)
    await delay(50)
    expect(running).toBe(1)
    await queue.setGlobalConcurrency(4)
    await waitFor(() => running === 4)
    for (let k = 0; k < 20; k++) {
      for (const r of release.splice(0)) r()
      if (running === 0 && (await queue.count()) === 0) break
      await delay(10)
    }
    expect(most).toBe(4)
  })
})

describe('manual rate limit', () => {
  it('rateLimit(ms) then Worker.RateLimitError() puts the job back without spending an attempt', async () => {
    const queue = await filled(2, 'manual')
    const runs = []
    const failed = []
    let worker
    worker = mkWorker(
      queue.name,
      async (job) => {
        runs.push([job.id, performance.now()])
        if (runs.length === 1) {
          await worker.rateLimit(300)
          throw Worker.RateLimitError()
        }
      },
      { concurrency: 1 },
    )
    worker.on('failed', (job) => failed.push(job.id))
    await waitFor(() => runs.length === 3)
    const [first, again, next] = runs
    expect(again[0]).toBe(first[0])
    expect(next[0]).not.toBe(first[0])
    expect(again[1] - first[1]).toBeGreaterThanOrEqual(290)
    expect(failed).toEqual([])
    await waitFor(async () => (await queue.getJobCounts('completed')).completed === 2)
    const job = await queue.getJob(first[0])
    expect(job.attemptsMade).toBe(1)
    expect(job.attemptsStarted).toBe(2)
    expect(Worker.RateLimitError()).toBeInstanceOf(RateLimitError)
    expect(Worker.RateLimitError().message).toBe('bullmq:rateLimitExceeded')
  })

  it('queue.rateLimit(ms) holds every worker and getRateLimitTtl counts it down', async () => {
    const queue = mkQueue()
    await queue.rateLimit(250)
    const ttl = await queue.getRateLimitTtl()
    expect(ttl).toBeGreaterThan(150)
    expect(ttl).toBeLessThanOrEqual(250)
    await queue.add('j', {})
    const t0 = performance.now()
    const done = []
    mkWorker(queue.name, async () => done.push(performance.now() - t0))
    await waitFor(() => done.length === 1)
    expect(done[0]).toBeGreaterThan(100)
    await queue.rateLimit(0)
    expect(await queue.getRateLimitTtl()).toBe(0)
  })
})

describe('limits: bad input', () => {
  it('refuses a bad limiter, naming it', () => {
    const name = uniqueName('bad')
    const cases = [
      [{ max: 0, duration: 1000 }, RangeError, /^limiter\.max must be an integer in 1\.\.=4294967295/],
      [{ max: 5 }, TypeError, /^limiter\.duration must be a number/],
      [{ max: 5, duration: 1.5 }, RangeError, /^limiter\.duration/],
      [{ max: 5, duration: 100, groupKey: 'customer' }, TypeError, /^limiter\.groupKey is not an option/],
      ['5/s', TypeError, /^limiter must be \{ max, duration \}/],
    ]
    for (const [limiter, cls, message] of cases) {
      let err
      try {
        new Worker(name, async () => {}, { limiter, autorun: false })
      } catch (e) {
        err = e
      }
      expect(err).toBeInstanceOf(cls)
      expect(err.code).toBe('ERR_INVALID_OPTION')
      expect(err.message).toMatch(message)
    }
  })

  it('refuses bad global limits, naming the argument', async () => {
    const queue = mkQueue()
    for (const [p, message] of [
      [queue.setGlobalRateLimit(0, 1000), /^max must be an integer in 1/],
      [queue.setGlobalRateLimit(5, -1), /^duration must be an integer in 1/],
      [queue.setGlobalRateLimit(5), /^duration must be a number/],
      [queue.setGlobalConcurrency(0), /^concurrency must be an integer in 1/],
      [queue.setGlobalConcurrency(2.5), /^concurrency must be an integer in 1/],
      [queue.rateLimit(-5), /^expireTimeMs must be an integer in 0/],
    ]) {
      const e = await rejection(p)
      expect(e.code).toBe('ERR_INVALID_OPTION')
      expect(e.message).toMatch(message)
    }
    expect(await queue.getGlobalConcurrency()).toBe(null)
  })
})

describe('limits on a durable queue', () => {
  let dir
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'ferroqueue-limits-'))
  })
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  itExcept('postgres', 'the SQLite file is the embedded engine; PostgreSQL keeps limits in its queues table, tested above')(
    'keeps the rate limit and the cap on active jobs across a restart',
    async () => {
      const dataPath = join(dir, 'limits.db')
      const name = uniqueName('durable')
      const q = new Queue(name, { dataPath })
      await q.setGlobalRateLimit(7, 1_500)
      await q.setGlobalConcurrency(3)
      await q.close()
      const again = track(new Queue(name, { dataPath }))
      expect(await again.getGlobalRateLimit()).toEqual({ max: 7, duration: 1_500 })
      expect(await again.getGlobalConcurrency()).toBe(3)
    },
  )
})
