#!/usr/bin/env bash
# Same-run comparison of two builds: this checkout's boundary benchmark run against the build of
# a checkout at BEFORE (a directory with its addon built, e.g. a `git worktree` of an older
# commit) and against this one, interleaved run by run so both see the same machine, on Node and
# Bun. Each run repeats the workloads REPEAT times in one process. The table gives the median and
# the best of all runs per side: on a shared VM noise only slows a run down, so the best is the
# steadier comparison.
#   bash bench/boundary/ab.sh BEFORE [runs, default 5] [storages, default "memory commit buffered"]
#   [runtimes, default "node bun"]
set -euo pipefail
cd "$(dirname "$0")/../.."
before=$(cd "$1" && pwd)
runs=${2:-5}
storages=${3:-memory commit buffered}
runtimes=${4:-node bun}
export BENCH_REPEAT=${BENCH_REPEAT:-3}
out=$(mktemp)
for storage in $storages; do
  for rt in $runtimes; do
    for i in $(seq "$runs"); do
      for side in before after; do
        dir=$PWD; [ "$side" = before ] && dir=$before
        if [ "$rt" = node ]; then run=(node); else run=(npx bun); fi
        FERROQUEUE_ENTRY="$dir/index.mjs" "${run[@]}" bench/boundary/boundary.mjs "$storage" |
          sed "s/^{/{\"side\":\"$side\",/"
      done
    done
  done
done >"$out"
node bench/boundary/table.mjs "$out"
rm -f "$out"
