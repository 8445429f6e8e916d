// Boundary benchmark: what a JS user gets through the public API, in jobs/s.
//   node bench/boundary/boundary.mjs [memory|commit|buffered]   (or with bun)
// memory: the in-memory engine; commit / buffered: a SQLite file in a temporary folder with that
// durability. Prints one JSON line per workload. Payload: a 200-byte JSON object.
// BENCH_REPEAT=k runs the workloads k times in one process (one line each time);
// FERROQUEUE_ENTRY=/path/to/index.mjs measures another checkout's build with this same script;
// BENCH_ONLY=i runs the i-th workload alone (see instructions.sh).
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

const { Queue, Worker } = await import(process.env.FERROQUEUE_ENTRY ?? '../../index.mjs')

const storage = process.argv[2] ?? 'memory'
if (!['memory', 'commit', 'buffered'].includes(storage)) throw new Error(`unknown storage ${storage}`)
const dir = storage === 'memory' ? null : mkdtempSync(join(tmpdir(), 'ferroqueue-bench-'))
const opts = dir ? { dataPath: join(dir, 'bench.db'), durability: storage } : {}

const runtime = typeof Bun !== 'undefined' ? `bun ${Bun.version}` : `node ${process.versions.node}`
const payload = { user: 'u-000123', email: 'someone@example.com', plan: 'pro', tags: ['a', 'b', 'c'], note: 'x'.repeat(107) }
if (JSON.stringify(payload).length < 190 || JSON.stringify(payload).length > 210) throw new Error('payload size drifted')

let seq = 0
const fresh = () => new Queue(`bench-${process.pid}-${++seq}`, opts)

function report(workload, n, ms) {
  const where = storage === 'memory' ? 'memory' : `SQLite, ${storage}`
  console.log(JSON.stringify({ runtime, storage: where, workload, jobs: n, ms: Math.round(ms * 10) / 10, jobsPerSec: Math.round((n * 1000) / ms) }))
}

async function addOneAtATime(n) {
  const q = fresh()
  const t = performance.now()
  for (let i = 0; i < n; i++) await q.add('job', payload)
  report('add one at a time', n, performance.now() - t)
  await q.obliterate({ force: true })
  await q.close()
}

async function addBulk(n, batch) {
  const q = fresh()
  const jobs = Array.from({ length: batch }, () => ({ name: 'job', data: payload }))
  const t = performance.now()
  for (let i = 0; i < n; i += batch) await q.addBulk(jobs)
  report(`addBulk ${n} (batches of ${batch})`, n, performance.now() - t)
  await q.obliterate({ force: true })
  await q.close()
}

async function processNoop(n, concurrency) {
  const q = fresh()
  const jobs = Array.from({ length: 1000 }, () => ({ name: 'job', data: payload }))
  for (let i = 0; i < n; i += 1000) await q.addBulk(jobs)
  let done = 0
  const t = performance.now()
  await new Promise((resolve) => {
    const w = new Worker(q.name, async () => {}, { concurrency, ...opts })
    w.on('completed', () => {
      if (++done === n) resolve(w)
    })
  }).then((w) => {
    report(`process ${n} no-op jobs, concurrency ${concurrency}`, n, performance.now() - t)
    return w.close()
  })
  await q.obliterate({ force: true })
  await q.close()
}

const quick = process.env.BENCH_QUICK === '1'
const repeat = Number(process.env.BENCH_REPEAT ?? 1)
const workloads = [
  () => addOneAtATime(quick || storage === 'commit' ? 10_000 : 100_000),
  () => addBulk(50_000, 50_000),
  () => addBulk(50_000, 1_000),
  () => processNoop(50_000, 50),
]
// BENCH_ONLY=i runs workload i alone (0-based; "none": none, for the cost of starting).
const only = process.env.BENCH_ONLY
for (let r = 0; r < repeat; r++) {
  for (const [i, w] of workloads.entries()) if (only === undefined || only === String(i)) await w()
}
if (dir) rmSync(dir, { recursive: true, force: true })
