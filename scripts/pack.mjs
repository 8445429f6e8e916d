#!/usr/bin/env node
// The packages a user installs, as npm tarballs: `node scripts/pack.mjs [out-dir]`
// (`npm run pack`). This is napi-rs's `prepublish` step without the publishing:
//
// - each platform package under `npm/` that holds its addon is packed (here: the one just
//   built, copied into `npm/linux-x64-gnu/`; a release pipeline drops the others' artifacts
//   into their folders first, for example with `napi artifacts`);
// - the main package is packed from a staging copy of its `files`, with the platform packages
//   it can use as `optionalDependencies` and without what only a checkout needs: the scripts
//   (`install` compiles Rust), `devDependencies`, `allowScripts`.
//
// A plain `npm pack` or `npm publish` in the checkout is refused by `prepack`: its tarball would
// carry the `install` script that runs cargo.

import { execFileSync } from 'node:child_process'
import { copyFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const out = resolve(process.argv[2] ?? join(root, 'target', 'pack'))
const readJson = (file) => JSON.parse(readFileSync(file, 'utf8'))
const manifest = readJson(join(root, 'package.json'))
const binaryName = manifest.napi.binaryName

/** `npm pack` in `dir` into `out`; the tarball's path. */
function pack(dir) {
  const [{ filename }] = JSON.parse(
    execFileSync('npm', ['pack', '--json', '--pack-destination', out], { cwd: dir, encoding: 'utf8', env: { ...process.env, npm_config_ignore_scripts: 'true' } }),
  )
  return join(out, filename)
}

mkdirSync(out, { recursive: true })

// The addon built in this checkout goes to its platform's package.
const built = join(root, `${binaryName}.linux-x64-gnu.node`)
if (process.platform === 'linux' && process.arch === 'x64' && existsSync(built)) {
  copyFileSync(built, join(root, 'npm', 'linux-x64-gnu', `${binaryName}.linux-x64-gnu.node`))
}

const optional = {}
const tarballs = []
for (const dir of manifest.napi.targets.map(platformDir)) {
  const pkg = readJson(join(root, 'npm', dir, 'package.json'))
  if (pkg.version !== manifest.version) throw new Error(`npm/${dir}/package.json is version ${pkg.version}, the main package ${manifest.version} (run \`npx napi version\`)`)
  if (!existsSync(join(root, 'npm', dir, pkg.main))) continue // not built here
  tarballs.push(pack(join(root, 'npm', dir)))
  optional[pkg.name] = pkg.version
}
if (tarballs.length === 0) throw new Error('no platform package holds its addon: run `npm run build` first')

const stage = mkdtempSync(join(tmpdir(), 'ferroqueue-pack-'))
try {
  for (const entry of [...manifest.files, 'README.md']) {
    cpSync(join(root, entry), join(stage, entry), { recursive: true })
  }
  const published = { ...manifest, optionalDependencies: optional }
  delete published.devDependencies
  delete published.allowScripts
  delete published.scripts
  writeFileSync(join(stage, 'package.json'), `${JSON.stringify(published, null, 2)}\n`)
  tarballs.unshift(pack(stage))
} finally {
  rmSync(stage, { recursive: true, force: true })
}

for (const tarball of tarballs) console.log(tarball)

/** napi's folder name for a Rust target triple, e.g. x86_64-unknown-linux-gnu -> linux-x64-gnu. */
function platformDir(triple) {
  const [cpu, , os, abi] = triple.split('-')
  const arch = { x86_64: 'x64', aarch64: 'arm64', i686: 'ia32', armv7: 'arm' }[cpu] ?? cpu
  const platform = { linux: 'linux', darwin: 'darwin', windows: 'win32' }[os] ?? os
  return abi ? `${platform}-${arch}-${abi}` : `${platform}-${arch}`
}
