// A vitest test (ES module) on the in-memory default, as a user's own test would be.
import { afterEach, expect, test } from 'vitest'
import { Queue, Worker, UnrecoverableError } from 'ferroqueue'

const open = []
afterEach(async () => {
  await Promise.all(open.splice(0).map((item) => item.close()))
})

test('a job added is processed, and its result is kept', async () => {
  const queue = new Queue('vitest-queue')
  const worker = new Worker('vitest-queue', async (job) => job.data.text.toUpperCase())
  open.push(worker, queue)
  const completed = new Promise((resolve) => worker.on('completed', (_job, result) => resolve(result)))
  await queue.add('shout', { text: 'hi' })
  expect(await completed).toBe('HI')
})

test('an UnrecoverableError fails the job with no retry', async () => {
  const queue = new Queue('vitest-failing')
  const worker = new Worker('vitest-failing', async () => {
    throw new UnrecoverableError('no')
  })
  open.push(worker, queue)
  const failed = new Promise((resolve) => worker.on('failed', (job) => resolve(job)))
  await queue.add('x', {}, { attempts: 5 })
  const job = await failed
  expect(job.attemptsMade).toBe(1)
  expect(await job.getState()).toBe('failed')
})
