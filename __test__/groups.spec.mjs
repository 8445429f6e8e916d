// Job groups (BullMQ Pro's `group`): ungrouped jobs first, then the groups in round-robin,
// each FIFO by group priority; a group's concurrency, rate limit and pause hold only that group.
// Runs on every backend.
import { describe, it, expect, afterEach, beforeAll, afterAll } from 'vitest'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Queue, Worker, QueueEvents } from '../index.mjs'
import { uniqueName, delay, waitFor, rejection, openTracker, itExcept } from './helpers.mjs'

const { track, mkQueue, mkWorker } = openTracker('grp', { Queue, Worker, QueueEvents }, afterEach)

const grouped = (g, i, extra = {}) => ({ name: 'j', data: { g, i }, opts: { group: { id: g, ...extra } } })

/** Resolves once `n` jobs completed over `workers`. */
function completions(workers, n) {
  let seen = 0
  return new Promise((resolve) => {
    for (const w of workers) w.on('completed', () => ++seen === n && resolve())
  })
}

/** Checks that each group's jobs ran in the order of their `i`. */
function expectFifoPerGroup(order) {
  const last = new Map()
  for (const { g, i } of order) {
    expect(i, `group ${g}`).toBeGreaterThan(last.get(g) ?? -1)
    last.set(g, i)
  }
}

describe('groups', () => {
  it('a group of 10 is not starved by one of 1,000, and each group is FIFO', async () => {
    const queue = mkQueue()
    await queue.addBulk(Array.from({ length: 1000 }, (_, i) => grouped('A', i)))
    await queue.addBulk(Array.from({ length: 10 }, (_, i) => grouped('B', i)))
    const order = []
    const w = mkWorker(queue.name, async (job) => {
      order.push(job.data)
    }, { concurrency: 4 })
    await completions([w], 1010)
    const shown = order.slice(0, 40).map((d) => `${d.g}${d.i}`).join(' ')
    const lastB = order.findLastIndex((d) => d.g === 'B')
    // Round-robin: B's 10 jobs are done within the first ~20 (a batch of slack), not after A's 1,000.
    expect(lastB, shown).toBeLessThan(30)
    expectFifoPerGroup(order)
  })

  it('ungrouped jobs go first, then the groups in turn', async () => {
    const queue = mkQueue()
    await queue.addBulk([grouped('A', 0), grouped('A', 1), grouped('B', 0)])
    await queue.add('plain', { g: '-', i: 0 })
    const order = []
    const w = mkWorker(queue.name, async (job) => {
      order.push(`${job.data.g}${job.data.i}`)
    })
    await completions([w], 4)
    expect(order).toEqual(['-0', 'A0', 'B0', 'A1'])
  })

  it('group concurrency 1 is strictly serial per group, and the groups run side by side', async () => {
    const queue = mkQueue()
    const groups = ['x', 'y', 'z']
    await queue.addBulk(groups.flatMap((g) => Array.from({ length: 8 }, (_, i) => grouped(g, i))))
    const active = new Map()
    let most = 0
    let together = 0
    const order = []
    const w = mkWorker(
      queue.name,
      async (job) => {
        const g = job.data.g
        active.set(g, (active.get(g) ?? 0) + 1)
        most = Math.max(most, active.get(g))
        together = Math.max(together, [...active.values()].filter((n) => n > 0).length)
        order.push(job.data)
        await delay(5)
        active.set(g, active.get(g) - 1)
      },
      { concurrency: 10, group: { concurrency: 1 } },
    )
    await completions([w], 24)
    expect(most).toBe(1)
    expect(together).toBeGreaterThan(1)
    expectFifoPerGroup(order)
  })

  it("a group's own concurrency overrides the workers' default", async () => {
    const queue = mkQueue()
    await queue.setGroupConcurrency('A', 3)
    expect(await queue.getGroupConcurrency('A')).toBe(3)
    expect(await queue.getGroupConcurrency('B')).toBe(null)
    await queue.addBulk(Array.from({ length: 12 }, (_, i) => grouped('A', i)))
    let active = 0
    let most = 0
    const w = mkWorker(
      queue.name,
      async () => {
        most = Math.max(most, ++active)
        await delay(10)
        active--
      },
      { concurrency: 10, group: { concurrency: 1 } },
    )
    await completions([w], 12)
    expect(most).toBe(3)
    await queue.removeGroupConcurrency('A')
    expect(await queue.getGroupConcurrency('A')).toBe(null)
  })

  it('a rate-limited group waits alone while the others run', async () => {
    const queue = mkQueue()
    await queue.setGroupRateLimit('slow', 2, 600)
    expect(await queue.getGroupRateLimit('slow')).toEqual({ max: 2, duration: 600 })
    await queue.addBulk([
      ...Array.from({ length: 5 }, (_, i) => grouped('slow', i)),
      ...Array.from({ length: 5 }, (_, i) => grouped('fast', i)),
    ])
    const done = { slow: [], fast: [] }
    const t0 = performance.now()
    const w = mkWorker(
      queue.name,
      async (job) => {
        done[job.data.g].push(performance.now() - t0)
      },
      { concurrency: 2 },
    )
    await completions([w], 10)
    // Two at once from a full bucket, then one every 300 ms: the fifth starts after ~900 ms.
    expect(done.slow[4]).toBeGreaterThan(800)
    expect(Math.max(...done.fast)).toBeLessThan(done.slow[3])
    await queue.removeGroupRateLimit('slow')
    expect(await queue.getGroupRateLimit('slow')).toBe(null)
  })

  it('a paused group keeps its jobs while the others run, until resumed', async () => {
    const queue = mkQueue()
    expect(await queue.pauseGroup('A')).toBe(true)
    expect(await queue.pauseGroup('A')).toBe(false)
    expect(await queue.isGroupPaused('A')).toBe(true)
    await queue.addBulk([grouped('A', 0), grouped('A', 1), grouped('B', 0)])
    const seen = []
    const w = mkWorker(queue.name, async (job) => {
      seen.push(job.data.g)
    })
    await waitFor(() => seen.length === 1)
    await delay(100)
    expect(seen).toEqual(['B'])
    expect(await queue.getGroupJobsCount('A')).toBe(2)
    expect(await queue.resumeGroup('A')).toBe(true)
    expect(await queue.resumeGroup('A')).toBe(false)
    await waitFor(() => seen.length === 3)
    expect(seen).toEqual(['B', 'A', 'A'])
    expect(w.isRunning()).toBe(true)
  })

  it('getters: group jobs by group priority, counts per group and in all groups', async () => {
    const queue = mkQueue()
    await queue.addBulk([
      grouped('A', 0, { priority: 5 }),
      grouped('A', 1),
      grouped('A', 2, { priority: 1 }),
      grouped(7, 0),
    ])
    await queue.add('plain', {})
    const jobs = await queue.getGroupJobs('A')
    expect(jobs.map((j) => j.data.i)).toEqual([1, 2, 0])
    expect((await queue.getGroupJobs('A', 1, 1)).map((j) => j.data.i)).toEqual([2])
    expect((await queue.getGroupJobs('7')).length).toBe(1)
    expect(await queue.getGroupJobsCount(7)).toBe(1)
    expect(await queue.getGroupsJobsCount()).toBe(4)
    expect(await queue.getGroupJobsCount('none')).toBe(0)
    // Grouped jobs are waiting (or prioritized) jobs of the queue too.
    expect(await queue.getWaitingCount()).toBe(3)
    expect(await queue.getPrioritizedCount()).toBe(2)
    expect(jobs[0].opts.group).toEqual({ id: 'A' })
    const w = mkWorker(queue.name, async () => delay(200), { concurrency: 5 })
    await waitFor(async () => (await queue.getGroupActiveCount('A')) === 3)
    expect(await queue.getGroupsJobsCount()).toBe(0)
    await w.close()
  })
})

describe('group options', () => {
  it('refuses bad job options with errors that name them', async () => {
    const queue = mkQueue()
    const cases = [
      [{ group: { id: 'A' }, priority: 1 }, 'ERR_INVALID_OPTION', /priority.*group\.priority/],
      [{ group: {} }, 'ERR_INVALID_OPTION', /group\.id/],
      [{ group: { id: '' } }, 'ERR_INVALID_OPTION', /group\.id/],
      [{ group: { id: 1.5 } }, 'ERR_INVALID_OPTION', /group\.id/],
      [{ group: { id: 'A', priority: -1 } }, 'ERR_INVALID_OPTION', /group\.priority/],
      [{ group: { id: 'A', maxSize: 10 } }, 'ERR_UNSUPPORTED_OPTION', /group\.maxSize/],
      [{ group: 'A' }, 'ERR_INVALID_OPTION', /opts/],
    ]
    for (const [opts, code, message] of cases) {
      const e = await rejection(queue.add('j', {}, opts))
      expect(e.code, JSON.stringify(opts)).toBe(code)
      expect(e.message).toMatch(message)
    }
    expect(await queue.count()).toBe(0)
  })

  it("refuses a bad Worker group option and bad group ids", async () => {
    const queue = mkQueue()
    const bad = [
      [{ group: 1 }, TypeError, /group/],
      [{ group: { concurrency: 0 } }, RangeError, /group\.concurrency/],
      [{ group: { limit: { max: 1 } } }, TypeError, /group\.limit\.duration/],
      [{ group: { limit: { max: 0, duration: 1 } } }, RangeError, /group\.limit\.max/],
      [{ group: { limit: { max: 1, duration: 1, x: 1 } } }, TypeError, /group\.limit\.x/],
      [{ group: { maxSize: 3 } }, TypeError, /group\.maxSize/],
    ]
    for (const [opts, Class, message] of bad) {
      expect(() => new Worker(queue.name, async () => {}, { ...opts, autorun: false })).toThrow(Class)
      expect(() => new Worker(queue.name, async () => {}, { ...opts, autorun: false })).toThrow(message)
    }
    await expect(queue.setGroupConcurrency({}, 1)).rejects.toThrow(/groupId/)
    await expect(queue.setGroupConcurrency('A', 0)).rejects.toThrow(RangeError)
    await expect(queue.setGroupRateLimit('A', 1, 0)).rejects.toThrow(/duration/)
    await expect(queue.getGroupJobs('')).rejects.toThrow(/groupId/)
    await expect(queue.getGroupsJobsCount(0)).rejects.toThrow(/maxGroups/)
  })
})

describe('groups on a durable queue', () => {
  let dir
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'ferroqueue-groups-'))
  })
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  itExcept('postgres', 'the SQLite file is the embedded engine; PostgreSQL keeps groups in its tables, tested above')(
    'keeps grouped jobs and group settings across a restart',
    async () => {
      const dataPath = join(dir, 'groups.db')
      const name = uniqueName('durable')
      const q = new Queue(name, { dataPath })
      await q.addBulk([grouped('A', 0), grouped('A', 1), grouped('B', 0)])
      await q.setGroupConcurrency('A', 2)
      await q.setGroupRateLimit('B', 3, 1_000)
      await q.pauseGroup('C')
      await q.close()
      const again = track(new Queue(name, { dataPath }))
      expect(await again.getGroupConcurrency('A')).toBe(2)
      expect(await again.getGroupRateLimit('B')).toEqual({ max: 3, duration: 1_000 })
      expect(await again.isGroupPaused('C')).toBe(true)
      expect((await again.getGroupJobs('A')).map((j) => j.data.i)).toEqual([0, 1])
      expect(await again.getGroupsJobsCount()).toBe(3)
    },
  )
})
