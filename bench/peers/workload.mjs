// One workload of one system in this (fresh) process; prints one JSON line.
//   <runtime> workload.mjs <system> <storage> <workload> <dir> [redisPort]
// PostgreSQL's URL comes in BENCH_POSTGRES_URL.
// Workloads (200-byte JSON payload):
//   add1     10,000 awaited adds, one at a time                      -> jobs/s
//   bulk     50,000 adds with addBulk in batches of 1,000            -> jobs/s
//   process  50,000 waiting no-op jobs, one worker, concurrency 50   -> jobs/s
//   process2 the same with two worker processes (shared backends only: PostgreSQL, Redis)
//            -> jobs/s, from the first worker's start to the last completion
//   cycle    a worker runs while 50,000 jobs are added in batches    -> jobs/s, first add to last completion
//   delayed  1,000 jobs due at known times over 1 s                  -> median and p99 lateness (ms)
//   rss      1,000,000 waiting jobs                                  -> bytes per job (process RSS, or Redis's)
import { readFileSync } from 'node:fs'
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { load } from './adapters.mjs'

const [system, storage, workload, dir, redisPortText, redisPidText, queueName] = process.argv.slice(2)
const runtime = typeof Bun !== 'undefined' ? `bun ${Bun.version}` : `node ${process.versions.node}`
const payload = { user: 'u-000123', email: 'someone@example.com', plan: 'pro', tags: ['a', 'b', 'c'], note: 'x'.repeat(107) }
const PAYLOAD_BYTES = JSON.stringify(payload).length
const sys = await load(system, storage, { dir, redisPort: Number(redisPortText), pgUrl: process.env.BENCH_POSTGRES_URL })
const name = queueName ?? `bench-${workload}-${process.pid}`

// A worker process of `process2`: says when it starts, then how many jobs it completed so far
// (at most once a tick, so that the parent counts without querying the database), until killed.
if (workload === 'worker-child') {
  console.log('DONE 0')
  let done = 0
  let told = false
  sys.worker(name, async () => {}, 50).on('completed', () => {
    done++
    if (told) return
    told = true
    setImmediate(() => {
      told = false
      console.log(`DONE ${done}`)
    })
  })
  await new Promise(() => {})
}

const gc = () => (typeof Bun !== 'undefined' ? Bun.gc(true) : globalThis.gc?.())

function out(result) {
  console.log(JSON.stringify({ system, storage, runtime, workload, ...result }))
}

function rssOf(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)[1]) * 1024
}

async function fill(queue, n, batch = 1000) {
  const jobs = Array.from({ length: batch }, () => ({ name: 'job', data: payload }))
  for (let i = 0; i < n; i += batch) await queue.addBulk(i + batch <= n ? jobs : jobs.slice(0, n - i))
}

function untilCompleted(worker, n) {
  return new Promise((resolve) => {
    let done = 0
    worker.on('completed', () => {
      if (++done === n) resolve()
    })
  })
}

const queue = sys.queue(name)
let worker = null
const t0 = performance.now()
switch (workload) {
  case 'add1': {
    const n = 10_000
    const t = performance.now()
    for (let i = 0; i < n; i++) await queue.add('job', payload)
    out({ jobs: n, jobsPerSec: Math.round((n * 1000) / (performance.now() - t)) })
    break
  }
  case 'bulk': {
    const n = 50_000
    const t = performance.now()
    await fill(queue, n)
    out({ jobs: n, jobsPerSec: Math.round((n * 1000) / (performance.now() - t)) })
    break
  }
  case 'process': {
    const n = 50_000
    await fill(queue, n)
    const t = performance.now()
    worker = sys.worker(name, async () => {}, 50)
    await untilCompleted(worker, n)
    out({ jobs: n, jobsPerSec: Math.round((n * 1000) / (performance.now() - t)) })
    break
  }
  case 'process2': {
    const n = 50_000
    await fill(queue, n)
    const self = fileURLToPath(import.meta.url)
    const args = [self, system, storage, 'worker-child', dir, redisPortText, redisPidText, name]
    let t = null
    const counts = [0, 0]
    let finished
    const all = new Promise((resolve) => (finished = resolve))
    const children = counts.map((_, i) => {
      const p = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] })
      p.stdout.on('data', (d) => {
        t ??= performance.now()
        const last = [...String(d).matchAll(/DONE (\d+)/g)].pop()
        if (last) counts[i] = Number(last[1])
        if (counts[0] + counts[1] >= n) finished(performance.now())
      })
      return p
    })
    try {
      const end = await all
      out({ jobs: n, jobsPerSec: Math.round((n * 1000) / (end - t)) })
    } finally {
      for (const p of children) p.kill('SIGKILL')
    }
    break
  }
  case 'cycle': {
    const n = 50_000
    worker = sys.worker(name, async () => {}, 50)
    const done = untilCompleted(worker, n)
    const t = performance.now()
    await fill(queue, n)
    await done
    out({ jobs: n, jobsPerSec: Math.round((n * 1000) / (performance.now() - t)) })
    break
  }
  case 'delayed': {
    const n = 1000
    const late = []
    worker = sys.worker(name, async (job) => {
      late.push(Date.now() - job.data.due)
    }, 50)
    const done = untilCompleted(worker, n)
    const start = Date.now() + 300
    const jobs = []
    for (let i = 0; i < n; i++) {
      const due = start + i
      jobs.push({ name: 'job', data: { ...payload, due }, opts: { delay: due - Date.now() } })
    }
    // the delay is relative to the add: recompute right before adding each batch
    for (let i = 0; i < n; i += 100) {
      const batch = jobs.slice(i, i + 100).map((j) => ({ ...j, opts: { delay: Math.max(0, j.data.due - Date.now()) } }))
      await queue.addBulk(batch)
    }
    await done
    late.sort((a, b) => a - b)
    out({ jobs: n, medianMs: late[Math.floor(n / 2)], p99Ms: late[Math.floor(n * 0.99)] })
    break
  }
  case 'rss': {
    const n = 1_000_000
    const pid = system === 'bullmq' ? Number(redisPidText) : process.pid
    gc()
    const before = rssOf(pid)
    await fill(queue, n, 10_000)
    gc()
    await new Promise((r) => setTimeout(r, 200))
    const after = rssOf(pid)
    const perJob = (after - before) / n
    out({ jobs: n, bytesPerJob: Math.round(perJob), beyondPayload: Math.round(perJob - PAYLOAD_BYTES) })
    break
  }
  default:
    throw new Error(`unknown workload ${workload}`)
}
try {
  if (worker) await worker.close()
  await queue.obliterate?.({ force: true })
  await queue.close()
} catch {}
void t0
process.exit(0)
