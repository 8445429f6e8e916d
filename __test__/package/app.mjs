// An ES module app: the in-memory default, a SQLite file reopened, and a processor file run in
// worker threads, all from the installed package.
import { Queue, Worker, QueueError } from 'ferroqueue'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import assert from 'node:assert/strict'

async function runAll(queue, worker, count) {
  const done = new Promise((resolve, reject) => {
    let left = count
    worker.on('completed', () => --left === 0 && resolve())
    worker.on('failed', (_job, err) => reject(err))
  })
  await queue.addBulk(Array.from({ length: count }, (_, n) => ({ name: 'double', data: { n } })))
  await done
}

// 1. Memory.
const memory = new Queue('app-memory')
const doubler = new Worker('app-memory', async (job) => job.data.n * 2, { concurrency: 8 })
await runAll(memory, doubler, 500)
assert.equal(await memory.getCompletedCount(), 500)
await doubler.close()
await memory.close()

// 2. SQLite: what was added survives a close and a reopen.
const dir = mkdtempSync(join(tmpdir(), 'ferroqueue-app-'))
const dataPath = join(dir, 'jobs.sqlite')
let durable = new Queue('app-durable', { dataPath })
await durable.add('kept', { n: 21 })
await durable.close()
durable = new Queue('app-durable', { dataPath })
assert.equal(await durable.getWaitingCount(), 1)
await durable.close()
rmSync(dir, { recursive: true, force: true })

// 3. A processor file in worker threads (lib/sandbox ships in the package).
const threaded = new Queue('app-threads')
const processor = new URL('./processor.cjs', import.meta.url)
const threads = new Worker('app-threads', processor, { useWorkerThreads: true, threads: 2 })
await runAll(threaded, threads, 50)
await threads.close()
await threaded.close()

// 4. Bad input is a clear error.
assert.throws(() => new Queue(''), (err) => err instanceof RangeError && err.code === 'ERR_INVALID_OPTION')
assert.equal(typeof QueueError, 'function')

console.log(`ok esm ${typeof Bun === 'undefined' ? 'node' : 'bun'}`)
