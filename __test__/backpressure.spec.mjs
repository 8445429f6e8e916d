// Back-pressure on a durable engine: with durability 'buffered' nothing waits for commits, so a
// producer can outrun the disk. The writer's uncommitted backlog is bounded: past it, answers
// come as promises that resolve once the writer has room again. The shipped addon cannot stall
// its writer on purpose; scripts/test.sh builds a second one with the `test-hooks` feature
// (debugStallWriter) and names it in FERROQUEUE_TEST_HOOKS.
import { describe, it, expect, afterAll } from 'vitest'
import { createRequire } from 'node:module'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { uniqueName } from './helpers.mjs'

const require = createRequire(import.meta.url)
const hooksPath = process.env.FERROQUEUE_TEST_HOOKS
const dir = mkdtempSync(join(tmpdir(), 'ferroqueue-backpressure-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const LIMIT = 100_000 // storage::BACKLOG_LIMIT
const BATCH = 10_000
const TOTAL = 3_000_000
const STALL_MS = 4_000

describe('a producer that outruns the disk', () => {
  it.skipIf(!hooksPath)(
    'is held back once the writer holds its limit, and memory stops growing (needs FERROQUEUE_TEST_HOOKS)',
    async () => {
      const hooks = require(hooksPath)
      const engine = hooks.openEngine(join(dir, 'bp.db'), false, null)
      const h = hooks.openQueue(engine, uniqueName('bp'), null)
      const text = JSON.stringify(Array.from({ length: BATCH }, (_, i) => ({ name: 'j', data: { i } })))
      const before = process.memoryUsage.rss()
      hooks.debugStallWriter(engine, STALL_MS)
      const started = Date.now()
      let added = 0
      let held = null
      while (added < TOTAL) {
        const r = hooks.addBulk(h, text, Date.now())
        added += BATCH
        if (typeof r.then === 'function') {
          held = r
          break
        }
      }
      const stalledFor = Date.now() - started
      const grown = process.memoryUsage.rss() - before
      // Held back right past the limit, while the disk was still stalled.
      expect(held).not.toBe(null)
      expect(added).toBe(LIMIT + BATCH)
      expect(stalledFor).toBeLessThan(STALL_MS)
      expect(grown).toBeLessThan(200 * 2 ** 20)
      // The held batch was added; its answer comes once the disk catches up.
      expect((await held).length).toBe(BATCH)
      expect(Date.now() - started).toBeGreaterThanOrEqual(STALL_MS / 2)
      // The rest, as fast as it can: every answer awaited only when it is a promise.
      let waits = 0
      while (added < TOTAL) {
        let r = hooks.addBulk(h, text, Date.now())
        if (typeof r.then === 'function') {
          waits++
          r = await r
        }
        expect(r.length).toBe(BATCH)
        added += BATCH
      }
      expect(hooks.count(h)).toBe(TOTAL)
      await hooks.closeEngine(engine)
      // the writer held the producer back whenever it fell behind; log how often
      console.log(`backpressure: ${waits} held-back batches of ${TOTAL / BATCH} after the stall`)
    },
    120_000,
  )
})

describe('a worker whose acks are held back', () => {
  it.skipIf(!hooksPath)(
    'completes every job and reports each once (needs FERROQUEUE_TEST_HOOKS)',
    () => {
      const script = fileURLToPath(new URL('./fixtures/backpressure-worker.cjs', import.meta.url))
      const total = 300_000
      const r = spawnSync(process.execPath, [script, join(dir, 'worker.db'), String(total)], {
        env: { ...process.env },
        encoding: 'utf8',
        timeout: 110_000,
      })
      expect(r.stderr).toBe('')
      const seen = JSON.parse(r.stdout.trim().split('\n').pop())
      expect(seen).toMatchObject({ completed: total, failed: 0, errors: 0 })
      expect(seen.counts).toEqual({ completed: total, failed: 0, active: 0, waiting: 0 })
      // both paths were taken: adds and acks answered with promises while the writer lagged
      expect(seen.held.addBulk).toBeGreaterThan(0)
      expect(seen.held.ack).toBeGreaterThan(0)
    },
    120_000,
  )
})
