// The dead-letter queue's costs, end to end from JS: `n` jobs (default 10,000, the default
// maxEntries) failed by a processor, each with 2 attempts, then
//   - failing: jobs per second through two attempts each, with histories written (and, on
//     PostgreSQL, the maxEntries statement after each ack batch that failed jobs for good),
//   - getDlq() of all entries, getDlq({ reason, limit: 10 }), getDlqStats(),
//   - retryDlq(): every entry back to waiting.
// In memory, in a SQLite file, and on PostgreSQL with FERROQUEUE_TEST_POSTGRES_URL set
// (scripts/postgres.sh start prints it).
//
//   node bench/dlq/dlq.mjs [n]
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Queue, Worker } from '../../index.mjs'

const n = Number(process.argv[2] ?? 10_000)
const url = process.env.FERROQUEUE_TEST_POSTGRES_URL
const dir = mkdtempSync(join(tmpdir(), 'ferroqueue-bench-dlq-'))

async function timed(f) {
  const t = performance.now()
  const v = await f()
  return [performance.now() - t, v]
}

async function run(label, opts) {
  const q = new Queue(`dlq-${Date.now()}`, opts)
  for (let i = 0; i < n; i += 5000) {
    const jobs = Array.from({ length: Math.min(5000, n - i) }, () => ({ name: 'j', data: { x: 1 }, opts: { attempts: 2 } }))
    await q.addBulk(jobs)
  }
  const t = performance.now()
  const w = new Worker(q.name, () => {
    throw new Error('boom')
  }, { ...opts, concurrency: 100 })
  while ((await q.getFailedCount()) < n) await new Promise((r) => setTimeout(r, 20))
  const failing = performance.now() - t
  await w.close()
  const row = (what, ms, k) => console.log(`| ${label} | ${what} | ${k.toLocaleString('en')} | ${ms.toFixed(1)} |`)
  row(`fail ${n.toLocaleString('en')} jobs, 2 attempts each`, failing, n)
  const [all, entries] = await timed(() => q.getDlq())
  row('getDlq(): every entry', all, entries.length)
  const [some, picked] = await timed(() => q.getDlq({ reason: 'max_attempts_exceeded', limit: 10 }))
  row('getDlq({ reason, limit: 10 })', some, picked.length)
  const [stats, s] = await timed(() => q.getDlqStats())
  row('getDlqStats()', stats, s.total)
  const [retry, r] = await timed(() => q.retryDlq())
  row('retryDlq(): every entry', retry, r)
  await q.obliterate({ force: true })
  await q.close()
}

console.log('| backend | call | jobs | ms |')
console.log('| --- | --- | ---: | ---: |')
await run('memory', {})
await run('SQLite', { dataPath: join(dir, 'dlq.db'), durability: 'buffered' })
if (url) await run('PostgreSQL', { connection: { connectionString: url, schema: 'bench' } })
rmSync(dir, { recursive: true, force: true })
