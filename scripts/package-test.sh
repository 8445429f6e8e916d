#!/usr/bin/env bash
# The package as a user installs it: pack the main and the platform package (scripts/pack.mjs),
# install the tarballs into a fresh temporary project with no cargo on PATH, and run there the
# apps and tests of __test__/package/ on Node and on Bun, in ESM and CommonJS, with jest and vitest.
# jest and vitest come from the registry. Needs a built addon (`npm run build`).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
bun="$repo/node_modules/.bin/bun"

work=$(mktemp -d "${TMPDIR:-/tmp}/ferroqueue-package.XXXXXX")
trap 'rm -rf "$work"' EXIT

node scripts/pack.mjs "$work/tarballs" > "$work/tarballs.txt"
main=$(sed -n 1p "$work/tarballs.txt")
platform=$(sed -n 2p "$work/tarballs.txt")

# A PATH without cargo or rustc: every entry that holds one is left out.
clean_path=""
IFS=: read -ra entries <<< "$PATH"
for entry in "${entries[@]}"; do
  [[ -z "$entry" || -e "$entry/cargo" || -e "$entry/rustc" ]] && continue
  clean_path="${clean_path:+$clean_path:}$entry"
done
if PATH="$clean_path" command -v cargo > /dev/null; then
  echo "package-test: cargo is still on the cleaned PATH" >&2
  exit 1
fi

app="$work/app"
mkdir -p "$app"
cp __test__/package/app.mjs __test__/package/app.cjs __test__/package/processor.cjs "$app/"
cp __test__/package/queue.jest.cjs "$app/queue.test.cjs"
cp __test__/package/queue.vitest.mjs "$app/queue.test.mjs"
# The main package finds its platform package through its optionalDependencies; with no registry
# that has them, `overrides` points that one name at its tarball.
cat > "$app/package.json" <<EOF
{
  "name": "ferroqueue-package-test",
  "private": true,
  "dependencies": { "ferroqueue": "file:$main" },
  "overrides": { "ferroqueue-linux-x64-gnu": "file:$platform" },
  "devDependencies": { "jest": "30.5.2", "vitest": "4.1.12" },
  "jest": { "testMatch": ["**/*.test.cjs"] }
}
EOF

cd "$app"
PATH="$clean_path" npm install --no-audit --no-fund --loglevel=error
test ! -e node_modules/ferroqueue/Cargo.toml
test -e node_modules/ferroqueue-linux-x64-gnu/ferroqueue.linux-x64-gnu.node
test ! -e node_modules/ferroqueue/ferroqueue.linux-x64-gnu.node
echo "package-test: installed $(basename "$main") and $(basename "$platform") with no cargo on PATH"

export PATH="$clean_path"
node app.mjs
node app.cjs
"$bun" app.mjs
"$bun" app.cjs
npx jest --ci
npx vitest run queue.test.mjs
# The CLI the package installs (`npx ferroqueue`), on a file a one-line app wrote.
node -e "const { Queue } = require('ferroqueue'); const q = new Queue('mail', { dataPath: 'cli.sqlite' }); q.add('hello', {}).then(() => q.close())"
npx --no-install ferroqueue stats cli.sqlite --json | grep -q '"queue":"mail".*"waiting":1'
echo "package-test: passed"
