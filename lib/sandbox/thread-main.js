'use strict'
// A worker thread of a threaded Worker (threaded-worker.js). It loads the processor file and runs
// an ordinary Worker on the same queue and engine as its parent (the addon's engines are shared
// by every thread of the process), so jobs are pulled and acknowledged here with no message per
// job. That Worker holds its jobs with the lease holder the parent opened for this thread, so
// that the parent can settle them if this thread dies. Its events go to the parent in batches.

const { parentPort, workerData } = require('node:worker_threads')
const { borrowEngines } = require('../native')
const { Worker } = require('../worker')
const { loadProcessor } = require('./processor-file')
const { recordOf, errorOut, Batcher } = require('./relay')

const { name, file, opts, holder } = workerData
/** The Worker events the parent has listeners for (it says when that changes). */
let listened = new Set()
const out = new Batcher((text) => parentPort.postMessage({ t: 'events', text }))
// The parent uses the same engine and outlives this thread: it closes the engine, not this thread.
borrowEngines()

/**
 * The processor, wrapped to tell the parent which jobs run here (for its `cancelJob`), with the
 * arity of the user's (a Worker gives an AbortSignal only to a processor that takes one).
 */
function tracked(processor) {
  const end = (id) => out.push(['end', id])
  if (processor.length >= 3) {
    return (job, token, signal) => {
      const id = job.id
      out.push(['start', id])
      try {
        const r = processor(job, token, signal)
        return r !== null && typeof r === 'object' && typeof r.then === 'function' ? Promise.resolve(r).finally(() => end(id)) : (end(id), r)
      } catch (e) {
        end(id)
        throw e
      }
    }
  }
  return (job, token) => {
    const id = job.id
    out.push(['start', id])
    try {
      const r = processor(job, token)
      return r !== null && typeof r === 'object' && typeof r.then === 'function' ? Promise.resolve(r).finally(() => end(id)) : (end(id), r)
    } catch (e) {
      end(id)
      throw e
    }
  }
}

/** Relays the Worker's events the parent listens for (`error` always). */
function relay(worker) {
  worker.on('active', (job) => {
    if (listened.has('active')) out.push(['active', recordOf(job)])
  })
  worker.on('completed', (job) => {
    if (listened.has('completed')) out.push(['completed', recordOf(job)])
  })
  worker.on('failed', (job, err) => {
    if (listened.has('failed')) out.push(['failed', job ? recordOf(job) : null, errorOut(err)])
  })
  worker.on('progress', (job, progress) => {
    if (listened.has('progress')) out.push(['progress', recordOf(job), progress])
  })
  worker.on('drained', () => out.push(['drained']))
  worker.on('error', (err) => out.push(['error', errorOut(err)]))
}

/** Answers a call of the parent (after the events batched before it). */
async function answer(worker, m) {
  let reply
  try {
    switch (m.m) {
      case 'pause':
        await worker.pause(m.a[0])
        break
      case 'resume':
        await worker.resume()
        break
      case 'close':
        await worker.close(m.a[0])
        break
      case 'concurrency':
        worker.concurrency = m.a[0]
        break
      case 'cancel':
        worker.cancelJob(m.a[0], m.a[1])
        break
      case 'cancelAll':
        worker.cancelAllJobs(m.a[0])
        break
    }
    reply = { t: 'reply', n: m.n, ok: true }
  } catch (e) {
    reply = { t: 'reply', n: m.n, ok: false, error: errorOut(e) }
  }
  out.flush()
  parentPort.postMessage(reply)
  // Closed: nothing keeps this thread alive any more, so it ends.
  if (m.m === 'close') parentPort.close()
}

async function main() {
  let processor
  try {
    processor = await loadProcessor(file)
  } catch (e) {
    parentPort.postMessage({ t: 'load-failed', error: errorOut(e) })
    parentPort.close()
    return
  }
  const Attached = class extends Worker {
    static get attachedHolder() {
      return holder
    }
  }
  const worker = new Attached(name, tracked(processor), { ...opts, autorun: false })
  relay(worker)
  parentPort.on('message', (m) => {
    if (m.t === 'listen') listened = new Set(m.events)
    else if (m.t === 'call') answer(worker, m)
    else if (m.t === 'start') start(worker, m)
  })
  // The parent answers with what it listens for now (listeners added while this thread
  // loaded), and whether it is paused: then this Worker runs.
  parentPort.postMessage({ t: 'loaded' })
}

async function start(worker, m) {
  listened = new Set(m.events)
  if (m.paused) await worker.pause(true)
  parentPort.postMessage({ t: 'ready' })
  worker.run().catch((e) => out.push(['error', errorOut(e)]))
}

main()
