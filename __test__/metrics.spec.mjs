// Metrics, as BullMQ's: the Worker option `metrics`, `queue.getMetrics` (per-minute counts of
// completed and failed jobs), `getWorkers` / `getWorkersCount`, `toKey`, and
// `exportPrometheusMetrics`, parsed with a Prometheus text parser. Every backend; on PostgreSQL
// a Worker of another process is listed too. The minute arithmetic is tested on a mock clock in
// Rust (crates/engine/src/domain/metrics_tests.rs, application/engine_tests/metrics.rs).
import { describe, it, expect, afterEach, afterAll } from 'vitest'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import parsePrometheus from 'parse-prometheus-text-format'
import { Queue, Worker, QueueEvents, MetricsTime } from '../index.mjs'
import { waitFor, openTracker, backend, uniqueName, thrown, rejection, expectError, spawnLines } from './helpers.mjs'

const { mkQueue, mkWorker, track } = openTracker('metrics', { Queue, Worker, QueueEvents }, afterEach)
const dir = mkdtempSync(join(tmpdir(), 'ferroqueue-metrics-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

/** Runs `count` jobs through `worker`'s queue; every fifth fails for good. */
async function runJobs(queue, worker, count) {
  let finished = 0
  worker.on('completed', () => finished++)
  worker.on('failed', () => finished++)
  await queue.addBulk(Array.from({ length: count }, (_, n) => ({ name: 'n', data: { n } })))
  await waitFor(() => finished === count, 10_000)
}

const failEveryFifth = async (job) => {
  if (job.data.n % 5 === 0) throw new Error('fifth')
  return job.data.n
}

/** BullMQ's getMetrics answer is self-consistent: the finished minutes and this one add up. */
function expectConsistent(m, points) {
  expect(m.data.length).toBe(m.count)
  expect(m.count).toBeLessThanOrEqual(points)
  const thisMinute = m.meta.count - m.meta.prevCount
  expect(m.data.reduce((a, b) => a + b, 0) + thisMinute).toBe(m.meta.count)
  expect(m.meta.prevTS % 60_000).toBe(0)
}

describe('metrics', () => {
  it('MetricsTime has BullMQ\'s spans in minutes', () => {
    expect(MetricsTime.ONE_MINUTE).toBe(1)
    expect(MetricsTime.ONE_HOUR).toBe(60)
    expect(MetricsTime.ONE_WEEK).toBe(10_080)
    expect(MetricsTime.TWO_WEEKS).toBe(20_160)
  })

  it('getMetrics counts completed and failed jobs once a Worker asks, per minute', async () => {
    const queue = mkQueue()
    const before = await queue.getMetrics('completed')
    expect(before).toEqual({ meta: { count: 0, prevTS: 0, prevCount: 0 }, data: [], count: 0 })
    const worker = mkWorker(queue.name, failEveryFifth, { metrics: { maxDataPoints: MetricsTime.ONE_HOUR } })
    await runJobs(queue, worker, 50)
    const completed = await queue.getMetrics('completed')
    const failed = await queue.getMetrics('failed')
    expect(completed.meta.count).toBe(40)
    expect(failed.meta.count).toBe(10)
    expectConsistent(completed, 60)
    expectConsistent(failed, 60)
    // A range of data points, as Redis's LRANGE: here within what is kept.
    const some = await queue.getMetrics('completed', 0, 0)
    expect(some.data.length).toBe(Math.min(1, some.count))
  })

  it('a retried attempt is not a failure, and a Worker without the option records nothing', async () => {
    const queue = mkQueue()
    const plain = mkWorker(queue.name, async () => 1)
    await runJobs(queue, plain, 5)
    await plain.close()
    expect((await queue.getMetrics('completed')).meta.count).toBe(0)
    let tries = 0
    const worker = mkWorker(queue.name, async () => {
      if (++tries === 1) throw new Error('once')
      return 1
    }, { metrics: {} })
    const done = new Promise((resolve) => worker.on('completed', resolve))
    await queue.add('retried', {}, { attempts: 2 })
    await done
    expect((await queue.getMetrics('failed')).meta.count).toBe(0)
    expect((await queue.getMetrics('completed')).meta.count).toBe(1)
  })

  it('refuses bad metrics options and types, naming them', async () => {
    const queue = mkQueue()
    expectError(thrown(() => new Worker(queue.name, async () => {}, { metrics: 5 })), TypeError, 'ERR_INVALID_OPTION', /^metrics /)
    expectError(thrown(() => new Worker(queue.name, async () => {}, { metrics: { maxDataPoints: 0 } })), RangeError, 'ERR_INVALID_OPTION', /metrics\.maxDataPoints/)
    expectError(thrown(() => new Worker(queue.name, async () => {}, { metrics: { maxDataPoints: 1.5 } })), RangeError, 'ERR_INVALID_OPTION', /metrics\.maxDataPoints/)
    expectError(thrown(() => new Worker(queue.name, async () => {}, { metrics: { points: 10 } })), TypeError, 'ERR_INVALID_OPTION', /metrics\.points/)
    expectError(await rejection(queue.getMetrics('active')), RangeError, 'ERR_INVALID_OPTION', /^type /)
    expectError(await rejection(queue.getMetrics('completed', 0.5)), RangeError, 'ERR_INVALID_OPTION', /^start /)
    expectError(await rejection(queue.exportPrometheusMetrics({ 'bad-name': 'x' })), RangeError, 'ERR_INVALID_OPTION', /globalVariables/)
    expectError(await rejection(queue.exportPrometheusMetrics({ env: {} })), TypeError, 'ERR_INVALID_OPTION', /globalVariables\.env/)
  })

  it('getWorkers lists the live Workers of the queue, named as their option says', async () => {
    const queue = mkQueue()
    const other = mkQueue()
    const a = mkWorker(queue.name, async () => 1, { name: 'mailer' })
    mkWorker(queue.name, async () => 1)
    mkWorker(other.name, async () => 1)
    await waitFor(async () => (await queue.getWorkersCount()) === 2)
    const workers = await queue.getWorkers()
    const client = `bull:${Buffer.from(queue.name).toString('base64')}`
    expect(workers.map((w) => w.rawname).sort()).toEqual([client, `${client}:w:mailer`])
    for (const w of workers) {
      expect(w).toMatchObject({ name: queue.name, pid: process.pid })
      expect(typeof w.id).toBe('string')
      expect(Number(w.age)).toBeGreaterThanOrEqual(0)
      expect(Date.now() - w.started).toBeLessThan(60_000)
    }
    expect(new Set(workers.map((w) => w.id)).size).toBe(2)
    await a.close()
    expect(await queue.getWorkersCount()).toBe(1)
  })

  it('a Worker with worker threads is one Worker', async () => {
    const queue = mkQueue()
    const file = fileURLToPath(new URL('./fixtures/processors/echo.cjs', import.meta.url))
    const worker = track(new Worker(queue.name, file, { useWorkerThreads: true, threads: 2, metrics: {} }))
    const done = new Promise((resolve) => worker.on('completed', resolve))
    await queue.add('t', { n: 1 })
    await done
    expect(await queue.getWorkersCount()).toBe(1)
    expect((await queue.getMetrics('completed')).meta.count).toBe(1)
  })

  it('toKey names a key as BullMQ does', () => {
    const queue = mkQueue()
    expect(queue.toKey('wait')).toBe(`bull:${queue.name}:wait`)
    const prefixed = mkQueue({ prefix: 'app' })
    expect(prefixed.toKey('failed')).toBe(`app:${prefixed.name}:failed`)
  })

  it('exportPrometheusMetrics is Prometheus text: BullMQ\'s job counts, then our totals and histograms', async () => {
    const queue = mkQueue()
    const worker = mkWorker(queue.name, failEveryFifth)
    await runJobs(queue, worker, 20)
    await queue.add('waits', {}, { delay: 60_000 })
    const text = await queue.exportPrometheusMetrics({ env: 'test', region: 'eu "west"' })
    expect(text.endsWith('\n')).toBe(true)
    const families = Object.fromEntries(parsePrometheus(text).map((f) => [f.name, f]))
    const labels = { queue: queue.name, env: 'test', region: 'eu "west"' }

    const counts = families.bullmq_job_count
    expect(counts.type).toBe('GAUGE')
    const byState = Object.fromEntries(counts.metrics.map((m) => [m.labels.state, Number(m.value)]))
    expect(byState).toMatchObject({ completed: 16, failed: 4, delayed: 1, active: 0, waiting: 0 })
    for (const m of counts.metrics) expect(m.labels).toMatchObject(labels)

    const finished = families.ferroqueue_jobs_finished_total
    expect(finished.type).toBe('COUNTER')
    const byOutcome = Object.fromEntries(finished.metrics.map((m) => [m.labels.outcome, Number(m.value)]))
    expect(byOutcome).toEqual({ completed: 16, failed: 4 })

    // The parser keeps a histogram's buckets (not the labels, sum and count of a labelled
    // one: those are read from the lines).
    const processing = families.ferroqueue_job_processing_seconds
    expect(processing.type).toBe('HISTOGRAM')
    // (A JS object lists integer keys first: sort the bounds.)
    const buckets = Object.entries(processing.metrics[0].buckets)
      .map(([le, n]) => [le === '+Inf' ? Infinity : Number(le), Number(n)])
      .sort((x, y) => x[0] - y[0])
    expect(buckets[0][0]).toBe(0.005)
    expect(buckets.at(-1)).toEqual([Infinity, 20])
    const cumulative = buckets.map(([, n]) => n)
    expect(cumulative).toEqual([...cumulative].sort((x, y) => x - y))
    const sample = (name) => text.split('\n').find((l) => l.startsWith(`${name}{`))
    const extra = ',env="test",region="eu \\"west\\""'
    expect(sample('ferroqueue_job_processing_seconds_count')).toBe(`ferroqueue_job_processing_seconds_count{queue="${queue.name}"${extra}} 20`)
    expect(Number(sample('ferroqueue_job_processing_seconds_sum').split(' ').pop())).toBeGreaterThanOrEqual(0)

    // The commit latency of a durable engine: SQLite's writer, PostgreSQL's ack batches.
    expect('ferroqueue_commit_seconds' in families).toBe(backend === 'postgres')
  })

  it('a SQLite queue reports its writer\'s commit latency', async () => {
    const dataPath = join(dir, `${uniqueName('m')}.sqlite`)
    const queue = mkQueue({ dataPath })
    for (let i = 0; i < 3; i++) await queue.add('x', {})
    const text = await queue.exportPrometheusMetrics()
    const families = Object.fromEntries(parsePrometheus(text).map((f) => [f.name, f]))
    expect(Number(families.ferroqueue_commit_seconds.metrics[0].buckets['+Inf'])).toBeGreaterThanOrEqual(1)
    const sum = text.split('\n').find((l) => l.startsWith('ferroqueue_commit_seconds_sum{'))
    expect(Number(sum.split(' ').pop())).toBeGreaterThan(0)
  })
})

const pgRun = backend === 'postgres' ? describe : describe.skip
pgRun('metrics on PostgreSQL', () => {
  it('getWorkers lists the Workers of every process, and getMetrics counts every process\'s jobs', async () => {
    const url = process.env.FERROQUEUE_POSTGRES_URL
    const queue = mkQueue()
    const role = fileURLToPath(new URL('./fixtures/pg-role.mjs', import.meta.url))
    const child = spawnLines(role, ['worker', url, queue.name])
    try {
      await waitFor(() => child.lines.includes('READY'), 20_000).catch(() => {
        throw new Error(`the worker process did not start: ${child.stderr}`)
      })
      mkWorker(queue.name, async () => 1, { name: 'here', metrics: {} })
      await waitFor(async () => (await queue.getWorkersCount()) === 2, 10_000)
      const pids = (await queue.getWorkers()).map((w) => w.pid).sort()
      expect(pids).toEqual([process.pid, child.p.pid].sort())
      await queue.addBulk(Array.from({ length: 200 }, (_, i) => ({ name: 'j', data: { id: String(i) } })))
      await waitFor(async () => (await queue.getJobCounts('completed')).completed === 200, 20_000)
      // Only this process's Worker asked for metrics: the count is what this process
      // completed, which its Prometheus totals say too.
      const here = (await queue.getMetrics('completed')).meta.count
      const families = Object.fromEntries(parsePrometheus(await queue.exportPrometheusMetrics()).map((f) => [f.name, f]))
      const total = families.ferroqueue_jobs_finished_total.metrics.find((m) => m.labels.outcome === 'completed')
      expect(here).toBe(Number(total.value))
      child.p.kill('SIGKILL')
      await child.exited
      // A killed process's Worker stops counting once its row is not renewed (30 s): not
      // waited for here; its row is there until then.
      expect(await queue.getWorkersCount()).toBeGreaterThanOrEqual(1)
    } finally {
      child.p.kill('SIGKILL')
    }
  })
})
