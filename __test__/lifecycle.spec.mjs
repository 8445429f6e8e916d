import { describe, it, expect } from 'vitest'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

const fixture = fileURLToPath(new URL('./fixtures/lifecycle.mjs', import.meta.url))

describe('process lifetime', () => {
  it('exits on its own once every queue, worker and listener is closed', () => {
    const t = Date.now()
    const r = spawnSync(process.execPath, [fixture], { encoding: 'utf8', timeout: 15_000 })
    expect(r.error).toBeUndefined()
    expect(r.stderr).toBe('')
    expect(r.status).toBe(0)
    expect(r.stdout.trim()).toMatch(/^done \d+$/)
    // well before the worker's 5 s pull timeout or the 60 s delayed job
    expect(Date.now() - t).toBeLessThan(4_000)
  })

  it('also with a durable queue, whose file is then released', () => {
    const dir = mkdtempSync(join(tmpdir(), 'ferroqueue-life-'))
    try {
      const dataPath = join(dir, 'life.db')
      for (let run = 0; run < 2; run++) {
        const t = Date.now()
        const r = spawnSync(process.execPath, [fixture, dataPath], { encoding: 'utf8', timeout: 15_000 })
        expect(r.stderr).toBe('')
        expect(r.status).toBe(0)
        expect(r.stdout.trim()).toMatch(/^done \d+$/)
        expect(Date.now() - t).toBeLessThan(4_000)
      }
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
