// A real producer/worker run on the embedded (in-memory) engine: 100,000 jobs, live progress.
//   npm run demo            (or: node demo/demo.mjs [jobs] [workers] [concurrency])
import { Queue, Worker, QueueEvents } from '../index.mjs'

const total = Number(process.argv[2] ?? 100_000)
const workerCount = Number(process.argv[3] ?? 2)
const concurrency = Number(process.argv[4] ?? 50)
const name = `demo-${process.pid}`

const queue = new Queue(name, { defaultJobOptions: { removeOnComplete: 1000, attempts: 3, backoff: 10 } })
const events = new QueueEvents(name)
let failedAttempts = 0
events.on('failed', () => {})

const started = Date.now()
let done = 0
let lastDone = 0
let lastTick = started
let rate = 0

const workers = Array.from({ length: workerCount }, (_, i) => {
  const w = new Worker(
    name,
    async (job) => {
      // A little real work: checksum the payload; one job in 1,000 fails once and is retried.
      let sum = 0
      for (const c of job.data.text) sum = (sum + c.charCodeAt(0)) % 65_521
      if (job.data.n % 1000 === 0 && job.attemptsMade === 0) throw new Error('transient failure, will retry')
      return { sum, by: i }
    },
    { concurrency },
  )
  w.on('completed', () => done++)
  w.on('failed', () => failedAttempts++)
  return w
})

async function line(final = false) {
  const c = await queue.getJobCounts('waiting', 'active', 'delayed', 'completed', 'failed')
  const now = Date.now()
  if (now > lastTick) rate = Math.round(((done - lastDone) * 1000) / (now - lastTick))
  lastDone = done
  lastTick = now
  const text =
    `processed ${String(done).padStart(7)}/${total}  ` +
    `waiting ${String(c.waiting).padStart(6)}  active ${String(c.active).padStart(4)}  ` +
    `delayed ${String(c.delayed).padStart(3)}  failed ${c.failed}  retried ${failedAttempts}  ` +
    `${String(rate).padStart(7)} jobs/s`
  if (process.stdout.isTTY && !final) process.stdout.write(`\r${text}`)
  else console.log(text)
}

const ticker = setInterval(line, process.stdout.isTTY ? 100 : 1000)

// Producer: addBulk in batches of 1,000 while the workers are already running.
const text = 'x'.repeat(160)
for (let start = 0; start < total; start += 1000) {
  const batch = []
  for (let n = start; n < Math.min(start + 1000, total); n++) batch.push({ name: 'checksum', data: { n, text } })
  await queue.addBulk(batch)
  if (start % 10_000 === 0) await new Promise((r) => setImmediate(r))
}
const addedIn = Date.now() - started

await new Promise((resolve) => {
  const check = () => (done >= total ? resolve() : setTimeout(check, 20))
  check()
})
clearInterval(ticker)
if (process.stdout.isTTY) process.stdout.write('\n')
await line(true)
const secs = (Date.now() - started) / 1000
console.log(
  `\ndone: ${total} jobs added in ${addedIn} ms, all processed in ${secs.toFixed(2)} s ` +
    `(${Math.round(total / secs)} jobs/s) by ${workerCount} workers x concurrency ${concurrency}; ` +
    `${failedAttempts} attempts failed and were retried`,
)
await Promise.all(workers.map((w) => w.close()))
await events.close()
await queue.close()
