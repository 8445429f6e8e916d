// A durable queue keeps only the newest finished jobs in memory (FERROQUEUE_FINISHED_IN_MEMORY,
// 10,000 by default; 5 here); the older ones stay readable and changeable through the file.
import { describe, it, expect, beforeAll, afterAll } from 'vitest'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Queue, Worker, QueueEvents, QueueError } from '../index.mjs'
import { collect } from './helpers.mjs'
import { createRequire } from 'node:module'

const binding = createRequire(import.meta.url)('../binding.js')

let dir
let saved
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'ferroqueue-evicted-'))
  saved = process.env.FERROQUEUE_FINISHED_IN_MEMORY
  process.env.FERROQUEUE_FINISHED_IN_MEMORY = '5'
})
afterAll(() => {
  if (saved === undefined) delete process.env.FERROQUEUE_FINISHED_IN_MEMORY
  else process.env.FERROQUEUE_FINISHED_IN_MEMORY = saved
  rmSync(dir, { recursive: true, force: true })
})

describe('finished jobs beyond the in-memory bound', () => {
  it('stay readable, countable, removable, cleanable and retryable through the file', async () => {
    const dataPath = join(dir, 'bound.db')
    const queue = new Queue('bound', { dataPath })
    const worker = new Worker('bound', async (job) => {
      await job.log(`ran ${job.id}`)
      return { id: job.id, n: job.data.n }
    }, { dataPath, concurrency: 4 })
    const done = collect(worker, 'completed', 20)
    await queue.add('first', { n: 0 }, { jobId: 'first' })
    await queue.addBulk(Array.from({ length: 19 }, (_, i) => ({ name: 'n', data: { n: i + 1 } })))
    await done
    await worker.close()

    expect(await queue.getCompletedCount()).toBe(20)
    // the oldest are no longer in memory (the backend answers with a promise: it reads the
    // file), yet read as before
    const pending = binding.getJob(queue._h, 'first')
    expect(pending).toBeInstanceOf(Promise)
    expect(JSON.parse(await pending).id).toBe('first')
    expect(binding.getJob(queue._h, '19')).toEqual(expect.any(String))
    const first = await queue.getJob('first')
    expect(first.returnvalue).toEqual({ id: 'first', n: 0 })
    expect(await queue.getJobState('first')).toBe('completed')
    expect(await first.getState()).toBe('completed')
    expect((await queue.getJobLogs('first')).logs).toEqual(['ran first'])
    const all = await queue.getCompleted()
    expect(all).toHaveLength(20)
    expect(new Set(all.map((j) => j.id)).size).toBe(20)
    const page = await queue.getCompleted(5, 9)
    expect(page.map((j) => j.id)).toEqual(all.slice(5, 10).map((j) => j.id))
    // a duplicate of an evicted custom id is still a duplicate
    const dup = await queue.add('first', { n: 99 }, { jobId: 'first' })
    expect(dup.data).toEqual({ n: 0 })
    expect(await queue.getCompletedCount()).toBe(20)

    // remove and clean reach the file
    const oldest = all[all.length - 1].id
    expect(await queue.remove(oldest)).toBe(1)
    expect(await queue.remove(oldest)).toBe(0)
    expect(await queue.getCompletedCount()).toBe(19)
    const cleaned = await queue.clean(0, 3, 'completed')
    expect(cleaned).toEqual(all.slice(-4, -1).reverse().map((j) => j.id))
    expect(await queue.getCompletedCount()).toBe(16)

    // a change that does not fit a job only the file holds is refused after the file read,
    // with the same error class and code as in memory (built on the JS thread)
    const older = (await queue.getCompleted(14, 14))[0]
    const refused = await older.changeDelay(100).then(() => null, (e) => e)
    expect(refused).toBeInstanceOf(QueueError)
    expect(refused.code).toBe('ERR_JOB_STATE')
    // a job only the file holds can be retried
    const old = (await queue.getCompleted(15, 15))[0]
    await old.retry('completed')
    expect(await queue.getJobState(old.id)).toBe('waiting')
    const w2 = new Worker('bound', async () => 'again', { dataPath })
    const [[job, result]] = await collect(w2, 'completed', 1)
    expect(job.id).toBe(old.id)
    expect(result).toBe('again')
    await w2.close()
    await queue.close()

    // and everything comes back after a restart
    const again = new Queue('bound', { dataPath })
    expect(await again.getCompletedCount()).toBe(16)
    expect((await again.getJob(old.id)).returnvalue).toBe('again')
    await again.close()
  })

  it('a retry and a remove racing on an old job agree with the file', async () => {
    const dataPath = join(dir, 'race.db')
    const queue = new Queue('race', { dataPath })
    const worker = new Worker('race', async () => 1, { dataPath, concurrency: 20 })
    const n = 60
    const done = collect(worker, 'completed', n + 1)
    await queue.addBulk(Array.from({ length: n + 1 }, (_, i) => ({ name: 'x', data: { i } })))
    await done
    await worker.close()
    const outcome = new Map()
    for (let i = 1; i <= n; i++) {
      const id = String(i)
      const job = await queue.getJob(id)
      await Promise.allSettled([job.retry('completed'), queue.remove(id)])
      // whichever won, memory and file must tell the same story (checked after the restart)
      outcome.set(id, await queue.getJobState(id))
    }
    const counts = await queue.getJobCounts('waiting', 'completed')
    await queue.close()
    const again = new Queue('race', { dataPath })
    for (const [id, state] of outcome) expect(await again.getJobState(id)).toBe(state)
    expect(await again.getJobCounts('waiting', 'completed')).toEqual(counts)
    await again.close()
  })

  it('waitUntilFinished resolves for a job finished long ago', async () => {
    const dataPath = join(dir, 'wait.db')
    const queue = new Queue('w', { dataPath })
    const events = new QueueEvents('w', { dataPath })
    const worker = new Worker('w', async (job) => job.data.n, { dataPath })
    const done = collect(worker, 'completed', 12)
    const jobs = await queue.addBulk(Array.from({ length: 12 }, (_, n) => ({ name: 'n', data: { n } })))
    await done
    expect(await jobs[0].waitUntilFinished(events, 2000)).toBe(0)
    await worker.close()
    await events.close()
    await queue.close()
  })
  it('the DLQ reaches failed jobs that live on disk only', async () => {
    const dataPath = join(dir, 'dlq.db')
    const queue = new Queue('dead', { dataPath })
    let fail = true
    const worker = new Worker('dead', async () => {
      if (fail) throw new Error('down')
      return 'ok'
    }, { dataPath })
    const failed = collect(worker, 'failed', 8)
    await queue.addBulk(Array.from({ length: 8 }, (_, i) => ({ name: 'n', data: { n: i } })))
    await failed
    // 5 in memory, 3 on disk only: every entry, with its history.
    const entries = await queue.getDlq()
    expect(entries.map((e) => e.job.data.n)).toEqual([7, 6, 5, 4, 3, 2, 1, 0])
    expect(entries.every((e) => e.reason === 'max_attempts_exceeded' && e.attempts.length === 1)).toBe(true)
    expect((await queue.getDlqStats()).total).toBe(8)
    fail = false
    const done = collect(worker, 'completed', 1)
    expect(await queue.retryDlq(entries[7].job.id)).toBe(1)
    await done
    expect(await queue.getJobState(entries[7].job.id)).toBe('completed')
    // maxEntries trims the file's rows as well as memory's.
    await queue.setDlqConfig({ maxEntries: 3 })
    expect((await queue.getDlq()).map((e) => e.job.data.n)).toEqual([7, 6, 5])
    expect(await queue.getFailedCount()).toBe(3)
    await worker.close()
    await queue.close()
  })
})
