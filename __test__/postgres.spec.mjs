// The PostgreSQL backend as a user meets it: the connection option, clear errors for a wrong
// URL or password, and queues shared between objects that connect separately. The rest of the
// suite runs on PostgreSQL too (scripts/test.sh runs it with FERROQUEUE_POSTGRES_URL).
import { describe, it, expect, afterEach } from 'vitest'
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { Queue, Worker, QueueEvents, QueueError } from '../index.mjs'
import { uniqueName, openTracker, thrown, expectError, rejection, once } from './helpers.mjs'

const url = process.env.FERROQUEUE_TEST_POSTGRES_URL
if (!url && process.env.FERROQUEUE_REQUIRE_POSTGRES) throw new Error('FERROQUEUE_REQUIRE_POSTGRES is set but FERROQUEUE_TEST_POSTGRES_URL is not')
const describePg = url ? describe : describe.skip

const { mkQueue, track } = openTracker('pg', { Queue, Worker, QueueEvents }, afterEach)

describePg('PostgreSQL connection', () => {
  it('takes a URL or { connectionString, schema, max } and shares queues across schemas apart', async () => {
    const name = uniqueName('pg')
    const a = mkQueue({ connection: url }, name)
    const b = mkQueue({ connection: { connectionString: url, schema: 'ferroqueue', max: 2 } }, name)
    const other = mkQueue({ connection: { connectionString: url, schema: 'ferroqueue_other' } }, name)
    await a.add('x', { n: 1 })
    expect(await b.count()).toBe(1)
    expect(await other.count()).toBe(0)
    await other.obliterate({ force: true })
  })

  it('any call may be the first on a new schema: it is created first (obliterate has its own connection)', async () => {
    const schema = `fresh_${process.pid}_${Date.now()}`
    const q = mkQueue({ connection: { connectionString: url, schema } })
    await q.obliterate({ force: true })
    expect(await q.count()).toBe(0)
  })

  it('a wrong password rejects the first call with ERR_STORAGE_IO, naming the server but not the password', async () => {
    const wrong = new URL(url)
    wrong.password = 'not-the-password-123'
    const q = mkQueue({ connection: wrong.toString() })
    const err = await rejection(q.add('x', {}))
    expectError(err, QueueError, 'ERR_STORAGE_IO', /cannot (connect|migrate)/)
    expect(err.message).toContain(wrong.hostname)
    expect(err.message).not.toContain('not-the-password-123')
  })

  it('a server that is not there rejects at once, not after a hang', async () => {
    const q = mkQueue({ connection: 'postgresql://nobody@127.0.0.1:1/none' })
    const t = Date.now()
    expectError(await rejection(q.getJobCounts()), QueueError, 'ERR_STORAGE_IO', /cannot connect/)
    expect(Date.now() - t).toBeLessThan(5000)
  })

  it('refuses a bad connection with errors that name the option', () => {
    expectError(thrown(() => new Queue(uniqueName(), { connection: 'mysql://x' })), TypeError, 'ERR_UNSUPPORTED_OPTION', /^connection must be a PostgreSQL URL/)
    expectError(thrown(() => new Queue(uniqueName(), { connection: { connectionString: url, scheme: 'x' } })), TypeError, 'ERR_INVALID_OPTION', /^connection\.scheme is not an option/)
    expectError(thrown(() => new Queue(uniqueName(), { connection: { connectionString: url, max: 0 } })), RangeError, 'ERR_INVALID_OPTION', /^connection\.max /)
    expectError(thrown(() => new Queue(uniqueName(), { connection: { connectionString: url, schema: 'Bad-Name' } })), RangeError, 'ERR_INVALID_OPTION', /^schema /)
    expectError(thrown(() => new Queue(uniqueName(), { connection: url, dataPath: '/tmp/x.db' })), TypeError, 'ERR_INVALID_OPTION', /^connection cannot be given with dataPath/)
    expectError(thrown(() => new Queue(uniqueName(), { connection: url, durability: 'buffered' })), RangeError, 'ERR_INVALID_OPTION', /^durability 'buffered' is not available on PostgreSQL/)
  })

  it('a worker on one connection processes what a producer on another added; QueueEvents hear it', async () => {
    const name = uniqueName('pg-two')
    const producer = mkQueue({ connection: { connectionString: url, max: 1 } }, name)
    const events = track(new QueueEvents(name, { connection: url }))
    await events.waitUntilReady()
    const completed = once(events, 'completed')
    track(new Worker(name, async (job) => job.data.n * 2, { connection: url }))
    const job = await producer.add('double', { n: 21 })
    const [payload] = await completed
    expect(payload).toEqual({ jobId: job.id, returnvalue: 42, prev: 'active' })
  })

  it('a QueueEvents keeps its process alive until closed: its events may come from other processes', async () => {
    const child = fileURLToPath(new URL('./fixtures/pg-events-alive.mjs', import.meta.url))
    const started = Date.now()
    const p = spawn(process.execPath, [child, url, uniqueName('pg-alive'), '1000'], { stdio: ['ignore', 'ignore', 'pipe'] })
    let stderr = ''
    p.stderr.on('data', (d) => (stderr += d))
    const code = await new Promise((resolve) => p.on('exit', resolve))
    expect({ code, stderr }).toEqual({ code: 0, stderr: '' })
    expect(Date.now() - started).toBeGreaterThanOrEqual(1000)
  })
})
