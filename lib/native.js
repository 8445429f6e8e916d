'use strict'
// The one place that loads the native binding. It owns the engine registry and fans engine
// events out to QueueEvents instances (one native callback per batch of events).

const binding = require('../binding.js')
const { decode } = require('./errors')

/** engineId -> Map<queueName, Set<listener>> */
const listeners = new Map()
let eventSeq = 0

function dispatch(engineId) {
  let batch
  try {
    batch = JSON.parse(binding.drainEvents(engineId))
  } catch (e) {
    return
  }
  const byQueue = listeners.get(engineId)
  if (!byQueue) return
  for (const [queue, name, payload] of batch) {
    const set = byQueue.get(queue)
    if (!set) continue
    const id = String(++eventSeq)
    for (const l of set) l._deliver(name, payload, id)
  }
}

/** Resolves the engine for options (in memory for now) and returns its id. */
function engineFor(_opts) {
  let id
  try {
    id = binding.memoryEngine()
  } catch (e) {
    throw decode(e)
  }
  if (!listeners.has(id)) {
    listeners.set(id, new Map())
    binding.setEventCallback(id, () => dispatch(id))
  }
  return id
}

/** Opens a queue handle on an engine; throws the decoded error for a bad name. */
function openQueue(engineId, name) {
  try {
    return binding.openQueue(engineId, name)
  } catch (e) {
    throw decode(e)
  }
}

/** Registers a QueueEvents-like listener ({ _deliver(name, payload, id) }). */
function listen(engineId, handle, queueName, listener) {
  const byQueue = listeners.get(engineId)
  let set = byQueue.get(queueName)
  if (!set) byQueue.set(queueName, (set = new Set()))
  set.add(listener)
  binding.subscribe(handle)
}

function unlisten(engineId, handle, queueName, listener) {
  const set = listeners.get(engineId)?.get(queueName)
  if (set && set.delete(listener)) binding.unsubscribe(handle)
}

module.exports = { binding, decode, engineFor, openQueue, listen, unlisten }
