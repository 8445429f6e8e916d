// Processor files (issue 12): a Worker given a file runs it in worker threads
// (`useWorkerThreads: true`: each thread pulls from the shared engine) or in child processes (the
// Worker pulls and hands jobs over in batches). The same rules for both: events on the Worker,
// a full Job inside the processor, faults that fail the job with a clear reason and replace the
// thread or child, close() and close(true), and load errors. Every backend.
import { describe, it, expect, afterEach, afterAll } from 'vitest'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { Queue, Worker, QueueEvents, QueueError } from '../index.mjs'
import { openTracker, collect, once, waitFor, delay, rejection, expectError, thrown, backend, uniqueName } from './helpers.mjs'

const { track, mkQueue, mkWorker } = openTracker('sandbox', { Queue, Worker, QueueEvents }, afterEach)
const dir = mkdtempSync(join(tmpdir(), 'ferroqueue-sandbox-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const fixture = (name) => join(import.meta.dirname, 'fixtures', 'processors', name)
const isBun = typeof globalThis.Bun !== 'undefined'

const MODES = [
  ['worker threads', { useWorkerThreads: true }],
  ['child processes', {}],
]

describe.each(MODES)('a processor file in %s', (mode, sandbox) => {
  const threads = sandbox.useWorkerThreads === true
  /** Where a job ran, as the fixtures answer it. */
  const place = (v) => (threads ? v.threadId : v.pid)
  const worker = (queue, file, opts) => mkWorker(queue.name, file, { ...sandbox, threads: 2, ...opts })

  it('processes jobs on every thread or child, with the events of an in-process processor', async () => {
    const queue = mkQueue()
    const w = worker(queue, pathToFileURL(fixture('echo.mjs')), { concurrency: 2, autorun: false })
    const active = collect(w, 'active', 40, 15000)
    const progress = collect(w, 'progress', 40, 15000)
    const completed = collect(w, 'completed', 40, 15000)
    await queue.addBulk(Array.from({ length: 40 }, (_, n) => ({ name: 'double', data: { n } })))
    w.run()
    const done = await completed
    for (const [job, value, prev] of done) {
      expect(value.doubled).toBe(job.data.n * 2)
      expect(job.returnvalue).toEqual(value)
      expect(job.queueName).toBe(queue.name)
      expect(prev).toBe('active')
    }
    expect(new Set(done.map(([job]) => job.id)).size).toBe(40)
    expect((await active).every(([job, prev]) => job.name === 'double' && prev === 'waiting')).toBe(true)
    expect((await progress).every(([, p]) => p === 50)).toBe(true)
    // Each place ran the processor: not the Worker's own thread or process.
    const places = new Set(done.map(([, v]) => place(v)))
    expect(places.has(threads ? 0 : process.pid)).toBe(false)
    const job = await queue.getJob(done[0][0].id)
    expect(job.progress).toBe(50)
    expect((await queue.getJobLogs(job.id)).logs).toEqual([`doubling ${job.data.n}`])
    expect(await queue.getJobCounts('completed')).toEqual({ completed: 40 })
  })

  it('takes a CommonJS file (module.exports) by path, and runs both places at once', async () => {
    const queue = mkQueue()
    const sleepy = worker(queue, fixture('faults.mjs'), { concurrency: 1 })
    const completed = collect(sleepy, 'completed', 4, 15000)
    await queue.addBulk(Array.from({ length: 4 }, () => ({ name: 'sleep', data: { do: 'sleep', ms: 300 } })))
    const done = await completed
    // Two places, one job each at a time: the four jobs ran two by two, in both.
    expect(new Set(done.map(([, v]) => place(v))).size).toBe(2)
    await sleepy.close()
    const cjs = worker(queue, fixture('echo.cjs'))
    const [[job, value]] = await Promise.all([once(cjs, 'completed', 15000), queue.add('double', { n: 21 })])
    expect(value.doubled).toBe(42)
    expect(job.data.n).toBe(21)
  })

  it('gives the processor a full Job: updateData, moveToDelayed and getState work', async () => {
    const queue = mkQueue()
    const w = worker(queue, fixture('faults.mjs'), { threads: 1 })
    const completed = once(w, 'completed', 15000)
    const failed = []
    w.on('failed', (job, err) => failed.push(err))
    const added = await queue.add('step', { do: 'step' })
    const [job, value] = await completed
    expect(job.id).toBe(added.id)
    expect(value).toEqual({ step: 1, state: 'active' })
    expect(job.attemptsMade).toBe(1)
    expect(failed).toEqual([])
  })

  it('fails and retries as the job says; UnrecoverableError fails at once', async () => {
    const queue = mkQueue()
    const w = worker(queue, fixture('faults.mjs'), { threads: 1 })
    const failed = collect(w, 'failed', 3, 15000)
    await queue.add('fail', { do: 'fail' }, { attempts: 2 })
    await queue.add('give-up', { do: 'unrecoverable' }, { attempts: 5 })
    const got = await failed
    const byName = (n) => got.filter(([job]) => job.name === n).map(([, err]) => err.message)
    expect(byName('fail')).toEqual(['failed on purpose (attempt 1)', 'failed on purpose (attempt 2)'])
    expect(byName('give-up')).toEqual(['give up'])
    const entries = await queue.getDlq()
    expect(entries.map((e) => [e.job.name, e.reason]).sort()).toEqual([
      ['fail', 'max_attempts_exceeded'],
      ['give-up', 'explicit_fail'],
    ])
  })

  it('a thread or child that exits fails its job as worker_lost, is replaced, and the retry runs', async () => {
    const queue = mkQueue()
    const w = worker(queue, fixture('faults.mjs'), { threads: 1 })
    const errors = []
    w.on('error', (e) => errors.push(e))
    const failed = once(w, 'failed', 15000)
    const completed = once(w, 'completed', 15000)
    const added = await queue.add('exit', { do: 'exit', once: true }, { attempts: 2 })
    const [job, err] = await failed
    expect(job.id).toBe(added.id)
    expect(err.message).toMatch(threads ? /worker thread exited with code 7/ : /child process exited with code 7/)
    expect(err.code).toBe('ERR_WORKER_LOST')
    const [, value] = await completed
    expect(value).toEqual({ recovered: true, attemptsMade: 1 })
    expect(errors.map((e) => e.code)).toContain('ERR_WORKER_LOST')
    // Its attempt is in the history as worker_lost.
    const again = await queue.add('exit-for-good', { do: 'exit' })
    await waitFor(async () => (await queue.getJobState(again.id)) === 'failed', 15000)
    const [entry] = await queue.getDlq({ reason: 'worker_lost' })
    expect(entry.job.id).toBe(again.id)
    expect(entry.attempts.at(-1)).toMatchObject({ kind: 'worker_lost', final: true })
    expect(entry.error).toMatch(/exited with code 7/)
  })

  it('a throw outside any job fails the jobs running there; the Worker keeps running', async () => {
    const queue = mkQueue()
    const w = worker(queue, fixture('faults.mjs'), { threads: 1 })
    w.on('error', () => {})
    const failed = once(w, 'failed', 15000)
    await queue.add('outside', { do: 'throw-outside' })
    const [, err] = await failed
    expect(err.message).toMatch(/thrown outside a job|exited with code 1/)
    const [[, value]] = await Promise.all([once(w, 'completed', 15000), queue.add('fine', {})])
    expect(value).toHaveProperty('pid')
  })

  it('a thread or child killed from outside fails its job; the job is retried', async () => {
    const queue = mkQueue()
    const w = worker(queue, fixture('faults.mjs'), { threads: 1 })
    w.on('error', () => {})
    const progress = once(w, 'progress', 15000)
    const failed = once(w, 'failed', 15000)
    const added = await queue.add('hang', { do: 'hang', once: true }, { attempts: 2 })
    const [, where] = await progress
    if (threads) w._slots[0].thread.terminate()
    else process.kill(where.pid, 'SIGKILL')
    const [job, err] = await failed
    expect(job.id).toBe(added.id)
    expect(err.message).toMatch(threads ? /worker thread exited with code 1/ : /child process was killed by SIGKILL/)
    await waitFor(async () => (await queue.getJobState(added.id)) === 'completed', 15000)
  })

  // Bun has no heap limit for a thread (resourceLimits) or a child (--max-old-space-size).
  it.skipIf(isBun)('a thread or child that runs out of memory fails its job', async () => {
    const queue = mkQueue()
    const limit = threads ? { workerThreadsOptions: { resourceLimits: { maxOldGenerationSizeMb: 32 } } } : { workerForkOptions: { execArgv: ['--max-old-space-size=32'] } }
    const w = worker(queue, fixture('faults.mjs'), { threads: 1, ...limit })
    w.on('error', () => {})
    const failed = once(w, 'failed', 30000)
    await queue.add('oom', { do: 'oom' })
    const [, err] = await failed
    expect(err.code).toBe('ERR_WORKER_LOST')
    expect(err.message).toMatch(threads ? /memory/i : /child process (exited with code|was killed by)/)
  })

  it('close() waits for running jobs; close(true) ends them and gives them back', async () => {
    const queue = mkQueue()
    const w = worker(queue, fixture('faults.mjs'), { threads: 1 })
    const started = once(w, 'active', 15000)
    const slow = await queue.add('sleep', { do: 'sleep', ms: 300 })
    await started
    await w.close()
    expect(await queue.getJobState(slow.id)).toBe('completed')

    const w2 = worker(queue, fixture('faults.mjs'), { threads: 1 })
    const progress = once(w2, 'progress', 15000)
    const hung = await queue.add('hang', { do: 'hang' })
    await progress
    await w2.close(true)
    expect(await queue.getJobState(hung.id)).toBe('waiting')
    const job = await queue.getJob(hung.id)
    expect(job.attemptsMade).toBe(0)
  })

  it('cancelJob aborts the signal inside the thread or child', async () => {
    const queue = mkQueue()
    const w = worker(queue, fixture('faults.mjs'), { threads: 1 })
    const active = once(w, 'active', 15000)
    const failed = once(w, 'failed', 15000)
    const added = await queue.add('wait', { do: 'wait-abort' })
    await active
    expect(w.cancelJob('no-such-job')).toBe(false)
    await waitFor(() => w.cancelJob(added.id, 'stop now'), 5000)
    const [job, err] = await failed
    expect(job.id).toBe(added.id)
    expect(err.message).toBe('aborted: stop now')
  })

  it('a file that cannot be loaded, or exports no function, rejects run() with the file named', async () => {
    const queue = mkQueue()
    for (const [file, pattern] of [
      ['not-a-function.mjs', /exports no function/],
      ['broken.mjs', /cannot be loaded: broken on purpose/],
    ]) {
      const w = worker(queue, fixture(file), { autorun: false })
      const err = await rejection(w.run())
      expectError(err, QueueError, 'ERR_PROCESSOR_LOAD', pattern)
      expect(err.message).toContain(fixture(file))
    }
    const errors = collect(worker(queue, fixture('broken.mjs')), 'error', 1, 15000)
    const [[err]] = await errors
    expect(err.code).toBe('ERR_PROCESSOR_LOAD')
    expect(await queue.getJobCounts('active')).toEqual({ active: 0 })
  })
})

describe('processor file options', () => {
  it('refuses a missing file at construction, as BullMQ does', () => {
    const name = uniqueName('sandbox')
    for (const opts of [{}, { useWorkerThreads: true }]) {
      const err = thrown(() => new Worker(name, join(dir, 'missing.mjs'), opts))
      expectError(err, QueueError, 'ERR_PROCESSOR_FILE', /missing\.mjs does not exist/)
    }
    expectError(thrown(() => new Worker(name, dir)), QueueError, 'ERR_PROCESSOR_FILE', /is not a file/)
    expectError(thrown(() => new Worker(name, new URL('https://example.com/p.mjs'))), TypeError, 'ERR_INVALID_OPTION', /file: URL/)
  })

  it('checks the sandbox options, naming each', () => {
    const name = uniqueName('sandbox')
    const file = fixture('echo.mjs')
    expectError(thrown(() => new Worker(name, () => {}, { useWorkerThreads: true })), TypeError, 'ERR_INVALID_OPTION', /^useWorkerThreads takes effect only with a processor file/)
    expectError(thrown(() => new Worker(name, file, { threads: 0 })), RangeError, 'ERR_INVALID_OPTION', /^threads/)
    expectError(thrown(() => new Worker(name, file, { useWorkerThreads: 'yes' })), TypeError, 'ERR_INVALID_OPTION', /^useWorkerThreads/)
    expectError(thrown(() => new Worker(name, file, { workerThreadsOptions: {} })), TypeError, 'ERR_INVALID_OPTION', /^workerThreadsOptions is for worker threads/)
    expectError(thrown(() => new Worker(name, file, { useWorkerThreads: true, workerForkOptions: {} })), TypeError, 'ERR_INVALID_OPTION', /^workerForkOptions is for child processes/)
    expectError(thrown(() => new Worker(name, file, { useWorkerThreads: true, workerThreadsOptions: { workerData: 1 } })), TypeError, 'ERR_INVALID_OPTION', /^workerThreadsOptions\.workerData is set by ferroqueue/)
    expectError(
      thrown(() => new Worker(name, file, { useWorkerThreads: true, settings: { backoffStrategy: () => 1 } })),
      TypeError,
      'ERR_UNSUPPORTED_OPTION',
      /^settings\.backoffStrategy cannot run in worker threads/,
    )
  })

  it('a threaded Worker refuses manual processing', async () => {
    const queue = mkQueue()
    const w = mkWorker(queue.name, fixture('echo.mjs'), { useWorkerThreads: true, threads: 1, autorun: false })
    expect(w).toBeInstanceOf(Worker)
    expectError(await rejection(w.getNextJob('token')), QueueError, 'ERR_SANDBOXED', /getNextJob/)
  })

  it('pause() stops every thread; resume() starts them again; concurrency reaches them', async () => {
    const queue = mkQueue()
    const w = mkWorker(queue.name, fixture('faults.mjs'), { useWorkerThreads: true, threads: 2 })
    await w.pause()
    expect(w.isPaused()).toBe(true)
    const added = await queue.add('later', {})
    await delay(200)
    expect(await queue.getJobState(added.id)).toBe('waiting')
    const completed = once(w, 'completed', 15000)
    await w.resume()
    expect((await completed)[0].id).toBe(added.id)
    w.concurrency = 3
    expect(w.concurrency).toBe(3)
  })

  it.skipIf(backend === 'postgres')('threads share a SQLite file with their Worker', async () => {
    const dataPath = join(dir, 'threads.db')
    const queue = track(new Queue(uniqueName('sandbox'), { dataPath }))
    const w = mkWorker(queue.name, fixture('echo.mjs'), { useWorkerThreads: true, threads: 2, dataPath })
    const completed = collect(w, 'completed', 20, 15000)
    await queue.addBulk(Array.from({ length: 20 }, (_, n) => ({ name: 'double', data: { n } })))
    const done = await completed
    expect(done.map(([, v]) => v.doubled).sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, n) => n * 2))
    await w.close()
    expect(await queue.getJobCounts('completed')).toEqual({ completed: 20 })
  })
})
