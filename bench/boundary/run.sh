#!/usr/bin/env bash
# Runs the boundary benchmark on Node and on Bun (3 fresh processes each) and prints a table
# of medians.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(mktemp)
for storage in memory commit buffered; do
  for rt in node bun; do
    for i in 1 2 3; do
      if [ "$rt" = node ]; then node bench/boundary/boundary.mjs $storage; else npx bun bench/boundary/boundary.mjs $storage; fi
    done
  done
done >"$out"
node -e '
const rows = require("fs").readFileSync(process.argv[1], "utf8").trim().split("\n").map(JSON.parse)
const groups = new Map()
for (const r of rows) {
  const k = r.runtime + "\u0000" + r.storage + "\u0000" + r.workload
  if (!groups.has(k)) groups.set(k, [])
  groups.get(k).push(r.jobsPerSec)
}
console.log("| runtime | storage | workload | jobs/s (median of 3) |\n| --- | --- | --- | ---: |")
for (const [k, v] of groups) {
  const [rt, st, wl] = k.split("\u0000")
  v.sort((a, b) => a - b)
  console.log(`| ${rt} | ${st} | ${wl} | ${v[Math.floor(v.length / 2)].toLocaleString("en-US")} |`)
}
' "$out"
rm -f "$out"
