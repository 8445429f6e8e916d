'use strict'
// The Job a processor gets in a child process (child-main.js): the job's fields as its Worker
// sent them, and its methods as calls that the Worker makes on the real Job (child-pool.js) and
// answers. Getters that read only the job's fields are answered here.

/** Job methods a processor in a child process can call; each resolves with the Worker's answer. */
const CALLS = [
  'updateProgress',
  'log',
  'updateData',
  'moveToDelayed',
  'moveToWait',
  'moveToWaitingChildren',
  'extendLock',
  'getChildrenValues',
  'getFailedChildrenValues',
  'getIgnoredChildrenFailures',
  'getDependencies',
  'getDependenciesCount',
  'getState',
  'changePriority',
  'changeDelay',
  'promote',
  'retry',
  'removeDeduplicationKey',
  'remove',
  'isCompleted',
  'isFailed',
  'isActive',
  'isWaiting',
  'isDelayed',
]

/** Fields of a job record (what `asJSON()` answers). */
const FIELDS = ['id', 'name', 'data', 'opts', 'progress', 'returnvalue', 'failedReason', 'stacktrace', 'attemptsMade', 'attemptsStarted', 'stalledCounter', 'processedBy', 'timestamp', 'processedOn', 'finishedOn', 'delay', 'priority']

class ChildJob {
  /** `record`: the job's fields and getters' values; `call(method, args)`: asks the Worker. */
  constructor(record, call) {
    for (const f of FIELDS) this[f] = record[f]
    this.opts = this.opts ?? {}
    this.token = record.token
    this._getters = record.getters
    Object.defineProperty(this, '_ask', { value: call })
  }

  get queueName() {
    return this._getters.queueName
  }
  get queueQualifiedName() {
    return this._getters.queueQualifiedName
  }
  get parent() {
    return this._getters.parent
  }
  get parentKey() {
    return this._getters.parentKey
  }
  get repeatJobKey() {
    return this._getters.repeatJobKey
  }
  get deduplicationId() {
    return this._getters.deduplicationId
  }

  asJSON() {
    const out = {}
    for (const f of FIELDS) out[f] = this[f]
    return out
  }

  toJSON() {
    return this.asJSON()
  }
}

for (const method of CALLS) {
  ChildJob.prototype[method] = function (...args) {
    if (method === 'updateProgress') this.progress = args[0]
    else if (method === 'updateData') this.data = args[0]
    return this._ask(method, args)
  }
}

/** The values of a Job's getters, sent with its record. */
function gettersOf(job) {
  return {
    queueName: job.queueName,
    queueQualifiedName: job.queueQualifiedName,
    parent: job.parent,
    parentKey: job.parentKey,
    repeatJobKey: job.repeatJobKey,
    deduplicationId: job.deduplicationId,
  }
}

module.exports = { ChildJob, CALLS, gettersOf }
