// clean() over many completed jobs, end to end from JS: `n` no-op jobs completed, then
//   - clean(0, 1000): the 1,000 oldest (the cost of a batch, whatever the queue holds),
//   - clean(grace, 0) of the older half (those finished before a cut between two halves),
//   - clean(0, 0) of the rest.
// In memory, in a SQLite file (10,000 finished jobs in memory, the rest on disk only), and on
// PostgreSQL with FERROQUEUE_TEST_POSTGRES_URL set (scripts/postgres.sh start prints it).
//
//   node bench/clean/clean.mjs [n]
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Queue, Worker } from '../../index.mjs'

const n = Number(process.argv[2] ?? 100_000)
const url = process.env.FERROQUEUE_TEST_POSTGRES_URL
const dir = mkdtempSync(join(tmpdir(), 'ferroqueue-bench-clean-'))

async function complete(q, opts, count) {
  for (let i = 0; i < count; i += 5000) {
    await q.addBulk(Array.from({ length: Math.min(5000, count - i) }, () => ({ name: 'j', data: {} })))
  }
  const target = (await q.getCompletedCount()) + count
  const w = new Worker(q.name, () => null, { ...opts, concurrency: 100 })
  while ((await q.getCompletedCount()) < target) await new Promise((r) => setTimeout(r, 20))
  await w.close()
}

async function timed(f) {
  const t = performance.now()
  const ids = await f()
  return [performance.now() - t, ids.length]
}

async function run(label, opts) {
  const q = new Queue(`clean-${Date.now()}`, opts)
  await complete(q, opts, n / 2)
  await new Promise((r) => setTimeout(r, 30))
  const cut = Date.now()
  await new Promise((r) => setTimeout(r, 30))
  await complete(q, opts, n / 2)
  const [batch, b] = await timed(() => q.clean(0, 1000, 'completed'))
  const [half, h] = await timed(() => q.clean(Date.now() - cut, 0, 'completed'))
  const [rest, r] = await timed(() => q.clean(0, 0, 'completed'))
  const row = (what, ms, k) => console.log(`| ${label} | ${what} | ${k.toLocaleString('en')} | ${ms.toFixed(1)} |`)
  row(`clean(0, 1000) of ${n.toLocaleString('en')}`, batch, b)
  row('clean(grace, 0): the older half', half, h)
  row('clean(0, 0): the rest', rest, r)
  await q.obliterate({ force: true })
  await q.close()
}

console.log('| backend | call | removed | ms |')
console.log('| --- | --- | ---: | ---: |')
await run('memory', {})
await run('SQLite', { dataPath: join(dir, 'clean.db'), durability: 'buffered' })
if (url) await run('PostgreSQL', { connection: { connectionString: url, schema: 'bench' } })
rmSync(dir, { recursive: true, force: true })
