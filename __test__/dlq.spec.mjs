// The dead-letter queue: a queue's failed jobs as entries with their attempt history and
// reason, filtered, retried, purged; its settings stored with the queue; expiry, maxEntries and
// automatic retries kept by the process's DLQ keeper. Every backend; the SQLite file and
// PostgreSQL keep histories and settings across a restart.
import { describe, it, expect, afterEach, afterAll } from 'vitest'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Queue, Worker, QueueEvents, UnrecoverableError } from '../index.mjs'
import { waitFor, delay, openTracker, backend, uniqueName, rejection } from './helpers.mjs'

const { track, mkQueue, mkWorker } = openTracker('dlq', { Queue, Worker, QueueEvents }, afterEach)
const dir = mkdtempSync(join(tmpdir(), 'ferroqueue-dlq-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

/** A worker whose processor fails each job as its data says. */
function failing(queue) {
  const seen = new Set()
  return mkWorker(queue.name, async (job, _token, signal) => {
    if (job.data.how === 'unrecoverable') throw new UnrecoverableError('no way')
    if (job.data.how === 'hang') {
      await new Promise((resolve) => signal.addEventListener('abort', resolve))
      return
    }
    if (job.data.how === 'once') {
      if (seen.has(job.id)) return 'done'
      seen.add(job.id)
      throw new Error('first try fails')
    }
    throw new Error(`boom ${job.data.n ?? ''}`.trim())
  })
}

describe('dead-letter queue', () => {
  it('records each failed attempt and why the job failed for good', async () => {
    const queue = mkQueue()
    await queue.add('retried', { how: 'throw', n: 1 }, { attempts: 2 })
    await queue.add('unrecoverable', { how: 'unrecoverable' }, { attempts: 5 })
    await queue.add('slow', { how: 'hang' }, { timeout: 50 })
    failing(queue)
    await waitFor(async () => (await queue.getFailedCount()) === 3, 5000)
    const entries = await queue.getDlq()
    const byName = Object.fromEntries(entries.map((e) => [e.job.name, e]))
    expect(byName.retried.reason).toBe('max_attempts_exceeded')
    expect(byName.retried.attempts.map((a) => [a.attempt, a.kind, a.final, a.error])).toEqual([
      [1, 'error', false, 'boom 1'],
      [2, 'error', true, 'boom 1'],
    ])
    expect(byName.unrecoverable.reason).toBe('explicit_fail')
    expect(byName.unrecoverable.attempts.map((a) => a.kind)).toEqual(['unrecoverable'])
    expect(byName.slow.reason).toBe('timeout')
    expect(byName.slow.attempts[0].duration).toBeGreaterThanOrEqual(40)
    const e = byName.retried
    expect(e.job.data).toEqual({ how: 'throw', n: 1 })
    expect(e.error).toBe('boom 1')
    expect(e.enteredAt).toBe(e.job.finishedOn)
    expect(e.expiresAt - e.enteredAt).toBe(7 * 24 * 3600 * 1000)
    expect([e.nextRetryAt, e.retries]).toEqual([null, 0])
    for (const a of e.attempts) expect(a.failedAt - a.startedAt).toBe(a.duration)
    // Still `failed` to BullMQ's getters.
    expect((await queue.getFailed()).map((j) => j.name).sort()).toEqual(['retried', 'slow', 'unrecoverable'])
    expect((await queue.getDlq({ reason: 'timeout' })).map((x) => x.job.name)).toEqual(['slow'])
    const stats = await queue.getDlqStats()
    expect(stats).toMatchObject({ total: 3, pendingAutoRetries: 0, nextAutoRetryAt: null })
    expect(stats.byReason).toEqual({
      explicit_fail: 1,
      max_attempts_exceeded: 1,
      timeout: 1,
      stalled: 0,
      ttl_expired: 0,
      worker_lost: 0,
      unknown: 0,
    })
  })

  it('keeps any error text in the history, U+0000 included', async () => {
    const queue = mkQueue()
    const reason = 'nul \u0000 and \u0001 mark'
    mkWorker(queue.name, async () => {
      throw new Error(reason)
    })
    await queue.add('j', {})
    await waitFor(async () => (await queue.getFailedCount()) === 1, 5000)
    const [entry] = await queue.getDlq()
    expect([entry.error, entry.attempts[0].error]).toEqual([reason, reason])
  })

  it('filters by age and pages newest first', async () => {
    const queue = mkQueue()
    failing(queue)
    for (const n of [1, 2, 3]) {
      await queue.add('j', { n })
      await waitFor(async () => (await queue.getFailedCount()) === n, 5000)
      if (n === 1) await delay(150)
    }
    const ns = (entries) => entries.map((x) => x.job.data.n)
    expect(ns(await queue.getDlq())).toEqual([3, 2, 1])
    expect(ns(await queue.getDlq({ olderThan: 120 }))).toEqual([1])
    expect(ns(await queue.getDlq({ newerThan: 120 }))).toEqual([3, 2])
    expect(ns(await queue.getDlq({ offset: 1, limit: 1 }))).toEqual([2])
  })

  it('retries one entry, a filter or all, with its attempts counted again', async () => {
    const queue = mkQueue()
    await queue.add('a', { how: 'once' }, { attempts: 1 })
    await queue.add('b', { how: 'throw' }, { jobId: 'dead-b' })
    await queue.add('c', { how: 'unrecoverable' })
    const done = []
    const worker = failing(queue)
    worker.on('completed', (job) => done.push(job))
    await waitFor(async () => (await queue.getFailedCount()) === 3, 5000)
    const a = (await queue.getDlq()).find((x) => x.job.name === 'a').job
    expect(await queue.retryDlq(a.id)).toBe(1)
    expect(await queue.retryDlq(a.id)).toBe(0)
    await waitFor(() => done.length === 1, 5000)
    const again = await queue.getJob(a.id)
    expect([await again.getState(), again.attemptsMade, again.returnvalue]).toEqual(['completed', 1, 'done'])
    expect(await queue.retryDlqByFilter({ reason: 'explicit_fail' })).toBe(1)
    await waitFor(async () => (await queue.getDlq({ reason: 'explicit_fail' }))[0]?.retries === 1, 5000)
    expect(await queue.retryDlq()).toBe(2)
    await waitFor(async () => (await queue.getDlqStats()).total === 2, 5000)
    const entries = await queue.getDlq()
    expect(entries.map((x) => x.retries).sort()).toEqual([1, 2])
    expect(entries.find((x) => x.job.name === 'c').attempts.length).toBe(3)
    expect(entries.find((x) => x.job.id === 'dead-b').attempts.length).toBe(2)
  })

  it('removes one entry, or all of them', async () => {
    const queue = mkQueue()
    failing(queue)
    await queue.addBulk([1, 2, 3].map((n) => ({ name: 'j', data: { n } })))
    await waitFor(async () => (await queue.getFailedCount()) === 3, 5000)
    const waiting = await queue.add('later', {}, { delay: 60_000 })
    const [newest] = await queue.getDlq({ limit: 1 })
    expect(await queue.removeDlqJob(newest.job.id)).toBe(true)
    expect(await queue.removeDlqJob(newest.job.id)).toBe(false)
    expect(await queue.removeDlqJob(waiting.id)).toBe(false)
    expect(await queue.getJobState(waiting.id)).toBe('delayed')
    expect(await queue.purgeDlq()).toBe(2)
    expect([(await queue.getDlqStats()).total, await queue.getFailedCount()]).toEqual([0, 0])
  })

  it('keeps at most maxEntries, dropping the oldest', async () => {
    const queue = mkQueue()
    expect(await queue.setDlqConfig({ maxEntries: 2 })).toMatchObject({ maxEntries: 2, autoRetry: false })
    const worker = failing(queue)
    let failures = 0
    worker.on('failed', () => failures++)
    for (const n of [1, 2, 3, 4]) await queue.add('j', { n })
    // Acks of two batches may commit out of order on PostgreSQL, each then bounding the DLQ:
    // wait for all four, then for the bound.
    await waitFor(() => failures === 4, 5000)
    await waitFor(async () => (await queue.getFailedCount()) === 2, 5000)
    expect((await queue.getDlq()).map((x) => x.job.data.n)).toEqual([4, 3])
  })

  it('expires entries after maxAge', async () => {
    const queue = mkQueue()
    await queue.setDlqConfig({ maxAge: 300 })
    failing(queue)
    await queue.add('j', {})
    await waitFor(async () => (await queue.getFailedCount()) === 1, 5000)
    const [entry] = await queue.getDlq()
    expect(entry.expiresAt).toBe(entry.enteredAt + 300)
    await waitFor(async () => (await queue.getFailedCount()) === 0, 3000)
    expect(Date.now()).toBeGreaterThanOrEqual(entry.expiresAt)
  })

  it('retries automatically after autoRetryInterval, then gives up', async () => {
    const queue = mkQueue()
    await queue.setDlqConfig({ autoRetry: true, autoRetryInterval: 200, maxAutoRetries: 1 })
    const runs = []
    mkWorker(queue.name, async (job) => {
      runs.push(Date.now())
      throw new Error(`run ${runs.length}`)
    })
    await queue.add('j', {})
    await waitFor(() => runs.length === 2, 5000)
    expect(runs[1] - runs[0]).toBeGreaterThanOrEqual(190)
    await waitFor(async () => (await queue.getFailedCount()) === 1, 5000)
    const [entry] = await queue.getDlq()
    expect([entry.retries, entry.nextRetryAt, entry.attempts.length]).toEqual([1, null, 2])
    await delay(500)
    expect(runs.length).toBe(2)
    expect((await queue.getDlqStats()).pendingAutoRetries).toBe(0)
  })

  it('refuses bad settings and filters, naming them', async () => {
    const queue = mkQueue()
    expect(await queue.getDlqConfig()).toEqual({
      autoRetry: false,
      autoRetryInterval: 3600000,
      maxAutoRetries: 3,
      maxAge: 7 * 24 * 3600 * 1000,
      maxEntries: 10000,
    })
    for (const [config, cls, code, names] of [
      [{ maxEntries: 0 }, RangeError, 'ERR_INVALID_OPTION', 'dlqConfig.maxEntries'],
      [{ maxAge: 1.5 }, RangeError, 'ERR_INVALID_OPTION', 'dlqConfig.maxAge'],
      [{ autoRetry: 'yes' }, TypeError, 'ERR_INVALID_OPTION', 'dlqConfig.autoRetry'],
      [{ ttl: 5 }, TypeError, 'ERR_UNSUPPORTED_OPTION', 'dlqConfig.ttl'],
      [{ maxAge: 10n }, TypeError, 'ERR_INVALID_OPTION', 'dlqConfig.maxAge'],
      [5, TypeError, 'ERR_INVALID_OPTION', 'dlqConfig'],
    ]) {
      const e = await rejection(Promise.resolve().then(() => queue.setDlqConfig(config)))
      expect([e instanceof cls, e.code], String(config)).toEqual([true, code])
      expect(e.message).toContain(names)
    }
    for (const [filter, code, names] of [
      [{ reason: 'lost' }, 'ERR_INVALID_OPTION', 'filter.reason'],
      [{ limit: -1 }, 'ERR_INVALID_OPTION', 'filter.limit'],
      [{ state: 'failed' }, 'ERR_UNSUPPORTED_OPTION', 'filter.state'],
    ]) {
      const e = await rejection(Promise.resolve().then(() => queue.getDlq(filter)))
      expect([e.code, e.message.includes(names)]).toEqual([code, true])
    }
    expect((await queue.getDlqConfig()).maxEntries).toBe(10000)
  })

  it('keeps settings and histories across a restart', async () => {
    const name = uniqueName('dlq')
    const where = backend === 'postgres' ? {} : { dataPath: join(dir, `${name}.db`) }
    const queue = new Queue(name, where)
    await queue.setDlqConfig({ maxEntries: 50, autoRetryInterval: 1234 })
    const worker = new Worker(name, async () => {
      throw new Error('down')
    }, where)
    await queue.add('j', {}, { attempts: 2 })
    await waitFor(async () => (await queue.getFailedCount()) === 1, 5000)
    await worker.close()
    await queue.close()
    const reopened = track(new Queue(name, where))
    expect(await reopened.getDlqConfig()).toMatchObject({ maxEntries: 50, autoRetryInterval: 1234 })
    const [entry] = await reopened.getDlq()
    expect([entry.reason, entry.attempts.map((a) => a.final)]).toEqual(['max_attempts_exceeded', [false, true]])
  })
})
