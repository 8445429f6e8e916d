// Cancelling running jobs: the job option `timeout` (the signal aborts, the job fails with reason
// `timeout`, retried if attempts remain) and Worker#cancelJob / cancelAllJobs (the signal aborts;
// the processor decides). Runs on every backend.
import { describe, it, expect, afterEach } from 'vitest'
import { Queue, Worker, QueueEvents, UnrecoverableError } from '../index.mjs'
import { once, waitFor, rejection, thrown, expectError, openTracker, gate } from './helpers.mjs'

const { mkQueue, mkWorker } = openTracker('cancel', { Queue, Worker, QueueEvents }, afterEach)

describe('job timeout', () => {
  it('aborts the signal and fails the job with reason timeout', async () => {
    const queue = mkQueue()
    const added = await queue.add('slow', {}, { timeout: 60 })
    let reason
    const worker = mkWorker(queue.name, (job, token, signal) => {
      return new Promise((resolve) => {
        signal.addEventListener('abort', () => {
          reason = signal.reason
          resolve('finished anyway') // ignored: the job failed at its timeout
        })
      })
    })
    const [job, err] = await once(worker, 'failed')
    expect(job.id).toBe(added.id)
    expect(err.message).toBe('timeout')
    expect(reason).toBe(err)
    expect(reason.name).toBe('TimeoutError')
    const stored = await queue.getJob(added.id)
    expect(await stored.getState()).toBe('failed')
    expect([stored.failedReason, stored.attemptsMade]).toEqual(['timeout', 1])
  })

  it('fails even a processor that ignores its signal, and frees its slot', async () => {
    const queue = mkQueue()
    const hang = gate()
    await queue.add('hangs', {}, { timeout: 50 })
    await queue.add('next', {})
    const worker = mkWorker(queue.name, (job) => (job.name === 'hangs' ? hang.p : 'done'), { concurrency: 1 })
    // Both listen from the start: the two outcomes may be answered in one batch of acks.
    const failing = once(worker, 'failed')
    const completing = once(worker, 'completed')
    const [failed] = await failing
    expect(failed.failedReason).toBe('timeout')
    const [next, value] = await completing
    expect([next.name, value]).toEqual(['next', 'done'])
    hang.open('late')
  })

  it('retries a timed-out job while attempts remain', async () => {
    const queue = mkQueue()
    const added = await queue.add('flaky', {}, { timeout: 40, attempts: 2 })
    let runs = 0
    const worker = mkWorker(queue.name, async () => {
      if (++runs === 1) await new Promise(() => {}) // the first run hangs
      return 'second run'
    })
    const [job, value] = await once(worker, 'completed')
    expect([job.id, value, runs]).toEqual([added.id, 'second run', 2])
    const stored = await queue.getJob(added.id)
    expect(stored.attemptsMade).toBe(2)
  })

  it('a job that finishes in time is not touched by its timer', async () => {
    const queue = mkQueue()
    await queue.add('quick', {}, { timeout: 30 })
    let signalSeen
    const worker = mkWorker(queue.name, (job, token, signal) => {
      signalSeen = signal
      return 'quick'
    })
    await once(worker, 'completed')
    await new Promise((r) => setTimeout(r, 60))
    expect(signalSeen.aborted).toBe(false)
  })

  it('refuses a timeout that is not a whole number of ms in 1..2^31-1, naming it', async () => {
    const queue = mkQueue()
    for (const timeout of [0, -1, 1.5, 2 ** 31]) {
      expectError(await rejection(queue.add('x', {}, { timeout })), RangeError, 'ERR_INVALID_OPTION', /^timeout /)
    }
    expectError(await rejection(queue.add('x', {}, { timeout: '5' })), TypeError, 'ERR_INVALID_OPTION', /timeout/)
    expect(await queue.count()).toBe(0)
  })
})

describe('cancelJob and cancelAllJobs', () => {
  it('aborts the signal with the reason; the processor decides the outcome', async () => {
    const queue = mkQueue()
    const added = await queue.add('long', {})
    const worker = mkWorker(queue.name, (job, token, signal) => {
      return new Promise((resolve, reject) => {
        signal.addEventListener('abort', () => reject(new UnrecoverableError(`cancelled: ${signal.reason}`)))
      })
    })
    await once(worker, 'active')
    expect(worker.cancelJob('no such job')).toBe(false)
    expect(worker.cancelJob(added.id, 'user asked')).toBe(true)
    const [job, err] = await once(worker, 'failed')
    expect([job.id, err.message]).toEqual([added.id, 'cancelled: user asked'])
    expect(await job.getState()).toBe('failed')
    expect(worker.cancelJob(added.id)).toBe(false) // no longer runs here
  })

  it('cancelAllJobs aborts every running job', async () => {
    const queue = mkQueue()
    await queue.addBulk([1, 2, 3].map((i) => ({ name: 'j', data: { i } })))
    let started = 0
    const worker = mkWorker(
      queue.name,
      (job, token, signal) => {
        started++
        return new Promise((resolve) => signal.addEventListener('abort', () => resolve(`stopped: ${signal.reason}`)))
      },
      { concurrency: 3 },
    )
    await waitFor(() => started === 3)
    const values = []
    worker.on('completed', (job, value) => values.push(value))
    worker.cancelAllJobs('shutdown')
    await waitFor(() => values.length === 3)
    expect(values).toEqual(['stopped: shutdown', 'stopped: shutdown', 'stopped: shutdown'])
  })

  it('refuses a job id that is not a string', () => {
    const worker = mkWorker(mkQueue().name, () => {})
    expectError(thrown(() => worker.cancelJob(42)), TypeError, 'ERR_INVALID_OPTION', /^jobId /)
  })
})
