// Flows (BullMQ's FlowProducer and `parent`): parents wait in waiting-children until their
// children are done, see their values, and follow each child failure rule; flows are all or
// nothing and live in one engine (one SQLite file, memory, or one PostgreSQL schema). Runs on
// every backend.
import { describe, it, expect, afterEach, beforeAll, afterAll } from 'vitest'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Queue, Worker, QueueEvents, FlowProducer } from '../index.mjs'
import { uniqueName, waitFor, rejection, openTracker, itExcept } from './helpers.mjs'

const { track, mkQueue, mkWorker } = openTracker('flow', { Queue, Worker, QueueEvents }, afterEach)
const durableOnly = itExcept('postgres', 'a SQLite file is the embedded engine; PostgreSQL keeps flows in its tables')

function producer(opts) {
  return track(new FlowProducer(opts))
}

describe('flows', () => {
  it('a three-level flow completes children first and each parent sees its children', async () => {
    const [top, mid, leaf] = [uniqueName('top'), uniqueName('mid'), uniqueName('leaf')]
    const flow = producer()
    const tree = await flow.add({
      name: 'top',
      queueName: top,
      data: { level: 0 },
      children: [
        {
          name: 'mid',
          queueName: mid,
          data: { level: 1 },
          children: [
            { name: 'a', queueName: leaf, data: { v: 1 } },
            { name: 'b', queueName: leaf, data: { v: 2 } },
          ],
        },
      ],
    })
    expect(tree.job.name).toBe('top')
    expect(await tree.job.getState()).toBe('waiting-children')
    const topQueue = mkQueue(undefined, top)
    expect(await topQueue.count()).toBe(1)
    expect(await topQueue.getJobCounts('waiting-children')).toEqual({ 'waiting-children': 1 })
    expect((await topQueue.getJobs(['waiting-children'])).map((j) => j.id)).toEqual([tree.job.id])
    const midJob = tree.children[0].job
    expect(midJob.parent).toEqual({ id: tree.job.id, queueKey: `bull:${top}` })
    expect(midJob.parentKey).toBe(`bull:${top}:${tree.job.id}`)
    expect(tree.children[0].children.map((c) => c.job.name)).toEqual(['a', 'b'])
    const done = []
    let seenByMid, seenByTop, counts
    mkWorker(leaf, async (job) => {
      done.push(job.name)
      return job.data.v * 10
    })
    mkWorker(mid, async (job) => {
      done.push(job.name)
      seenByMid = await job.getChildrenValues()
      counts = await job.getDependenciesCount()
      return Object.values(seenByMid).reduce((a, b) => a + b, 0)
    })
    const topWorker = mkWorker(top, async (job) => {
      done.push(job.name)
      seenByTop = await job.getChildrenValues()
      return 'done'
    })
    await new Promise((r) => topWorker.on('completed', r))
    expect(done.slice(2)).toEqual(['mid', 'top'])
    expect(done.slice(0, 2).sort()).toEqual(['a', 'b'])
    const [a, b] = tree.children[0].children.map((c) => c.job)
    expect(seenByMid).toEqual({ [`bull:${leaf}:${a.id}`]: 10, [`bull:${leaf}:${b.id}`]: 20 })
    expect(counts).toEqual({ processed: 2, unprocessed: 0, failed: 0, ignored: 0 })
    expect(seenByTop).toEqual({ [`bull:${mid}:${midJob.id}`]: 30 })
    const got = await flow.getFlow({ id: tree.job.id, queueName: top })
    expect(got.job.returnvalue).toBe('done')
    expect(got.children[0].children.map((c) => c.job.returnvalue).sort()).toEqual([10, 20])
    const shallow = await flow.getFlow({ id: tree.job.id, queueName: top, depth: 1 })
    expect(shallow.children[0].children).toBeUndefined()
  })

  it('getDependencies pages by kind with cursors', async () => {
    const q = uniqueName('deps')
    const flow = producer()
    const tree = await flow.add({
      name: 'p',
      queueName: q,
      children: Array.from({ length: 5 }, (_, i) => ({ name: `c${i}`, queueName: q })),
    })
    const deps = await tree.job.getDependencies()
    expect(deps.unprocessed.length).toBe(5)
    expect(deps.processed).toEqual({})
    const page = await tree.job.getDependencies({ unprocessed: { cursor: 0, count: 2 } })
    expect(page.unprocessed.length).toBe(2)
    expect(page.nextUnprocessedCursor).toBe(2)
    const last = await tree.job.getDependencies({ unprocessed: { cursor: 4, count: 2 } })
    expect(last.nextUnprocessedCursor).toBe(0)
    expect(await tree.job.getDependenciesCount({ unprocessed: true })).toEqual({ unprocessed: 5 })
  })
})

/** A parent in `pq` with one failing child (with `rule`) and one slow child, in `cq`. */
async function failingFlow(rule) {
  const [pq, cq] = [uniqueName('p'), uniqueName('c')]
  const flow = producer()
  const tree = await flow.add({
    name: 'parent',
    queueName: pq,
    children: [
      { name: 'bad', queueName: cq, opts: rule ? { [rule]: true } : {} },
      { name: 'slow', queueName: cq, opts: { delay: 60_000 } },
    ],
  })
  const failed = new Promise((resolve) => {
    const w = mkWorker(cq, async () => {
      throw new Error('child broke')
    })
    w.on('failed', resolve)
  })
  await failed
  return { tree, pq, cq, parent: tree.job, bad: tree.children[0].job }
}

describe('child failure options', () => {
  it('without one, the parent keeps waiting for the failed child', async () => {
    const { parent } = await failingFlow(undefined)
    await new Promise((r) => setTimeout(r, 50))
    expect(await parent.getState()).toBe('waiting-children')
    expect((await parent.getDependenciesCount()).unprocessed).toBe(2)
  })

  it('failParentOnFailure fails the parent', async () => {
    const { parent, pq, cq, bad } = await failingFlow('failParentOnFailure')
    await waitFor(async () => (await parent.getState()) === 'failed')
    const again = await mkQueue(undefined, pq).getJob(parent.id)
    expect(again.failedReason).toBe(`child bull:${cq}:${bad.id} failed`)
    expect(await parent.getFailedChildrenValues()).toEqual({ [`bull:${cq}:${bad.id}`]: 'child broke' })
  })

  it('ignoreDependencyOnFailure lets the parent run once the others are done', async () => {
    const { parent, cq, bad, tree } = await failingFlow('ignoreDependencyOnFailure')
    expect(await parent.getIgnoredChildrenFailures()).toEqual({ [`bull:${cq}:${bad.id}`]: 'child broke' })
    expect(await parent.getState()).toBe('waiting-children')
    await tree.children[1].job.remove()
    await waitFor(async () => (await parent.getState()) === 'waiting')
  })

  it('removeDependencyOnFailure drops the dependency', async () => {
    const { parent } = await failingFlow('removeDependencyOnFailure')
    await waitFor(async () => (await parent.getDependenciesCount()).unprocessed === 1)
    expect(await parent.getDependenciesCount()).toEqual({ processed: 0, unprocessed: 1, failed: 0, ignored: 0 })
  })

  it('continueParentOnFailure starts the parent at once', async () => {
    const { parent, cq, bad } = await failingFlow('continueParentOnFailure')
    await waitFor(async () => (await parent.getState()) === 'waiting')
    expect(await parent.getFailedChildrenValues()).toEqual({ [`bull:${cq}:${bad.id}`]: 'child broke' })
    expect((await parent.getDependenciesCount()).unprocessed).toBe(1)
  })
})

describe('parent option and refusals', () => {
  it('a job added with parent holds its parent back; a missing or finished parent is refused', async () => {
    const pq = mkQueue()
    const cq = mkQueue()
    const flow = producer()
    const tree = await flow.add({ name: 'p', queueName: pq.name, children: [{ name: 'c0', queueName: cq.name }] })
    const extra = await cq.add('c1', {}, { parent: { id: tree.job.id, queue: pq.qualifiedName } })
    expect(extra.parentKey).toBe(`${pq.qualifiedName}:${tree.job.id}`)
    expect((await tree.job.getDependenciesCount()).unprocessed).toBe(2)
    const missing = await rejection(cq.add('c2', {}, { parent: { id: '404', queue: pq.qualifiedName } }))
    expect(missing.code).toBe('ERR_PARENT_NOT_FOUND')
    expect(missing.message).toMatch(/one engine/)
    const bulk = await rejection(
      cq.addBulk([
        { name: 'ok', data: {}, opts: { parent: { id: tree.job.id, queue: pq.qualifiedName } } },
        { name: 'bad', data: {}, opts: { parent: { id: '404', queue: pq.qualifiedName } } },
      ]),
    )
    expect(bulk.code).toBe('ERR_PARENT_NOT_FOUND')
    expect(await cq.count()).toBe(2)
  })

  it('children drained or obliterated before they finished no longer hold their parents', async () => {
    const [pq, cq] = [uniqueName('p'), uniqueName('c')]
    const flow = producer()
    const a = await flow.add({ name: 'p', queueName: pq, children: [{ name: 'c', queueName: cq }] })
    const b = await flow.add({ name: 'p', queueName: pq, children: [{ name: 'c', queueName: cq, opts: { delay: 60_000 } }] })
    const children = mkQueue(undefined, cq)
    await children.drain()
    await waitFor(async () => (await a.job.getState()) === 'waiting')
    expect(await b.job.getState()).toBe('waiting-children')
    await children.obliterate({ force: true })
    await waitFor(async () => (await b.job.getState()) === 'waiting')
  })

  it('bad flow options are refused with errors that name them, and nothing is added', async () => {
    const q = mkQueue()
    const flow = producer()
    const cases = [
      [{ name: 'p', queueName: q.name, children: [{ name: 'c', queueName: q.name, opts: { failParentOnFailure: true, continueParentOnFailure: true } }] }, /continueParentOnFailure/],
      [{ name: 'p', queueName: q.name, opts: { failParentOnFailure: true } }, /parent/],
      [{ name: 'p', queueName: q.name, color: 'red' }, /flows\[0\]\.color/],
      [{ name: 'p', queueName: q.name, children: 'x' }, /children/],
      [{ name: 'p', queueName: q.name, children: [{ name: 'c', queueName: q.name, opts: { deduplication: { id: 'd' } } }] }, /deduplication/],
    ]
    for (const [tree, message] of cases) {
      const e = await rejection(flow.add(tree))
      expect(e.message, JSON.stringify(tree)).toMatch(message)
    }
    // queuesOptions apply when the producer opens the queue; others later are refused.
    const fresh = producer()
    const withDefaults = { queuesOptions: { [q.name]: { defaultJobOptions: { attempts: 3 } } } }
    const made = await fresh.add({ name: 'p', queueName: q.name }, withDefaults)
    expect(made.job.opts.attempts).toBe(3)
    const again = await fresh.add({ name: 'p', queueName: q.name }, withDefaults)
    const other = await rejection(fresh.add({ name: 'p', queueName: q.name }, { queuesOptions: { [q.name]: {} } }))
    expect(other.message).toMatch(/queuesOptions/)
    expect(await rejection(flow.add({ name: 'p', queueName: q.name }, withDefaults))).toBeInstanceOf(TypeError)
    await made.job.remove()
    await again.job.remove()
    const closed = new FlowProducer()
    await closed.close()
    const late = await rejection(closed.add({ name: 'p', queueName: q.name }))
    expect(late.code).toBe('ERR_QUEUE_CLOSED')
    await q.add('x', {}, { jobId: 'taken' })
    const e = await rejection(flow.add({ name: 'p', queueName: q.name, children: [{ name: 'c', queueName: q.name, opts: { jobId: 'taken' } }] }))
    expect(e.code).toBe('ERR_FLOW_JOB_EXISTS')
    expect(await q.count()).toBe(1)
    const bad = await rejection(q.add('c', {}, { parent: { id: '1' } }))
    expect(bad.message).toMatch(/parent\.queue/)
  })

  describe('across engines', () => {
    let dir
    beforeAll(() => {
      dir = mkdtempSync(join(tmpdir(), 'ferroqueue-flows-'))
    })
    afterAll(() => rmSync(dir, { recursive: true, force: true }))

    it('a flow whose queue lives on another engine is refused', async () => {
      const flow = producer()
      const child = uniqueName('file')
      const e = await rejection(
        flow.add(
          { name: 'p', queueName: uniqueName('mem'), children: [{ name: 'c', queueName: child }] },
          { queuesOptions: { [child]: { dataPath: join(dir, 'other.db') } } },
        ),
      )
      expect(e.code).toBe('ERR_FLOW_CROSS_ENGINE')
      // A parent on a file is not found from an in-memory queue.
      const onFile = track(new Queue(uniqueName('pf'), { dataPath: join(dir, 'parents.db') }))
      const parent = await onFile.add('p', {})
      const inMemory = mkQueue()
      const miss = await rejection(inMemory.add('c', {}, { parent: { id: parent.id, queue: onFile.qualifiedName } }))
      expect(miss.code).toBe('ERR_PARENT_NOT_FOUND')
    })

    durableOnly('a flow survives a restart of its file', async () => {
      const dataPath = join(dir, 'flow.db')
      const [pq, cq] = [uniqueName('p'), uniqueName('c')]
      const flow = new FlowProducer({ dataPath })
      const tree = await flow.add({ name: 'p', queueName: pq, children: [{ name: 'c', queueName: cq }] })
      await flow.close()
      const w = mkWorker(cq, async () => 'child value', { dataPath })
      const parents = track(new Queue(pq, { dataPath }))
      await waitFor(async () => (await parents.getJobState(tree.job.id)) === 'waiting')
      await w.close()
      const p = await parents.getJob(tree.job.id)
      expect(await p.getChildrenValues()).toEqual({ [`bull:${cq}:${tree.children[0].job.id}`]: 'child value' })
    })
  })
})
