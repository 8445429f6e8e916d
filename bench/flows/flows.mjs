// Flows end to end from JS: `n` flows of one parent and 3 children (children in their own queue)
// added with FlowProducer.addBulk in batches of 100 flows, then processed by two Workers
// (children, parents; concurrency 50 each) until every parent completed, each parent reading
// its children's values. Embedded by default (in memory; `--file` on a SQLite file in the
// temporary folder); on PostgreSQL with FERROQUEUE_TEST_POSTGRES_URL set (scripts/postgres.sh
// start prints it), schema `bench`.
//
//   node bench/flows/flows.mjs [n] [--file]
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { FlowProducer, Worker } from '../../index.mjs'

const n = Number(process.argv.find((a) => /^\d+$/.test(a)) ?? 10_000)
const file = process.argv.includes('--file')
const dir = file ? mkdtempSync(join(tmpdir(), 'ferroqueue-flows-bench-')) : null
const url = process.env.FERROQUEUE_TEST_POSTGRES_URL
const opts = url
  ? { connection: { connectionString: url, schema: 'bench' } }
  : file
    ? { dataPath: join(dir, 'flows.db') }
    : {}
const [parents, children] = [`parents-${Date.now()}`, `children-${Date.now()}`]

const producer = new FlowProducer(opts)
const t0 = performance.now()
for (let i = 0; i < n; i += 100) {
  const batch = Array.from({ length: Math.min(100, n - i) }, (_, k) => ({
    name: 'parent',
    queueName: parents,
    data: { i: i + k },
    children: [0, 1, 2].map((c) => ({ name: 'child', queueName: children, data: { c } })),
  }))
  await producer.addBulk(batch)
}
const added = performance.now() - t0
let done = 0
const t1 = performance.now()
const childWorker = new Worker(children, async (job) => job.data.c, { ...opts, concurrency: 50 })
const finished = new Promise((resolve) => {
  const w = new Worker(
    parents,
    async (job) => {
      const values = await job.getChildrenValues()
      return Object.values(values).reduce((a, b) => a + b, 0)
    },
    { ...opts, concurrency: 50 },
  )
  w.on('completed', () => {
    if (++done === n) resolve(w)
  })
})
const parentWorker = await finished
const took = performance.now() - t1
await Promise.all([childWorker.close(), parentWorker.close(), producer.close()])
if (dir) rmSync(dir, { recursive: true, force: true })
const rate = (count, ms) => Math.round(count / (ms / 1000)).toLocaleString('en')
console.log(`${url ? 'PostgreSQL' : file ? 'SQLite file' : 'memory'}: ${n.toLocaleString('en')} flows of 1 parent + 3 children`)
console.log(`| add (flows/s) | add (jobs/s) | process (flows/s) | process (jobs/s) |`)
console.log(`| ---: | ---: | ---: | ---: |`)
console.log(`| ${rate(n, added)} | ${rate(4 * n, added)} | ${rate(n, took)} | ${rate(4 * n, took)} |`)
