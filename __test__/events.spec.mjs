import { describe, it, expect, afterEach } from 'vitest'
import { Queue, Worker, QueueEvents } from '../index.mjs'
import { uniqueName, delay, once, collect, waitFor, openTracker } from './helpers.mjs'

const { track } = openTracker('t', { Queue, Worker, QueueEvents }, afterEach)

function setup(prefix) {
  const name = uniqueName(prefix)
  return { name, queue: track(new Queue(name)), events: track(new QueueEvents(name)) }
}

/** Records every event name + payload of a QueueEvents. */
function recorder(events) {
  const log = []
  const names = ['added', 'waiting', 'delayed', 'active', 'progress', 'completed', 'failed', 'retries-exhausted', 'removed', 'duplicated', 'cleaned', 'drained', 'paused', 'resumed']
  for (const n of names) events.on(n, (payload, id) => log.push([n, payload, id]))
  return log
}

describe('QueueEvents', () => {
  it('reports added, waiting, active, completed with BullMQ payloads', async () => {
    const { name, queue, events } = setup('ev-life')
    const log = recorder(events)
    const job = await queue.add('mail', { to: 'a' })
    track(new Worker(name, async () => ({ sent: true })))
    const [payload, id] = await once(events, 'completed')
    expect(payload).toEqual({ jobId: job.id, returnvalue: { sent: true }, prev: 'active' })
    expect(typeof id).toBe('string')
    await waitFor(() => log.some(([n]) => n === 'drained'))
    const seq = log.map(([n]) => n)
    expect(seq.slice(0, 2)).toEqual(['added', 'waiting'])
    expect(seq).toContain('active')
    expect(seq.indexOf('active')).toBeLessThan(seq.indexOf('completed'))
    expect(log[0][1]).toEqual({ jobId: job.id, name: 'mail' })
    expect(log.find(([n]) => n === 'active')[1]).toEqual({ jobId: job.id, prev: 'waiting' })
  })

  it('reports failed only for the final failure, and retries-exhausted', async () => {
    const { name, queue, events } = setup('ev-fail')
    const log = recorder(events)
    const job = await queue.add('x', {}, { attempts: 2 })
    track(
      new Worker(name, async () => {
        throw new Error('kaput')
      }),
    )
    const [payload] = await once(events, 'failed')
    expect(payload).toEqual({ jobId: job.id, failedReason: 'kaput', prev: 'active' })
    await waitFor(() => log.some(([n]) => n === 'retries-exhausted'))
    expect(log.filter(([n]) => n === 'failed')).toHaveLength(1)
    expect(log.find(([n]) => n === 'retries-exhausted')[1]).toEqual({ jobId: job.id, attemptsMade: 2 })
    // the retry went back through waiting with prev 'failed'
    expect(log.some(([n, p]) => n === 'waiting' && p.prev === 'failed')).toBe(true)
  })

  it('reports delayed with the run-at timestamp, then waiting when due', async () => {
    const { queue, events } = setup('ev-delay')
    const log = recorder(events)
    const before = Date.now()
    // Long enough to be still delayed once the add is answered on a loaded machine.
    const job = await queue.add('later', {}, { delay: 300 })
    const [p] = await once(events, 'waiting')
    expect(p).toEqual({ jobId: job.id, prev: 'delayed' })
    const d = log.find(([n]) => n === 'delayed')[1]
    expect(d.jobId).toBe(job.id)
    expect(d.delay).toBeGreaterThanOrEqual(before + 300)
    expect(d.delay).toBeLessThanOrEqual(Date.now())
  })

  it('reports progress, removed, duplicated, cleaned, paused and resumed', async () => {
    const { queue, events } = setup('ev-misc')
    const log = recorder(events)
    const a = await queue.add('a', {}, { jobId: 'alpha' })
    await queue.add('a', {}, { jobId: 'alpha' })
    await a.updateProgress(30)
    await queue.pause()
    await queue.resume()
    const b = await queue.add('b', {})
    await queue.remove(b.id)
    await delay(5)
    await queue.clean(0, 0, 'waiting')
    await waitFor(() => log.some(([n]) => n === 'cleaned'))
    const byName = (n) => log.filter(([x]) => x === n).map(([, p]) => p)
    expect(byName('duplicated')).toEqual([{ jobId: 'alpha' }])
    expect(byName('progress')).toEqual([{ jobId: 'alpha', data: 30 }])
    expect(byName('paused')).toHaveLength(1)
    expect(byName('resumed')).toHaveLength(1)
    expect(byName('removed')).toEqual([{ jobId: b.id, prev: 'waiting' }])
    expect(byName('cleaned')).toEqual([{ count: 1 }])
  })

  it('delivers to every QueueEvents of the queue and stops after close', async () => {
    const { name, queue, events } = setup('ev-multi')
    const second = new QueueEvents(name)
    const got = collect(second, 'added', 1)
    const first = collect(events, 'added', 2)
    await queue.add('one', {})
    await got
    await second.close()
    let late = 0
    second.on('added', () => late++)
    await queue.add('two', {})
    await first
    await delay(20)
    expect(late).toBe(0)
  })

  it('a throwing listener goes to error and later events still arrive', async () => {
    const { queue, events } = setup('ev-throw')
    const errors = []
    events.on('error', (e) => errors.push(e.message))
    const first = once(events, 'added')
    events.once('added', () => {
      throw new Error('listener bug')
    })
    await queue.add('a', {})
    await first
    const second = once(events, 'added')
    await queue.add('b', {})
    const [p] = await second
    expect(p.name).toBe('b')
    expect(errors).toEqual(['listener bug'])
  })

  it('does not mix events of different queues', async () => {
    const a = setup('ev-iso-a')
    const b = setup('ev-iso-b')
    // Both queues have listeners, so both collect events, in the same engine batches.
    const seenA = []
    const seenB = []
    a.events.on('added', ({ name }) => seenA.push(name))
    b.events.on('added', ({ name }) => seenB.push(name))
    await b.queue.add('for-b', {})
    await a.queue.add('for-a', {})
    await b.queue.add('for-b', {})
    await waitFor(() => seenA.length + seenB.length === 3)
    await delay(20)
    expect(seenA).toEqual(['for-a'])
    expect(seenB).toEqual(['for-b', 'for-b'])
  })

  it('collects many events in batches without losing any', async () => {
    const { name, queue, events } = setup('ev-batch')
    const n = 2000
    const completed = collect(events, 'completed', n, 10_000)
    await queue.addBulk(Array.from({ length: n }, (_, i) => ({ name: 'j', data: { i } })))
    track(new Worker(name, async (job) => job.data.i, { concurrency: 20 }))
    const got = await completed
    const values = got.map(([p]) => p.returnvalue).sort((a, b) => a - b)
    expect(values).toEqual(Array.from({ length: n }, (_, i) => i))
  })
})
