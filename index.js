'use strict'
// ferroqueue: BullMQ's API on a Rust engine. See README.md.

const { Queue } = require('./lib/queue')
const { Worker } = require('./lib/worker')
const { QueueEvents } = require('./lib/queue-events')
const { Job } = require('./lib/job')
const { QueueError, UnrecoverableError, RateLimitError } = require('./lib/errors')

module.exports = { Queue, Worker, QueueEvents, Job, QueueError, UnrecoverableError, RateLimitError }
