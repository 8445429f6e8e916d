// Job schedulers at scale, in memory, end to end from JS: 10,000 schedulers upserted, then one
// Worker (concurrency 100) runs `n` of their jobs. Every job that starts makes its scheduler's
// next job (the scheduler's "tick"); the same `n` plain jobs, added up front, give the cost of a
// job without it.
//
//   node bench/schedulers/schedulers.mjs [schedulers] [n]
import { Queue, Worker } from '../../index.mjs'

const schedulers = Number(process.argv[2] ?? 10_000)
const n = Number(process.argv[3] ?? 100_000)

async function drain(q, count) {
  let done = 0
  const t = performance.now()
  await new Promise((resolve) => {
    const w = new Worker(q.name, () => null, { concurrency: 100 })
    w.on('completed', () => {
      if (++done === count) w.close(true).then(resolve)
    })
  })
  return performance.now() - t
}

const sq = new Queue(`sched-${Date.now()}`)
let t = performance.now()
for (let i = 0; i < schedulers; i++) await sq.upsertJobScheduler(`s${i}`, { every: 1 }, { data: { i } })
const upsert = performance.now() - t
const withTicks = await drain(sq, n)
await sq.obliterate({ force: true })

const pq = new Queue(`plain-${Date.now()}`)
for (let i = 0; i < n; i += 5000) await pq.addBulk(Array.from({ length: 5000 }, (_, k) => ({ name: 'j', data: { i: i + k } })))
const plain = await drain(pq, n)
await pq.obliterate({ force: true })

const us = (ms, k) => ((ms * 1000) / k).toFixed(2)
console.log('| row | value |')
console.log('| --- | ---: |')
console.log(`| upsertJobScheduler, ${schedulers.toLocaleString('en')} schedulers | ${us(upsert, schedulers)} µs each |`)
console.log(`| ${n.toLocaleString('en')} scheduler jobs run (each start makes the next) | ${us(withTicks, n)} µs/job |`)
console.log(`| ${n.toLocaleString('en')} plain jobs run | ${us(plain, n)} µs/job |`)
await sq.close()
await pq.close()
