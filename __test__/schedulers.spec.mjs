// Job schedulers (BullMQ v5's upsertJobScheduler): one pending job per scheduler, the next made
// when it starts; upserts update and never duplicate; a restart neither fires a slot twice nor
// loses the next run, and slots missed while down are skipped; cron patterns land on their
// instants in their time zone. Built on the embedded engine first (memory and SQLite files).
import { describe, it, expect, afterEach, afterAll } from 'vitest'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Queue, Worker, QueueEvents } from '../index.mjs'
import { waitFor, delay, openTracker, itExcept, backend, uniqueName, expectError, rejection, thrown } from './helpers.mjs'

const { track, mkQueue, mkWorker } = openTracker('sched', { Queue, Worker, QueueEvents }, afterEach)
const dir = mkdtempSync(join(tmpdir(), 'ferroqueue-schedulers-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
const embedded = itExcept('postgres', 'job schedulers are built on the embedded engine first; PostgreSQL refuses them (tested below)')

/** The slot (ms) in a scheduler job's id `repeat:{id}:{slot}`. */
const slotOf = (id) => Number(id.slice(id.lastIndexOf(':') + 1))

describe('job schedulers', () => {
  embedded('every: 200 runs at once, then every 200 ms, one job pending at a time', async () => {
    const queue = mkQueue()
    const first = await queue.upsertJobScheduler('tick', { every: 200 }, { name: 'beat', data: { n: 1 } })
    expect([first.name, first.data, first.repeatJobKey]).toEqual(['beat', { n: 1 }, 'tick'])
    const runs = []
    mkWorker(queue.name, (job) => {
      runs.push({ id: job.id, at: Date.now(), key: job.repeatJobKey })
    })
    await waitFor(() => runs.length >= 4, 5000)
    const slots = runs.map((r) => slotOf(r.id))
    expect(new Set(slots).size).toBe(slots.length)
    for (let i = 1; i < slots.length; i++) expect(slots[i] - slots[i - 1]).toBe(200)
    // Each ran at its slot (timers are late, never early).
    for (const r of runs) expect(r.at).toBeGreaterThanOrEqual(slotOf(r.id))
    expect(runs.every((r) => r.key === 'tick')).toBe(true)
    expect(await queue.getDelayedCount()).toBe(1)
    const s = await queue.getJobScheduler('tick')
    expect(s).toMatchObject({ key: 'tick', id: 'tick', name: 'beat', every: 200, template: { data: { n: 1 } } })
    expect(s.iterationCount).toBeGreaterThanOrEqual(5)
    expect(await queue.getJobSchedulersCount()).toBe(1)
    expect(await queue.removeJobScheduler('tick')).toBe(true)
    expect(await queue.removeJobScheduler('tick')).toBe(false)
    expect([await queue.getJobScheduler('tick'), await queue.getDelayedCount()]).toEqual([undefined, 0])
  })

  embedded('upserting the same id updates it and never duplicates its pending job', async () => {
    const queue = mkQueue()
    const start = Date.now() + 60_000
    await queue.upsertJobScheduler('s', { every: 1000, startDate: start })
    await queue.upsertJobScheduler('s', { every: 5000, startDate: start })
    await queue.upsertJobScheduler('s', { every: 5000, startDate: new Date(start) })
    expect(await queue.getDelayedCount()).toBe(1)
    expect(await queue.getJobScheduler('s')).toMatchObject({ every: 5000, next: start, iterationCount: 1 })
    await queue.upsertJobScheduler('t', { pattern: '0 0 1 1 *' })
    const all = await queue.getJobSchedulers(0, -1, true)
    expect(all.map((x) => x.key)).toEqual(['s', 't'])
    expect((await queue.getJobSchedulers()).map((x) => x.key)).toEqual(['t', 's'])
  })

  embedded('a cron pattern with a time zone lands on its local time', async () => {
    const queue = mkQueue()
    await queue.upsertJobScheduler('ny', { pattern: '30 9 * * *', tz: 'America/New_York' })
    const { next } = await queue.getJobScheduler('ny')
    const local = new Intl.DateTimeFormat('en-US', { timeZone: 'America/New_York', hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23' }).format(next)
    expect(local).toBe('09:30:00')
    expect(next).toBeGreaterThan(Date.now())
    expect(next - Date.now()).toBeLessThanOrEqual(25 * 3600 * 1000)
  })

  embedded("BullMQ's repeat option makes a scheduler", async () => {
    const queue = mkQueue()
    const job = await queue.add('report', { x: 1 }, { repeat: { every: 60_000 }, attempts: 2 })
    expect(job.repeatJobKey).toBe('report::::60000')
    expect(await queue.getJobSchedulersCount()).toBe(1)
    expect((await queue.getJob(job.id)).opts.attempts).toBe(2)
  })

  it.skipIf(backend === 'postgres')('in a SQLite file: a restart neither fires a slot twice nor loses the next run, and skips the missed ones', async () => {
    const dataPath = join(dir, `${uniqueName()}.db`)
    const name = uniqueName('sched')
    const runs = []
    const process = (job) => {
      runs.push({ slot: slotOf(job.id), at: Date.now() })
    }
    let queue = new Queue(name, { dataPath })
    let worker = new Worker(name, process, { dataPath })
    await queue.upsertJobScheduler('s', { every: 200 })
    await waitFor(() => runs.length >= 2, 5000)
    await worker.close()
    await queue.close()
    const downAt = Date.now()
    await delay(1000) // about 5 slots pass while nothing runs
    queue = track(new Queue(name, { dataPath }))
    const s = await queue.getJobScheduler('s')
    expect(s.next).toBeGreaterThan(runs.at(-1).slot)
    worker = track(new Worker(name, process, { dataPath }))
    const before = runs.length
    await waitFor(() => runs.length >= before + 3, 5000)
    await worker.close()
    const slots = runs.map((r) => r.slot)
    expect(new Set(slots).size).toBe(slots.length)
    // After the restart: the pending slot ran once, then the grid went on from now, not from
    // the missed slots (no burst): every later slot is in the future of when it was made.
    const after = runs.slice(before)
    expect(after[0].slot).toBeLessThan(downAt + 400)
    expect(after[1].slot).toBeGreaterThan(downAt + 900)
    for (let i = 2; i < after.length; i++) expect(after[i].slot - after[i - 1].slot).toBe(200)
  })

  embedded('refuses bad repeat options and templates, naming them', async () => {
    const queue = mkQueue()
    expectError(await rejection(queue.upsertJobScheduler('x', { pattern: '61 * * * *' })), RangeError, 'ERR_INVALID_OPTION', /^repeat\.pattern /)
    expectError(await rejection(queue.upsertJobScheduler('x', { pattern: '* * * * *', tz: 'Mars/Base' })), RangeError, 'ERR_INVALID_OPTION', /^repeat\.tz /)
    expectError(await rejection(queue.upsertJobScheduler('x', { every: 0 })), RangeError, 'ERR_INVALID_OPTION', /^repeat\.every /)
    expectError(await rejection(queue.upsertJobScheduler('x', {})), TypeError, 'ERR_INVALID_OPTION', /^repeat /)
    expectError(await rejection(queue.upsertJobScheduler('x', { every: 10, offset: 5 })), TypeError, 'ERR_UNSUPPORTED_OPTION', /^repeat\.offset /)
    expectError(await rejection(queue.upsertJobScheduler('x', { every: 10, evry: 5 })), TypeError, 'ERR_INVALID_OPTION', /^repeat\.evry /)
    expectError(await rejection(queue.upsertJobScheduler('x', { every: 10 }, { opts: { jobId: 'a' } })), TypeError, 'ERR_INVALID_OPTION', /^template\.opts /)
    expectError(await rejection(queue.upsertJobScheduler('', { every: 10 })), TypeError, 'ERR_INVALID_OPTION', /^jobSchedulerId /)
    expect(await queue.getJobSchedulersCount()).toBe(0)
  })

  it.skipIf(backend !== 'postgres')('are refused on PostgreSQL until they are built there', async () => {
    const queue = mkQueue()
    expectError(await rejection(queue.upsertJobScheduler('x', { every: 100 })), TypeError, 'ERR_UNSUPPORTED_OPTION', /PostgreSQL/)
    expectError(await rejection(queue.add('x', {}, { repeat: { every: 100 } })), TypeError, 'ERR_UNSUPPORTED_OPTION', /PostgreSQL/)
  })
})
void thrown
