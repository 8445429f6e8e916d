#!/usr/bin/env bash
# Every test: Rust (engine + binding), then the JS suite on Node (vitest) and on Bun (bun test).
set -euo pipefail
cd "$(dirname "$0")/.."

# The addon is built by `npm install`; rebuild only what changed (a no-op on a fresh install).
npm run --silent build

cargo test --workspace --release

# The public typings compile, and misuse of the generics is a type error.
npx tsc -p __test__/types

npx vitest run
npx bun test --timeout 20000 ./__test__/
