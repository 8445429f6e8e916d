// Job: progress, logs, state, data, priority, delay/promote, retry, remove, delayed order,
// retention (removeOnComplete / removeOnFail) and waitUntilFinished.
import { describe, it, expect, afterEach } from 'vitest'
import { Queue, Worker, QueueEvents, Job, QueueError } from '../index.mjs'
import { uniqueName, waitFor, once, collect, openTracker, gate, rejection, ids, names } from './helpers.mjs'

// Everything opened by a test, closed after it (workers with force, so a held job cannot block).
const { track, mkQueue, mkWorker, mkEvents } = openTracker('jobs', { Queue, Worker, QueueEvents }, afterEach)


describe('Job#updateProgress', () => {
  it('stores the progress, visible through getJob', async () => {
    const q = mkQueue()
    const job = await q.add('p', {})
    expect(job.progress).toBe(0)
    await job.updateProgress(42)
    expect(job.progress).toBe(42)
    expect((await q.getJob(job.id)).progress).toBe(42)
    await job.updateProgress({ step: 3, of: 7, label: 'parsing' })
    expect((await q.getJob(job.id)).progress).toEqual({ step: 3, of: 7, label: 'parsing' })
  })

  it('a processor reports progress: worker emits progress and the job keeps it', async () => {
    const q = mkQueue()
    const w = mkWorker(q.name, async (job) => {
      await job.updateProgress(50)
      await job.updateProgress(100)
      return 'ok'
    })
    const progress = collect(w, 'progress', 2)
    const done = once(w, 'completed')
    const job = await q.add('p', {})
    const seen = await progress
    expect(seen.map(([j, p]) => [j.id, p])).toEqual([
      [job.id, 50],
      [job.id, 100],
    ])
    await done
    expect((await q.getJob(job.id)).progress).toBe(100)
  })
})

describe('Job#log and Queue#getJobLogs', () => {
  it('appends rows and pages them', async () => {
    const q = mkQueue()
    const job = await q.add('l', {})
    expect(await job.log('one')).toBe(1)
    expect(await job.log('two')).toBe(2)
    expect(await job.log('three')).toBe(3)
    expect(await job.log('four')).toBe(4)
    expect(await q.getJobLogs(job.id)).toEqual({ logs: ['one', 'two', 'three', 'four'], count: 4 })
    expect(await q.getJobLogs(job.id, 0, 0)).toEqual({ logs: ['one'], count: 4 })
    expect(await q.getJobLogs(job.id, 1, 2)).toEqual({ logs: ['two', 'three'], count: 4 })
    expect(await q.getJobLogs(job.id, 2, -1)).toEqual({ logs: ['three', 'four'], count: 4 })
    expect(await q.getJobLogs(job.id, -1, -1)).toEqual({ logs: ['four'], count: 4 })
    expect(await q.getJobLogs(job.id, 0, -1, false)).toEqual({ logs: ['four', 'three', 'two', 'one'], count: 4 })
    expect(await q.getJobLogs(job.id, 0, 1, false)).toEqual({ logs: ['four', 'three'], count: 4 })
    expect(await q.getJobLogs(job.id, 10, 20)).toEqual({ logs: [], count: 4 })
    expect(await q.getJobLogs('no-such-job')).toEqual({ logs: [], count: 0 })
  })

  it('keepLogs keeps only the newest rows; a processor can log', async () => {
    const q = mkQueue()
    const w = mkWorker(q.name, async (job) => {
      for (const row of ['a', 'b', 'c']) await job.log(row)
    })
    const done = once(w, 'completed')
    const job = await q.add('l', {}, { keepLogs: 2 })
    await done
    expect(await q.getJobLogs(job.id)).toEqual({ logs: ['b', 'c'], count: 2 })
  })

  it('log on a removed job rejects with ERR_JOB_NOT_FOUND', async () => {
    const q = mkQueue()
    const job = await q.add('l', {})
    await job.remove()
    const err = await rejection(job.log('late'))
    expect(err).toBeInstanceOf(QueueError)
    expect(err.code).toBe('ERR_JOB_NOT_FOUND')
  })
})

describe('Job#getState', () => {
  it('follows the job through its states', async () => {
    const q = mkQueue()
    const waiting = await q.add('w', {})
    const prio = await q.add('p', {}, { priority: 2 })
    const delayed = await q.add('d', {}, { delay: 60_000 })
    expect(await waiting.getState()).toBe('waiting')
    expect(await waiting.isWaiting()).toBe(true)
    expect(await prio.getState()).toBe('prioritized')
    expect(await prio.isWaiting()).toBe(true)
    expect(await delayed.getState()).toBe('delayed')
    expect(await delayed.isDelayed()).toBe(true)
    expect(await delayed.isWaiting()).toBe(false)

    const hold = gate()
    const w = mkWorker(q.name, async (job) => {
      if (job.name === 'w') await hold.p
      if (job.name === 'p') throw new Error('no')
    })
    const active = once(w, 'active')
    await active
    expect(await waiting.getState()).toBe('active')
    expect(await waiting.isActive()).toBe(true)
    const done = once(w, 'completed')
    const failed = once(w, 'failed')
    hold.open()
    await done
    await failed
    expect(await waiting.isCompleted()).toBe(true)
    expect(await prio.isFailed()).toBe(true)
    expect(await prio.getState()).toBe('failed')
    await delayed.remove()
    expect(await delayed.getState()).toBe('unknown')
  })
})

describe('Job#updateData', () => {
  it('replaces the stored data', async () => {
    const q = mkQueue()
    const job = await q.add('u', { v: 1, keep: 'me' })
    await job.updateData({ v: 2, list: [1, 2] })
    expect(job.data).toEqual({ v: 2, list: [1, 2] })
    expect((await q.getJob(job.id)).data).toEqual({ v: 2, list: [1, 2] })
  })

  it('rejects unserialisable data and keeps the old data', async () => {
    const q = mkQueue()
    const job = await q.add('u', { v: 1 })
    const err = await rejection(job.updateData({ f: () => 1 }))
    expect(err).toBeInstanceOf(TypeError)
    expect(err.code).toBe('ERR_INVALID_DATA')
    expect((await q.getJob(job.id)).data).toEqual({ v: 1 })
  })

  it('a processor can update its data', async () => {
    const q = mkQueue()
    const w = mkWorker(q.name, async (job) => {
      await job.updateData({ ...job.data, seen: true })
    })
    const done = once(w, 'completed')
    const job = await q.add('u', { n: 1 })
    await done
    expect((await q.getJob(job.id)).data).toEqual({ n: 1, seen: true })
  })
})

describe('Job#changePriority', () => {
  it('moves a waiting job to its new place', async () => {
    const q = mkQueue()
    const a = await q.add('a', {}, { priority: 5 })
    const b = await q.add('b', {}, { priority: 5 })
    const c = await q.add('c', {}, { priority: 10 })
    expect(names(await q.getPrioritized())).toEqual(['a', 'b', 'c'])

    await c.changePriority({ priority: 1 })
    expect(c.priority).toBe(1)
    expect((await q.getJob(c.id)).priority).toBe(1)
    expect(names(await q.getPrioritized())).toEqual(['c', 'a', 'b'])

    await b.changePriority({ priority: 5, lifo: true })
    expect(names(await q.getPrioritized())).toEqual(['c', 'b', 'a'])

    await a.changePriority({ priority: 0 })
    expect(await a.getState()).toBe('waiting')
    expect(names(await q.getWaiting())).toEqual(['a'])
    expect(names(await q.getPrioritized())).toEqual(['c', 'b'])

    const order = []
    const w = mkWorker(q.name, (job) => {
      order.push(job.name)
    })
    await collect(w, 'completed', 3)
    expect(order).toEqual(['a', 'c', 'b'])
  })

  it('rejects a bad priority with RangeError and leaves the job alone', async () => {
    const q = mkQueue()
    const a = await q.add('a', {}, { priority: 3 })
    const err = await rejection(a.changePriority({ priority: -1 }))
    expect(err).toBeInstanceOf(RangeError)
    expect(err.code).toBe('ERR_INVALID_OPTION')
    expect(err.message).toMatch(/priority/)
    expect((await q.getJob(a.id)).priority).toBe(3)
    expect(await a.getState()).toBe('prioritized')
  })
})

describe('Job#changeDelay and Job#promote', () => {
  it('changeDelay reschedules a delayed job', async () => {
    const q = mkQueue()
    const late = await q.add('late', {}, { delay: 60_000 })
    const soon = await q.add('soon', {}, { delay: 30_000 })
    expect(names(await q.getDelayed())).toEqual(['soon', 'late'])
    await late.changeDelay(10_000)
    expect(await late.getState()).toBe('delayed')
    expect(late.delay).toBe(10_000)
    expect((await q.getJob(late.id)).delay).toBe(10_000)
    expect(names(await q.getDelayed())).toEqual(['late', 'soon'])
    expect(await q.getDelayedCount()).toBe(2)
    expect(ids(await q.getDelayed())).toEqual([late.id, soon.id])
  })

  it('a delay of any size is a job that waits (none overflows a timestamp)', async () => {
    const q = mkQueue()
    const far = await q.add('far', {}, { delay: 2 ** 53 })
    expect(await far.getState()).toBe('delayed')
    for (const d of [2 ** 53, 1e300]) {
      await far.changeDelay(d)
      expect(await far.getState()).toBe('delayed')
    }
    expect(await q.getDelayedCount()).toBe(1)
  })

  it('a shortened delay makes the job run at the new time', async () => {
    const q = mkQueue()
    const job = await q.add('d', {}, { delay: 60_000 })
    const w = mkWorker(q.name, () => 'ran')
    const done = once(w, 'completed')
    const changedAt = Date.now()
    await job.changeDelay(100)
    const [finished] = await done
    expect(finished.id).toBe(job.id)
    expect(finished.processedOn).toBeGreaterThanOrEqual(changedAt + 100)
  })

  it('promote makes a delayed job ready now', async () => {
    const q = mkQueue()
    const a = await q.add('a', {}, { delay: 60_000 })
    const b = await q.add('b', {}, { delay: 60_000 })
    await b.promote()
    expect(await b.getState()).toBe('waiting')
    expect((await q.getJob(b.id)).delay).toBe(0)
    expect(await a.getState()).toBe('delayed')
    const w = mkWorker(q.name, (job) => job.name)
    const [done] = await once(w, 'completed')
    expect(done.id).toBe(b.id)
    expect(await b.getState()).toBe('completed')
    expect(await a.getState()).toBe('delayed')
  })

  it('changeDelay and promote reject with ERR_JOB_STATE for jobs that are not delayed', async () => {
    const q = mkQueue()
    const waiting = await q.add('w', {})
    const prio = await q.add('p', {}, { priority: 1 })
    for (const call of [() => waiting.changeDelay(1000), () => waiting.promote(), () => prio.promote()]) {
      const err = await rejection(call())
      expect(err).toBeInstanceOf(QueueError)
      expect(err.code).toBe('ERR_JOB_STATE')
    }
    expect(await waiting.getState()).toBe('waiting')
    expect(await prio.getState()).toBe('prioritized')

    const w = mkWorker(q.name, () => 1)
    await collect(w, 'completed', 2)
    const err = await rejection(waiting.promote())
    expect(err).toBeInstanceOf(QueueError)
    expect(err.code).toBe('ERR_JOB_STATE')
    expect((await rejection(waiting.changeDelay(5))).code).toBe('ERR_JOB_STATE')
    expect(await waiting.getState()).toBe('completed')
  })
})

describe('Job#retry', () => {
  it('moves a failed job back to waiting; a worker then processes it', async () => {
    const q = mkQueue()
    let calls = 0
    const w1 = mkWorker(q.name, () => {
      calls += 1
      throw new Error('first try fails')
    })
    const failed = once(w1, 'failed')
    const job = await q.add('r', { x: 1 })
    await failed
    await w1.close()
    const stored = await q.getJob(job.id)
    expect(await stored.getState()).toBe('failed')
    expect(stored.failedReason).toBe('first try fails')
    expect(stored.attemptsMade).toBe(1)

    await stored.retry()
    expect(await stored.getState()).toBe('waiting')
    const again = await q.getJob(job.id)
    expect(again.failedReason).toBeUndefined()
    expect(again.finishedOn).toBeUndefined()
    expect(again.attemptsMade).toBe(1)
    expect(await q.getJobCounts('failed', 'waiting')).toEqual({ failed: 0, waiting: 1 })

    const w2 = mkWorker(q.name, (j) => `done ${j.data.x}`)
    const [completed, value] = await once(w2, 'completed')
    expect(completed.id).toBe(job.id)
    expect(value).toBe('done 1')
    expect(calls).toBe(1)
    expect(await job.getState()).toBe('completed')
    expect((await q.getJob(job.id)).returnvalue).toBe('done 1')
  })

  it("retry('completed') re-runs a completed job; retrying a job in the wrong state rejects with ERR_JOB_STATE", async () => {
    const q = mkQueue()
    const waiting = await q.add('w', {})
    const err = await rejection(waiting.retry())
    expect(err).toBeInstanceOf(QueueError)
    expect(err.code).toBe('ERR_JOB_STATE')
    expect(await waiting.getState()).toBe('waiting')

    let runs = 0
    const w = mkWorker(q.name, () => ++runs)
    await once(w, 'completed')
    expect((await rejection(waiting.retry('failed'))).code).toBe('ERR_JOB_STATE')
    const second = once(w, 'completed')
    await waiting.retry('completed')
    const [, value] = await second
    expect(value).toBe(2)
    expect((await q.getJob(waiting.id)).returnvalue).toBe(2)
  })
})

describe('Job#remove', () => {
  it('removes a waiting job', async () => {
    const q = mkQueue()
    const job = await q.add('x', {})
    await job.remove()
    expect(await q.getJob(job.id)).toBeUndefined()
    expect(await q.count()).toBe(0)
  })

  it('rejects with ERR_JOB_LOCKED for an active job, which stays active', async () => {
    const q = mkQueue()
    const hold = gate()
    let inProcessor
    const w = mkWorker(q.name, async (job) => {
      inProcessor = job
      await hold.p
      return 'finished'
    })
    const active = once(w, 'active')
    const job = await q.add('x', {})
    await active
    const err = await rejection(job.remove())
    expect(err).toBeInstanceOf(QueueError)
    expect(err.code).toBe('ERR_JOB_LOCKED')
    const err2 = await rejection(inProcessor.remove())
    expect(err2.code).toBe('ERR_JOB_LOCKED')
    expect(await job.getState()).toBe('active')

    const done = once(w, 'completed')
    hold.open()
    const [, value] = await done
    expect(value).toBe('finished')
    await job.remove()
    expect(await job.getState()).toBe('unknown')
  })
})

describe('delayed jobs', () => {
  it('a delay counts from the job timestamp: one already past is ready at once', async () => {
    const q = mkQueue()
    const past = await q.add('past', {}, { delay: 60_000, timestamp: Date.now() - 61_000 })
    const half = await q.add('half', {}, { delay: 60_000, timestamp: Date.now() - 30_000 })
    expect(await q.getJobState(past.id)).toBe('waiting')
    expect(await q.getJobState(half.id)).toBe('delayed')
    expect((await q.getJob(half.id)).delay).toBe(60_000)
  })

  it('run in run-at order: delays 150/50/100 are processed 50, 100, 150', async () => {
    const q = mkQueue()
    const t = Date.now()
    // One timestamp for all three, so the run-at order does not depend on how fast adds are.
    await q.add('d150', {}, { delay: 150, timestamp: t })
    await q.add('d50', {}, { delay: 50, timestamp: t })
    await q.add('d100', {}, { delay: 100, timestamp: t })
    const order = []
    const w = mkWorker(q.name, (job) => {
      order.push(job.name)
    })
    const done = await collect(w, 'completed', 3)
    expect(order).toEqual(['d50', 'd100', 'd150'])
    for (const [job] of done) {
      const d = Number(job.name.slice(1))
      expect(job.processedOn).toBeGreaterThanOrEqual(t + d)
    }
  })
})

describe('retention', () => {
  it('removeOnComplete: true removes the job when it completes', async () => {
    const q = mkQueue()
    const w = mkWorker(q.name, () => 'v')
    const done = collect(w, 'completed', 2)
    // 'kept' finishes first: removing 'gone' must not take other completed jobs with it
    const kept = await q.add('kept', {})
    const gone = await q.add('gone', {}, { removeOnComplete: true })
    await done
    expect(await q.getJob(gone.id)).toBeUndefined()
    expect(await q.getJobState(gone.id)).toBe('unknown')
    expect(await q.getJobState(kept.id)).toBe('completed')
    expect(await q.getCompletedCount()).toBe(1)
  })

  it('removeOnComplete: N keeps the newest N; { count } likewise', async () => {
    const q = mkQueue()
    const w = mkWorker(q.name, () => 'v')
    const done = collect(w, 'completed', 4)
    for (let i = 0; i < 4; i++) await q.add('n', { i }, { removeOnComplete: 2 })
    await done
    expect(ids(await q.getCompleted())).toEqual(['4', '3'])

    const q2 = mkQueue()
    const w2 = mkWorker(q2.name, () => 'v')
    const done2 = collect(w2, 'completed', 3)
    for (let i = 0; i < 3; i++) await q2.add('n', { i }, { removeOnComplete: { count: 1 } })
    await done2
    expect(ids(await q2.getCompleted())).toEqual(['3'])
    expect(await q2.getJob('1')).toBeUndefined()
  })

  it('removeOnFail: true removes a failed job; a count keeps the newest', async () => {
    const q = mkQueue()
    const w = mkWorker(q.name, () => {
      throw new Error('always')
    })
    const failed = collect(w, 'failed', 4)
    const gone = await q.add('gone', {}, { removeOnFail: true })
    await q.add('k', {}, { removeOnFail: 1 })
    await q.add('k', {}, { removeOnFail: 1 })
    await q.add('k', {}, { removeOnFail: 1 })
    await failed
    expect(await q.getJob(gone.id)).toBeUndefined()
    expect(ids(await q.getFailed())).toEqual(['4'])
    expect(await q.getJobCounts('failed', 'completed')).toEqual({ failed: 1, completed: 0 })
  })

  it("a worker's removeOnComplete / removeOnFail apply only to jobs that have none", async () => {
    const q = mkQueue()
    const w = mkWorker(
      q.name,
      (job) => {
        if (job.data.fail) throw new Error('f')
        return 'ok'
      },
      { removeOnComplete: true, removeOnFail: true },
    )
    const done = collect(w, 'completed', 2)
    const failed = collect(w, 'failed', 2)
    const plainOk = await q.add('a', {})
    const keepOk = await q.add('b', {}, { removeOnComplete: false })
    const plainFail = await q.add('c', { fail: true })
    const keepFail = await q.add('d', { fail: true }, { removeOnFail: false })
    await done
    await failed
    expect(await q.getJob(plainOk.id)).toBeUndefined()
    expect(await q.getJobState(keepOk.id)).toBe('completed')
    expect(await q.getJob(plainFail.id)).toBeUndefined()
    expect(await q.getJobState(keepFail.id)).toBe('failed')
  })

  it("a worker's count retention keeps the newest N of jobs without their own rule", async () => {
    const q = mkQueue()
    const w = mkWorker(q.name, () => 'ok', { removeOnComplete: 1 })
    const done = collect(w, 'completed', 3)
    await q.add('a', {})
    await q.add('b', {})
    await q.add('c', {})
    await done
    expect(ids(await q.getCompleted())).toEqual(['3'])
  })
})

describe('Job#waitUntilFinished', () => {
  it('resolves with the return value', async () => {
    const q = mkQueue()
    const qe = mkEvents(q.name)
    const job = await q.add('sum', { a: 1, b: 2 })
    const finished = job.waitUntilFinished(qe)
    mkWorker(q.name, (j) => ({ sum: j.data.a + j.data.b }))
    expect(await finished).toEqual({ sum: 3 })
  })

  it('rejects with the failure reason after the final failure, not on a retried attempt', async () => {
    const q = mkQueue()
    const qe = mkEvents(q.name)
    let attempts = 0
    const w = mkWorker(q.name, () => {
      attempts += 1
      throw new Error(`attempt ${attempts} failed`)
    })
    const job = await q.add('x', {}, { attempts: 3 })
    const err = await rejection(job.waitUntilFinished(qe))
    expect(err).toBeInstanceOf(Error)
    expect(err.message).toBe('attempt 3 failed')
    expect(attempts).toBe(3)
    expect(await job.getState()).toBe('failed')
    expect(w.isRunning()).toBe(true)
  })

  it('resolves when a retried attempt succeeds after a failure', async () => {
    const q = mkQueue()
    const qe = mkEvents(q.name)
    let attempts = 0
    mkWorker(q.name, () => {
      attempts += 1
      if (attempts === 1) throw new Error('transient')
      return 'second time lucky'
    })
    const job = await q.add('x', {}, { attempts: 2 })
    expect(await job.waitUntilFinished(qe)).toBe('second time lucky')
    expect(attempts).toBe(2)
    // BullMQ 6 counts the successful attempt too.
    expect((await q.getJob(job.id)).attemptsMade).toBe(2)
  })

  it('settles at once for a job that already finished', async () => {
    const q = mkQueue()
    const qe = mkEvents(q.name)
    const w = mkWorker(q.name, (job) => {
      if (job.name === 'bad') throw new Error('it broke')
      return [1, 'two']
    })
    const done = once(w, 'completed')
    const failed = once(w, 'failed')
    const ok = await q.add('ok', {})
    const bad = await q.add('bad', {})
    await done
    await failed
    expect(await ok.waitUntilFinished(qe)).toEqual([1, 'two'])
    const err = await rejection(bad.waitUntilFinished(qe, 5000))
    expect(err.message).toBe('it broke')
  })

  it('rejects with ERR_TIMEOUT after ttl ms', async () => {
    const q = mkQueue()
    const qe = mkEvents(q.name)
    const job = await q.add('never', {})
    const start = Date.now()
    const err = await rejection(job.waitUntilFinished(qe, 200))
    expect(Date.now() - start).toBeGreaterThanOrEqual(190)
    expect(err).toBeInstanceOf(QueueError)
    expect(err.code).toBe('ERR_TIMEOUT')
    expect(await job.getState()).toBe('waiting')
  })
})

describe('Job objects', () => {
  it('asJSON / toJSON carry the job fields', async () => {
    const q = mkQueue()
    const job = await q.add('j', { a: 1 }, { priority: 2 })
    const json = JSON.parse(JSON.stringify(job))
    expect(json).toMatchObject({ id: job.id, name: 'j', data: { a: 1 }, opts: { priority: 2 }, priority: 2 })
    expect(json.timestamp).toBe(job.timestamp)
    expect(job).toBeInstanceOf(Job)
  })
})
