// Leases and stalled jobs: a Worker's lease options, a processor that blocks the event loop past
// lockDuration (never stalled), and a Worker whose thread is terminated without close() (its job
// stalls: back to waiting with stalledCounter 1 and no attempt spent, `stalled` on QueueEvents
// and on the queue's other Workers). Runs on every backend.
import { Worker as Thread } from 'node:worker_threads'
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { describe, it, expect, afterEach } from 'vitest'
import { Queue, Worker, QueueEvents } from '../index.mjs'
import { once, thrown, expectError, openTracker, backend, waitFor } from './helpers.mjs'

const { track, mkQueue, mkWorker } = openTracker('lease', { Queue, Worker, QueueEvents }, afterEach)

/** Short leases, renewed and checked often, so that a lost one shows within a second. */
const SHORT = { lockDuration: 400, lockRenewTime: 100, stalledInterval: 100 }

describe('lease options', () => {
  it('are checked, naming the option', () => {
    const bad = [
      [{ lockDuration: 0 }, RangeError, /^lockDuration /],
      [{ lockDuration: '30s' }, TypeError, /^lockDuration /],
      [{ lockDuration: 1000, lockRenewTime: 1000 }, RangeError, /^lockRenewTime .*less than lockDuration/],
      [{ stalledInterval: 2 ** 31 }, RangeError, /^stalledInterval /],
      [{ maxStalledCount: -1 }, RangeError, /^maxStalledCount /],
      [{ maxStalledCount: 1.5 }, RangeError, /^maxStalledCount /],
      [{ skipStalledCheck: 'yes' }, TypeError, /^skipStalledCheck /],
    ]
    for (const [opts, Class, pattern] of bad) {
      expectError(thrown(() => new Worker('lease-bad', () => {}, { autorun: false, ...opts })), Class, 'ERR_INVALID_OPTION', pattern)
    }
  })

  it('are taken with BullMQ defaults filled in', async () => {
    const w = mkWorker('lease-ok', () => {}, { autorun: false, lockDuration: 5_000, maxStalledCount: 0, skipStalledCheck: true })
    expect(w.opts.lockDuration).toBe(5_000)
    await w.close()
  })
})

describe('stalled jobs', () => {
  it('a processor that blocks the event loop past lockDuration is not stalled', async () => {
    const queue = mkQueue()
    const events = track(new QueueEvents(queue.name))
    const stalled = []
    events.on('stalled', ({ jobId }) => stalled.push(jobId))
    const job = await queue.add('cpu', {})
    const worker = mkWorker(
      queue.name,
      () => {
        const end = Date.now() + 3 * SHORT.lockDuration
        while (Date.now() < end) {} // the event loop is blocked: no JS timer can renew anything
        return 'done'
      },
      SHORT,
    )
    const [done, value] = await once(worker, 'completed')
    expect([done.id, value]).toEqual([job.id, 'done'])
    // Long enough for a sweep that would find an expired lease.
    await new Promise((r) => setTimeout(r, 3 * SHORT.stalledInterval))
    const stored = await queue.getJob(job.id)
    expect([await stored.getState(), stored.stalledCounter, stored.attemptsMade]).toEqual(['completed', 0, 1])
    expect(stalled).toEqual([])
  })

  it('a running Worker keeps its process alive until closed, even when its processor never settles', async () => {
    const queue = mkQueue()
    const child = spawn(process.execPath, [fileURLToPath(new URL('./fixtures/busy-worker.mjs', import.meta.url)), queue.name], {
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve(signal ?? code)))
    let out = ''
    const active = new Promise((resolve) => child.stdout.on('data', (d) => (out += d).includes('ACTIVE') && resolve()))
    expect(await Promise.race([active.then(() => 'active'), exited])).toBe('active')
    // With nothing else to wait for, a process whose Worker did not hold it would end now.
    const after = await Promise.race([exited, new Promise((r) => setTimeout(() => r('alive'), 1000))])
    child.kill('SIGKILL')
    expect(after).toBe('alive')
    if (backend !== 'postgres') return // the child's queue lived in its own memory
    // Its job was still held when the process died: active until its lease expires.
    const id = out.trim().split(' ')[1]
    expect(await queue.getJobState(id)).toBe('active')
  })

  it('a Worker whose thread is terminated without close() loses its job: it stalls and runs again', async () => {
    const queue = mkQueue()
    const events = track(new QueueEvents(queue.name))
    const heard = once(events, 'stalled', 10_000)
    const job = await queue.add('lost', { n: 1 })
    const thread = new Thread(new URL('./fixtures/thread-holder.mjs', import.meta.url), {
      workerData: { name: queue.name, opts: SHORT },
    })
    const [started] = await once(thread, 'message', 10_000)
    expect(started).toBe(job.id)
    // Another worker of the queue hears it too, and runs the job again.
    const worker = mkWorker(queue.name, async (j) => `again after ${j.stalledCounter} stall`, SHORT)
    const workerHeard = once(worker, 'stalled', 10_000)
    const completed = once(worker, 'completed', 10_000)
    await thread.terminate()
    const [{ jobId }] = await heard
    expect(jobId).toBe(job.id)
    expect(await workerHeard).toEqual([job.id, 'active'])
    const [done, value] = await completed
    expect([done.id, value]).toEqual([job.id, 'again after 1 stall'])
    const stored = await queue.getJob(job.id)
    // The stall spent no attempt: one attempt, the one that completed (as BullMQ counts).
    expect([stored.stalledCounter, stored.attemptsMade]).toEqual([1, 1])
  })

  it.skipIf(backend !== 'postgres')('on PostgreSQL a worker hears locksRenewed, and lockRenewalFailed once its paused process lost a lease', async () => {
    const queue = mkQueue()
    const job = await queue.add('held', {})
    const child = spawn(process.execPath, [fileURLToPath(new URL('./fixtures/pg-lease-holder.mjs', import.meta.url)), process.env.FERROQUEUE_POSTGRES_URL, queue.name], {
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    const lines = []
    let out = ''
    child.stdout.on('data', (d) => {
      const parts = (out + d).split('\n')
      out = parts.pop()
      lines.push(...parts)
    })
    try {
      await waitFor(() => lines.includes(`RENEWED 1 ${job.id}`), 10_000)
      expect(lines[0]).toBe(`ACTIVE ${job.id}`)
      // The process stops (as under a debugger or a suspended VM): its lease runs out, another
      // worker's check takes the job back and runs it.
      child.kill('SIGSTOP')
      const other = mkWorker(queue.name, async () => 'done here', SHORT)
      await once(other, 'completed', 10_000)
      child.kill('SIGCONT')
      await waitFor(() => lines.includes(`LOST ${job.id}`), 10_000)
    } finally {
      child.kill('SIGKILL')
    }
    expect(lines.filter((l) => l.startsWith('ERROR'))).toEqual([])
    const stored = await queue.getJob(job.id)
    expect([await stored.getState(), stored.returnvalue, stored.stalledCounter]).toEqual(['completed', 'done here', 1])
  })

  it('past maxStalledCount the job fails with BullMQ reason', async () => {
    const queue = mkQueue()
    const events = track(new QueueEvents(queue.name))
    const failed = once(events, 'failed', 10_000)
    const job = await queue.add('lost', {}, { attempts: 5 })
    const thread = new Thread(new URL('./fixtures/thread-holder.mjs', import.meta.url), {
      workerData: { name: queue.name, opts: { ...SHORT, maxStalledCount: 0 } },
    })
    await once(thread, 'message', 10_000)
    await thread.terminate()
    if (backend === 'postgres') {
      // On PostgreSQL the expired lease is found by a worker's check (its maxStalledCount).
      track(new Worker(queue.name, () => {}, { ...SHORT, maxStalledCount: 0, autorun: false }))
    }
    const [{ jobId, failedReason }] = await failed
    expect([jobId, failedReason]).toEqual([job.id, 'job stalled more than allowable limit'])
    const stored = await queue.getJob(job.id)
    expect([await stored.getState(), stored.stalledCounter, stored.attemptsMade]).toEqual(['failed', 1, 1])
  })
})
