// Instructions per job of each boundary workload, counted by valgrind (cachegrind, no cache
// simulation), for this checkout's build and, optionally, another's: a comparison that the noise
// of a shared VM does not move. Wall-time A/B runs here move ±5–17% from run to run; counts of
// the same build agree within 0.1% (JIT and GC kept on the main thread: node --single-threaded,
// JSC's concurrent JIT and GC off under Bun).
//   node bench/boundary/instructions.mjs [BEFORE_DIR|-] [memory|commit|buffered] [node,bun] [runs]
// Each count is the least of `runs` processes (default 3): what varies between runs of one build
// is collection work (JSC starts some collections on timers, and time runs 50x slower under
// valgrind), which only adds.
// Needs valgrind (Debian: apt install valgrind). Each workload runs alone in its own process
// (BENCH_ONLY); the count of a process that runs none is taken off, then divided by its jobs.
// Instructions are not time (a cache miss costs no instruction), so this finds what the code
// does more, not what the machine does slower.
import { spawnSync } from 'node:child_process'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const here = dirname(fileURLToPath(import.meta.url))
const repo = resolve(here, '../..')
const before = process.argv[2] && process.argv[2] !== '-' ? resolve(process.argv[2]) : null
const storage = process.argv[3] ?? 'memory'
const runtimes = (process.argv[4] ?? 'node,bun').split(',')
const runs = Number(process.argv[5] ?? 3)
const script = join(here, 'boundary.mjs')
const WORKLOADS = 4

/** Runs the workload `only` of the build in `dir` under valgrind: its lines and the instructions. */
function counted(runtime, dir, only) {
  const cmd = runtime === 'node' ? ['node', '--single-threaded', script, storage] : [join(repo, 'node_modules/.bin/bun'), script, storage]
  const env = {
    ...process.env,
    BENCH_ONLY: only,
    BENCH_REPEAT: '1',
    FERROQUEUE_ENTRY: join(dir, 'index.mjs'),
    BUN_JSC_useConcurrentJIT: '0',
    BUN_JSC_useConcurrentGC: '0',
  }
  const args = ['--tool=cachegrind', '--cache-sim=no', '--smc-check=all-non-file', '--cachegrind-out-file=/dev/null', ...cmd]
  const r = spawnSync('valgrind', args, { env, encoding: 'utf8', maxBuffer: 1 << 26 })
  const refs = /I\s+refs:\s+([\d,]+)/.exec(r.stderr ?? '')
  if (r.status !== 0 || !refs) throw new Error(`valgrind ${cmd.join(' ')} (BENCH_ONLY=${only}) failed: ${r.error ?? r.stderr}`)
  const lines = r.stdout.trim().split('\n').filter(Boolean).map((l) => JSON.parse(l))
  return { lines, instructions: Number(refs[1].replaceAll(',', '')) }
}

/** The least count of `runs` processes. */
function least(runtime, dir, only) {
  const all = Array.from({ length: runs }, () => counted(runtime, dir, only))
  return all.reduce((a, b) => (b.instructions < a.instructions ? b : a))
}

/** Instructions per job of each workload: `[{ workload, jobs, perJob }]`. */
function perJob(runtime, dir) {
  const base = least(runtime, dir, 'none').instructions
  const out = []
  for (let i = 0; i < WORKLOADS; i++) {
    const { lines, instructions } = least(runtime, dir, String(i))
    const [line] = lines
    out.push({ runtime: line.runtime, workload: line.workload, jobs: line.jobs, perJob: (instructions - base) / line.jobs })
  }
  return out
}

const fmt = (n) => Math.round(n).toLocaleString('en-US')
console.log(`Instructions per job (valgrind), ${storage === 'memory' ? 'memory' : `SQLite, ${storage}`}\n`)
console.log(before ? '| runtime | workload | before | after | change |\n| --- | --- | ---: | ---: | ---: |' : '| runtime | workload | instructions per job |\n| --- | --- | ---: |')
for (const runtime of runtimes) {
  const after = perJob(runtime, repo)
  const was = before ? perJob(runtime, before) : null
  for (const [i, a] of after.entries()) {
    if (!was) console.log(`| ${a.runtime} | ${a.workload} | ${fmt(a.perJob)} |`)
    else console.log(`| ${a.runtime} | ${a.workload} | ${fmt(was[i].perJob)} | ${fmt(a.perJob)} | ${(((a.perJob - was[i].perJob) / was[i].perJob) * 100).toFixed(1)}% |`)
  }
}
