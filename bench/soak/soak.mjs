// Soak benchmark: does memory stay flat while jobs flow through? A producer adds jobs in batches
// of 10,000 while a Worker (concurrency 100, removeOnComplete: true) processes them; after every
// STEP processed jobs the process collects garbage and samples its RSS.
//   node bench/soak/soak.mjs                     runs every case in fresh processes, prints a table
//   node --expose-gc bench/soak/soak.mjs one memory|sqlite [jobs]   (or: bun …) one case, JSON out
// Env SOAK_JOBS (default 20,000,000) sets the jobs per case.
import { spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { cpus, tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const here = dirname(fileURLToPath(import.meta.url))
const BATCH = 10_000
const payload = { user: 'u-000123', email: 'someone@example.com', plan: 'pro', tags: ['a', 'b', 'c'], note: 'x'.repeat(107) }

/** A full, synchronous collection: Node's gc() (with --expose-gc) or Bun.gc(true). */
function fullGc() {
  if (typeof Bun !== 'undefined') return () => Bun.gc(true)
  return globalThis.gc ? () => globalThis.gc() : null
}

async function one(storage, total) {
  const { Queue, Worker } = await import('../../index.mjs')
  const gc = fullGc()
  if (!gc) throw new Error('run with --expose-gc (Node) or under Bun')
  const step = Math.max(BATCH, Math.round(total / 20 / BATCH) * BATCH)
  const dir = storage === 'sqlite' ? mkdtempSync(join(tmpdir(), 'ferroqueue-soak-')) : null
  const opts = dir ? { dataPath: join(dir, 'soak.db') } : {}
  const name = `soak-${process.pid}`
  const q = new Queue(name, opts)
  let done = 0
  let wake = null
  const w = new Worker(name, async () => null, { ...opts, concurrency: 100, removeOnComplete: true })
  w.on('completed', () => {
    done++
    if (wake && done >= wake.at) {
      const r = wake.resolve
      wake = null
      r()
    }
  })
  const until = (at) => (done >= at ? null : new Promise((resolve) => (wake = { at, resolve })))
  const batch = Array.from({ length: BATCH }, () => ({ name: 'job', data: payload }))
  const sample = async (jobs) => {
    gc()
    await new Promise((r) => setTimeout(r, 20))
    gc()
    const m = process.memoryUsage()
    return { jobs, rssMB: Math.round(m.rss / 1e5) / 10, heapMB: Math.round(m.heapUsed / 1e5) / 10 }
  }
  const series = [await sample(0)]
  const t = performance.now()
  for (let added = 0; added < total; ) {
    await q.addBulk(batch)
    added += BATCH
    // Keep at most ~5 batches in flight, so the queue's own size does not grow.
    const behind = until(added - 5 * BATCH)
    if (behind) await behind
    if (added % step === 0) {
      const wait = until(added)
      if (wait) await wait
      series.push(await sample(added))
    }
  }
  const seconds = (performance.now() - t) / 1000
  await w.close()
  await q.close()
  if (dir) rmSync(dir, { recursive: true, force: true })
  const runtime = typeof Bun !== 'undefined' ? `bun ${Bun.version}` : `node ${process.versions.node}`
  console.log(JSON.stringify({ runtime, storage, total, jobsPerSec: Math.round(total / seconds), series }))
}

function all() {
  const total = Number(process.env.SOAK_JOBS ?? 20_000_000)
  const runs = []
  for (const storage of ['memory', 'sqlite']) {
    for (const [cmd, args] of [
      ['node', ['--expose-gc']],
      ['npx', ['bun']],
    ]) {
      const r = spawnSync(cmd, [...args, join(here, 'soak.mjs'), 'one', storage, String(total)], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] })
      if (r.status !== 0) throw new Error(`${cmd} ${storage} failed (${r.status})`)
      const run = JSON.parse(r.stdout.trim().split('\n').pop())
      console.error(`${run.runtime} ${storage}: ${run.jobsPerSec.toLocaleString('en-US')} jobs/s, RSS ${run.series.map((s) => s.rssMB).join(' → ')} MB`)
      runs.push(run)
    }
  }
  const head = `Machine: ${cpus().length} × ${cpus()[0].model.trim()}; ${new Date().toISOString().slice(0, 10)}; ${total.toLocaleString('en-US')} jobs per case, each through a Worker (concurrency 100, removeOnComplete) in batches of ${BATCH.toLocaleString('en-US')}; RSS in MB after gc, by jobs processed.`
  const cols = runs[0].series.map((s) => `${s.jobs / 1e6}M`)
  const lines = [head, '', `| runtime | storage | jobs/s | ${cols.join(' | ')} |`, `| --- | --- | ---: | ${cols.map(() => '---:').join(' | ')} |`]
  for (const r of runs) {
    lines.push(`| ${r.runtime} | ${r.storage} | ${r.jobsPerSec.toLocaleString('en-US')} | ${r.series.map((s) => s.rssMB).join(' | ')} |`)
  }
  const table = lines.join('\n')
  mkdirSync(join(here, '..', 'results'), { recursive: true })
  writeFileSync(join(here, '..', 'results', 'soak.md'), table + '\n')
  console.log(table)
}

if (process.argv[2] === 'one') await one(process.argv[3], Number(process.argv[4] ?? 20_000_000))
else all()
