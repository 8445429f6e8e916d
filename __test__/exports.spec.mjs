import { describe, it, expect } from 'vitest'
import { createRequire } from 'node:module'
import * as esm from 'ferroqueue'

const require = createRequire(import.meta.url)

describe('package entry points', () => {
  it("import { Queue } from 'ferroqueue' and require('ferroqueue') give the same classes", () => {
    const cjs = require('ferroqueue')
    for (const name of ['Queue', 'Worker', 'QueueEvents', 'FlowProducer', 'Job', 'UnrecoverableError', 'QueueError', 'RateLimitError', 'DelayedError', 'WaitingChildrenError']) {
      expect(typeof esm[name]).toBe('function')
      expect(cjs[name]).toBe(esm[name])
    }
    expect(new esm.UnrecoverableError('x')).toBeInstanceOf(Error)
    expect(cjs.MetricsTime).toBe(esm.MetricsTime)
    expect(esm.MetricsTime.ONE_HOUR).toBe(60)
  })
})
