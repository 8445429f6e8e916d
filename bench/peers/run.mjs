// `npm run bench`: every workload on ferroqueue (Node and Bun, memory and SQLite), bunqueue
// (embedded, on Bun, memory and SQLite) and BullMQ (Node, against a redis-server this script
// starts on 127.0.0.1 and stops by pid), and ferroqueue and BullMQ 6 on PostgreSQL (each its own
// backend, on one server that scripts/postgres.sh starts and stops), each the median of 3 fresh
// processes; prints markdown tables with the ratios and writes them to bench/results/latest.md.
//   BENCH_REPS=1 BENCH_ONLY=add1,bulk npm run bench   (quicker subsets)
//   BENCH_STORAGE=postgres npm run bench                (only the cells of some storages)
import { spawn, spawnSync, execFileSync } from 'node:child_process'
import { mkdtempSync, mkdirSync, rmSync, writeFileSync, existsSync, readFileSync } from 'node:fs'
import { cpus, totalmem, tmpdir } from 'node:os'
import { join, dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import { startRedis } from './redis.mjs'

const here = dirname(fileURLToPath(import.meta.url))
const root = join(here, '..', '..')
const bun = join(root, 'node_modules', '.bin', 'bun')
const REPS = Number(process.env.BENCH_REPS ?? 3)
const WORKLOADS = (process.env.BENCH_ONLY ?? 'add1,bulk,process,process2,cycle,delayed,rss').split(',')
// The workloads of each storage (`process2`, two worker processes, needs a shared backend).
const EMBEDDED = ['add1', 'bulk', 'process', 'cycle', 'delayed', 'rss']
const SHARED = ['add1', 'bulk', 'process', 'process2']

const CELLS = [
  { system: 'ferroqueue', runtime: 'node', storage: 'memory' },
  { system: 'ferroqueue', runtime: 'bun', storage: 'memory' },
  { system: 'bunqueue', runtime: 'bun', storage: 'memory' },
  { system: 'ferroqueue', runtime: 'node', storage: 'sqlite' },
  { system: 'ferroqueue', runtime: 'bun', storage: 'sqlite' },
  { system: 'bunqueue', runtime: 'bun', storage: 'sqlite' },
  { system: 'bullmq', runtime: 'node', storage: 'redis' },
  { system: 'ferroqueue', runtime: 'node', storage: 'postgres' },
  { system: 'bullmq', runtime: 'node', storage: 'postgres' },
]
const STORAGES = process.env.BENCH_STORAGE?.split(',')
const workloadsOf = (cell) => (STORAGES && !STORAGES.includes(cell.storage) ? [] : cell.storage === 'postgres' ? SHARED : EMBEDDED)

function startPostgres() {
  const out = execFileSync('bash', [join(root, 'scripts', 'postgres.sh'), 'start'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] })
  const env = Object.fromEntries([...out.matchAll(/export (\w+)=(\S+)/g)].map((m) => [m[1], m[2]]))
  return { url: env.FERROQUEUE_TEST_POSTGRES_URL, dir: env.PG_TEST_DIR }
}

function runCell(cell, workload, dir, redis, pg) {
  return new Promise((resolve) => {
    const args = [join(here, 'workload.mjs'), cell.system, cell.storage, workload, dir, String(redis?.port ?? 0), String(redis?.p.pid ?? 0)]
    const cmd = cell.runtime === 'bun' ? bun : process.execPath
    const env = { ...process.env, BENCH_POSTGRES_URL: pg?.url ?? '' }
    const p = spawn(cmd, cell.runtime === 'node' ? ['--expose-gc', ...args] : args, { cwd: here, env, stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    let err = ''
    p.stdout.on('data', (d) => (out += d))
    p.stderr.on('data', (d) => (err += d))
    const timer = setTimeout(() => p.kill('SIGKILL'), 180_000)
    p.on('exit', (code) => {
      clearTimeout(timer)
      const line = out.trim().split('\n').filter((l) => l.startsWith('{')).pop()
      if (code === 0 && line) resolve(JSON.parse(line))
      else resolve({ error: (err.trim().split('\n').pop() || `exit ${code}`).slice(0, 120) })
    })
  })
}

const median = (xs) => {
  const v = xs.filter((x) => typeof x === 'number').sort((a, b) => a - b)
  return v.length ? v[Math.floor(v.length / 2)] : null
}

const work = mkdtempSync(join(tmpdir(), 'ferroqueue-peers-'))
const redis = await startRedis(work)
const pg = WORKLOADS.some((w) => SHARED.includes(w)) ? startPostgres() : null
const results = new Map() // key -> [result]
try {
  for (const workload of WORKLOADS) {
    for (const cell of CELLS) {
      if (!workloadsOf(cell).includes(workload)) continue
      const key = `${workload}|${cell.system}|${cell.runtime}|${cell.storage}`
      const runs = []
      for (let r = 0; r < REPS; r++) {
        const dir = mkdtempSync(join(work, 'run-'))
        spawnSync('redis-cli', ['-p', String(redis.port), 'FLUSHALL'])
        runs.push(await runCell(cell, workload, dir, redis, pg))
        rmSync(dir, { recursive: true, force: true })
      }
      results.set(key, runs)
      const shown = runs.map((x) => x.error ?? x.jobsPerSec ?? x.medianMs ?? x.beyondPayload)
      console.error(`${key}: ${shown.join(', ')}`)
    }
  }
} finally {
  redis.p.kill('SIGTERM')
  if (pg) execFileSync('bash', [join(root, 'scripts', 'postgres.sh'), 'stop', pg.dir])
  rmSync(work, { recursive: true, force: true })
}

// ---- the table ----
const metric = {
  add1: ['add one at a time (10,000)', 'jobs/s', (x) => x.jobsPerSec, true],
  bulk: ['addBulk 50,000 (batches of 1,000)', 'jobs/s', (x) => x.jobsPerSec, true],
  process: ['process 50,000 no-op, concurrency 50', 'jobs/s', (x) => x.jobsPerSec, true],
  process2: ['process 50,000 no-op, 2 worker processes of concurrency 50', 'jobs/s', (x) => x.jobsPerSec, true],
  cycle: ['add + process 50,000', 'jobs/s', (x) => x.jobsPerSec, true],
  delayed: ['delayed punctuality, median (p99) lateness', 'ms', (x) => x.medianMs, false],
  rss: ['memory per waiting job beyond its 200-byte payload (1,000,000 jobs)', 'bytes', (x) => x.beyondPayload, false],
}
const fmt = (v) => (v === null || v === undefined ? '—' : typeof v === 'number' ? v.toLocaleString('en-US') : v)
const val = (workload, system, runtime, storage, pick) => {
  const runs = results.get(`${workload}|${system}|${runtime}|${storage}`) || []
  const errors = runs.filter((x) => x.error)
  if (errors.length === runs.length && runs.length) return { v: null, text: `error: ${errors[0].error}` }
  const v = median(runs.filter((x) => !x.error).map(pick))
  let text = fmt(v)
  if (workload === 'delayed' && v !== null) text = `${v} (${median(runs.filter((x) => !x.error).map((x) => x.p99Ms))})`
  return { v, text }
}
const ratio = (a, b, higherBetter) => {
  if (a === null || b === null || a === undefined || b === undefined) return '—'
  if (higherBetter) return b > 0 ? `${(a / b).toFixed(1)}x` : '—'
  return a > 0 ? `${(b / a).toFixed(1)}x` : '∞'
}
const lines = []
const versions = (() => {
  const pj = (p) => JSON.parse(readFileSync(p, 'utf8')).version
  const nm = join(here, '..', 'node_modules')
  const redisV = spawnSync('redis-server', ['--version'], { encoding: 'utf8' }).stdout.match(/v=([\d.]+)/)?.[1]
  const bunV = spawnSync(bun, ['--version'], { encoding: 'utf8' }).stdout.trim()
  return `ferroqueue ${pj(join(root, 'package.json'))}, bunqueue ${pj(join(nm, 'bunqueue', 'package.json'))}, BullMQ ${pj(join(nm, 'bullmq', 'package.json'))} + ioredis ${pj(join(nm, 'ioredis', 'package.json'))}, Redis ${redisV}; Node ${process.versions.node}, Bun ${bunV}`
})()
lines.push(`Machine: ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, ${Math.round(totalmem() / 2 ** 30)} GiB; ${versions}; ${new Date().toISOString().slice(0, 10)}; median of ${REPS} fresh processes.`)
lines.push('')
for (const [storageClass, cells] of [
  ['in memory', ['memory']],
  ['durable (ferroqueue and bunqueue on SQLite, BullMQ on Redis with AOF)', ['sqlite', 'redis']],
]) {
  lines.push(`**${storageClass}**`)
  lines.push('')
  const bullCol = cells.includes('redis')
  lines.push(`| workload | unit | ferroqueue (Node) | ferroqueue (Bun) | bunqueue (Bun) | ${bullCol ? 'BullMQ (Node) | ' : ''}ferroqueue / bunqueue | ${bullCol ? 'ferroqueue / BullMQ |' : ''}`)
  lines.push(`| --- | --- | ---: | ---: | ---: | ${bullCol ? '---: | ' : ''}---: | ${bullCol ? '---: |' : ''}`)
  const st = cells[0]
  for (const w of WORKLOADS.filter((x) => EMBEDDED.includes(x))) {
    const [label, unit, pick, higher] = metric[w]
    const fn = val(w, 'ferroqueue', 'node', st, pick)
    const fb = val(w, 'ferroqueue', 'bun', st, pick)
    const bq = val(w, 'bunqueue', 'bun', st, pick)
    const best = [fn.v, fb.v].filter((x) => x !== null).reduce((a, b) => (higher ? Math.max(a, b) : Math.min(a, b)), higher ? -Infinity : Infinity)
    const ferro = Number.isFinite(best) ? best : null
    let row = `| ${label} | ${unit} | ${fn.text} | ${fb.text} | ${bq.text} | `
    if (bullCol) {
      const bm = val(w, 'bullmq', 'node', 'redis', pick)
      row += `${bm.text} | ${ratio(ferro, bq.v, higher)} | ${ratio(ferro, bm.v, higher)} |`
    } else row += `${ratio(ferro, bq.v, higher)} |`
    lines.push(row)
  }
  lines.push('')
}
if (pg) {
  const pgV = execFileSync('sh', ['-c', 'ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1'], { encoding: 'utf8' }).trim()
  const server = spawnSync(join(pgV, 'postgres'), ['--version'], { encoding: 'utf8' }).stdout.trim()
  const pgDriver = JSON.parse(readFileSync(join(here, '..', 'node_modules', 'pg', 'package.json'), 'utf8')).version
  lines.push(`**shared by processes (PostgreSQL: ${server}, fsync on; BullMQ's createPostgresBackend with pg ${pgDriver})**`)
  lines.push('')
  lines.push('| workload | unit | ferroqueue (Node) | BullMQ (Node) | ferroqueue / BullMQ |')
  lines.push('| --- | --- | ---: | ---: | ---: |')
  for (const w of WORKLOADS.filter((x) => SHARED.includes(x))) {
    const [label, unit, pick, higher] = metric[w]
    const f = val(w, 'ferroqueue', 'node', 'postgres', pick)
    const b = val(w, 'bullmq', 'node', 'postgres', pick)
    lines.push(`| ${label} | ${unit} | ${f.text} | ${b.text} | ${ratio(f.v, b.v, higher)} |`)
  }
  lines.push('')
}
lines.push('Ratios compare the better ferroqueue runtime with the peer (for lateness and memory: the peer\'s value over ours, so higher is better for ferroqueue too).')
const table = lines.join('\n')
console.log(table)
mkdirSync(join(here, '..', 'results'), { recursive: true })
writeFileSync(join(here, '..', 'results', 'latest.md'), table + '\n')
void existsSync
