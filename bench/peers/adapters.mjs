// One BullMQ-shaped interface over the three systems, so every workload runs the same code.
//   system: 'ferroqueue' | 'bunqueue' | 'bullmq'
//   storage: 'memory' | 'sqlite' | 'redis' | 'postgres' (ferroqueue's own backend, or BullMQ 6's
//   createPostgresBackend, on the same server; ours in schema BENCH_PG_SCHEMA, default
//   ferroqueue_bench)
import { join } from 'node:path'

export async function load(system, storage, { dir, redisPort, pgUrl }) {
  if (system === 'ferroqueue') {
    const { Queue, Worker } = await import('../../index.mjs')
    const opts =
      storage === 'sqlite'
        ? { dataPath: join(dir, 'ferroqueue.db'), durability: 'commit' }
        : storage === 'postgres'
          ? { connection: { connectionString: pgUrl, schema: process.env.BENCH_PG_SCHEMA ?? 'ferroqueue_bench' } }
          : {}
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
  if (system === 'bullmq' && storage === 'postgres') {
    const { Queue, Worker, createPostgresBackend } = await import('bullmq')
    // BullMQ creates its schema only when told to (its default pool of 20 connections).
    const connection = { connectionString: pgUrl, migrate: true }
    return {
      queue: (name) => new Queue(name, { connection }, createPostgresBackend),
      worker: (name, fn, concurrency) => new Worker(name, fn, { connection, concurrency }, createPostgresBackend),
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
