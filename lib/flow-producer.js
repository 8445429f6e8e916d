'use strict'
// FlowProducer: BullMQ's trees of parent and child jobs, added all or nothing in one engine call
// (the engine links them and moves each parent on when its children are done, see
// crates/engine/src/application/engine_flows.rs). Its queues are plain Queues it opens on its own
// engine, one per queue name and prefix.

const { EventEmitter } = require('node:events')
const { binding, acquireEngine, releaseEngine, fromBinding, isPending, native } = require('./native')
const { QueueError, typeError, inputError } = require('./errors')
const { checkClassOptions } = require('./options')
const { Queue } = require('./queue')
const { Job } = require('./job')
const v = require('./validate')

const NODE_KEYS = ['name', 'queueName', 'data', 'prefix', 'opts', 'children']

class FlowProducer extends EventEmitter {
  /** @param {{ dataPath?, connection?, durability?, prefix? }} [opts] */
  constructor(opts) {
    super()
    this.opts = v.ownOptions(opts)
    try {
      checkClassOptions('FlowProducer', this.opts)
    } catch (e) {
      throw inputError(e, 'opts')
    }
    const { engine } = acquireEngine(this.opts)
    this._engine = engine
    this._queues = new Map()
    this._closed = false
  }

  /** Adds a tree of jobs, all or nothing; resolves with `{ job, children? }` nodes. */
  async add(flow, opts) {
    const [node] = await this.addBulk([flow], opts)
    return node
  }

  /** Adds trees of jobs, all or nothing together. */
  async addBulk(flows, opts) {
    this._ensureOpen()
    if (!Array.isArray(flows)) throw typeError('flows', `must be an array, got ${v.describe(flows)}`)
    const queuesOptions = checkQueuesOptions(opts)
    const flat = []
    const parts = []
    const walk = (node, parent, path) => {
      checkNode(node, path)
      const queue = this._queue(node.queueName, node.prefix ?? this.opts.prefix, queuesOptions)
      const defaults = queue.opts.defaultJobOptions
      const own = v.ownJobOptions(node.opts, `${path}.opts`)
      const jobOpts = defaults ? { ...defaults, ...own } : own
      const children = node.children ?? []
      const at = flat.length
      const entry = { queue, kids: [], name: node.name, data: node.data ?? {}, opts: jobOpts, parent }
      flat.push(entry)
      const data = v.toJson(node.data ?? {}, `${path}.data`, '{}')
      const optsText = Object.keys(jobOpts).length === 0 ? 'null' : v.optionsJson(jobOpts, `${path}.opts`)
      parts.push(
        `{"h":${queue._h},"name":${JSON.stringify(node.name)},"data":${data},"opts":${optsText},` +
          `"parent":${parent === undefined ? 'null' : parent},"children":${children.length}}`,
      )
      children.forEach((c, i) => entry.kids.push(walk(c, at, `${path}.children[${i}]`)))
      return at
    }
    const roots = flows.map((f, i) => walk(f, undefined, `flows[${i}]`))
    let text
    const timestamp = Date.now()
    try {
      text = binding.addFlow(this._engine.id, `[${parts.join(',')}]`, timestamp)
    } catch (e) {
      throw fromBinding(e)
    }
    if (isPending(text)) text = await native(text)
    const ids = JSON.parse(text)
    const wait = flat.length > 0 ? flat[0].queue._commitWait() : null
    if (wait) await wait
    // Built here from what was added, as Queue.add builds its Job: no read back per job. A
    // child's options name its parent, as the engine stored them.
    const jobs = flat.map((f, i) => {
      const opts = f.parent === undefined ? f.opts : { ...f.opts, parent: { id: ids[f.parent], queue: flat[f.parent].queue.qualifiedName } }
      return new Job(f.queue, f.name, f.data, opts, ids[i], timestamp)
    })
    const tree = (at) => {
      const out = { job: jobs[at] }
      if (flat[at].kids.length > 0) out.children = flat[at].kids.map(tree)
      return out
    }
    return roots.map(tree)
  }

  /**
   * The tree under job `id` of `queueName`: `{ job, children? }`, `depth` levels down (default
   * 10), at most `maxChildren` children per job; undefined when there is no such job.
   */
  async getFlow(opts) {
    this._ensureOpen()
    if (!v.isRecord(opts)) throw typeError('opts', `must be { id, queueName, depth?, maxChildren? }, got ${v.describe(opts)}`)
    const { id, queueName, prefix, depth = 10, maxChildren } = opts
    v.name('id', id)
    v.integerIn('depth', depth, 0, 2 ** 32 - 1)
    if (maxChildren !== undefined) v.integerIn('maxChildren', maxChildren, 0, 2 ** 32 - 1)
    const node = async (queue, jobId, left) => {
      const job = await queue.getJob(jobId)
      if (job === undefined) return undefined
      const out = { job }
      if (left === 0) return out
      const deps = await dependenciesOf(queue, jobId)
      const kids = deps === null ? [] : deps.children.slice(0, maxChildren ?? deps.children.length)
      const found = await Promise.all(
        kids.map(([queueKey, childId]) => {
          const cut = queueKey.lastIndexOf(':')
          const q = this._queue(queueKey.slice(cut + 1), queueKey.slice(0, cut), {})
          return node(q, childId, left - 1)
        }),
      )
      const children = found.filter((c) => c !== undefined)
      if (children.length > 0) out.children = children
      return out
    }
    return node(this._queue(queueName, prefix ?? this.opts.prefix, {}), id, depth)
  }

  /** Closes the producer's queues and lets go of its engine. */
  async close() {
    if (this._closed) return
    this._closed = true
    const queues = [...this._queues.values()]
    this._queues.clear()
    await Promise.all(queues.map((q) => q.close()))
    await releaseEngine(this._engine)
    this.emit('closed')
  }

  _ensureOpen() {
    if (this._closed) throw new QueueError('ERR_QUEUE_CLOSED', 'the FlowProducer is closed')
  }

  /** The producer's Queue for `name` under `prefix`, opened once. */
  _queue(name, prefix, queuesOptions) {
    v.queueName(name)
    const key = `${prefix ?? 'bull'}:${name}`
    const own = queuesOptions[name]
    let q = this._queues.get(key)
    if (q === undefined) {
      const base = { ...this.opts, ...(own ?? {}) }
      if (prefix !== undefined) base.prefix = prefix
      q = new Queue(name, base)
      q._flowOptions = own === undefined ? undefined : v.toJson(own, `opts.queuesOptions.${name}`)
      this._queues.set(key, q)
    } else if (own !== undefined && v.toJson(own, `opts.queuesOptions.${name}`) !== q._flowOptions) {
      // The queue is open with other options: they would not apply, so they are refused.
      throw typeError(
        `opts.queuesOptions.${name}`,
        'differ from the options this FlowProducer opened the queue with; use another FlowProducer',
      )
    }
    return q
  }
}

function checkNode(node, path) {
  if (!v.isRecord(node)) throw typeError(path, `must be { name, queueName, data?, opts?, children? }, got ${v.describe(node)}`)
  for (const k of Object.keys(node)) {
    if (!NODE_KEYS.includes(k)) throw typeError(`${path}.${k}`, `is not an option; expected ${NODE_KEYS.join(', ')}`)
  }
  v.name(`${path}.name`, node.name, '(job name) ')
  if (typeof node.queueName !== 'string') throw typeError(`${path}.queueName`, `must be a string, got ${v.describe(node.queueName)}`)
  if (node.children !== undefined && !Array.isArray(node.children)) {
    throw typeError(`${path}.children`, `must be an array, got ${v.describe(node.children)}`)
  }
}

/** BullMQ's `{ queuesOptions: { [queueName]: QueueOptions } }`, each checked as a Queue's. */
function checkQueuesOptions(opts) {
  if (opts === undefined || opts === null) return {}
  if (!v.isRecord(opts)) throw typeError('opts', `must be { queuesOptions? }, got ${v.describe(opts)}`)
  for (const k of Object.keys(opts)) {
    if (k !== 'queuesOptions') throw typeError(`opts.${k}`, 'is not an option; expected queuesOptions')
  }
  const q = opts.queuesOptions ?? {}
  if (!v.isRecord(q)) throw typeError('opts.queuesOptions', `must be an object, got ${v.describe(q)}`)
  return q
}

/** A parent's dependencies as the binding answers them, or null. */
async function dependenciesOf(queue, id) {
  let text
  try {
    text = binding.getDependencies(queue._h, id)
  } catch (e) {
    throw fromBinding(e)
  }
  if (isPending(text)) text = await native(text)
  return text === null ? null : JSON.parse(text)
}

module.exports = { FlowProducer, dependenciesOf }
