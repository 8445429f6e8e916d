// A Rust panic reaches JS as an error and the addon keeps working. The shipped addon has no way to
// panic on purpose; scripts/test.sh builds a second one with the `test-hooks` feature (debugPanic)
// and names it in FERROQUEUE_TEST_HOOKS.
import { describe, it, expect } from 'vitest'
import { createRequire } from 'node:module'
import { thrown, uniqueName } from './helpers.mjs'

const require = createRequire(import.meta.url)
const hooksPath = process.env.FERROQUEUE_TEST_HOOKS

describe('Rust panics', () => {
  it('the shipped addon cannot panic on purpose', () => {
    expect(require('../binding.js').debugPanic).toBeUndefined()
  })

  it.skipIf(!hooksPath)('reach JS as an error, and the addon keeps working (needs FERROQUEUE_TEST_HOOKS, set by npm test)', () => {
    const hooks = require(hooksPath)
    expect(() => hooks.debugPanic('boom')).toThrow(/boom/)
    const err = thrown(() => hooks.debugPanic('boom again'))
    expect(err).toBeInstanceOf(Error)
    expect(err.message).toMatch(/boom again/)

    // The same addon still serves a queue after the panics.
    const engine = hooks.openEngine(null, false, null)
    const h = hooks.openQueue(engine, uniqueName('panic'), null)
    expect(hooks.add(h, 'after-panic', '{"ok":true}', null, Date.now())).toBe(1)
    expect(JSON.parse(hooks.getJob(h, '1')).data).toEqual({ ok: true })
  })
})
