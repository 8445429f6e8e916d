// The CommonJS twin of app.mjs: require('ferroqueue'), the in-memory default and a SQLite file.
const { Queue, Worker } = require('ferroqueue')
const { mkdtempSync, rmSync } = require('node:fs')
const { tmpdir } = require('node:os')
const { join } = require('node:path')
const assert = require('node:assert/strict')

async function main() {
  const queue = new Queue('app-cjs')
  let sum = 0
  const worker = new Worker('app-cjs', async (job) => { sum += job.data.n })
  const drained = new Promise((resolve) => worker.on('drained', resolve))
  await queue.addBulk(Array.from({ length: 100 }, (_, n) => ({ name: 'n', data: { n } })))
  await drained
  assert.equal(sum, 4950)
  await worker.close()
  await queue.close()

  const dir = mkdtempSync(join(tmpdir(), 'ferroqueue-app-'))
  const durable = new Queue('app-cjs-durable', { dataPath: join(dir, 'jobs.sqlite') })
  const job = await durable.add('kept', { text: 'hello' })
  assert.deepEqual((await durable.getJob(job.id)).data, { text: 'hello' })
  await durable.close()
  rmSync(dir, { recursive: true, force: true })

  // The bull-board subpath ships; without bull-board installed it says what to install.
  assert.throws(() => require('ferroqueue/bull-board'), (err) => err.code === 'ERR_PEER_MISSING' && /@bull-board\/api/.test(err.message))
  console.log(`ok cjs ${typeof Bun === 'undefined' ? 'node' : 'bun'}`)
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
