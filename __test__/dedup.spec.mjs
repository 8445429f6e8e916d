// Deduplication (BullMQ's `deduplication: { id, ttl?, extend?, replace? }`): while a job holds
// the key of its id, adds with that id add nothing and resolve with it; QueueEvents hear
// `deduplicated`. Runs on every backend.
import { describe, it, expect, afterEach, beforeAll, afterAll } from 'vitest'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Queue, Worker, QueueEvents } from '../index.mjs'
import { uniqueName, delay, waitFor, rejection, openTracker, itExcept } from './helpers.mjs'

const { track, mkQueue, mkWorker, mkEvents } = openTracker('dd', { Queue, Worker, QueueEvents }, afterEach)

describe('deduplication', () => {
  it('without ttl, the holder answers every add until it finishes; then adds go through', async () => {
    const queue = mkQueue()
    const events = mkEvents(queue.name)
    const seen = []
    events.on('deduplicated', (p) => seen.push(p))
    await events.waitUntilReady()
    const opts = { deduplication: { id: 'mail:ada' } }
    const first = await queue.add('mail', { n: 1 }, opts)
    const again = await queue.add('mail', { n: 2 }, opts)
    expect(again.id).toBe(first.id)
    expect(again.data).toEqual({ n: 1 })
    expect(first.deduplicationId).toBe('mail:ada')
    expect(await queue.getDeduplicationJobId('mail:ada')).toBe(first.id)
    expect(await queue.count()).toBe(1)
    await waitFor(() => seen.length === 1)
    expect(seen[0]).toEqual({ jobId: first.id, deduplicationId: 'mail:ada', deduplicatedJobId: '2' })
    const gate = []
    mkWorker(queue.name, () => new Promise((r) => gate.push(r)))
    await waitFor(() => gate.length === 1)
    // Active is not finished: still held.
    expect((await queue.add('mail', { n: 3 }, opts)).id).toBe(first.id)
    gate[0]()
    await waitFor(async () => (await queue.getDeduplicationJobId('mail:ada')) === null)
    const next = await queue.add('mail', { n: 4 }, opts)
    expect(next.id).not.toBe(first.id)
    expect(next.data).toEqual({ n: 4 })
  })

  it('a ttl is a window from the add, whatever the job does; extend restarts it', async () => {
    const queue = mkQueue()
    const ttl = { deduplication: { id: 'w', ttl: 300 } }
    const a = await queue.add('j', {}, ttl)
    expect((await queue.add('j', {}, ttl)).id).toBe(a.id)
    await a.remove()
    // Removing the holder drops its key.
    const b = await queue.add('j', {}, ttl)
    expect(b.id).not.toBe(a.id)
    await delay(350)
    const c = await queue.add('j', {}, ttl)
    expect(c.id).not.toBe(b.id)
    const ext = { deduplication: { id: 'x', ttl: 300, extend: true } }
    const d = await queue.add('j', {}, ext)
    for (let i = 0; i < 4; i++) {
      await delay(150)
      expect((await queue.add('j', {}, ext)).id).toBe(d.id)
    }
    await delay(350)
    expect((await queue.add('j', {}, ext)).id).not.toBe(d.id)
  })

  it('replace swaps a delayed holder for the newest job (debounce)', async () => {
    const queue = mkQueue()
    const events = mkEvents(queue.name)
    const removed = []
    events.on('removed', (p) => removed.push(p))
    await events.waitUntilReady()
    const opts = (i) => ({ deduplication: { id: 'deploy', ttl: 5_000, extend: true, replace: true }, delay: 200 })
    let last
    for (let i = 1; i <= 5; i++) last = await queue.add('deploy', { i }, opts(i))
    expect(await queue.getJobCountByTypes('delayed')).toBe(1)
    const ran = []
    mkWorker(queue.name, async (job) => ran.push(job.data.i))
    await waitFor(() => ran.length === 1)
    expect(ran).toEqual([5])
    expect(await queue.getDeduplicationJobId('deploy')).toBe(last.id)
    await waitFor(() => removed.length === 4)
    expect(removed.every((r) => r.prev === 'delayed')).toBe(true)
  })

  it('removeDeduplicationKey (queue, or job: only its own key) lets the next add through', async () => {
    const queue = mkQueue()
    const opts = { deduplication: { id: 'k' } }
    const a = await queue.add('j', {}, opts)
    expect(await queue.removeDeduplicationKey('k')).toBe(1)
    expect(await queue.removeDeduplicationKey('k')).toBe(0)
    const b = await queue.add('j', {}, opts)
    expect(b.id).not.toBe(a.id)
    expect(await a.removeDeduplicationKey()).toBe(false)
    expect(await b.removeDeduplicationKey()).toBe(true)
    expect(await queue.getDeduplicationJobId('k')).toBe(null)
  })

  it('addBulk deduplicates within a batch and against earlier jobs', async () => {
    const queue = mkQueue()
    const opts = { deduplication: { id: 'b' } }
    const jobs = await queue.addBulk([
      { name: 'j', data: { i: 1 }, opts },
      { name: 'j', data: { i: 2 }, opts },
      { name: 'j', data: { i: 3 } },
    ])
    expect(jobs.map((j) => j.id)).toEqual(['1', '1', '3'])
    expect(await queue.count()).toBe(2)
  })

  it('refuses bad deduplication options, naming them', async () => {
    const queue = mkQueue()
    for (const [opts, code, pattern] of [
      [{ deduplication: {} }, 'ERR_INVALID_OPTION', /^deduplication\.id is required/],
      [{ deduplication: { id: 5 } }, 'ERR_INVALID_OPTION', /^deduplication\.id must be a string/],
      [{ deduplication: { id: 'a', ttl: 0 } }, 'ERR_INVALID_OPTION', /^deduplication\.ttl/],
      [{ deduplication: { id: 'a', replace: true } }, 'ERR_INVALID_OPTION', /^deduplication\.replace needs a ttl/],
      [{ deduplication: { id: 'a', keepLastIfActive: true } }, 'ERR_UNSUPPORTED_OPTION', /^deduplication\.keepLastIfActive/],
    ]) {
      const e = await rejection(queue.add('j', {}, opts))
      expect(e.code).toBe(code)
      expect(e.message).toMatch(pattern)
    }
    expect(await queue.count()).toBe(0)
  })
})

describe('deduplication on a durable queue', () => {
  let dir
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'ferroqueue-dedup-'))
  })
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  itExcept('postgres', 'the SQLite file is the embedded engine; PostgreSQL keeps keys in its dedup table, tested above')('keeps its keys across a restart', async () => {
    const dataPath = join(dir, 'dedup.db')
    const name = uniqueName('durable')
    const q = new Queue(name, { dataPath })
    const held = await q.add('j', {}, { deduplication: { id: 'k' } })
    await q.close()
    const again = track(new Queue(name, { dataPath }))
    expect((await again.add('j', {}, { deduplication: { id: 'k' } })).id).toBe(held.id)
    expect(await again.getDeduplicationJobId('k')).toBe(held.id)
  })
})
