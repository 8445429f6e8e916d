// Manual processing and step jobs, as BullMQ's guides show them: a Worker without a processor
// hands out jobs with getNextJob(token) and the caller moves each on with its token; a
// processor moves its own job (moveToDelayed + DelayedError, moveToWait + RateLimitError,
// moveToWaitingChildren + WaitingChildrenError), spending no attempt. A move with a token that
// does not hold the job is rejected with ERR_LOCK_MISMATCH and changes nothing. Runs on every
// backend.
import { describe, it, expect, afterEach } from 'vitest'
import { Queue, Worker, QueueEvents, QueueError, DelayedError, WaitingChildrenError, RateLimitError } from '../index.mjs'
import { once, rejection, expectError, openTracker, delay, waitFor } from './helpers.mjs'

const { mkQueue, mkWorker } = openTracker('manual', { Queue, Worker, QueueEvents }, afterEach)

const mismatch = (p) => p.then(() => 'resolved', (e) => e)

describe('manual processing', () => {
  it('getNextJob, then moveToCompleted / moveToFailed with the token', async () => {
    const queue = mkQueue()
    await queue.add('a', { n: 1 })
    await queue.add('b', { n: 2 }, { attempts: 1 })
    const worker = mkWorker(queue.name, null)
    expect(worker.isRunning()).toBe(false)
    const token = 'my-token'
    const a = await worker.getNextJob(token)
    expect([a.name, a.data, a.token]).toEqual(['a', { n: 1 }, token])
    expect(await a.getState()).toBe('active')
    expect(await a.moveToCompleted('some return value', token, false)).toBeUndefined()
    const done = await queue.getJob(a.id)
    expect([await done.getState(), done.returnvalue, done.attemptsMade]).toEqual(['completed', 'some return value', 1])
    const b = await worker.getNextJob(token)
    await b.moveToFailed(new Error('my error message'), token, false)
    const failed = await queue.getJob(b.id)
    expect([await failed.getState(), failed.failedReason, failed.attemptsMade]).toEqual(['failed', 'my error message', 1])
    expect(await worker.getNextJob(token, { block: false })).toBeUndefined()
  })

  it('fetchNext (the default of moveToCompleted) hands back the next job, taken with the same token', async () => {
    const queue = mkQueue()
    await queue.addBulk([{ name: 'one' }, { name: 'two' }])
    const worker = mkWorker(queue.name, null)
    const first = await worker.getNextJob('t')
    const second = await first.moveToCompleted(1, 't')
    expect([second.name, second.token, await second.getState()]).toEqual(['two', 't', 'active'])
    expect(await second.moveToCompleted(2, 't')).toBeUndefined()
    expect(await queue.getJobCounts('completed', 'active')).toEqual({ completed: 2, active: 0 })
  })

  it('a blocking getNextJob waits for a job', async () => {
    const queue = mkQueue()
    const worker = mkWorker(queue.name, null, { drainDelay: 5 })
    const next = worker.getNextJob('t')
    await delay(50)
    await queue.add('late', {})
    const job = await next
    expect(job.name).toBe('late')
  })

  it('a token that does not hold the job is rejected and changes nothing', async () => {
    const queue = mkQueue()
    await queue.add('a', {})
    const worker = mkWorker(queue.name, null)
    const job = await worker.getNextJob('right')
    for (const p of [
      job.moveToCompleted('x', 'wrong', false),
      job.moveToFailed(new Error('x'), 'wrong'),
      job.moveToDelayed(Date.now() + 1000, 'wrong'),
      job.moveToWait('wrong'),
      job.moveToWaitingChildren('wrong'),
    ]) {
      expectError(await mismatch(p), QueueError, 'ERR_LOCK_MISMATCH', /^Missing lock for job /)
    }
    expect(await job.extendLock('wrong', 1000)).toBe(0)
    expect(await job.getState()).toBe('active')
    // Any Job object of the queue moves it with the right token.
    expect(await job.extendLock('right', 60_000)).toBe(1)
    expect(await worker.extendJobLocks([job.id, job.id], ['right', 'wrong'], 60_000)).toBe(1)
    const same = await queue.getJob(job.id)
    await same.moveToCompleted('ok', 'right', false)
    expect(await job.getState()).toBe('completed')
    // Done: the token holds it no more.
    expectError(await mismatch(job.moveToCompleted('again', 'right', false)), QueueError, 'ERR_LOCK_MISMATCH', /^Missing lock for job /)
  })

  it('a job fetched by a Worker that closes stalls: back to waiting, its token no longer holds it', async () => {
    const queue = mkQueue()
    await queue.add('a', {})
    const worker = mkWorker(queue.name, null)
    const job = await worker.getNextJob('t')
    await worker.close()
    // At once in one process; on PostgreSQL right after (its process ends the leases it held).
    const back = await waitFor(async () => {
      const j = await queue.getJob(job.id)
      return j.stalledCounter === 1 && (await j.getState()) === 'waiting' && j
    })
    expect([back.stalledCounter, back.attemptsMade]).toEqual([1, 0])
    expectError(await mismatch(job.moveToCompleted('late', 't', false)), QueueError, 'ERR_LOCK_MISMATCH', /^Missing lock for job /)
  })

  it('run() without a processor is refused; a bad token is a TypeError', async () => {
    const worker = mkWorker(mkQueue().name, null)
    expectError(await rejection(worker.run()), QueueError, 'ERR_NO_PROCESSOR', /^No process function/)
    expectError(await rejection(worker.getNextJob(42)), TypeError, 'ERR_INVALID_OPTION', /^token /)
  })
})

describe('step jobs', () => {
  it('moveToDelayed + DelayedError: the steps run in turn and spend no attempt', async () => {
    const queue = mkQueue()
    const added = await queue.add('steps', { step: 'initial' })
    const failed = []
    const runs = []
    const worker = mkWorker(queue.name, async (job, token) => {
      let step = job.data.step
      runs.push(step)
      while (step !== 'finish') {
        if (step === 'initial') {
          await job.updateData({ step: 'second' })
          await job.moveToDelayed(Date.now() + 50, token)
          throw new DelayedError()
        }
        step = 'finish'
        await job.updateData({ step })
      }
      return 'done'
    })
    worker.on('failed', (j, e) => failed.push(e))
    const [job, value] = await once(worker, 'completed')
    expect([job.id, value, runs]).toEqual([added.id, 'done', ['initial', 'second']])
    expect(failed).toEqual([])
    const stored = await queue.getJob(added.id)
    expect([stored.attemptsMade, stored.attemptsStarted]).toEqual([1, 2])
  })

  it('moveToWait + RateLimitError: back to waiting, no attempt spent', async () => {
    const queue = mkQueue()
    const added = await queue.add('wait', {})
    let runs = 0
    const worker = mkWorker(queue.name, async (job, token) => {
      if (++runs === 1) {
        expect(await job.moveToWait(token)).toBe(0)
        throw new RateLimitError()
      }
      return runs
    })
    const [, value] = await once(worker, 'completed')
    expect(value).toBe(2)
    const stored = await queue.getJob(added.id)
    expect([stored.attemptsMade, stored.attemptsStarted]).toEqual([1, 2])
  })

  it('moveToWaitingChildren + WaitingChildrenError: the parent runs again once its children are done', async () => {
    const parents = mkQueue()
    const children = mkQueue()
    // Started once the parent waits: children done before its move would leave nothing to wait for.
    const childWorker = mkWorker(children.name, async (job) => job.data.n * 10, { autorun: false })
    const added = await parents.add('parent', { step: 'spawn' })
    const worker = mkWorker(parents.name, async (job, token) => {
      if (job.data.step === 'spawn') {
        // No children yet: nothing to wait for, the job keeps running.
        expect(await job.moveToWaitingChildren(token)).toBe(false)
        for (const n of [1, 2]) await children.add('child', { n }, { parent: { id: job.id, queue: parents.qualifiedName } })
        await job.updateData({ step: 'collect' })
        const waits = await job.moveToWaitingChildren(token)
        childWorker.run().catch(() => {})
        if (waits) throw new WaitingChildrenError()
      }
      const values = Object.values(await job.getChildrenValues()).sort()
      return values
    })
    const [job, value] = await once(worker, 'completed', 10_000)
    expect([job.id, value]).toEqual([added.id, [10, 20]])
    const stored = await parents.getJob(added.id)
    expect([stored.attemptsMade, stored.attemptsStarted]).toEqual([1, 2])
  })

  it('a throw of DelayedError without a move puts the job back to waiting', async () => {
    const queue = mkQueue()
    await queue.add('x', {})
    let runs = 0
    const worker = mkWorker(queue.name, async () => {
      if (++runs === 1) throw new DelayedError()
      return runs
    })
    const [, value] = await once(worker, 'completed')
    expect(value).toBe(2)
  })
})
