// A redis-server for the BullMQ cells of the benchmarks: installed from Debian when missing,
// started on 127.0.0.1 on a free port (durable like our SQLite cells), stopped by its caller by
// pid (`p.kill()`).
import { spawn, spawnSync, execFileSync } from 'node:child_process'
import { createServer } from 'node:net'

function freePort() {
  return new Promise((resolve) => {
    const s = createServer()
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address()
      s.close(() => resolve(port))
    })
  })
}

function ensureRedis() {
  const found = spawnSync('sh', ['-c', 'command -v redis-server'], { encoding: 'utf8' }).stdout.trim()
  if (found) return found
  console.error('redis-server not found: installing Debian package redis-server')
  execFileSync('sh', ['-c', 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server'], {
    stdio: 'inherit',
  })
  return spawnSync('sh', ['-c', 'command -v redis-server'], { encoding: 'utf8' }).stdout.trim()
}

export async function startRedis(dir) {
  const bin = ensureRedis()
  const port = await freePort()
  // Durable like our SQLite cells: append-only file, fsync every second (Redis's usual setting).
  const p = spawn(bin, ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--appendonly', 'yes', '--appendfsync', 'everysec', '--save', ''], {
    stdio: 'ignore',
  })
  for (let i = 0; i < 100; i++) {
    if (spawnSync('redis-cli', ['-p', String(port), 'ping'], { encoding: 'utf8' }).stdout.trim() === 'PONG') break
    await new Promise((r) => setTimeout(r, 50))
  }
  return { p, port }
}
