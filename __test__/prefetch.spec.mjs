// A Worker's `prefetch`: jobs claimed beyond its free slots. They count as active, start in claim
// order as slots free (the Worker's `active` fires then), and pause() / close() give back those
// not started, without counting a start. Runs on every backend; left out, prefetch adapts on
// PostgreSQL and is 0 on the embedded engine, and a worker of long jobs holds none back.
import { describe, it, expect, afterEach } from 'vitest'
import { Queue, Worker, QueueEvents } from '../index.mjs'
import { uniqueName, delay, waitFor, gate, openTracker } from './helpers.mjs'
import { Prefetch } from '../lib/prefetch.js'

const { track } = openTracker('p', { Queue, Worker, QueueEvents }, afterEach)

/** A queue with jobs i = 1..n, and a processor that holds job 1 until `held.open()`. */
async function setup(prefix, n) {
  const name = uniqueName(prefix)
  const queue = track(new Queue(name))
  await queue.addBulk(Array.from({ length: n }, (_, k) => ({ name: 'j', data: { i: k + 1 } })))
  const held = gate()
  const ran = []
  const processor = async (job) => {
    ran.push(job.data.i)
    if (job.data.i === 1) await held.p
    return job.data.i
  }
  return { name, queue, held, ran, processor }
}

const activeCount = (queue) => queue.getJobCounts('active').then((c) => c.active)

/**
 * Waits until `worker` runs job 1 and holds `held` more: the database counts a claim's jobs
 * active before its answer reaches the worker, so the count alone is not enough.
 */
async function holding(worker, queue, ran, held) {
  await waitFor(async () => ran.length === 1 && worker._held === held && (await activeCount(queue)) === held + 1)
}

/** Resolves once `worker` has completed `n` more jobs. */
function completions(worker, n) {
  return new Promise((resolve) => {
    let seen = 0
    worker.on('completed', () => ++seen === n && resolve())
  })
}

describe('Worker prefetch', () => {
  it('holds claimed jobs beyond its slots and starts them in order as slots free', async () => {
    const { name, queue, held, ran, processor } = await setup('pf-order', 5)
    const worker = track(new Worker(name, processor, { concurrency: 1, prefetch: 2 }))
    const started = []
    worker.on('active', (job) => started.push(job.data.i))
    await holding(worker, queue, ran, 2)
    expect(ran).toEqual([1])
    expect(started).toEqual([1])
    const done = completions(worker, 5)
    held.open()
    await done
    expect(ran).toEqual([1, 2, 3, 4, 5])
    expect(started).toEqual([1, 2, 3, 4, 5])
    const jobs = await queue.getJobs(['completed'])
    expect(jobs.map((j) => j.attemptsStarted)).toEqual([1, 1, 1, 1, 1])
  })

  it('pause() gives back the jobs not started, in order, without counting a start', async () => {
    const { name, queue, held, ran, processor } = await setup('pf-pause', 4)
    const worker = track(new Worker(name, processor, { concurrency: 1, prefetch: 3 }))
    await holding(worker, queue, ran, 3)
    const paused = worker.pause()
    held.open()
    await paused
    await waitFor(async () => (await queue.getJobCounts('waiting')).waiting === 3)
    expect(await queue.getJobCounts('active', 'completed')).toEqual({ active: 0, completed: 1 })
    const waiting = await queue.getWaiting()
    expect(waiting.map((j) => j.data.i)).toEqual([2, 3, 4])
    expect(waiting.map((j) => j.attemptsStarted)).toEqual([0, 0, 0])
    expect(ran).toEqual([1])
    const done = completions(worker, 3)
    worker.resume()
    await done
    expect(ran).toEqual([1, 2, 3, 4])
    const jobs = await queue.getJobs(['completed'])
    expect(jobs.map((j) => j.attemptsStarted)).toEqual([1, 1, 1, 1])
  })

  it('close() gives back the jobs not started; another worker runs them', async () => {
    const { name, queue, held, ran, processor } = await setup('pf-close', 3)
    const worker = new Worker(name, processor, { concurrency: 1, prefetch: 5 })
    await holding(worker, queue, ran, 2)
    const closed = worker.close()
    held.open()
    await closed
    expect(ran).toEqual([1])
    const waiting = await queue.getWaiting()
    expect(waiting.map((j) => [j.data.i, j.attemptsStarted])).toEqual([
      [2, 0],
      [3, 0],
    ])
    const next = track(new Worker(name, async (job) => job.data.i, { prefetch: 0 }))
    await new Promise((resolve) => next.on('completed', (job) => job.data.i === 3 && resolve()))
    expect(await queue.getJobCounts('completed', 'waiting', 'active')).toEqual({ completed: 3, waiting: 0, active: 0 })
  })

  it('left out, a worker of long jobs holds none back from other workers', async () => {
    // A job claimed ahead would wait in the worker for a slot, a whole job's time (100 ms);
    // `processedOn` is set by the claim, so the wait shows when its processor starts.
    const name = uniqueName('pf-long')
    const queue = track(new Queue(name))
    await queue.addBulk(Array.from({ length: 12 }, (_, i) => ({ name: 'j', data: { i } })))
    const waits = []
    const worker = track(
      new Worker(
        name,
        (job) => {
          waits.push(Date.now() - job.processedOn)
          return delay(100)
        },
        { concurrency: 2 },
      ),
    )
    await completions(worker, 12)
    expect(waits.length).toBe(12)
    expect(Math.max(...waits)).toBeLessThan(50)
  })
})

describe('Prefetch (the adaptive size)', () => {
  /** Claims every `every` ms, each taking `latency` ms, with `perClaim` jobs started between. */
  function run(p, { claims, every, latency, perClaim, concurrency = 50 }) {
    let now = 1000
    for (let i = 0; i < claims; i++) {
      p.starts += perClaim
      now += every
      p.adapt(typeof latency === 'function' ? latency(i) : latency, concurrency, now)
    }
    return p.size
  }

  it('is the option when given, and 0 on an engine of this process', () => {
    expect(run(new Prefetch(7, true), { claims: 20, every: 1, latency: 2, perClaim: 50 })).toBe(7)
    expect(run(new Prefetch(undefined, false), { claims: 20, every: 1, latency: 2, perClaim: 50 })).toBe(0)
  })

  it('holds none back for long jobs, and grows for short ones up to 8 × concurrency', () => {
    // 2 jobs every 100 ms, 1 ms round trips: nothing is worth holding.
    expect(run(new Prefetch(undefined, true), { claims: 20, every: 100, latency: 1, perClaim: 2 })).toBe(0)
    // 50 jobs every 2 ms (25 a ms), 2 ms round trips: 2 × 25 × 2 = 100.
    expect(run(new Prefetch(undefined, true), { claims: 40, every: 2, latency: 2, perClaim: 50 })).toBe(100)
    expect(run(new Prefetch(undefined, true), { claims: 40, every: 2, latency: 2, perClaim: 50, concurrency: 5 })).toBe(40)
  })

  it('one slow claim does not make a worker of long jobs hoard', () => {
    // 2 jobs every 40 ms; every tenth claim takes 500 ms (a new connection, a busy server).
    const latency = (i) => (i % 10 === 9 ? 500 : 1)
    expect(run(new Prefetch(undefined, true), { claims: 30, every: 40, latency, perClaim: 2 })).toBe(0)
    const sizes = []
    const p = new Prefetch(undefined, true)
    for (let i = 0; i < 30; i++) sizes.push(run(p, { claims: 1, every: 40, latency: latency(i), perClaim: 2 }))
    expect(Math.max(...sizes)).toBe(0)
  })
})
