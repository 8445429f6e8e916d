// Durable queues on a SQLite file: restart fidelity, durability modes, engines per path, the
// one-engine-per-file lock between processes, refused files, recovery of active jobs.
import { describe, it, expect, beforeEach, afterEach } from 'vitest'
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync, readFileSync, statSync, openSync, writeSync, closeSync, existsSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Queue, Worker, QueueEvents } from '../index.mjs'
import { once, waitFor, thrown, expectError } from './helpers.mjs'

const holdChild = fileURLToPath(new URL('./fixtures/hold-child.mjs', import.meta.url))
let dir
let open = []
const track = (x) => (open.push(x), x)
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'ferroqueue-durable-'))
})
afterEach(async () => {
  const list = open.reverse()
  open = []
  for (const x of list) await x.close(true)
  rmSync(dir, { recursive: true, force: true })
})

/** Starts the hold child and resolves once it printed `marker`; returns the process and line. */
function startChild(dataPath, mode, marker) {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [holdChild, dataPath, mode], { stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    let err = ''
    p.stdout.on('data', (d) => {
      out += d
      const line = out.split('\n').find((l) => l.startsWith(marker))
      if (line) resolve({ p, line })
    })
    p.stderr.on('data', (d) => (err += d))
    p.on('exit', (code) => reject(new Error(`child exited (${code}) before ${marker}: ${err}`)))
  })
}

function kill(p) {
  return new Promise((resolve) => {
    p.removeAllListeners('exit')
    p.on('exit', resolve)
    p.kill('SIGKILL')
  })
}

describe('durable queues', () => {
  it('come back after close exactly as they were', async () => {
    const dataPath = join(dir, 'q.db')
    const q = new Queue('mail', { dataPath })
    await q.add('plain', { n: 1 })
    await q.add('prio', { n: 2 }, { priority: 5 })
    await q.add('later', { n: 3 }, { delay: 60_000 })
    await q.add('custom', { n: 4 }, { jobId: 'my-id' })
    const w = new Worker('mail', async (job) => {
      await job.updateProgress({ pct: 100 })
      await job.log(`processing ${job.id}`)
      if (job.name === 'prio') throw new Error('nope')
      return { done: job.data.n }
    }, { dataPath })
    await waitFor(async () => (await q.getJobCounts('completed', 'failed')).completed === 2)
    await waitFor(async () => (await q.getJobCounts('failed')).failed === 1)
    await w.close()
    await q.pause()
    const ids = ['1', '2', '3', 'my-id']
    const before = await Promise.all(ids.map((id) => q.getJob(id).then((j) => j.asJSON())))
    const counts = await q.getJobCounts()
    const completed = (await q.getCompleted()).map((j) => j.id)
    const logs = await q.getJobLogs('1')
    await q.close()

    const again = track(new Queue('mail', { dataPath }))
    const after = await Promise.all(ids.map((id) => again.getJob(id).then((j) => j.asJSON())))
    expect(after).toEqual(before)
    expect(await again.getJobCounts()).toEqual(counts)
    expect((await again.getCompleted()).map((j) => j.id)).toEqual(completed)
    expect(await again.isPaused()).toBe(true)
    expect(await again.getJobLogs('1')).toEqual(logs)
    expect(after[0].returnvalue).toEqual({ done: 1 })
    expect(after[0].progress).toEqual({ pct: 100 })
    expect(after[1].failedReason).toBe('nope')
    expect(await again.getJobState('3')).toBe('delayed')
    expect((await again.add('next', {})).id).toBe('4') // custom ids do not use auto ids
    expect((await again.add('dup', {}, { jobId: 'my-id' })).name).toBe('custom')
  })

  it("'buffered' resolves before the commit and still lands; 'fsync' and 'commit' wait", async () => {
    const dataPath = join(dir, 'modes.db')
    const b = new Queue('m', { dataPath, durability: 'buffered' })
    const f = new Queue('m', { dataPath, durability: 'fsync' })
    for (let i = 0; i < 50; i++) await b.add('b', { i })
    await f.add('f', {})
    await b.close()
    await f.close()
    const q = track(new Queue('m', { dataPath }))
    expect(await q.count()).toBe(51)
  })

  it('an add not yet awaited when the queue closes still resolves, and the file can be reopened at once', async () => {
    const dataPath = join(dir, 'race.db')
    const q = new Queue('r', { dataPath })
    const adds = Array.from({ length: 20 }, (_, i) => q.add('x', { i }))
    const closing = q.close()
    // a new object on the same file while the close is still flushing
    const q2 = track(new Queue('r', { dataPath }))
    expect((await Promise.all(adds)).map((j) => j.id)).toEqual(Array.from({ length: 20 }, (_, i) => String(i + 1)))
    await closing
    expect(await q2.count()).toBe(20)
    const next = await q2.add('y', {})
    expect(next.id).toBe('21')
  })

  it('rejects a bad durability or dataPath', () => {
    const e1 = thrown(() => new Queue('x', { dataPath: join(dir, 'x.db'), durability: 'sometimes' }))
    expect(e1).toBeInstanceOf(RangeError)
    expect(e1.code).toBe('ERR_INVALID_OPTION')
    expect(e1.message).toMatch(/durability/)
    const e2 = thrown(() => new Queue('x', { dataPath: 42 }))
    expect(e2).toBeInstanceOf(TypeError)
    expect(e2.message).toMatch(/dataPath/)
    const e3 = thrown(() => new Queue('x', { dataPath: join(dir, 'no', 'such', 'dir', 'x.db') }))
    expect(e3.code).toBe('ERR_STORAGE_IO')
  })

  it('shares one engine per file and keeps different files apart', async () => {
    const a = join(dir, 'a.db')
    const b = join(dir, 'b.db')
    const qa1 = track(new Queue('q', { dataPath: a }))
    const qa2 = track(new Queue('q', { dataPath: join(dir, '.', 'a.db') }))
    const qb = track(new Queue('q', { dataPath: b }))
    const mem = track(new Queue('q'))
    await qa1.add('x', {})
    expect(await qa2.count()).toBe(1)
    expect(await qb.count()).toBe(0)
    expect(await mem.count()).toBe(0)
  })

  it('takes the file from FERROQUEUE_DATA_PATH when no dataPath is given', async () => {
    const dataPath = join(dir, 'env.db')
    const saved = process.env.FERROQUEUE_DATA_PATH
    // The suite's PostgreSQL run sets FERROQUEUE_POSTGRES_URL; both set is refused (tested below).
    const url = process.env.FERROQUEUE_POSTGRES_URL
    delete process.env.FERROQUEUE_POSTGRES_URL
    process.env.FERROQUEUE_DATA_PATH = dataPath
    try {
      const q = new Queue('env')
      await q.add('x', {})
      await q.close()
      process.env.FERROQUEUE_POSTGRES_URL = 'postgresql://nobody@127.0.0.1:1/none'
      expectError(thrown(() => new Queue('env')), RangeError, 'ERR_INVALID_OPTION', /FERROQUEUE_POSTGRES_URL and FERROQUEUE_DATA_PATH are both set/)
    } finally {
      if (saved === undefined) delete process.env.FERROQUEUE_DATA_PATH
      else process.env.FERROQUEUE_DATA_PATH = saved
      if (url === undefined) delete process.env.FERROQUEUE_POSTGRES_URL
      else process.env.FERROQUEUE_POSTGRES_URL = url
    }
    const q = track(new Queue('env', { dataPath }))
    expect(await q.count()).toBe(1)
  })

  it('delivers QueueEvents of a durable queue', async () => {
    const dataPath = join(dir, 'ev.db')
    const q = track(new Queue('ev', { dataPath }))
    const events = track(new QueueEvents('ev', { dataPath }))
    track(new Worker('ev', async () => 'ok', { dataPath }))
    const got = once(events, 'completed')
    const job = await q.add('x', {})
    const [payload] = await got
    expect(payload).toEqual({ jobId: job.id, returnvalue: 'ok', prev: 'active' })
  })

  it('lets one process at a time use a file (ERR_STORAGE_LOCKED)', async () => {
    const dataPath = join(dir, 'locked.db')
    const { p } = await startChild(dataPath, 'hold', 'READY')
    try {
      const e = thrown(() => new Queue('held', { dataPath }))
      expect(e.code).toBe('ERR_STORAGE_LOCKED')
      expect(e.message).toMatch(/in use/)
    } finally {
      await kill(p)
    }
    const q = track(new Queue('held', { dataPath }))
    expect(await q.count()).toBe(0)
  })

  it('refuses a file that is not a ferroqueue database and leaves it untouched', () => {
    const dataPath = join(dir, 'notes.txt')
    writeFileSync(dataPath, 'my precious notes, not a database\n'.repeat(100))
    const before = readFileSync(dataPath)
    const e = thrown(() => new Queue('q', { dataPath }))
    expect(e.code).toBe('ERR_STORAGE_FOREIGN')
    expect(e.message).toMatch(/not a ferroqueue database/)
    expect(readFileSync(dataPath).equals(before)).toBe(true)
  })

  it('refuses a corrupt file and leaves it untouched', async () => {
    const dataPath = join(dir, 'corrupt.db')
    const q = new Queue('q', { dataPath })
    await q.addBulk(Array.from({ length: 3000 }, (_, i) => ({ name: 'x', data: { i, pad: 'p'.repeat(100) } })))
    await q.close()
    const size = statSync(dataPath).size
    const fd = openSync(dataPath, 'r+')
    writeSync(fd, Buffer.alloc(8192, 0xa5), 0, 8192, Math.floor(size / 2))
    closeSync(fd)
    const before = readFileSync(dataPath)
    const e = thrown(() => new Queue('q', { dataPath }))
    expect(e.code).toBe('ERR_STORAGE_CORRUPT')
    expect(readFileSync(dataPath).equals(before)).toBe(true)
    expect(existsSync(dataPath + '-wal')).toBe(false)
  })

  it('puts jobs that were active in a killed process back without spending an attempt, and reports them stalled', async () => {
    const dataPath = join(dir, 'stalled.db')
    const { p, line } = await startChild(dataPath, 'active', 'ACTIVE ')
    const id = line.slice('ACTIVE '.length)
    await kill(p)
    const q = track(new Queue('held', { dataPath }))
    expect(await q.getJobState(id)).toBe('waiting')
    const back = await q.getJob(id)
    expect([back.attemptsMade, back.stalledCounter, back.failedReason]).toEqual([0, 1, undefined])
    const w = track(new Worker('held', async (job) => `redone after ${job.stalledCounter} stall`, { dataPath }))
    const stalled = once(w, 'stalled')
    const completed = once(w, 'completed')
    const [stalledId, prev] = await stalled
    expect(stalledId).toBe(id)
    expect(prev).toBe('active')
    const [job, result] = await completed
    expect(job.id).toBe(id)
    expect(result).toBe('redone after 1 stall')
    const done = await q.getJob(id)
    expect([done.attemptsMade, done.stalledCounter]).toEqual([1, 1])
  })

})
