// Limits across processes on PostgreSQL: two worker processes (fixtures/pg-limited-worker.mjs)
// already waiting on a queue when this process sets its limits: they find the limits at their
// next claim, and hold them between them (a finished job in one process wakes the other).
//
// Like postgres-processes.spec.mjs, it runs in the embedded pass of scripts/test.sh only.
import { describe, it, expect } from 'vitest'
import { fileURLToPath } from 'node:url'
import { Queue } from '../index.mjs'
import { uniqueName, waitFor, spawnLines } from './helpers.mjs'

const url = process.env.FERROQUEUE_TEST_POSTGRES_URL
const run = url && !process.env.FERROQUEUE_POSTGRES_URL ? describe : describe.skip
const fixture = fileURLToPath(new URL('./fixtures/pg-limited-worker.mjs', import.meta.url))

const start = (name, hold) => spawnLines(fixture, [url, name, String(hold)])

/** `[ms, id]` of each line of `kind` over all processes. */
const marks = (procs, kind) =>
  procs.flatMap((proc) => proc.lines.filter((l) => l.startsWith(`${kind} `)).map((l) => l.slice(2).split(' ')).map(([ms, id]) => [Number(ms), id]))

async function withWorkers(name, hold, body) {
  const procs = [start(name, hold), start(name, hold)]
  try {
    await Promise.all(procs.map((proc) => waitFor(() => proc.lines.includes('READY'), 20_000).catch(() => {
      throw new Error(`a worker did not start: ${proc.stderr}`)
    })))
    await body(procs)
    for (const proc of procs) expect(proc.lines.filter((l) => l.startsWith('ERROR'))).toEqual([])
  } finally {
    for (const proc of procs) proc.p.kill('SIGTERM')
    await Promise.all(procs.map((proc) => proc.exited))
  }
}

run('PostgreSQL: limits across processes', () => {
  it('a cap of 2 set after the workers started holds across two worker processes of concurrency 5', async () => {
    const name = uniqueName('pg-cap')
    const queue = new Queue(name, { connection: url })
    try {
      await queue.add('warm', {})
      await withWorkers(name, 40, async (procs) => {
        await waitFor(() => marks(procs, 'F').length === 1, 10_000)
        await queue.setGlobalConcurrency(2)
        const t0 = Date.now()
        await queue.addBulk(Array.from({ length: 30 }, () => ({ name: 'j', data: {} })))
        await waitFor(() => marks(procs, 'F').length === 31, 20_000)
        // 30 jobs of 40 ms two at a time: about 0.6 s; a slot wake-up lost between processes
        // would wait for a pull's timeout (30 s) instead.
        expect(Date.now() - t0).toBeLessThan(10_000)
        const edges = [...marks(procs, 'S').map(([ms]) => [ms, 1]), ...marks(procs, 'F').map(([ms]) => [ms, -1])]
        // Finishes before starts at the same ms: a slot frees before the next job takes it.
        edges.sort((a, b) => a[0] - b[0] || a[1] - b[1])
        let running = 0
        let most = 0
        for (const [, d] of edges) most = Math.max(most, (running += d))
        expect(most).toBe(2)
      })
    } finally {
      await queue.obliterate({ force: true })
      await queue.close()
    }
  }, 60_000)

  it("a queue's rate limit set from another process holds over workers that have no limiter", async () => {
    const name = uniqueName('pg-rate')
    const queue = new Queue(name, { connection: url })
    try {
      await withWorkers(name, 1, async (procs) => {
        await queue.setGlobalRateLimit(5, 500)
        await queue.addBulk(Array.from({ length: 20 }, () => ({ name: 'j', data: {} })))
        await waitFor(() => marks(procs, 'F').length === 20, 20_000)
        const starts = marks(procs, 'S').map(([ms]) => ms).sort((a, b) => a - b)
        // A full bucket of 5, then one every 100 ms (15 ms of slack for timers and clocks).
        for (let i = 0; i < starts.length; i++) {
          for (let j = i; j < starts.length; j++) {
            const allowed = 5 + Math.floor((5 * (starts[j] - starts[i] + 15)) / 500)
            expect(j - i + 1).toBeLessThanOrEqual(allowed)
          }
        }
        expect(starts[19] - starts[0]).toBeGreaterThan(1_400)
      })
    } finally {
      await queue.obliterate({ force: true })
      await queue.close()
    }
  }, 60_000)
})
