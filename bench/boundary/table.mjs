// Prints the markdown table of a boundary benchmark run: the JSON lines of boundary.mjs in a
// file, grouped by runtime, storage and workload, as medians. Rows that carry a `side`
// ("before" / "after", from ab.sh) give a before/after table with the change, of the medians
// and of the best runs.
//   node bench/boundary/table.mjs RESULTS_FILE
import { readFileSync } from 'node:fs'

const rows = readFileSync(process.argv[2], 'utf8').trim().split('\n').map((l) => JSON.parse(l))
const median = (v) => v.slice().sort((a, b) => a - b)[Math.floor(v.length / 2)]
const groups = new Map()
for (const r of rows) {
  const k = [r.runtime, r.storage, r.workload].join('\u0000')
  if (!groups.has(k)) groups.set(k, { all: [], before: [], after: [] })
  const g = groups.get(k)
  g.all.push(r.jobsPerSec)
  if (r.side) g[r.side].push(r.jobsPerSec)
}
const fmt = (n) => n.toLocaleString('en-US')
if (rows.some((r) => r.side)) {
  const change = (b, a) => `${(((a - b) / b) * 100).toFixed(1)}%`
  console.log('| runtime | storage | workload | before (median) | after (median) | change | before (best) | after (best) | change |')
  console.log('| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |')
  for (const [k, g] of groups) {
    const [b, a] = [median(g.before), median(g.after)]
    const [bb, ab] = [Math.max(...g.before), Math.max(...g.after)]
    console.log(`| ${k.split('\u0000').join(' | ')} | ${fmt(b)} | ${fmt(a)} | ${change(b, a)} | ${fmt(bb)} | ${fmt(ab)} | ${change(bb, ab)} |`)
  }
} else {
  const runs = groups.size ? [...groups.values()][0].all.length : 0
  console.log(`| runtime | storage | workload | jobs/s (median of ${runs}) |\n| --- | --- | --- | ---: |`)
  for (const [k, g] of groups) console.log(`| ${k.split('\u0000').join(' | ')} | ${fmt(median(g.all))} |`)
}
