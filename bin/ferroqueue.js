#!/usr/bin/env node
'use strict'
// `npx ferroqueue`: look at and change the queues of a SQLite file or a PostgreSQL database.
// Reads work while an app holds the file: they read a view of it (no lock taken, nothing
// written; lib/native.js VIEW). Changes open the file as an app does, so they need it free and
// say so when it is not. Tables by default, `--json` for scripts. See README, "CLI".

const { parseArgs } = require('node:util')
const { Queue, QueueError } = require('../index.js')
const { acquireEngine, releaseEngine, binding, native, VIEW } = require('../lib/native')
const { postgresConnection } = require('../lib/options')

const USAGE = `Usage: ferroqueue <command> <file.sqlite | postgres://…> [queue] [arguments] [--json]

Reading (while an app runs, too):
  stats   <target> [queue]           counts per state, and whether paused, of every queue (or one)
  jobs    <target> <queue> <state>   jobs in a state (--start 0 --end 19; newest first, --asc)
  job     <target> <queue> <id>      one job, every field
  logs    <target> <queue> <id>      a job's log lines
  export  <target> <queue>           every job as JSON lines on stdout (--state a,b to choose)

Changing (a SQLite file must not be held by an app):
  retry   <target> <queue>           failed jobs back to waiting (--state completed for those)
  promote <target> <queue>           delayed jobs to waiting now
  clean   <target> <queue>           remove finished jobs (--state completed|failed|…,
                                     --grace <ms> older than this, default 0; --limit <n>, 0: all)
  pause   <target> <queue>
  resume  <target> <queue>

A queue with a prefix is named prefix:name. --schema <name> for a PostgreSQL schema of its own.`

const STATES = ['waiting', 'active', 'delayed', 'prioritized', 'waiting-children', 'completed', 'failed']
const READS = ['stats', 'jobs', 'job', 'logs', 'export']
const CHANGES = ['retry', 'promote', 'clean', 'pause', 'resume']

/** An error for the user: printed as it is, exit code 1 (2 for usage). */
class Refusal extends Error {
  constructor(message, exitCode = 1) {
    super(message)
    this.exitCode = exitCode
  }
}

function parse(argv) {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
      state: { type: 'string' },
      start: { type: 'string' },
      end: { type: 'string' },
      asc: { type: 'boolean', default: false },
      grace: { type: 'string' },
      limit: { type: 'string' },
      schema: { type: 'string' },
    },
  })
  return { flags: values, args: positionals }
}

/** An integer flag, or `fallback`. */
function integer(flags, name, fallback, min) {
  if (flags[name] === undefined) return fallback
  const n = Number(flags[name])
  if (!Number.isSafeInteger(n) || n < min) throw new Refusal(`--${name} must be an integer >= ${min}, got ${flags[name]}`, 2)
  return n
}

/** Where the queues are: the options that open them there, for reading or for changing. */
function target(text, flags, forReading) {
  if (!text) throw new Refusal('say which file or database: a SQLite file path or a postgres:// URL', 2)
  if (/^postgres(ql)?:\/\//.test(text)) {
    return { connection: postgresConnection(flags.schema ? { connectionString: text, schema: flags.schema } : text) }
  }
  if (flags.schema) throw new Refusal('--schema is for a PostgreSQL database', 2)
  return forReading ? { dataPath: text, [VIEW]: true } : { dataPath: text }
}

/** `prefix:name` or `name` as the Queue constructor takes them. */
function queueOf(full, opts) {
  if (!full) throw new Refusal('say which queue', 2)
  const cut = full.lastIndexOf(':')
  return cut === -1 ? new Queue(full, opts) : new Queue(full.slice(cut + 1), { ...opts, prefix: full.slice(0, cut) })
}

/** Rows as an aligned text table with a header. */
function table(rows, columns) {
  const text = rows.map((r) => columns.map((c) => (r[c] === undefined || r[c] === null ? '' : String(r[c]).replace(/\s+/g, ' '))))
  const widths = columns.map((c, i) => Math.min(60, Math.max(c.length, ...text.map((t) => t[i].length))))
  const line = (cells) => cells.map((cell, i) => (cell.length > widths[i] ? cell.slice(0, widths[i] - 1) + '…' : cell.padEnd(widths[i]))).join('  ').trimEnd()
  return [line(columns), line(widths.map((w) => '-'.repeat(w))), ...text.map(line)].join('\n')
}

const time = (ms) => (ms ? new Date(ms).toISOString() : '')

function jobRow(job, state) {
  return {
    id: job.id,
    name: job.name,
    state,
    attempts: job.attemptsMade,
    added: time(job.timestamp),
    finished: time(job.finishedOn),
    reason: job.failedReason,
  }
}

async function stats(opts, queueName, out) {
  // One engine for the whole command: the queues below share it (a PostgreSQL pool, a view).
  const { engine } = acquireEngine(opts)
  const rows = []
  try {
    const names = queueName ? [queueName] : await native(binding.queueNames(engine.id))
    for (const name of names) {
      await withQueue(opts, name, async (q) => rows.push({ queue: name, paused: await q.isPaused(), ...(await q.getJobCounts(...STATES)) }))
    }
  } finally {
    await releaseEngine(engine)
  }
  if (out.json) return out.print(JSON.stringify(rows))
  out.print(rows.length === 0 ? 'no queues' : table(rows, ['queue', 'paused', ...STATES]))
}

async function withQueue(opts, name, fn) {
  const q = queueOf(name, opts)
  try {
    return await fn(q)
  } finally {
    await q.close()
  }
}

function checkState(state, allowed = STATES) {
  if (!allowed.includes(state)) throw new Refusal(`state must be one of ${allowed.join(', ')}, got ${state ?? 'nothing'}`, 2)
  return state
}

const COMMANDS = {
  stats: (opts, [name], flags, out) => stats(opts, name, out),

  jobs: (opts, [name, state], flags, out) =>
    withQueue(opts, name, async (q) => {
      checkState(state)
      const start = integer(flags, 'start', 0, 0)
      const end = integer(flags, 'end', start + 19, -1)
      const jobs = await q.getJobs([state], start, end, flags.asc)
      if (out.json) return out.print(JSON.stringify(jobs.map((j) => j.asJSON())))
      out.print(jobs.length === 0 ? `no ${state} jobs` : table(jobs.map((j) => jobRow(j, state)), ['id', 'name', 'state', 'attempts', 'added', 'finished', 'reason']))
    }),

  job: (opts, [name, id], flags, out) =>
    withQueue(opts, name, async (q) => {
      if (!id) throw new Refusal('say which job id', 2)
      const job = await q.getJob(id)
      if (!job) throw new Refusal(`no job ${id} in queue ${name}`)
      const json = { ...job.asJSON(), state: await job.getState() }
      if (out.json) return out.print(JSON.stringify(json))
      out.print(table(Object.entries(json).map(([field, value]) => ({ field, value: typeof value === 'string' ? value : JSON.stringify(value) })), ['field', 'value']))
    }),

  logs: (opts, [name, id], flags, out) =>
    withQueue(opts, name, async (q) => {
      if (!id) throw new Refusal('say which job id', 2)
      if (!(await q.getJob(id))) throw new Refusal(`no job ${id} in queue ${name}`)
      const { logs } = await q.getJobLogs(id)
      out.print(out.json ? JSON.stringify(logs) : logs.join('\n'))
    }),

  export: (opts, [name], flags, out) =>
    withQueue(opts, name, async (q) => {
      const states = flags.state ? flags.state.split(',').map((s) => checkState(s.trim())) : STATES
      const counts = await q.getJobCounts(...states)
      const total = Object.values(counts).reduce((a, b) => a + b, 0)
      let done = 0
      for (const state of states) {
        for (let start = 0; ; start += 1000) {
          const page = await q.getJobs([state], start, start + 999, true)
          if (page.length === 0) break
          out.write(page.map((j) => JSON.stringify({ ...j.asJSON(), state })).join('\n') + '\n')
          done += page.length
          out.progress(`exported ${done} of ${total} jobs`)
          if (page.length < 1000) break
        }
      }
      out.progress(`exported ${done} jobs`, true)
    }),

  retry: (opts, [name], flags, out) =>
    withQueue(opts, name, async (q) => {
      const state = checkState(flags.state ?? 'failed', ['failed', 'completed'])
      const before = await q.getJobCountByTypes(state)
      await q.retryJobs({ state, count: 1000 })
      out.done({ retried: before - (await q.getJobCountByTypes(state)) })
    }),

  promote: (opts, [name], flags, out) =>
    withQueue(opts, name, async (q) => {
      const before = await q.getDelayedCount()
      await q.promoteJobs()
      out.done({ promoted: before - (await q.getDelayedCount()) })
    }),

  clean: (opts, [name], flags, out) =>
    withQueue(opts, name, async (q) => {
      const state = checkState(flags.state ?? 'completed', ['completed', 'failed', 'delayed', 'waiting', 'prioritized'])
      const ids = await q.clean(integer(flags, 'grace', 0, 0), integer(flags, 'limit', 0, 0), state)
      out.done({ removed: ids.length })
    }),

  pause: (opts, [name], flags, out) =>
    withQueue(opts, name, async (q) => {
      await q.pause()
      out.done({ paused: true })
    }),

  resume: (opts, [name], flags, out) =>
    withQueue(opts, name, async (q) => {
      await q.resume()
      out.done({ paused: false })
    }),
}

/** Runs the CLI on `argv`; resolves the exit code. */
async function main(argv, io = { stdout: process.stdout, stderr: process.stderr }) {
  let parsed
  try {
    parsed = parse(argv)
  } catch (e) {
    io.stderr.write(`ferroqueue: ${e.message}\n\n${USAGE}\n`)
    return 2
  }
  const { flags, args } = parsed
  const [command, where, ...rest] = args
  if (flags.help || !command) {
    ;(flags.help ? io.stdout : io.stderr).write(`${USAGE}\n`)
    return flags.help ? 0 : 2
  }
  if (!COMMANDS[command]) {
    io.stderr.write(`ferroqueue: unknown command ${command}\n\n${USAGE}\n`)
    return 2
  }
  const tty = io.stderr.isTTY === true
  const out = {
    json: flags.json,
    print: (text) => io.stdout.write(`${text}\n`),
    write: (text) => io.stdout.write(text),
    progress: (text, last = false) => io.stderr.write(tty && !last ? `\r${text}` : `${tty ? '\r' : ''}${text}\n`),
    done: (result) => io.stdout.write(flags.json ? `${JSON.stringify(result)}\n` : `${Object.entries(result).map(([k, v]) => `${k}: ${v}`).join(', ')}\n`),
  }
  try {
    const opts = target(where, flags, READS.includes(command))
    await COMMANDS[command](opts, rest, flags, out)
    return 0
  } catch (e) {
    io.stderr.write(`ferroqueue: ${explain(e, where)}\n`)
    return e instanceof Refusal ? e.exitCode : 1
  }
}

/** What went wrong, in the user's terms. */
function explain(e, where) {
  if (e instanceof Refusal) return e.message
  if (e && e.code === 'ERR_STORAGE_LOCKED') {
    return `${where} is in use by another process (an app holds it): stop it first, or make this change from the app. Reading commands (${READS.join(', ')}) work while it runs. (${e.code})`
  }
  if (e instanceof QueueError || (e && typeof e.code === 'string')) return `${e.message} (${e.code})`
  return e && e.stack ? e.stack : String(e)
}

module.exports = { main, CHANGES, READS }

if (require.main === module) {
  main(process.argv.slice(2)).then((code) => {
    process.exitCode = code
  })
}
