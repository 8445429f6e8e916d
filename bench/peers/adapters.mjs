// One BullMQ-shaped interface over the three systems, so every workload runs the same code.
//   system: 'ferroqueue' | 'bunqueue' | 'bullmq';  storage: 'memory' | 'sqlite' | 'redis'
import { join } from 'node:path'

export async function load(system, storage, { dir, redisPort }) {
  if (system === 'ferroqueue') {
    const { Queue, Worker } = await import('../../index.mjs')
    const opts = storage === 'sqlite' ? { dataPath: join(dir, 'ferroqueue.db'), durability: 'commit' } : {}
    return {
      queue: (name) => new Queue(name, opts),
      worker: (name, fn, concurrency) => new Worker(name, fn, { ...opts, concurrency }),
    }
  }
  if (system === 'bunqueue') {
    const { Queue, Worker } = await import('bunqueue/client')
    const opts = storage === 'sqlite' ? { embedded: true, dataPath: join(dir, 'bunqueue.db') } : { embedded: true }
    return {
      queue: (name) => new Queue(name, opts),
      worker: (name, fn, concurrency) => new Worker(name, fn, { ...opts, concurrency }),
    }
  }
  if (system === 'bullmq') {
    const { Queue, Worker } = await import('bullmq')
    const connection = { host: '127.0.0.1', port: redisPort, maxRetriesPerRequest: null }
    return {
      queue: (name) => new Queue(name, { connection }),
      worker: (name, fn, concurrency) => new Worker(name, fn, { connection, concurrency }),
    }
  }
  throw new Error(`unknown system ${system}`)
}
