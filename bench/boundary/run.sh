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
node bench/boundary/table.mjs "$out"
rm -f "$out"
