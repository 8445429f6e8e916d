// A rate-limited queue's measured rate against its limit, end to end from JS: two workers share
// one `limiter` (a token bucket of `max` per `duration` ms); the rate is counted after the
// bucket's first burst, over `seconds`. Embedded by default; on PostgreSQL with
// FERROQUEUE_TEST_POSTGRES_URL set (scripts/postgres.sh start prints it), schema `bench`.
//
//   node bench/limits/rate.mjs [max] [duration_ms] [seconds]
import { Queue, Worker } from '../../index.mjs'

const max = Number(process.argv[2] ?? 1_000)
const duration = Number(process.argv[3] ?? 100)
const seconds = Number(process.argv[4] ?? 5)
const url = process.env.FERROQUEUE_TEST_POSTGRES_URL
const connection = url ? { connection: { connectionString: url, schema: 'bench' } } : {}
const perMs = max / duration
const n = Math.ceil(max + perMs * seconds * 1000 * 1.2)

const q = new Queue(`rate-${Date.now()}`, connection)
for (let i = 0; i < n; i += 1000) {
  await q.addBulk(Array.from({ length: Math.min(1000, n - i) }, () => ({ name: 'j', data: {} })))
}
const starts = []
const processor = async () => {
  starts.push(performance.now())
}
const opts = { ...connection, concurrency: 50, limiter: { max, duration } }
const workers = [new Worker(q.name, processor, opts), new Worker(q.name, processor, opts)]
await new Promise((r) => setTimeout(r, seconds * 1000 + 200))
await Promise.all(workers.map((w) => w.close()))
starts.sort((a, b) => a - b)
// After the first burst (the full bucket), the rate is the refill's: intervals between the
// first start after the burst and the last start, over their span.
const after = starts.slice(max)
const measured = (after.length - 1) / (after[after.length - 1] - after[0])
const err = ((measured - perMs) / perMs) * 100
const span = (after[after.length - 1] - after[0]) / 1000
console.log(
  `${url ? 'PostgreSQL' : 'embedded'}: limit ${max} per ${duration} ms (${Math.round(perMs * 1000)}/s); ` +
    `measured ${Math.round(measured * 1000)}/s over ${span.toFixed(1)} s (${err >= 0 ? '+' : ''}${err.toFixed(2)}%)`,
)
await q.obliterate({ force: true })
await q.close()
