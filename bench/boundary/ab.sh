#!/usr/bin/env bash
# Same-run comparison of two builds: the boundary benchmark of a checkout at BEFORE (a directory
# with its addon built, e.g. a `git worktree` of an older commit) against this one, interleaved
# run by run so both see the same machine, on Node and Bun, memory and SQLite. Prints a table of
# medians and the change.   bash bench/boundary/ab.sh /tmp/before [runs, default 5]
set -euo pipefail
cd "$(dirname "$0")/../.."
before=$(cd "$1" && pwd)
runs=${2:-5}
out=$(mktemp)
for storage in memory commit buffered; do
  for rt in node bun; do
    for i in $(seq "$runs"); do
      for side in before after; do
        dir=$PWD; [ "$side" = before ] && dir=$before
        if [ "$rt" = node ]; then line=$(node "$dir/bench/boundary/boundary.mjs" $storage)
        else line=$(npx bun "$dir/bench/boundary/boundary.mjs" $storage); fi
        echo "$line" | sed "s/^{/{\"side\":\"$side\",/"
      done
    done
  done
done >"$out"
node -e '
const rows = require("fs").readFileSync(process.argv[1], "utf8").trim().split("\n").map(JSON.parse)
const groups = new Map()
for (const r of rows) {
  const k = [r.runtime, r.storage, r.workload].join("\u0000")
  if (!groups.has(k)) groups.set(k, { before: [], after: [] })
  groups.get(k)[r.side].push(r.jobsPerSec)
}
const median = (v) => v.sort((a, b) => a - b)[Math.floor(v.length / 2)]
console.log("| runtime | storage | workload | before | after | change |\n| --- | --- | --- | ---: | ---: | ---: |")
for (const [k, g] of groups) {
  const [rt, st, wl] = k.split("\u0000")
  const b = median(g.before), a = median(g.after)
  console.log(`| ${rt} | ${st} | ${wl} | ${b.toLocaleString("en-US")} | ${a.toLocaleString("en-US")} | ${(((a - b) / b) * 100).toFixed(1)}% |`)
}
' "$out"
rm -f "$out"
