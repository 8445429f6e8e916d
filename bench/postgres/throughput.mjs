// ferroqueue on PostgreSQL, end to end from JS: addBulk, add one at a time (many in flight),
// and processing with one Worker at concurrency 50. Needs a server: FERROQUEUE_TEST_POSTGRES_URL
// (scripts/postgres.sh start prints it). Each row uses a fresh queue; the schema is `bench`.
//
//   node bench/postgres/throughput.mjs [jobs]
import { Queue, Worker } from '../../index.mjs'

const url = process.env.FERROQUEUE_TEST_POSTGRES_URL
if (!url) throw new Error('set FERROQUEUE_TEST_POSTGRES_URL (see scripts/postgres.sh)')
const connection = { connectionString: url, schema: 'bench', max: 4 }
const n = Number(process.argv[2] ?? 50_000)
const data = { to: 'ada@example.com', subject: 'x'.repeat(150) } // about 200 bytes of JSON

const rate = (count, ms) => Math.round((count * 1000) / ms)
const rows = []

async function fresh(label) {
  const q = new Queue(`bench-${label}-${Date.now()}`, { connection })
  await q.obliterate({ force: true })
  return q
}

{
  const q = await fresh('bulk')
  const batch = Array.from({ length: 1_000 }, () => ({ name: 'mail', data }))
  const t = performance.now()
  for (let i = 0; i < n; i += batch.length) await q.addBulk(batch)
  rows.push(['addBulk (1,000 per call)', rate(n, performance.now() - t)])

  let done = 0
  const t2 = performance.now()
  const finished = new Promise((resolve) => {
    const w = new Worker(q.name, async () => null, { connection, concurrency: 50 })
    w.on('completed', () => {
      if (++done === n) resolve(w)
    })
  })
  const w = await finished
  rows.push(['process, 1 worker, concurrency 50', rate(n, performance.now() - t2)])
  await w.close()
  await q.obliterate({ force: true })
  await q.close()
}

{
  const q = await fresh('one')
  const m = Math.min(n, 20_000)
  const inFlight = 100
  const t = performance.now()
  for (let i = 0; i < m; i += inFlight) {
    await Promise.all(Array.from({ length: inFlight }, () => q.add('mail', data)))
  }
  rows.push([`add one at a time (${inFlight} in flight)`, rate(m, performance.now() - t)])
  await q.obliterate({ force: true })
  await q.close()
}

console.log(`| ferroqueue on PostgreSQL (${n} jobs) | jobs/s |\n| --- | ---: |`)
for (const [what, r] of rows) console.log(`| ${what} | ${r.toLocaleString('en-US')} |`)
