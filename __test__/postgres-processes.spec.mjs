// Many processes on one PostgreSQL queue: a producer, two workers and QueueEvents, each its own
// process (fixtures/pg-role.mjs, on the runtime running this test). One worker is killed with
// SIGKILL mid-run: the jobs it held come back when their lease expires (the workers' lockDuration
// of 3 s) and complete on the other; every job completes exactly once.
//
// It runs in the embedded pass of scripts/test.sh only (it names its connection itself, so the
// PostgreSQL pass would run it a second time for nothing).
import { describe, it, expect } from 'vitest'
import { fileURLToPath } from 'node:url'
import { Queue } from '../index.mjs'
import { uniqueName, waitFor, spawnLines } from './helpers.mjs'

const url = process.env.FERROQUEUE_TEST_POSTGRES_URL
const run = url && !process.env.FERROQUEUE_POSTGRES_URL ? describe : describe.skip
const role = fileURLToPath(new URL('./fixtures/pg-role.mjs', import.meta.url))
const JOBS = 20_000

/** A child process of one role, with the lines it printed so far (whole lines only). */
const start = (args) => spawnLines(role, args)

/** The ids of one kind of line (`S`, `C`, `A`, `E`) a process printed, with repeats. */
const idsOf = (proc, kind) => proc.lines.filter((l) => l.startsWith(`${kind} `)).map((l) => l.slice(2))

run('PostgreSQL: many processes on one queue', () => {
  it(`a producer, two workers and QueueEvents in four processes complete ${JOBS} jobs once each, through a SIGKILL`, async () => {
    const name = uniqueName('pg-procs')
    const events = start(['events', url, name])
    const workers = [start(['worker', url, name]), start(['worker', url, name])]
    const all = [events, ...workers]
    let producer
    try {
      const ready = (proc) => waitFor(() => proc.lines.includes('READY'), 20_000).catch(() => {
        throw new Error(`a process did not start: ${proc.stderr}`)
      })
      await Promise.all(all.map(ready))
      producer = start(['producer', url, name, String(JOBS)])
      all.push(producer)
      await ready(producer)

      // Mid-run: the first worker has completed some jobs and holds others.
      const [killed, survivor] = workers
      await waitFor(() => idsOf(killed, 'C').length >= 2000, 60_000)
      killed.p.kill('SIGKILL')
      expect((await killed.exited).signal).toBe('SIGKILL')

      await waitFor(() => producer.lines.includes('DONE'), 60_000).catch(() => {
        throw new Error(`the producer did not finish: ${producer.stderr}`)
      })
      // The killed worker's jobs come back after their 3 s lease and the sweep that follows.
      await waitFor(() => new Set(idsOf(events, 'E')).size >= JOBS, 90_000, 100).catch(() => {
        throw new Error(`QueueEvents heard ${new Set(idsOf(events, 'E')).size} of ${JOBS} completions; worker: ${survivor.stderr}`)
      })

      // Nothing acknowledged is lost: every add that resolved is a job, and it completed.
      const acknowledged = idsOf(producer, 'A')
      expect(new Set(acknowledged).size).toBe(JOBS)
      const queue = new Queue(name, { connection: url })
      try {
        const counts = await queue.getJobCounts()
        expect(counts).toMatchObject({ completed: JOBS, active: 0, waiting: 0, delayed: 0, failed: 0 })
      } finally {
        await queue.obliterate({ force: true })
        await queue.close()
      }

      // Completed once: one completed event per job, and no job acknowledged by both workers.
      const heard = idsOf(events, 'E')
      expect(heard.length).toBe(JOBS)
      const byKilled = new Set(idsOf(killed, 'C'))
      const bySurvivor = idsOf(survivor, 'C')
      expect(new Set(bySurvivor).size).toBe(bySurvivor.length)
      expect(bySurvivor.filter((id) => byKilled.has(id))).toEqual([])
      // A completion nobody printed is one the killed worker committed as it died.
      const survivorDid = new Set(bySurvivor)
      const startedByKilled = new Set(idsOf(killed, 'S'))
      expect(heard.filter((id) => !byKilled.has(id) && !survivorDid.has(id) && !startedByKilled.has(id))).toEqual([])

      // Jobs the killed worker held came back after their lease and completed on the survivor.
      // (The killed process's last lines may be lost with it: the survivor says which it got
      // a second time.)
      const redone = idsOf(survivor, 'R')
      expect(redone.length).toBeGreaterThan(0)
      expect(redone.filter((id) => !survivorDid.has(id))).toEqual([])
      expect(redone.filter((id) => byKilled.has(id))).toEqual([])
      // QueueEvents heard each stall.
      expect(new Set(idsOf(events, 'T')).size).toBeGreaterThanOrEqual(new Set(redone).size)
      expect(survivor.lines.filter((l) => l.startsWith('ERROR'))).toEqual([])
    } finally {
      for (const proc of all) proc.p.kill('SIGKILL')
      await Promise.all(all.map((proc) => proc.exited))
    }
  }, 180_000)
})
