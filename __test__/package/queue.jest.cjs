// A jest test (CommonJS) on the in-memory default, as a user's own test would be.
const { Queue, Worker } = require('ferroqueue')

let queue
afterEach(async () => {
  await queue?.close()
})

test('a job added is processed, and its result is kept', async () => {
  queue = new Queue('jest-queue')
  const worker = new Worker('jest-queue', async (job) => job.data.a + job.data.b)
  const completed = new Promise((resolve) => worker.on('completed', (job, result) => resolve([job.id, result])))
  const job = await queue.add('sum', { a: 2, b: 3 })
  expect(await completed).toEqual([job.id, 5])
  expect(await queue.getJobCounts('completed', 'waiting')).toEqual({ completed: 1, waiting: 0 })
  await worker.close()
})

test('priorities: lower number first, FIFO within one', async () => {
  queue = new Queue('jest-priorities')
  await queue.add('c', {}, { priority: 5 })
  await queue.add('a', {}, { priority: 1 })
  await queue.add('b', {}, { priority: 1 })
  const names = (await queue.getJobs(['prioritized'], 0, -1, true)).map((job) => job.name)
  expect(names).toEqual(['a', 'b', 'c'])
})
