'use strict'
// A Worker's processor given as a file (BullMQ's sandboxed processors): which values name one,
// the check made when the Worker is built (the file exists), and loading it where it runs (a
// worker thread or a child process), each failure with a code and the file named.

const fs = require('node:fs')
const path = require('node:path')
const { fileURLToPath, pathToFileURL } = require('node:url')
const { QueueError, typeError } = require('../errors')
const v = require('../validate')

/** Whether `processor` names a file (a path or a URL) rather than being a function. */
function isProcessorFile(processor) {
  try {
    return typeof processor === 'string' || processor instanceof URL
  } catch {
    return false // a Proxy whose traps throw: not a file (the Worker says what it is)
  }
}

/** The absolute path of a processor file; throws at once when it is not a file, as BullMQ does. */
function processorPath(processor) {
  let file
  if (processor instanceof URL) {
    if (processor.protocol !== 'file:') throw typeError('processor', `must be a file path or a file: URL, got ${processor.href}`)
    file = fileURLToPath(processor)
  } else {
    if (processor === '') throw typeError('processor', 'must be a function, a file path or a file: URL, got an empty string')
    file = processor.startsWith('file:') ? fileURLToPath(processor) : path.resolve(processor)
  }
  let stat
  try {
    stat = fs.statSync(file)
  } catch {
    throw new QueueError('ERR_PROCESSOR_FILE', `processor file ${file} does not exist`)
  }
  if (!stat.isFile()) throw new QueueError('ERR_PROCESSOR_FILE', `processor file ${file} is not a file`)
  return file
}

/** The processor function of a file: its default export, or `module.exports`. */
async function loadProcessor(file) {
  let mod
  try {
    mod = await import(pathToFileURL(file).href)
  } catch (e) {
    const err = new QueueError('ERR_PROCESSOR_LOAD', `processor file ${file} cannot be loaded: ${e && e.message}`)
    err.cause = e
    throw err
  }
  let fn = mod.default
  // A CommonJS module compiled from ESM: `exports.default`.
  if (typeof fn !== 'function' && fn !== null && typeof fn === 'object' && typeof fn.default === 'function') fn = fn.default
  if (typeof fn !== 'function') {
    throw new QueueError('ERR_PROCESSOR_LOAD', `processor file ${file} exports no function: give it a default export (or module.exports) that processes a job, got ${v.describe(fn)}`)
  }
  return fn
}

module.exports = { isProcessorFile, processorPath, loadProcessor }
