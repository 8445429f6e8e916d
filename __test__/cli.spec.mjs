// The CLI (`npx ferroqueue`, bin/ferroqueue.js), run as a child process on the runtime running
// this test. On a SQLite file that an app (fixtures/cli-app.mjs) holds, with jobs in every state:
// every reading command works and shows the app's jobs, the active one included; changes are
// refused with a message saying the file is in use. Once the app is gone (SIGKILL), changes
// work. On PostgreSQL the same commands on a URL. Bad usage exits 2 with the usage.
import { describe, it, expect, beforeAll, afterAll } from 'vitest'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Queue, Worker } from '../index.mjs'
import { spawnLines, waitFor, backend, uniqueName } from './helpers.mjs'

const cli = fileURLToPath(new URL('../bin/ferroqueue.js', import.meta.url))
const app = fileURLToPath(new URL('./fixtures/cli-app.mjs', import.meta.url))

/** Runs the CLI; its exit code, output and errors. */
function ferroqueue(...args) {
  const r = spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', timeout: 30_000 })
  return { code: r.status, stdout: r.stdout, stderr: r.stderr }
}

/** Runs the CLI with --json and parses what it printed. */
function json(...args) {
  const r = ferroqueue(...args, '--json')
  if (r.code !== 0) throw new Error(`ferroqueue ${args.join(' ')} exited ${r.code}: ${r.stderr}`)
  return JSON.parse(r.stdout)
}

describe('the CLI on a SQLite file', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ferroqueue-cli-'))
  const file = join(dir, 'app.sqlite')
  let held

  beforeAll(async () => {
    held = spawnLines(app, [file])
    await waitFor(() => held.lines.includes('READY'), 20_000).catch(() => {
      throw new Error(`the app did not start: ${held.stderr}`)
    })
  }, 30_000)

  afterAll(() => {
    held?.p.kill('SIGKILL')
    rmSync(dir, { recursive: true, force: true })
  })

  it('reads every queue of a file an app holds, its active job included', () => {
    const stats = json('stats', file)
    expect(stats.map((s) => s.queue)).toEqual(['app:reports', 'mail'])
    expect(stats[1]).toMatchObject({ paused: false, completed: 1, failed: 2, active: 1, delayed: 1, waiting: 1, prioritized: 1 })
    expect(stats[0]).toMatchObject({ waiting: 1 })
    const text = ferroqueue('stats', file)
    expect(text.code).toBe(0)
    expect(text.stdout).toMatch(/^queue\s+paused\s+waiting\s+active/)
    expect(text.stdout).toMatch(/\nmail\s+false\s+1\s+1\s+1\s+1\s+0\s+1\s+2\n/)
  })

  it('lists jobs, shows one with its fields and logs, and exports them all as JSON lines', () => {
    const failed = json('jobs', file, 'mail', 'failed')
    expect(failed.map((j) => j.failedReason).sort()).toEqual(['mailbox of nobody is full', 'mailbox of noone is full'])
    const table = ferroqueue('jobs', file, 'mail', 'failed')
    expect(table.stdout).toMatch(/^id\s+name\s+state/)
    expect(table.stdout).toContain('mailbox of nobody is full')

    const id = failed[0].id
    const job = json('job', file, 'mail', id)
    expect(job).toMatchObject({ id, name: 'bounce', state: 'failed' })
    expect(ferroqueue('job', file, 'mail', id).stdout).toMatch(/failedReason\s+mailbox of/)
    expect(json('logs', file, 'mail', id)).toEqual([`sending to ${failed[0].data.to}`])
    expect(ferroqueue('logs', file, 'mail', id).stdout).toBe(`sending to ${failed[0].data.to}\n`)
    const missing = ferroqueue('job', file, 'mail', '999')
    expect(missing.code).toBe(1)
    expect(missing.stderr).toContain('no job 999 in queue mail')

    const exported = ferroqueue('export', file, 'mail')
    expect(exported.code).toBe(0)
    const lines = exported.stdout.trim().split('\n').map((l) => JSON.parse(l))
    expect(lines.length).toBe(7)
    expect(new Set(lines.map((j) => j.state))).toEqual(new Set(['waiting', 'active', 'delayed', 'prioritized', 'completed', 'failed']))
    expect(exported.stderr).toContain('exported 7 jobs')
    const some = ferroqueue('export', file, 'app:reports', '--state', 'waiting')
    expect(some.stdout.trim().split('\n').map((l) => JSON.parse(l).name)).toEqual(['weekly'])
  })

  it('refuses changes while the app holds the file, saying so, and makes them once it is gone', async () => {
    for (const command of ['retry', 'promote', 'clean', 'pause', 'resume']) {
      const r = ferroqueue(command, file, 'mail')
      expect(r.code, command).toBe(1)
      expect(r.stderr).toContain('is in use by another process')
      expect(r.stderr).toContain('ERR_STORAGE_LOCKED')
    }
    held.p.kill('SIGKILL')
    await held.exited

    expect(json('retry', file, 'mail')).toEqual({ retried: 2 })
    expect(json('promote', file, 'mail')).toEqual({ promoted: 1 })
    expect(json('clean', file, 'mail', '--state', 'completed')).toEqual({ removed: 1 })
    expect(ferroqueue('pause', file, 'mail').stdout).toBe('paused: true\n')
    // The killed app's active job was recovered when the file was opened for the change.
    const [mail] = json('stats', file, 'mail').filter((s) => s.queue === 'mail')
    expect(mail).toMatchObject({ paused: true, failed: 0, delayed: 0, completed: 0, active: 0 })
    expect(json('resume', file, 'mail')).toEqual({ paused: false })
  })

  it('says what is wrong with its arguments', () => {
    const none = ferroqueue()
    expect(none.code).toBe(2)
    expect(none.stderr).toContain('Usage: ferroqueue')
    expect(ferroqueue('--help').code).toBe(0)
    expect(ferroqueue('frobnicate', file).stderr).toContain('unknown command frobnicate')
    expect(ferroqueue('stats').stderr).toContain('say which file or database')
    expect(ferroqueue('jobs', file, 'mail', 'sleeping').stderr).toContain('state must be one of')
    expect(ferroqueue('jobs', file, 'mail', 'failed', '--start', '-3').code).toBe(2)
    const foreign = ferroqueue('stats', join(dir, 'nothing-here.sqlite'))
    expect(foreign.code).toBe(1)
    expect(foreign.stderr).toContain('ERR_STORAGE_IO')
  })
})

const pg = backend === 'postgres' ? describe : describe.skip
pg('the CLI on a PostgreSQL URL', () => {
  it('reads and changes the queues of the database', async () => {
    const url = process.env.FERROQUEUE_POSTGRES_URL
    const name = uniqueName('cli')
    const queue = new Queue(name)
    const worker = new Worker(name, async (job) => {
      if (job.name === 'bad') throw new Error('no')
    })
    try {
      await queue.add('ok', {})
      await queue.add('bad', {})
      await waitFor(async () => (await queue.getJobCountByTypes('completed', 'failed')) === 2, 10_000)
      await worker.close()
      expect(json('stats', url).find((s) => s.queue === name)).toMatchObject({ completed: 1, failed: 1 })
      expect(json('jobs', url, name, 'failed')[0].failedReason).toBe('no')
      expect(json('retry', url, name)).toEqual({ retried: 1 })
      expect(await queue.getWaitingCount()).toBe(1)
    } finally {
      await worker.close()
      await queue.close()
    }
  }, 30_000)
})
