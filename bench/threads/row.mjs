// One row of bench/threads/run.mjs, in a process of its own: a Worker (ferroqueue or BullMQ) with
// the row's processor placement is warmed up, paused, given `jobs` jobs, resumed, and timed until
// every job completed (completed count polled). Prints one JSON line: { jobsPerSec, ms }.
//   node row.mjs <system> <placement> <file> <copies> <concurrency> <jobs> <rounds> [redisPort]
import { createRequire } from 'node:module'
import { join, dirname } from 'node:path'
import { fileURLToPath } from 'node:url'

const here = dirname(fileURLToPath(import.meta.url))
const [system, placement, file, copies, concurrency, jobs, rounds, redisPort] = process.argv.slice(2)
const N = Number(jobs)
const data = { rounds: Number(rounds) }
const path = join(here, file)
const warm = 4 * Number(copies)

async function ferroqueue() {
  const { Queue, Worker } = await import('../../index.mjs')
  const name = `threads-${process.pid}`
  const queue = new Queue(name)
  const opts = { concurrency: Number(concurrency), threads: Number(copies) }
  let worker
  if (placement === 'inline') {
    const require = createRequire(import.meta.url)
    worker = new Worker(name, require(path), { concurrency: Number(concurrency) })
  } else {
    worker = new Worker(name, path, { ...opts, useWorkerThreads: placement === 'threads' })
  }
  worker.on('error', (e) => console.error(e))
  const done = async () => (await queue.getJobCounts('completed')).completed
  return { queue, worker, add: (n) => queue.addBulk(Array.from({ length: n }, () => ({ name: 'j', data }))), done, close: async () => (await worker.close(), await queue.close()) }
}

async function bullmq() {
  const require = createRequire(join(here, '..', 'package.json'))
  const { Queue, Worker } = require('bullmq')
  const connection = { host: '127.0.0.1', port: Number(redisPort), maxRetriesPerRequest: null }
  const name = `threads-${process.pid}`
  const queue = new Queue(name, { connection })
  const worker = new Worker(name, path, { connection, concurrency: Number(concurrency), useWorkerThreads: placement === 'threads' })
  worker.on('error', (e) => console.error(e))
  const add = async (n) => {
    for (let i = 0; i < n; i += 1000) await queue.addBulk(Array.from({ length: Math.min(1000, n - i) }, () => ({ name: 'j', data })))
  }
  return { queue, worker, add, done: () => queue.getCompletedCount(), close: async () => (await worker.close(), await queue.obliterate({ force: true }), await queue.close()) }
}

const q = system === 'bullmq' ? await bullmq() : await ferroqueue()
const until = async (n) => {
  while ((await q.done()) < n) await new Promise((r) => setTimeout(r, 2))
}
await q.add(warm)
await until(warm)
await q.worker.pause()
await q.add(N)
const t0 = performance.now()
q.worker.resume()
await until(warm + N)
const ms = performance.now() - t0
await q.close()
console.log(JSON.stringify({ jobsPerSec: Math.round((N / ms) * 1000), ms: Math.round(ms) }))
process.exit(0)
