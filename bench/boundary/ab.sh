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
node bench/boundary/table.mjs "$out"
rm -f "$out"
