// PostgreSQL faults: the server crashes (immediate shutdown: every connection cut) and comes
// back mid-run. Calls in flight settle with a clear error instead of hanging; the producer's
// retries (custom jobIds make them safe) and the worker reconnect; nothing acknowledged is lost,
// and a job runs twice only when its acknowledgement was cut off (it comes back when its lease
// expires: the worker's lockDuration of 3 s); jobs held ahead (prefetch) are given back at the
// first failed ack.
//
// The test starts a server of its own (scripts/postgres.sh) so that crashing it disturbs no other
// test file, and runs in the embedded pass of scripts/test.sh only (it names its connection).
import { describe, it, expect } from 'vitest'
import { execFileSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { Queue, Worker, QueueError } from '../index.mjs'
import { uniqueName, waitFor } from './helpers.mjs'

const run = process.env.FERROQUEUE_TEST_POSTGRES_URL && !process.env.FERROQUEUE_POSTGRES_URL ? describe : describe.skip
const script = fileURLToPath(new URL('../scripts/postgres.sh', import.meta.url))
const JOBS = 3_000
const CONCURRENCY = 20

function server(...args) {
  return execFileSync('bash', [script, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] })
}

run('PostgreSQL faults', () => {
  it('a server crash mid-run: pending calls reject with ERR_STORAGE_IO, everything reconnects, nothing acknowledged is lost', async () => {
    const env = Object.fromEntries([...server('start').matchAll(/export (\w+)=(\S+)/g)].map((m) => [m[1], m[2]]))
    const url = env.FERROQUEUE_TEST_POSTGRES_URL
    const name = uniqueName('pg-crash')
    const queue = new Queue(name, { connection: url })
    const runs = new Map()
    const worker = new Worker(name, async (job) => {
      runs.set(job.id, (runs.get(job.id) ?? 0) + 1)
      await new Promise((r) => setTimeout(r, 1))
      return job.data.i
    }, { connection: url, concurrency: CONCURRENCY, lockDuration: 3000, stalledInterval: 500 })
    const errors = []
    worker.on('error', (e) => errors.push(e))
    // The run after which each job was acknowledged (the Worker's `completed` comes after the
    // commit), and jobs acknowledged twice.
    const ackedAfterRun = new Map()
    const ackedTwice = []
    worker.on('completed', (job) => {
      if (ackedAfterRun.has(job.id)) ackedTwice.push(job.id)
      ackedAfterRun.set(job.id, runs.get(job.id))
    })
    try {
      // The producer: batches of 100 with custom ids, each retried until it resolves.
      const acknowledged = new Set()
      const produce = (async () => {
        for (let from = 0; from < JOBS; from += 100) {
          const batch = Array.from({ length: 100 }, (_, k) => ({ name: 'j', data: { i: from + k }, opts: { jobId: `j${from + k}` } }))
          for (;;) {
            try {
              for (const job of await queue.addBulk(batch)) acknowledged.add(job.id)
              break
            } catch (e) {
              expect(e).toBeInstanceOf(QueueError)
              expect(e.code).toBe('ERR_STORAGE_IO')
              await new Promise((r) => setTimeout(r, 50))
            }
          }
        }
      })()
      await waitFor(() => runs.size >= 1000, 30_000)

      // Calls in flight when the connections are cut settle, each at once or with a clear error.
      const pending = Array.from({ length: 20 }, (_, k) => (k % 2 ? queue.getJobCounts() : queue.add('extra', { i: -k }, { jobId: `x${k}` })))
      server('crash', env.PG_TEST_DIR)
      const settled = await Promise.race([
        Promise.allSettled(pending),
        new Promise((r) => setTimeout(() => r('hung'), 10_000)),
      ])
      expect(settled).not.toBe('hung')
      for (const s of settled) {
        if (s.status === 'rejected') {
          expect(s.reason).toBeInstanceOf(QueueError)
          expect(s.reason.code).toBe('ERR_STORAGE_IO')
        }
      }
      await produce
      // An add cut off may have committed or not; one that resolved has.
      const extras = []
      for (let k = 0; k < 20; k += 2) {
        const job = await queue.getJob(`x${k}`)
        if (settled[k].status === 'fulfilled') expect(job, `x${k}`).toBeDefined()
        if (job) extras.push(job)
      }

      // Jobs whose acknowledgement was cut off come back after their lease.
      await waitFor(async () => (await queue.getCompletedCount().catch(() => 0)) >= JOBS + extras.length, 90_000, 200)
      const counts = await queue.getJobCounts()
      expect(counts).toMatchObject({ completed: JOBS + extras.length, active: 0, waiting: 0, failed: 0 })
      expect(acknowledged.size).toBe(JOBS)
      for (const id of acknowledged) expect(runs.get(id), id).toBeGreaterThanOrEqual(1)
      // A job runs twice only when the acknowledgement of its first run was cut off: it is
      // acknowledged once, after its last run. (How many that is depends on how many acks were
      // in flight when the server went down: with prefetch, up to ~100 here.)
      expect(ackedTwice).toEqual([])
      const twice = [...runs].filter(([, n]) => n > 1)
      expect(twice.filter(([id, n]) => ackedAfterRun.get(id) !== n)).toEqual([])
      expect(twice.length).toBeLessThan(JOBS / 10)
      for (const e of errors) expect(e.code).toBe('ERR_STORAGE_IO')
    } finally {
      await worker.close(true).catch(() => {})
      await queue.close().catch(() => {})
      server('stop', env.PG_TEST_DIR)
    }
  }, 180_000)
})
