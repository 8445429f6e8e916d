// Where a job's time goes: each step of the add and process paths timed on its own, in µs per
// job, plus the SQLite writer thread's CPU time per job. Explains the peers table's numbers.
//   node bench/boundary/breakdown.mjs        (or: npx bun bench/boundary/breakdown.mjs)
// Steps are measured in isolation (warm, 200,000 jobs, 200-byte payload), so they add up only
// roughly to the end-to-end figures: GC and event-loop turns come on top.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Queue, Worker } from '../../index.mjs'

const require = createRequire(import.meta.url)
const { binding } = require('../../lib/native.js')
const runtime = typeof Bun !== 'undefined' ? `bun ${Bun.version}` : `node ${process.versions.node}`
const payload = { user: 'u-000123', email: 'someone@example.com', plan: 'pro', tags: ['a', 'b', 'c'], note: 'x'.repeat(107) }
const N = 200_000
const BATCH = 50
const rows = []

function row(path, step, us) {
  rows.push({ path, step, us: Math.round(us * 1000) / 1000 })
}

function perJob(fn, n = N) {
  fn(Math.min(n, 20_000)) // warm-up
  const t = performance.now()
  fn(n)
  return ((performance.now() - t) * 1000) / n
}

let seq = 0
const fresh = (opts = {}) => new Queue(`breakdown-${process.pid}-${++seq}`, opts)

// --- add path, in memory ----------------------------------------------------------------------
{
  const q = fresh()
  const h = q._h
  const text = JSON.stringify(payload)
  row('add', 'a sync native call that does nothing (isPaused)', perJob((n) => { for (let i = 0; i < n; i++) binding.isPaused(h) }))
  row('add', 'JSON.stringify of the payload', perJob((n) => { for (let i = 0; i < n; i++) JSON.stringify(payload) }))
  row('add', 'native add: strings into Rust, engine add', perJob((n) => { for (let i = 0; i < n; i++) binding.add(h, 'job', text, null, 1) }))
  await q.obliterate({ force: true })
  const t = performance.now()
  for (let i = 0; i < N; i++) await q.add('job', payload)
  row('add', 'await queue.add (all of it)', ((performance.now() - t) * 1000) / N)
  await q.obliterate({ force: true })
  await q.close()
}

// --- process path, in memory ------------------------------------------------------------------
{
  const q = fresh()
  const h = q._h
  const jobs = Array.from({ length: 1000 }, () => ({ name: 'job', data: payload }))
  const fill = async () => { for (let i = 0; i < N; i += 1000) await q.addBulk(jobs) }
  await fill()
  const texts = []
  let t = performance.now()
  for (let i = 0; i < N; i += BATCH) texts.push(binding.tryPull(h, BATCH, 0, 0))
  row('process', `native tryPull (${BATCH} per call): engine take + JSON records`, ((performance.now() - t) * 1000) / N)
  t = performance.now()
  const records = texts.map((s) => JSON.parse(s))
  row('process', 'JSON.parse of the records', ((performance.now() - t) * 1000) / N)
  const acks = records.map((rs) => '[' + rs.map((r) => `{"id":"${r.id}","token":${r.token},"ok":true,"value":null}`).join(',') + ']')
  t = performance.now()
  for (const a of acks) binding.ack(h, a)
  row('process', `native ack (${BATCH} per call): parse + engine ack`, ((performance.now() - t) * 1000) / N)
  await q.obliterate({ force: true })
  await fill()
  let done = 0
  t = performance.now()
  await new Promise((resolve) => {
    const w = new Worker(q.name, async () => {}, { concurrency: BATCH })
    w.on('completed', () => { if (++done === N) resolve(w.close()) })
  })
  row('process', 'Worker, no-op processor (all of it)', ((performance.now() - t) * 1000) / N)
  await q.close()
}

// --- durable: the writer thread's CPU per job --------------------------------------------------
function writerCpuMs() {
  for (const t of readdirSync('/proc/self/task')) {
    if (readFileSync(`/proc/self/task/${t}/comm`, 'utf8').startsWith('ferroqueue-writ')) {
      const f = readFileSync(`/proc/self/task/${t}/stat`, 'utf8').split(') ')[1].split(' ')
      return (Number(f[11]) + Number(f[12])) * 10 // clock ticks of 10 ms
    }
  }
  return NaN
}
if (process.platform === 'linux') {
  const dir = mkdtempSync(join(tmpdir(), 'ferroqueue-breakdown-'))
  const opts = { dataPath: join(dir, 'b.db'), durability: 'commit' }
  const q = fresh(opts)
  const jobs = Array.from({ length: 1000 }, () => ({ name: 'job', data: payload }))
  let cpu0 = writerCpuMs()
  let t = performance.now()
  for (let i = 0; i < N; i += 1000) await q.addBulk(jobs)
  const bulkWall = performance.now() - t
  let cpu1 = writerCpuMs()
  row('SQLite', 'writer CPU per inserted job (addBulk, batches of 1,000)', ((cpu1 - (Number.isNaN(cpu0) ? 0 : cpu0)) * 1000) / N)
  row('SQLite', 'addBulk wall time per job (each batch awaits its commit)', (bulkWall * 1000) / N)
  let done = 0
  t = performance.now()
  await new Promise((resolve) => {
    const w = new Worker(q.name, async () => {}, { ...opts, concurrency: BATCH })
    w.on('completed', () => { if (++done === N) resolve(w.close()) })
  })
  const procWall = performance.now() - t
  const cpu2 = writerCpuMs()
  row('SQLite', 'writer CPU per processed job (one folded UPDATE each)', ((cpu2 - cpu1) * 1000) / N)
  row('SQLite', 'Worker wall time per job', (procWall * 1000) / N)
  const one = fresh(opts)
  t = performance.now()
  for (let i = 0; i < 2000; i++) await one.add('job', payload)
  row('SQLite', 'await queue.add, one at a time (a commit round trip each)', ((performance.now() - t) * 1000) / 2000)
  await one.close()
  await q.close()
  rmSync(dir, { recursive: true, force: true })
}

console.log(`${runtime}: µs per job`)
console.log('| path | step | µs/job |\n| --- | --- | ---: |')
for (const r of rows) console.log(`| ${r.path} | ${r.step} | ${r.us.toFixed(2)} |`)
