'use strict'
// A child process of a Worker whose processor file runs in child processes (child-pool.js). It
// loads the file and runs the processor on the jobs its Worker sends, in batches; results, and
// the calls a processor makes on its job, go back in batches. The Worker pulls and acks: a
// child process cannot share the engine of the Worker's process.

const { loadProcessor } = require('./processor-file')
const { errorOut, errorIn, Batcher } = require('./relay')
const { ChildJob } = require('./child-job')

const file = process.argv[2]
const out = new Batcher((text) => process.send(text))
/** Jobs running here, by the Worker's key: their AbortControllers. */
const running = new Map()
/** Calls to the Worker waiting for its answer, by number. */
const calls = new Map()
let nextCall = 1
let processor = null

function ask(k, method, args) {
  const n = nextCall++
  return new Promise((resolve, reject) => {
    calls.set(n, { resolve, reject })
    out.push(['call', k, n, method, args])
  })
}

function run(k, record) {
  const controller = new AbortController()
  running.set(k, controller)
  const job = new ChildJob(record, (method, args) => ask(k, method, args))
  const done = (value) => {
    running.delete(k)
    let text
    try {
      text = JSON.stringify(value === undefined ? null : value)
    } catch (e) {
      return out.push(['fail', k, errorOut(e)])
    }
    out.push(['done', k, text])
  }
  const fail = (e) => {
    running.delete(k)
    out.push(['fail', k, errorOut(e)])
  }
  try {
    const r = processor(job, job.token, controller.signal)
    if (r !== null && typeof r === 'object' && typeof r.then === 'function') Promise.resolve(r).then(done, fail)
    else done(r)
  } catch (e) {
    fail(e)
  }
}

function hear(text) {
  for (const m of JSON.parse(text)) {
    switch (m[0]) {
      case 'run':
        run(m[1], m[2])
        break
      case 'abort': {
        const c = running.get(m[1])
        if (c) c.abort(errorIn(m[2]))
        break
      }
      case 'reply': {
        const call = calls.get(m[1])
        if (!call) break
        calls.delete(m[1])
        if (m[2]) call.resolve(m[3])
        else call.reject(errorIn(m[3]))
        break
      }
      case 'close':
        out.flush()
        process.disconnect()
        break
    }
  }
}

async function main() {
  try {
    processor = await loadProcessor(file)
  } catch (e) {
    process.send(JSON.stringify([['load-failed', errorOut(e)]]))
    process.disconnect()
    return
  }
  process.on('message', hear)
  process.send(JSON.stringify([['ready']]))
}

// The Worker's process is gone: so is this one.
process.on('disconnect', () => process.exit(0))
main()
