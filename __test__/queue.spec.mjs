// Queue: adding jobs, ids, reads, ordering, counts, pause/resume, drain, clean, obliterate,
// remove and close. BullMQ semantics; ids are strings, auto ids "1", "2", ... per queue.
import { describe, it, expect, afterEach } from 'vitest'
import { Queue, Worker, QueueEvents, Job, QueueError } from '../index.mjs'
import { uniqueName, delay, waitFor, once, collect, openTracker, gate, rejection, ids, names } from './helpers.mjs'

// Everything opened by a test, closed after it (workers with force, so a held job cannot block).
const { track, mkQueue, mkWorker, mkEvents } = openTracker('queue', { Queue, Worker, QueueEvents }, afterEach)


const ZERO_COUNTS = {
  waiting: 0,
  active: 0,
  completed: 0,
  failed: 0,
  delayed: 0,
  prioritized: 0,
  'waiting-children': 0,
  paused: 0,
}

describe('Queue.add', () => {
  it('returns a Job with id, name, data, opts and timestamp', async () => {
    const q = mkQueue()
    const before = Date.now()
    const job = await q.add('send', { to: 'a@b.c', n: [1, 2] }, { attempts: 2 })
    const after = Date.now()
    expect(job).toBeInstanceOf(Job)
    expect(job.id).toBe('1')
    expect(job.name).toBe('send')
    expect(job.data).toEqual({ to: 'a@b.c', n: [1, 2] })
    expect(job.opts).toEqual({ attempts: 2 })
    expect(typeof job.timestamp).toBe('number')
    expect(job.timestamp).toBeGreaterThanOrEqual(before)
    expect(job.timestamp).toBeLessThanOrEqual(after)
    expect(job.queue).toBe(q)
  })

  it('gives auto ids "1", "2", ... per queue, independently for each queue', async () => {
    const a = mkQueue()
    const b = mkQueue()
    expect((await a.add('x', {})).id).toBe('1')
    expect((await a.add('x', {})).id).toBe('2')
    expect((await b.add('x', {})).id).toBe('1')
    expect((await a.add('x', {})).id).toBe('3')
    expect((await b.add('x', {})).id).toBe('2')
    expect(await a.count()).toBe(3)
    expect(await b.count()).toBe(2)
  })

  it('returns the existing job for a duplicate jobId and adds nothing', async () => {
    const q = mkQueue()
    const first = await q.add('orig', { v: 1 }, { jobId: 'order-7' })
    expect(first.id).toBe('order-7')
    const countsBefore = await q.getJobCounts()
    const again = await q.add('other', { v: 2 }, { jobId: 'order-7', priority: 9 })
    expect(again.id).toBe('order-7')
    expect(again.name).toBe('orig')
    expect(again.data).toEqual({ v: 1 })
    expect(await q.getJobCounts()).toEqual(countsBefore)
    expect(await q.count()).toBe(1)
    expect((await q.getJob('order-7')).data).toEqual({ v: 1 })
  })

  it('custom ids do not consume auto ids', async () => {
    const q = mkQueue()
    expect((await q.add('a', {})).id).toBe('1')
    expect((await q.add('b', {}, { jobId: 'custom-b' })).id).toBe('custom-b')
    expect((await q.add('c', {}, { jobId: 'custom-c' })).id).toBe('custom-c')
    expect((await q.add('d', {})).id).toBe('2')
    expect(await q.count()).toBe(4)
  })

  it('merges defaultJobOptions under the job options (job opts win)', async () => {
    const q = mkQueue({ defaultJobOptions: { attempts: 3, priority: 5, removeOnComplete: true } })
    expect(q.defaultJobOptions).toEqual({ attempts: 3, priority: 5, removeOnComplete: true })
    const plain = await q.add('plain', {})
    expect(plain.opts).toEqual({ attempts: 3, priority: 5, removeOnComplete: true })
    const mine = await q.add('mine', {}, { priority: 1, removeOnComplete: false })
    expect(mine.opts).toEqual({ attempts: 3, priority: 1, removeOnComplete: false })

    const stored = await q.getJob(mine.id)
    expect(stored.opts).toEqual({ attempts: 3, priority: 1, removeOnComplete: false })
    expect(stored.priority).toBe(1)
    expect((await q.getJob(plain.id)).priority).toBe(5)
    // Priority 1 runs before priority 5.
    expect(ids(await q.getPrioritized())).toEqual([mine.id, plain.id])
  })

  it("emits 'waiting' with the job on add", async () => {
    const q = mkQueue()
    const seen = once(q, 'waiting')
    const job = await q.add('evt', { k: 1 })
    const [emitted] = await seen
    expect(emitted).toBeInstanceOf(Job)
    expect(emitted.id).toBe(job.id)
    expect(emitted.name).toBe('evt')
    expect(emitted.data).toEqual({ k: 1 })
  })
})

describe('Queue.addBulk', () => {
  it('returns the jobs in order with increasing ids', async () => {
    const q = mkQueue()
    await q.add('first', {})
    const jobs = await q.addBulk([
      { name: 'a', data: { i: 0 } },
      { name: 'b', data: { i: 1 }, opts: { jobId: 'bulk-b' } },
      { name: 'c', data: { i: 2 }, opts: { priority: 2 } },
      { name: 'd', data: { i: 3 } },
    ])
    expect(jobs).toHaveLength(4)
    for (const j of jobs) expect(j).toBeInstanceOf(Job)
    expect(ids(jobs)).toEqual(['2', 'bulk-b', '3', '4'])
    expect(names(jobs)).toEqual(['a', 'b', 'c', 'd'])
    expect(jobs.map((j) => j.data.i)).toEqual([0, 1, 2, 3])
    expect(jobs[2].opts).toEqual({ priority: 2 })
    expect(await q.getJobState('3')).toBe('prioritized')
    expect(await q.count()).toBe(5)
    expect((await q.getJob('bulk-b')).data).toEqual({ i: 1 })
  })

  it('is all-or-nothing: one bad item rejects and nothing is added', async () => {
    const q = mkQueue()
    await q.add('seed', {})
    const before = await q.getJobCounts()

    const badOpts = await rejection(
      q.addBulk([
        { name: 'a', data: {} },
        { name: 'b', data: {}, opts: { priority: -1 } },
        { name: 'c', data: {} },
      ]),
    )
    expect(badOpts).toBeInstanceOf(RangeError)
    expect(badOpts.code).toBe('ERR_INVALID_OPTION')
    expect(badOpts.message).toMatch(/priority/)

    const badData = await rejection(
      q.addBulk([
        { name: 'a', data: {} },
        { name: 'b', data: { f: () => 1 } },
      ]),
    )
    expect(badData).toBeInstanceOf(TypeError)
    expect(badData.code).toBe('ERR_INVALID_DATA')

    const badId = await rejection(
      q.addBulk([
        { name: 'a', data: {}, opts: { jobId: 'fine' } },
        { name: 'b', data: {}, opts: { jobId: '42' } },
      ]),
    )
    expect(badId).toBeInstanceOf(RangeError)
    expect(badId.message).toMatch(/jobId/)

    expect(await q.getJobCounts()).toEqual(before)
    expect(await q.getJob('fine')).toBeUndefined()
    expect(await q.getJob('2')).toBeUndefined()
    // No auto id was used up by the rejected batches.
    expect((await q.add('next', {})).id).toBe('2')
  })
})

describe('Queue.getJob / getJobState', () => {
  it('getJob resolves undefined for an absent id', async () => {
    const q = mkQueue()
    expect(await q.getJob('1')).toBeUndefined()
    expect(await q.getJob('nope')).toBeUndefined()
    await q.add('a', {})
    expect(await q.getJob('2')).toBeUndefined()
  })

  it('getJob reproduces name, data, opts and timestamp', async () => {
    const q = mkQueue()
    const data = { s: 'text', n: 1.5, list: [1, { b: null }], nested: { deep: { t: true } }, uni: 'é✓' }
    const opts = { attempts: 3, backoff: { type: 'exponential', delay: 10 }, removeOnFail: 5 }
    const added = await q.add('report', data, opts)
    const got = await q.getJob(added.id)
    expect(got).toBeInstanceOf(Job)
    expect(got.id).toBe(added.id)
    expect(got.name).toBe('report')
    expect(got.data).toEqual(data)
    expect(got.opts).toEqual(opts)
    expect(got.timestamp).toBe(added.timestamp)
    expect(got.attemptsMade).toBe(0)
    expect(got.progress).toBe(0)
    expect(got.returnvalue).toBe(null)
    expect(got.failedReason).toBeUndefined()

    const stamped = await q.add('old', { a: 1 }, { timestamp: 1234567 })
    expect(stamped.timestamp).toBe(1234567)
    expect((await q.getJob(stamped.id)).timestamp).toBe(1234567)
  })

  it('getJobState reports waiting, prioritized, delayed and unknown', async () => {
    const q = mkQueue()
    const w = await q.add('w', {})
    const p = await q.add('p', {}, { priority: 4 })
    const d = await q.add('d', {}, { delay: 60_000 })
    expect(await q.getJobState(w.id)).toBe('waiting')
    expect(await q.getJobState(p.id)).toBe('prioritized')
    expect(await q.getJobState(d.id)).toBe('delayed')
    expect(await q.getJobState('999')).toBe('unknown')
    expect(await q.getJobState('no-such-job')).toBe('unknown')
  })

  it('getJobState reports active, completed and failed', async () => {
    const q = mkQueue()
    const hold = gate()
    const w = mkWorker(
      q.name,
      async (job) => {
        if (job.name === 'bad') throw new Error('nope')
        if (job.name === 'hold') await hold.p
        return job.name
      },
      { concurrency: 3 },
    )
    const done = collect(w, 'completed', 1)
    const failed = collect(w, 'failed', 1)
    const ok = await q.add('ok', {})
    const bad = await q.add('bad', {})
    const held = await q.add('hold', {})
    await done
    await failed
    await waitFor(async () => (await q.getJobState(held.id)) === 'active')
    expect(await q.getJobState(ok.id)).toBe('completed')
    expect(await q.getJobState(bad.id)).toBe('failed')
    expect(await q.getJobState(held.id)).toBe('active')
    const finished = once(w, 'completed')
    hold.open()
    await finished
    expect(await q.getJobState(held.id)).toBe('completed')
  })
})

describe('ordering', () => {
  it('getWaiting / getPrioritized: no priority first, then lower number first, FIFO within one priority', async () => {
    const q = mkQueue()
    await q.add('p5-a', {}, { priority: 5 })
    await q.add('none-a', {})
    await q.add('p1-a', {}, { priority: 1 })
    await q.add('p5-b', {}, { priority: 5 })
    await q.add('none-b', {}, { priority: 0 })
    await q.add('p1-b', {}, { priority: 1 })
    expect(names(await q.getWaiting())).toEqual(['none-a', 'none-b'])
    expect(names(await q.getPrioritized())).toEqual(['p1-a', 'p1-b', 'p5-a', 'p5-b'])
    expect(await q.getJobCounts('waiting', 'prioritized')).toEqual({ waiting: 2, prioritized: 4 })
  })

  it('a worker of concurrency 1 processes in priority order', async () => {
    const q = mkQueue()
    await q.add('p5-a', {}, { priority: 5 })
    await q.add('none-a', {})
    await q.add('p1-a', {}, { priority: 1 })
    await q.add('p5-b', {}, { priority: 5 })
    await q.add('none-b', {})
    await q.add('p1-b', {}, { priority: 1 })
    await q.add('p2', {}, { priority: 2 })
    const order = []
    const w = mkWorker(q.name, async (job) => {
      order.push(job.name)
    })
    await collect(w, 'completed', 7)
    expect(order).toEqual(['none-a', 'none-b', 'p1-a', 'p1-b', 'p2', 'p5-a', 'p5-b'])
  })

  it('lifo puts a job at the head of its priority', async () => {
    const q = mkQueue()
    await q.add('a', {})
    await q.add('b', {})
    await q.add('c', {}, { lifo: true })
    await q.add('d', {}, { lifo: true })
    await q.add('p-a', {}, { priority: 3 })
    await q.add('p-b', {}, { priority: 3, lifo: true })
    expect(names(await q.getWaiting())).toEqual(['d', 'c', 'a', 'b'])
    expect(names(await q.getPrioritized())).toEqual(['p-b', 'p-a'])
    const order = []
    const w = mkWorker(q.name, (job) => {
      order.push(job.name)
    })
    await collect(w, 'completed', 6)
    expect(order).toEqual(['d', 'c', 'a', 'b', 'p-b', 'p-a'])
  })
})

describe('Queue.getJobs', () => {
  it('pages with inclusive start/end, -1 for the last, newest first unless asc', async () => {
    const q = mkQueue()
    for (let i = 0; i < 5; i++) await q.add(`j${i + 1}`, {})
    expect(ids(await q.getJobs('waiting'))).toEqual(['5', '4', '3', '2', '1'])
    expect(ids(await q.getJobs(['waiting']))).toEqual(['5', '4', '3', '2', '1'])
    expect(ids(await q.getJobs('waiting', 0, -1, true))).toEqual(['1', '2', '3', '4', '5'])
    expect(ids(await q.getJobs('waiting', 0, 1))).toEqual(['5', '4'])
    expect(ids(await q.getJobs('waiting', 0, 0, true))).toEqual(['1'])
    expect(ids(await q.getJobs('waiting', 1, 3, true))).toEqual(['2', '3', '4'])
    expect(ids(await q.getJobs('waiting', 3, -1))).toEqual(['2', '1'])
    expect(ids(await q.getJobs('waiting', -2, -1, true))).toEqual(['4', '5'])
    expect(ids(await q.getJobs('waiting', 2, 100, true))).toEqual(['3', '4', '5'])
    expect(ids(await q.getJobs('waiting', 10, 20))).toEqual([])
    expect(ids(await q.getJobs('wait', 0, -1, true))).toEqual(['1', '2', '3', '4', '5'])
    expect(ids(await q.getWaiting(1, 2))).toEqual(['2', '3'])
    expect(ids(await q.getJobs('delayed'))).toEqual([])
  })

  it('takes several types and concatenates them in the order asked', async () => {
    const q = mkQueue()
    await q.add('w1', {})
    await q.add('w2', {})
    await q.add('late', {}, { delay: 60_000 })
    await q.add('soon', {}, { delay: 30_000 })
    await q.add('prio', {}, { priority: 7 })
    expect(names(await q.getDelayed())).toEqual(['soon', 'late'])
    expect(names(await q.getJobs(['waiting', 'delayed'], 0, -1, true))).toEqual(['w1', 'w2', 'soon', 'late'])
    expect(names(await q.getJobs(['delayed', 'waiting'], 0, -1, true))).toEqual(['soon', 'late', 'w1', 'w2'])
    expect(names(await q.getJobs(['waiting', 'delayed']))).toEqual(['w2', 'w1', 'late', 'soon'])
    const all = await q.getJobs()
    expect(names(all).sort()).toEqual(['late', 'prio', 'soon', 'w1', 'w2'])
    const some = await q.getJobs(['prioritized', 'waiting'], 0, -1, true)
    expect(names(some)).toEqual(['prio', 'w1', 'w2'])
  })

  it('getCompleted / getFailed list newest first', async () => {
    const q = mkQueue()
    const w = mkWorker(q.name, (job) => {
      if (job.data.fail) throw new Error(`fail ${job.id}`)
      return job.id
    })
    const done = collect(w, 'completed', 3)
    const failed = collect(w, 'failed', 2)
    await q.addBulk([
      { name: 'a', data: {} },
      { name: 'b', data: { fail: true } },
      { name: 'c', data: {} },
      { name: 'd', data: { fail: true } },
      { name: 'e', data: {} },
    ])
    await done
    await failed
    expect(ids(await q.getCompleted())).toEqual(['5', '3', '1'])
    expect(ids(await q.getJobs('completed', 0, -1, true))).toEqual(['1', '3', '5'])
    expect(ids(await q.getFailed())).toEqual(['4', '2'])
    expect(ids(await q.getCompleted(0, 0))).toEqual(['5'])
    const [first] = await q.getFailed(1, 1)
    expect(first.failedReason).toBe('fail 2')
    expect((await q.getCompleted(2, 2))[0].returnvalue).toBe('1')
  })
})

describe('counts', () => {
  it('getJobCounts() has all 8 states; with types only those; count() is waiting + prioritized + delayed', async () => {
    const q = mkQueue()
    expect(await q.getJobCounts()).toEqual(ZERO_COUNTS)
    const hold = gate()
    const w = mkWorker(q.name, async (job) => {
      if (job.name === 'bad') throw new Error('bad')
      if (job.name === 'hold') await hold.p
      return 1
    })
    const done = collect(w, 'completed', 1)
    const failed = collect(w, 'failed', 1)
    const active = new Promise((resolve) => w.on('active', (job) => job.name === 'hold' && resolve()))
    await q.add('ok', {})
    await q.add('bad', {})
    await q.add('hold', {})
    await done
    await failed
    await active
    // The worker (concurrency 1) is busy with 'hold': these stay where they are.
    await q.add('w1', {})
    await q.add('w2', {})
    await q.add('p', {}, { priority: 2 })
    await q.add('d', {}, { delay: 60_000 })

    expect(await q.getJobCounts()).toEqual({
      waiting: 2,
      active: 1,
      completed: 1,
      failed: 1,
      delayed: 1,
      prioritized: 1,
      'waiting-children': 0,
      paused: 0,
    })
    expect(await q.getJobCounts('waiting', 'active')).toEqual({ waiting: 2, active: 1 })
    expect(await q.getJobCounts('delayed')).toEqual({ delayed: 1 })
    expect(await q.getJobCountByTypes('waiting', 'prioritized')).toBe(3)
    expect(await q.getWaitingCount()).toBe(2)
    expect(await q.getPrioritizedCount()).toBe(1)
    expect(await q.getDelayedCount()).toBe(1)
    expect(await q.getActiveCount()).toBe(1)
    expect(await q.getCompletedCount()).toBe(1)
    expect(await q.getFailedCount()).toBe(1)
    expect(await q.count()).toBe(4)

    // 'hold' finishes, then w1, w2 and p run.
    const finished = collect(w, 'completed', 4)
    hold.open()
    await finished
    expect(await q.count()).toBe(1)
    expect(await q.getJobCounts('completed', 'delayed', 'waiting')).toEqual({ completed: 5, delayed: 1, waiting: 0 })
  })
})

describe('pause / resume', () => {
  it("a paused queue's worker gets nothing; adds still land; after resume they are processed", async () => {
    const q = mkQueue()
    const pausedEvt = once(q, 'paused')
    await q.pause()
    await pausedEvt
    expect(await q.isPaused()).toBe(true)
    const processed = []
    const w = mkWorker(q.name, (job) => {
      processed.push(job.id)
    })
    const a = await q.add('a', {})
    const b = await q.add('b', {})
    expect(await q.getJobState(a.id)).toBe('waiting')
    expect(await q.getJobState(b.id)).toBe('waiting')
    expect(await q.count()).toBe(2)
    // As in BullMQ 5+: they are counted as waiting, never a second time as paused.
    expect(await q.getJobCounts('waiting', 'paused')).toEqual({ waiting: 2, paused: 0 })
    expect(await q.getJobs(['paused'])).toEqual([])
    // A negative check needs some time: give the worker a fair chance to (wrongly) take a job.
    await delay(150)
    expect(processed).toEqual([])
    expect(await q.getActiveCount()).toBe(0)

    const resumedEvt = once(q, 'resumed')
    const done = collect(w, 'completed', 2)
    await q.resume()
    await resumedEvt
    expect(await q.isPaused()).toBe(false)
    await done
    expect(processed).toEqual(['1', '2'])
    expect(await q.getJobCounts('completed', 'paused', 'waiting')).toEqual({ completed: 2, paused: 0, waiting: 0 })
  })

  it('pause and resume are idempotent', async () => {
    const q = mkQueue()
    await q.pause()
    await q.pause()
    expect(await q.isPaused()).toBe(true)
    await q.resume()
    expect(await q.isPaused()).toBe(false)
    await q.resume()
    expect(await q.isPaused()).toBe(false)
  })
})

describe('Queue.drain', () => {
  it('drain() removes waiting and prioritized jobs but keeps delayed; drain(true) removes delayed too', async () => {
    const q = mkQueue()
    const w1 = await q.add('w1', {})
    await q.add('w2', {}, { jobId: 'custom-w2' })
    const p = await q.add('p', {}, { priority: 3 })
    const d1 = await q.add('d1', {}, { delay: 60_000 })
    await q.add('d2', {}, { delay: 90_000 })
    await q.drain()
    expect(await q.getJobCounts('waiting', 'prioritized', 'delayed')).toEqual({ waiting: 0, prioritized: 0, delayed: 2 })
    expect(await q.getJob(w1.id)).toBeUndefined()
    expect(await q.getJob('custom-w2')).toBeUndefined()
    expect(await q.getJob(p.id)).toBeUndefined()
    expect(await q.getJobState(d1.id)).toBe('delayed')
    // A drained custom id can be used again.
    expect((await q.add('again', {}, { jobId: 'custom-w2' })).name).toBe('again')
    expect(await q.getWaitingCount()).toBe(1)

    await q.drain(true)
    expect(await q.getJobCounts('waiting', 'prioritized', 'delayed')).toEqual({ waiting: 0, prioritized: 0, delayed: 0 })
    expect(await q.getJob(d1.id)).toBeUndefined()
    expect(await q.count()).toBe(0)
  })

  it('drain leaves completed and failed jobs alone', async () => {
    const q = mkQueue()
    const w = mkWorker(q.name, (job) => {
      if (job.name === 'bad') throw new Error('x')
    })
    const done = collect(w, 'completed', 1)
    const failed = collect(w, 'failed', 1)
    await q.add('ok', {})
    await q.add('bad', {})
    await done
    await failed
    await w.close()
    await q.add('waiting', {})
    await q.drain(true)
    expect(await q.getJobCounts('completed', 'failed', 'waiting')).toEqual({ completed: 1, failed: 1, waiting: 0 })
  })
})

describe('Queue.clean', () => {
  it('removes waiting jobs older than grace (by timestamp), oldest first, up to limit', async () => {
    const q = mkQueue()
    const now = Date.now()
    const old3 = await q.add('old3', {}, { timestamp: now - 30_000 })
    const old1 = await q.add('old1', {}, { timestamp: now - 50_000 })
    const old2 = await q.add('old2', {}, { timestamp: now - 40_000 })
    const fresh = await q.add('fresh', {})
    const oldDelayed = await q.add('oldDelayed', {}, { timestamp: now - 60_000, delay: 3_600_000 })
    const cleanedEvt = once(q, 'cleaned')

    const first = await q.clean(10_000, 2, 'wait')
    expect(first).toEqual([old1.id, old2.id])
    const [evIds, evType] = await cleanedEvt
    expect(evIds).toEqual(first)
    expect(evType).toBe('wait')
    expect(await q.getJob(old1.id)).toBeUndefined()
    expect(await q.getJobState(old3.id)).toBe('waiting')

    expect(await q.clean(10_000, 0, 'waiting')).toEqual([old3.id])
    // Grace protects the fresh job; the type protects the delayed one.
    expect(await q.getJobState(fresh.id)).toBe('waiting')
    expect(await q.getJobState(oldDelayed.id)).toBe('delayed')
    expect(await q.clean(10_000, 0, 'delayed')).toEqual([oldDelayed.id])
    expect(await q.count()).toBe(1)
  })

  it('cleans completed and failed jobs by finish time, separately by type', async () => {
    const q = mkQueue()
    const w = mkWorker(q.name, (job) => {
      if (job.name === 'bad') throw new Error('x')
    })
    const done = collect(w, 'completed', 3)
    const failed = collect(w, 'failed', 1)
    await q.addBulk([
      { name: 'a', data: {} },
      { name: 'b', data: {} },
      { name: 'c', data: {} },
      { name: 'bad', data: {} },
    ])
    await done
    await failed
    // Just finished: a large grace protects them all.
    expect(await q.clean(60_000, 0, 'completed')).toEqual([])
    expect(await q.clean(60_000, 0, 'failed')).toEqual([])
    expect(await q.getCompletedCount()).toBe(3)

    const finishedOn = Math.max(...(await q.getJobs(['completed', 'failed'])).map((j) => j.finishedOn))
    await waitFor(() => Date.now() > finishedOn + 10)
    const two = await q.clean(5, 2) // type defaults to 'completed'
    expect(two).toHaveLength(2)
    expect(await q.getCompletedCount()).toBe(1)
    expect(await q.getFailedCount()).toBe(1)
    const rest = await q.clean(5, 0, 'completed')
    expect(rest).toHaveLength(1)
    expect([...two, ...rest].sort()).toEqual(['1', '2', '3'])
    expect(await q.clean(5, 0, 'failed')).toEqual(['4'])
    expect(await q.getJobCounts('completed', 'failed')).toEqual({ completed: 0, failed: 0 })
  })

  it('never cleans active jobs', async () => {
    const q = mkQueue()
    const hold = gate()
    const w = mkWorker(q.name, () => hold.p)
    const active = once(w, 'active')
    const job = await q.add('a', {}, { timestamp: Date.now() - 60_000 })
    await active
    expect(await q.clean(0, 0, 'active')).toEqual([])
    expect(await q.getJobState(job.id)).toBe('active')
    hold.open()
  })
})

describe('Queue.obliterate', () => {
  it('refuses with ERR_QUEUE_ACTIVE while a job is active, unless force; ids restart at "1"', async () => {
    const q = mkQueue()
    const hold = gate()
    const w = mkWorker(q.name, () => hold.p)
    const active = once(w, 'active')
    await q.add('a', {})
    await q.add('b', {}, { jobId: 'bee' })
    await q.add('c', {}, { delay: 60_000 })
    await active
    const before = await q.getJobCounts()

    const err = await rejection(q.obliterate())
    expect(err).toBeInstanceOf(QueueError)
    expect(err.code).toBe('ERR_QUEUE_ACTIVE')
    expect(await q.getJobCounts()).toEqual(before)
    expect(await q.getJobState('1')).toBe('active')

    await q.obliterate({ force: true })
    expect(await q.getJobCounts()).toEqual(ZERO_COUNTS)
    expect(await q.getJob('1')).toBeUndefined()
    expect(await q.getJob('bee')).toBeUndefined()
    expect((await q.add('fresh', {})).id).toBe('1')
    expect((await q.add('bee-again', {}, { jobId: 'bee' })).name).toBe('bee-again')
    hold.open()
  })

  it('obliterates an idle queue without force, including its paused flag', async () => {
    const q = mkQueue()
    await q.add('a', {})
    await q.add('b', {})
    await q.pause()
    await q.obliterate()
    expect(await q.getJobCounts()).toEqual(ZERO_COUNTS)
    expect(await q.isPaused()).toBe(false)
    expect((await q.add('c', {})).id).toBe('1')
  })

  it('an activation from before a forced obliterate cannot finish a new job with the same id', async () => {
    const q = mkQueue()
    const oldHold = gate()
    const newHold = gate()
    const w1 = mkWorker(q.name, () => oldHold.p.then(() => 'old result'))
    const w1Active = once(w1, 'active')
    await q.add('old', {})
    await w1Active
    await q.obliterate({ force: true })
    await w1.pause(true) // w1 must not take the new job
    const w2 = mkWorker(q.name, () => newHold.p.then(() => 'new result'))
    const w2Active = once(w2, 'active')
    const fresh = await q.add('new', {})
    expect(fresh.id).toBe('1')
    await w2Active
    expect(await q.getJobState('1')).toBe('active')

    // The old activation finishes now: its ack must be stale, not complete the new job '1'.
    oldHold.open()
    await w1.close()
    expect(await q.getJobState('1')).toBe('active')
    expect(await q.getCompletedCount()).toBe(0)

    const done = once(w2, 'completed')
    newHold.open()
    await done
    expect((await q.getJob('1')).returnvalue).toBe('new result')
  })
})

describe('Queue.remove', () => {
  it('returns 1 when removed, 0 when absent, 0 for an active job', async () => {
    const q = mkQueue()
    const a = await q.add('a', {})
    const b = await q.add('b', {}, { jobId: 'bee', delay: 60_000 })
    expect(await q.remove(a.id)).toBe(1)
    expect(await q.getJob(a.id)).toBeUndefined()
    expect(await q.remove(a.id)).toBe(0)
    expect(await q.remove('404')).toBe(0)
    expect(await q.remove('no-such')).toBe(0)
    expect(await q.remove(b.id)).toBe(1)
    expect(await q.count()).toBe(0)

    const hold = gate()
    const w = mkWorker(q.name, () => hold.p)
    const active = once(w, 'active')
    const c = await q.add('c', {})
    await active
    expect(await q.remove(c.id)).toBe(0)
    expect(await q.getJobState(c.id)).toBe('active')
    const done = once(w, 'completed')
    hold.open()
    await done
    expect(await q.remove(c.id)).toBe(1)
    expect(await q.getJobState(c.id)).toBe('unknown')
  })
})

describe('Queue.close', () => {
  it('after close every call rejects with QueueError ERR_QUEUE_CLOSED', async () => {
    const q = mkQueue()
    const job = await q.add('a', {})
    await q.close()
    const calls = {
      add: () => q.add('b', {}),
      addBulk: () => q.addBulk([{ name: 'b', data: {} }]),
      getJob: () => q.getJob('1'),
      getJobState: () => q.getJobState('1'),
      getJobs: () => q.getJobs('waiting'),
      getWaiting: () => q.getWaiting(),
      getJobCounts: () => q.getJobCounts(),
      getWaitingCount: () => q.getWaitingCount(),
      count: () => q.count(),
      pause: () => q.pause(),
      resume: () => q.resume(),
      isPaused: () => q.isPaused(),
      drain: () => q.drain(),
      remove: () => q.remove('1'),
      clean: () => q.clean(0, 0, 'completed'),
      obliterate: () => q.obliterate(),
      getJobLogs: () => q.getJobLogs('1'),
      waitUntilReady: () => q.waitUntilReady(),
      'job.getState': () => job.getState(),
      'job.updateProgress': () => job.updateProgress(5),
    }
    for (const [what, call] of Object.entries(calls)) {
      const err = await rejection(call())
      expect({ what, isQueueError: err instanceof QueueError, code: err.code }).toEqual({
        what,
        isQueueError: true,
        code: 'ERR_QUEUE_CLOSED',
      })
    }
    // The jobs stay: another Queue object on the same name sees them.
    const again = mkQueue(undefined, q.name)
    expect(await again.getJobState(job.id)).toBe('waiting')
    expect(await again.count()).toBe(1)
  })
})
