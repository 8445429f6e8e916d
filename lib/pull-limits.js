'use strict'
// The limits a Worker brings to each pull, checked by the engine: its `limiter` (BullMQ's: one
// budget for the queue, shared by its workers; the queue's own rate limit overrides it) and its
// `group` option (BullMQ Pro's: defaults for groups without settings of their own); and its
// `name`, which the jobs it takes record as `processedBy`.

const { typeError } = require('./errors')
const v = require('./validate')

const GROUP_KEYS = ['concurrency', 'limit']

/** Checks a Worker's `group`: `{ concurrency?, limit?: { max, duration } }`. */
function checkGroup(g) {
  if (g === undefined) return
  if (!v.isRecord(g)) throw typeError('group', `must be { concurrency?, limit? }, got ${v.describe(g)}`)
  for (const k of Object.keys(g)) {
    if (!GROUP_KEYS.includes(k)) throw typeError(`group.${k}`, `is not an option; expected ${GROUP_KEYS.join(', ')}`)
  }
  if (g.concurrency !== undefined) v.integerIn('group.concurrency', g.concurrency, 1, 2 ** 32 - 1)
  if (g.limit !== undefined) {
    if (!v.isRecord(g.limit)) throw typeError('group.limit', `must be { max, duration }, got ${v.describe(g.limit)}`)
    for (const k of Object.keys(g.limit)) {
      if (k !== 'max' && k !== 'duration') throw typeError(`group.limit.${k}`, 'is not an option; expected max, duration')
    }
    v.rate('group.limit', g.limit.max, g.limit.duration)
  }
}

/** The binding's PullLimits of validated Worker options (0: none). */
function pullLimits(o) {
  const group = o.group ?? {}
  return {
    rateMax: o.limiter?.max ?? 0,
    rateDuration: o.limiter?.duration ?? 0,
    groupConcurrency: group.concurrency ?? 0,
    groupMax: group.limit?.max ?? 0,
    groupDuration: group.limit?.duration ?? 0,
    name: o.name,
  }
}

module.exports = { checkGroup, pullLimits }
