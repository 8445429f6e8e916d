'use strict'
// ferroqueue: BullMQ's API on a Rust engine. See README.md.

const { Queue } = require('./lib/queue')
const { Worker } = require('./lib/worker')
const { QueueEvents } = require('./lib/queue-events')
const { Job } = require('./lib/job')
const { FlowProducer } = require('./lib/flow-producer')
const { QueueError, UnrecoverableError, RateLimitError, DelayedError, WaitingChildrenError } = require('./lib/errors')
const { MetricsTime } = require('./lib/metrics')

module.exports = { Queue, Worker, QueueEvents, FlowProducer, Job, QueueError, UnrecoverableError, RateLimitError, DelayedError, WaitingChildrenError, MetricsTime }
