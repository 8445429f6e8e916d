// Retention and cleanup at scale: clean() of 100,000 completed jobs removes exactly those that
// finished before the cut (in memory, in a SQLite file whose older jobs live on disk only, and on
// PostgreSQL); retryJobs and promoteJobs move a whole state in batches, oldest first.
import { describe, it, expect, afterEach, afterAll } from 'vitest'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Queue, Worker, QueueEvents } from '../index.mjs'
import { waitFor, delay, openTracker, backend, uniqueName, expectError, rejection } from './helpers.mjs'

const { track, mkQueue, mkWorker } = openTracker('retain', { Queue, Worker, QueueEvents }, afterEach)
const dir = mkdtempSync(join(tmpdir(), 'ferroqueue-retention-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const HALF = 50_000

/** Adds `n` jobs in batches and waits until `done` of them are completed. */
async function addAndComplete(queue, n, done) {
  for (let i = 0; i < n; i += 5000) {
    await queue.addBulk(Array.from({ length: Math.min(5000, n - i) }, () => ({ name: 'j', data: {} })))
  }
  await waitFor(async () => (await queue.getCompletedCount()) >= done, 120_000, 20)
}

async function cleanExactly(queue) {
  mkWorker(queue.name, () => null, { concurrency: 100, ...queue.opts })
  await addAndComplete(queue, HALF, HALF)
  const old = new Set((await queue.getCompleted(0, -1)).map((j) => j.id))
  expect(old.size).toBe(HALF)
  await delay(40)
  const cut = Date.now()
  await delay(40)
  await addAndComplete(queue, HALF, 2 * HALF)
  const started = performance.now()
  const removed = await queue.clean(Date.now() - cut, 0, 'completed')
  const ms = performance.now() - started
  expect(removed.length).toBe(HALF)
  expect(removed.filter((id) => !old.has(id))).toEqual([])
  expect(await queue.getCompletedCount()).toBe(HALF)
  const left = await queue.getCompleted(0, -1)
  expect(left.filter((j) => old.has(j.id))).toEqual([])
  console.log(`clean of ${HALF} of ${2 * HALF} completed jobs (${backend}${queue.opts.dataPath ? ', SQLite' : ''}): ${ms.toFixed(0)} ms`)
}

describe('clean at scale', () => {
  it('clean() on 100,000 completed jobs removes exactly those that finished before the cut', async () => {
    await cleanExactly(mkQueue())
  }, 180_000)

  it.skipIf(backend === 'postgres')('also in a SQLite file, where the older completed jobs live on disk only', async () => {
    const dataPath = join(dir, `${uniqueName()}.db`)
    const queue = track(new Queue(uniqueName('retain'), { dataPath, durability: 'buffered' }))
    await cleanExactly(queue)
  }, 180_000)
})

describe('retryJobs and promoteJobs', () => {
  it('retryJobs moves every failed job that finished before the timestamp back to waiting, oldest first', async () => {
    const queue = mkQueue()
    const worker = mkWorker(queue.name, async () => {
      throw new Error('no')
    })
    await queue.addBulk(Array.from({ length: 30 }, (_, i) => ({ name: 'j', data: { i } })))
    await waitFor(async () => (await queue.getFailedCount()) === 30)
    await delay(20)
    const cut = Date.now()
    await delay(20)
    await queue.addBulk(Array.from({ length: 5 }, (_, i) => ({ name: 'late', data: { i } })))
    await waitFor(async () => (await queue.getFailedCount()) === 35)
    await worker.close()
    await queue.retryJobs({ count: 7, timestamp: cut })
    expect(await queue.getJobCounts('waiting', 'failed')).toEqual({ waiting: 30, failed: 5 })
    const waiting = await queue.getWaiting(0, -1)
    expect(waiting.map((j) => j.data.i)).toEqual(Array.from({ length: 30 }, (_, i) => i))
    expect(waiting.every((j) => j.failedReason === undefined && j.name === 'j')).toBe(true)
    // Default: every failed job, up to now; then completed ones.
    await queue.retryJobs()
    expect(await queue.getJobCounts('waiting', 'failed')).toEqual({ waiting: 35, failed: 0 })
    const done = mkWorker(queue.name, () => 'ok')
    await waitFor(async () => (await queue.getCompletedCount()) === 35)
    await done.close()
    await queue.retryJobs({ state: 'completed', count: 10 })
    expect(await queue.getJobCounts('waiting', 'completed')).toEqual({ waiting: 35, completed: 0 })
  })

  it('promoteJobs moves every delayed job to waiting, earliest due first', async () => {
    const queue = mkQueue()
    await queue.addBulk(Array.from({ length: 2500 }, (_, i) => ({ name: 'd', data: { i }, opts: { delay: 60_000 + (2500 - i) * 10 } })))
    expect(await queue.getDelayedCount()).toBe(2500)
    await queue.promoteJobs({ count: 1000 })
    expect(await queue.getJobCounts('waiting', 'delayed')).toEqual({ waiting: 2500, delayed: 0 })
    const first = await queue.getWaiting(0, 2)
    expect(first.map((j) => [j.data.i, j.delay])).toEqual([[2499, 0], [2498, 0], [2497, 0]])
  })

  it('refuses bad options, naming them', async () => {
    const queue = mkQueue()
    expectError(await rejection(queue.retryJobs({ state: 'active' })), RangeError, 'ERR_INVALID_OPTION', /^state /)
    expectError(await rejection(queue.retryJobs({ count: 0 })), RangeError, 'ERR_INVALID_OPTION', /^count /)
    expectError(await rejection(queue.promoteJobs({ cout: 5 })), TypeError, 'ERR_INVALID_OPTION', /^opts\.cout /)
  })
})
