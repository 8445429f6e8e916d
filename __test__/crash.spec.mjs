// Nothing acknowledged is lost: a child adds and processes jobs on a SQLite file and is killed
// with SIGKILL at a random moment; the file, reopened, must hold every acknowledged change.
import { describe, it, expect } from 'vitest'
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Queue } from '../index.mjs'

const child = fileURLToPath(new URL('./fixtures/crash-child.mjs', import.meta.url))
const SEEDS = Array.from({ length: 20 }, (_, i) => 1000 + i * 7919)

/** Runs the child until it has worked `ms` milliseconds, kills it with SIGKILL, returns its output. */
function runAndKill(dataPath, seed, ms) {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [child, dataPath, String(seed)], { stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    let timer = null
    p.stdout.on('data', (d) => {
      stdout += d
      if (!timer && stdout.includes('READY')) timer = setTimeout(() => p.kill('SIGKILL'), ms)
    })
    p.stderr.on('data', (d) => (stderr += d))
    const guard = setTimeout(() => p.kill('SIGKILL'), 15_000)
    p.on('error', reject)
    p.on('exit', (code, signal) => {
      clearTimeout(guard)
      clearTimeout(timer)
      if (signal !== 'SIGKILL') return reject(new Error(`child ended by itself (${code}): ${stderr}`))
      resolve(stdout)
    })
  })
}

function parse(stdout) {
  const added = new Set()
  const completed = new Map()
  // The last line may be cut by the kill: only whole lines count.
  const lines = stdout.split('\n').slice(0, -1)
  for (const line of lines) {
    if (line.startsWith('A ')) added.add(line.slice(2))
    else if (line.startsWith('C ')) {
      const sp = line.indexOf(' ', 2)
      completed.set(line.slice(2, sp), JSON.parse(line.slice(sp + 1)))
    }
  }
  return { added, completed }
}

describe('crash safety (SIGKILL)', () => {
  it(`keeps every acknowledged add and completion over ${SEEDS.length} random kills`, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ferroqueue-crash-'))
    let totalAdded = 0
    let totalCompleted = 0
    try {
      for (const seed of SEEDS) {
        const dataPath = join(dir, `crash-${seed}.db`)
        const ms = 30 + (seed % 270)
        const { added, completed } = parse(await runAndKill(dataPath, seed, ms))
        totalAdded += added.size
        totalCompleted += completed.size
        const q = new Queue('crash', { dataPath })
        try {
          for (const id of added) {
            const state = await q.getJobState(id)
            expect(state, `seed ${seed}: acknowledged add ${id} lost`).not.toBe('unknown')
          }
          for (const [id, value] of completed) {
            const job = await q.getJob(id)
            expect(job, `seed ${seed}: completed job ${id} lost`).toBeDefined()
            expect(await q.getJobState(id), `seed ${seed}: job ${id}`).toBe('completed')
            expect(job.returnvalue).toEqual(value)
          }
          // every job is in exactly one state, and ids never repeat
          const all = await q.getJobs(['waiting', 'prioritized', 'delayed', 'active', 'completed', 'failed'], 0, -1, true)
          const ids = all.map((j) => j.id)
          expect(new Set(ids).size, `seed ${seed}: an id appears twice`).toBe(ids.length)
          const counts = await q.getJobCounts('waiting', 'prioritized', 'delayed', 'active', 'completed', 'failed')
          expect(Object.values(counts).reduce((a, b) => a + b, 0)).toBe(ids.length)
          expect(counts.active, 'nobody runs the jobs of a dead process').toBe(0)
          const maxId = ids.reduce((m, id) => Math.max(m, Number(id)), 0)
          const next = await q.add('after', {})
          expect(Number(next.id)).toBeGreaterThan(maxId)
        } finally {
          await q.close()
        }
      }
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
    // the runs did real work
    expect(totalAdded).toBeGreaterThan(SEEDS.length * 10)
    expect(totalCompleted).toBeGreaterThan(0)
  }, 120_000)
})
