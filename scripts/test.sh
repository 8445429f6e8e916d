#!/usr/bin/env bash
# Every test: Rust (engine + binding + PostgreSQL), then the JS suite on Node (vitest) and on Bun
# (bun test), on the embedded engine and again on PostgreSQL.
set -euo pipefail
cd "$(dirname "$0")/.."

# A PostgreSQL server of its own for the PostgreSQL backend's tests (scripts/postgres.sh:
# installed if missing, a free 127.0.0.1 port, a temporary folder), stopped by pid on exit.
# Required: with it set, a test that finds no server fails instead of skipping.
pg_env=$(bash scripts/postgres.sh start)
eval "$pg_env"
trap 'bash scripts/postgres.sh stop "${PG_TEST_DIR:-}"' EXIT
export FERROQUEUE_REQUIRE_POSTGRES=1

# A Chromium for the bull-board browser test (scripts/chromium.sh: Debian's, installed with
# apt-get when missing); without one the test skips and says why.
FERROQUEUE_CHROMIUM=$(bash scripts/chromium.sh)
export FERROQUEUE_CHROMIUM

# A second addon with the `test-hooks` feature (debugPanic) for __test__/panic.spec.mjs; the
# shipped one never has it. Built first: the release build below then restores the real addon.
cargo build --release --features test-hooks --quiet
mkdir -p target/hooks
cp target/release/libferroqueue.so target/hooks/ferroqueue-hooks.node
export FERROQUEUE_TEST_HOOKS="$PWD/target/hooks/ferroqueue-hooks.node"

# The addon is built by `npm install`; rebuild only what changed.
npm run --silent build

cargo test --workspace --release --features ferroqueue-engine/indexed-heap

# Loom models of the hand-made concurrency protocols (event hub, commit notice, writer hand-off;
# src/loom_models.rs), in their own target directory: `--cfg loom` rebuilds every crate.
# Preemptions are bounded at 3, as loom advises; each model runs in seconds.
LOOM_MAX_PREEMPTIONS=3 RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
  cargo test --release --quiet -p ferroqueue-engine --lib loom_models

# The public typings compile, and misuse of the generics is a type error.
npx tsc -p __test__/types

# The package as a user installs it: packed tarballs, no cargo on PATH, Node and Bun, ESM and
# CommonJS, jest and vitest (jest and vitest come from the registry).
bash scripts/package-test.sh

npx vitest run
npx bun test --timeout 20000 ./__test__/

# The same suite on PostgreSQL: every queue opened without dataPath or connection lives in the
# test server (tests that do not apply there say why: itExcept in __test__/helpers.mjs).
FERROQUEUE_POSTGRES_URL="$FERROQUEUE_TEST_POSTGRES_URL" npx vitest run
FERROQUEUE_POSTGRES_URL="$FERROQUEUE_TEST_POSTGRES_URL" npx bun test --timeout 20000 ./__test__/
