// Job schedulers (BullMQ v5's upsertJobScheduler): one pending job per scheduler, the next made
// when it starts; upserts update and never duplicate; a restart neither fires a slot twice nor
// loses the next run, and slots missed while down are skipped; cron patterns land on their
// instants in their time zone. Every backend; on PostgreSQL also with workers in several
// processes, one of them killed, and the elected process's repair.
import { describe, it, expect, afterEach, afterAll } from 'vitest'
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Queue, Worker, QueueEvents } from '../index.mjs'
import { waitFor, delay, openTracker, backend, uniqueName, expectError, rejection } from './helpers.mjs'

const { track, mkQueue, mkWorker } = openTracker('sched', { Queue, Worker, QueueEvents }, afterEach)
const dir = mkdtempSync(join(tmpdir(), 'ferroqueue-schedulers-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

/** The slot (ms) in a scheduler job's id `repeat:{id}:{slot}`. */
const slotOf = (id) => Number(id.slice(id.lastIndexOf(':') + 1))

describe('job schedulers', () => {
  it('every: 200 runs at once, then every 200 ms, one job pending at a time', async () => {
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

  it('upserting the same id updates it and never duplicates its pending job', async () => {
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

  it('a cron pattern with a time zone lands on its local time', async () => {
    const queue = mkQueue()
    await queue.upsertJobScheduler('ny', { pattern: '30 9 * * *', tz: 'America/New_York' })
    const { next } = await queue.getJobScheduler('ny')
    const local = new Intl.DateTimeFormat('en-US', { timeZone: 'America/New_York', hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23' }).format(next)
    expect(local).toBe('09:30:00')
    expect(next).toBeGreaterThan(Date.now())
    expect(next - Date.now()).toBeLessThanOrEqual(25 * 3600 * 1000)
  })

  it("BullMQ's repeat option makes a scheduler", async () => {
    const queue = mkQueue()
    const job = await queue.add('report', { x: 1 }, { repeat: { every: 60_000 }, attempts: 2 })
    expect(job.repeatJobKey).toBe('report::::60000')
    expect(await queue.getJobSchedulersCount()).toBe(1)
    expect((await queue.getJob(job.id)).opts.attempts).toBe(2)
  })

  it('across a restart (a SQLite file, or PostgreSQL) neither fires a slot twice nor loses the next run, and skips the missed ones', async () => {
    // On PostgreSQL the queue lives in the database named by the environment.
    const where = backend === 'postgres' ? {} : { dataPath: join(dir, `${uniqueName()}.db`) }
    const name = uniqueName('sched')
    const runs = []
    const process = (job) => {
      runs.push({ slot: slotOf(job.id), at: Date.now() })
    }
    let queue = new Queue(name, where)
    let worker = new Worker(name, process, where)
    await queue.upsertJobScheduler('s', { every: 200 })
    await waitFor(() => runs.length >= 2, 5000)
    await worker.close()
    await queue.close()
    const downAt = Date.now()
    await delay(1000) // about 5 slots pass while nothing runs
    queue = track(new Queue(name, where))
    const s = await queue.getJobScheduler('s')
    expect(s.next).toBeGreaterThan(runs.at(-1).slot)
    worker = track(new Worker(name, process, where))
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

  it('refuses bad repeat options and templates, naming them', async () => {
    const queue = mkQueue()
    expectError(await rejection(queue.upsertJobScheduler('x', { pattern: '61 * * * *' })), RangeError, 'ERR_INVALID_OPTION', /^repeat\.pattern /)
    expectError(await rejection(queue.upsertJobScheduler('x', { pattern: '* * * * *', tz: 'Mars/Base' })), RangeError, 'ERR_INVALID_OPTION', /^repeat\.tz /)
    expectError(await rejection(queue.upsertJobScheduler('x', { every: 0 })), RangeError, 'ERR_INVALID_OPTION', /^repeat\.every /)
    expectError(await rejection(queue.upsertJobScheduler('x', {})), TypeError, 'ERR_INVALID_OPTION', /^repeat /)
    expectError(await rejection(queue.upsertJobScheduler('x', { every: 10, offset: 5 })), TypeError, 'ERR_UNSUPPORTED_OPTION', /^repeat\.offset /)
    expectError(await rejection(queue.upsertJobScheduler('x', { every: 10, evry: 5 })), TypeError, 'ERR_INVALID_OPTION', /^repeat\.evry /)
    expectError(await rejection(queue.upsertJobScheduler('x', { every: 10 }, { opts: { jobId: 'a' } })), TypeError, 'ERR_INVALID_OPTION', /^template\.opts /)
    expectError(await rejection(queue.upsertJobScheduler('', { every: 10 })), TypeError, 'ERR_INVALID_OPTION', /^jobSchedulerId /)
    expectError(await rejection(queue.upsertJobScheduler('a\0b', { every: 10 })), RangeError, 'ERR_INVALID_OPTION', /^jobSchedulerId must not contain the character U\+0000/)
    expect(await queue.getJobSchedulersCount()).toBe(0)
  })

  it.skipIf(backend !== 'postgres')('on PostgreSQL, with workers in two processes, one of them killed: each slot once, one job pending, the grid kept', async () => {
    const queue = mkQueue()
    const url = process.env.FERROQUEUE_POSTGRES_URL
    const fixture = fileURLToPath(new URL('./fixtures/pg-scheduler-worker.mjs', import.meta.url))
    const runs = []
    const children = [0, 1].map(() => {
      const p = spawn(process.execPath, [fixture, url, queue.name], { stdio: ['ignore', 'pipe', 'inherit'] })
      let out = ''
      p.ready = new Promise((resolve) => {
        p.stdout.on('data', (d) => {
          out += d
          const lines = out.split('\n')
          out = lines.pop()
          for (const l of lines) {
            if (l === 'READY') resolve()
            else if (l.startsWith('RUN ')) runs.push(l.slice(4))
            else if (l) runs.push(`unexpected: ${l}`)
          }
        })
      })
      return p
    })
    try {
      await Promise.all(children.map((p) => p.ready))
      await queue.upsertJobScheduler('tick', { every: 200 })
      await waitFor(() => runs.length >= 5, 10_000)
      children[0].kill('SIGKILL')
      const before = runs.length
      await waitFor(() => runs.length >= before + 5, 10_000)
    } finally {
      for (const p of children) p.kill('SIGKILL')
    }
    expect(runs.filter((r) => !r.startsWith('repeat:tick:'))).toEqual([])
    const slots = [...new Set(runs.map(slotOf))].sort((a, b) => a - b)
    // A job may run twice only if its worker was killed while running it: a slot is one job.
    expect(runs.length - slots.length).toBeLessThanOrEqual(1)
    for (let i = 1; i < slots.length; i++) {
      expect((slots[i] - slots[i - 1]) % 200).toBe(0)
      expect(slots[i] - slots[i - 1]).toBeGreaterThan(0)
    }
    const pending = await queue.getJobCounts('waiting', 'delayed', 'prioritized')
    expect(pending.waiting + pending.delayed + pending.prioritized).toBe(1)
  })

  it("a scheduler whose pending job is removed skips that run and goes on (on PostgreSQL by the elected process's repair)", async () => {
    const queue = mkQueue()
    const job = await queue.upsertJobScheduler('s', { every: 1000 })
    expect(await queue.remove(job.id)).toBe(1)
    const slot = slotOf(job.id)
    // At once in one process; on PostgreSQL the elected process looks every 5 s.
    const s = await waitFor(async () => {
      const now = await queue.getJobScheduler('s')
      return now.next > slot && now
    }, 8000, 100)
    expect((s.next - slot) % 1000).toBe(0)
    expect(await queue.getJobState(`repeat:s:${s.next}`)).toMatch(/^(waiting|delayed)$/)
    expect(s.iterationCount).toBe(2)
  })
})
