// `node bench/threads/run.mjs`: processor files on every core. CPU-bound jobs (SHA-256 over
// 64 KiB each) and no-op jobs, run by a processor function in the Worker's thread, by 1 and 2
// worker threads, by 2 child processes, and by BullMQ's sandboxed processors (worker threads and
// child processes) with the same file, against a redis-server this script starts on 127.0.0.1
// and stops by pid. Each row is the median of BENCH_REPS (3) fresh processes; ferroqueue rows run
// on Node and on Bun. Prints a markdown table.
import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { cpus, tmpdir } from 'node:os'
import { join, dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import { startRedis } from '../peers/redis.mjs'

const here = dirname(fileURLToPath(import.meta.url))
const bun = join(here, '..', '..', 'node_modules', '.bin', 'bun')
const REPS = Number(process.env.BENCH_REPS ?? 3)

// [label, system, placement, file, copies, concurrency, jobs, rounds]
const ROWS = [
  ['hash 64 KiB, processor function', 'ferroqueue', 'inline', 'hash.cjs', 1, 1, 20000, 1],
  ['hash 64 KiB, 1 worker thread', 'ferroqueue', 'threads', 'hash.cjs', 1, 1, 20000, 1],
  ['hash 64 KiB, 2 worker threads', 'ferroqueue', 'threads', 'hash.cjs', 2, 1, 20000, 1],
  ['hash 64 KiB, 2 child processes', 'ferroqueue', 'children', 'hash.cjs', 2, 4, 20000, 1],
  ['hash 64 KiB, BullMQ sandbox, 2 worker threads', 'bullmq', 'threads', 'hash.cjs', 2, 2, 4000, 1],
  ['hash 64 KiB × 16, processor function', 'ferroqueue', 'inline', 'hash.cjs', 1, 1, 2000, 16],
  ['hash 64 KiB × 16, 2 worker threads', 'ferroqueue', 'threads', 'hash.cjs', 2, 1, 2000, 16],
  ['no-op, processor function', 'ferroqueue', 'inline', 'noop.cjs', 1, 50, 100000, 0],
  ['no-op, 1 worker thread', 'ferroqueue', 'threads', 'noop.cjs', 1, 50, 100000, 0],
  ['no-op, 2 worker threads', 'ferroqueue', 'threads', 'noop.cjs', 2, 50, 100000, 0],
  ['no-op, 2 child processes', 'ferroqueue', 'children', 'noop.cjs', 2, 50, 100000, 0],
  ['no-op, BullMQ sandbox, worker threads (concurrency 8)', 'bullmq', 'threads', 'noop.cjs', 1, 8, 4000, 0],
  ['no-op, BullMQ sandbox, child processes (concurrency 8)', 'bullmq', 'children', 'noop.cjs', 1, 8, 4000, 0],
]

function runRow(runtime, row, redisPort) {
  const [, system, placement, file, copies, concurrency, jobs, rounds] = row
  const args = [join(here, 'row.mjs'), system, placement, file, copies, concurrency, jobs, rounds, redisPort].map(String)
  const r = spawnSync(runtime === 'bun' ? bun : process.execPath, args, { encoding: 'utf8', timeout: 300_000 })
  const line = r.stdout.trim().split('\n').filter((l) => l.startsWith('{')).pop()
  if (r.status !== 0 || !line) return { error: (r.stderr.trim().split('\n').pop() || `exit ${r.status}`).slice(0, 100) }
  return JSON.parse(line)
}

const median = (xs) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)]

const work = mkdtempSync(join(tmpdir(), 'ferroqueue-threads-'))
const redis = await startRedis(work)
const out = []
try {
  for (const row of ROWS) {
    for (const runtime of row[1] === 'bullmq' ? ['node'] : ['node', 'bun']) {
      const runs = []
      let error = null
      for (let i = 0; i < REPS && !error; i++) {
        const r = runRow(runtime, row, redis.port)
        if (r.error) error = r.error
        else runs.push(r.jobsPerSec)
      }
      const cell = error ? `error: ${error}` : median(runs).toLocaleString('en-US')
      out.push({ label: row[0], runtime, cell, jobsPerSec: error ? null : median(runs) })
      console.error(`${row[0]} (${runtime}): ${cell} jobs/s`)
    }
  }
} finally {
  redis.p.kill()
  rmSync(work, { recursive: true, force: true })
}

const noop = (label, runtime) => out.find((r) => r.label === label && r.runtime === runtime)?.jobsPerSec
const bullBest = Math.max(...out.filter((r) => r.label.startsWith('no-op, BullMQ') && r.jobsPerSec).map((r) => r.jobsPerSec))
console.log(`Machine: ${cpus().length} × ${cpus()[0].model}; Node ${process.version}; Bun ${spawnSync(bun, ['--version'], { encoding: 'utf8' }).stdout.trim()}; median of ${REPS}\n`)
console.log('| jobs run by | Node jobs/s | Bun jobs/s |')
console.log('| --- | ---: | ---: |')
for (const row of ROWS) {
  const cells = ['node', 'bun'].map((rt) => out.find((r) => r.label === row[0] && r.runtime === rt)?.cell ?? '—')
  console.log(`| ${row[0]} | ${cells[0]} | ${cells[1]} |`)
}
const threads = noop('no-op, 2 worker threads', 'node')
if (threads && bullBest) console.log(`\nNo-op jobs, 2 worker threads vs BullMQ's best sandbox: ${(threads / bullBest).toFixed(0)}x`)
