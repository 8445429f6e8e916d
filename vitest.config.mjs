import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['__test__/**/*.spec.mjs'],
    // Each file in its own process: one engine per file, like a real app.
    pool: 'forks',
    // The memory tests call gc() (on Bun: Bun.gc).
    execArgv: ['--expose-gc'],
    testTimeout: 20_000,
    hookTimeout: 20_000,
  },
})
