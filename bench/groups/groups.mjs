// Processing jobs spread over groups next to the same number of ungrouped jobs, end to end from
// JS: `n` no-op jobs added in batches of 1,000, then one Worker (concurrency 50) processes them.
// Grouped jobs are spread round-robin over `groups` groups; a third row gives every group a
// concurrency of 1 (the Worker's `group.concurrency`). Embedded by default; on PostgreSQL with
// FERROQUEUE_TEST_POSTGRES_URL set (scripts/postgres.sh start prints it), schema `bench`.
//
//   node bench/groups/groups.mjs [n] [groups]
import { Queue, Worker } from '../../index.mjs'

const n = Number(process.argv[2] ?? 50_000)
const groups = Number(process.argv[3] ?? 1_000)
const url = process.env.FERROQUEUE_TEST_POSTGRES_URL
const connection = url ? { connection: { connectionString: url, schema: 'bench' } } : {}

async function run(label, opts, workerGroup) {
  const q = new Queue(`groups-${label.replace(/\W+/g, '-')}-${Date.now()}`, connection)
  const t0 = performance.now()
  for (let i = 0; i < n; i += 1000) {
    await q.addBulk(
      Array.from({ length: Math.min(1000, n - i) }, (_, k) => ({ name: 'j', data: { i: i + k }, opts: opts(i + k) })),
    )
  }
  const added = performance.now() - t0
  let done = 0
  const t1 = performance.now()
  const finished = new Promise((resolve) => {
    const w = new Worker(q.name, async () => {}, { ...connection, concurrency: 50, group: workerGroup })
    w.on('completed', () => {
      if (++done === n) resolve(w)
    })
  })
  const w = await finished
  const took = performance.now() - t1
  await w.close()
  await q.obliterate({ force: true })
  await q.close()
  console.log(
    `| ${label} | ${Math.round(n / (added / 1000)).toLocaleString('en')} | ${Math.round(n / (took / 1000)).toLocaleString('en')} |`,
  )
}

console.log(`${url ? 'PostgreSQL' : 'embedded'}: ${n.toLocaleString('en')} jobs`)
console.log('| jobs | added/s | processed/s |\n| --- | ---: | ---: |')
await run('ungrouped', () => undefined)
await run(`over ${groups} groups`, (i) => ({ group: { id: `g${i % groups}` } }))
await run(`over ${groups} groups, concurrency 1 each`, (i) => ({ group: { id: `g${i % groups}` } }), { concurrency: 1 })
