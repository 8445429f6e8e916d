'use strict'
// Metrics (`queue.getMetrics`, `getWorkers`, `exportPrometheusMetrics`), as BullMQ's: per-minute
// counts of completed and failed jobs, recorded once a Worker asks (`metrics: { maxDataPoints }`),
// the live Workers, and a Prometheus text export. The engine counts (crates/engine/src/domain/
// metrics.rs; on PostgreSQL crates/postgres/src/backend/metrics.rs); this checks and shapes.
// Methods of Queue (installed by queue.js).

const { binding, native } = require('./native')
const { rangeError, typeError } = require('./errors')
const v = require('./validate')

/** BullMQ's `MetricsTime`: data points (minutes) in each span. */
const MetricsTime = Object.freeze({
  ONE_MINUTE: 1,
  FIVE_MINUTES: 5,
  FIFTEEN_MINUTES: 15,
  THIRTY_MINUTES: 30,
  ONE_HOUR: 60,
  ONE_WEEK: 60 * 24 * 7,
  TWO_WEEKS: 60 * 24 * 7 * 2,
  ONE_MONTH: 60 * 24 * 7 * 2 * 4,
})

/** The most minutes a queue keeps (a year). */
const MAX_DATA_POINTS = 60 * 24 * 366

/**
 * The Worker option `metrics: { maxDataPoints }`: how many minutes of per-minute counts its
 * queue keeps (default MetricsTime.ONE_WEEK). Answers the number, or 0 when not given.
 */
function metricsPoints(metrics) {
  if (metrics === undefined) return 0
  const o = v.ownOptions(metrics, 'metrics')
  for (const k of Object.keys(o)) {
    if (k !== 'maxDataPoints') throw typeError(`metrics.${k}`, 'is not an option; expected maxDataPoints')
  }
  const points = o.maxDataPoints ?? MetricsTime.ONE_WEEK
  v.integerIn('metrics.maxDataPoints', points, 1, MAX_DATA_POINTS)
  return points
}

/** Prometheus's escaping of a label value. */
function label(value) {
  return String(value).replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"')
}

/** `{ name: value }` labels as Prometheus text: `,k="v"` each, after the fixed ones. */
function extraLabels(globalVariables) {
  if (globalVariables === undefined) return ''
  const o = v.ownOptions(globalVariables, 'globalVariables')
  let out = ''
  for (const [k, val] of Object.entries(o)) {
    if (!/^[a-zA-Z_][a-zA-Z0-9_]*$/.test(k)) {
      throw rangeError('globalVariables', `label names must match [a-zA-Z_][a-zA-Z0-9_]*, got ${v.describe(k)}`)
    }
    if (typeof val !== 'string' && typeof val !== 'number' && typeof val !== 'boolean') {
      throw typeError(`globalVariables.${k}`, `must be a string, got ${v.describe(val)}`)
    }
    out += `,${k}="${label(val)}"`
  }
  return out
}

/** A histogram's lines: cumulative buckets (bounds divided by `unit` into seconds), sum, count. */
function histogramLines(lines, name, labels, h, unit) {
  h.bounds.forEach((b, i) => lines.push(`${name}_bucket{${labels},le="${b / unit}"} ${h.cumulative[i]}`))
  const total = h.cumulative[h.cumulative.length - 1]
  lines.push(`${name}_bucket{${labels},le="+Inf"} ${total}`)
  lines.push(`${name}_sum{${labels}} ${h.sum / unit}`)
  lines.push(`${name}_count{${labels}} ${total}`)
}

/**
 * A live Worker as getWorkers resolves it: the fields of BullMQ's that apply. `rawname` is the
 * connection name BullMQ gives a Worker, `prefix:base64(queue)` and `:w:name` for a named one,
 * which bull-board reads the Worker's name from.
 */
function workerOf(q, w, now) {
  const prefix = q.qualifiedName.slice(0, -(q.name.length + 1))
  const client = `${prefix}:${Buffer.from(q.name).toString('base64')}`
  return {
    id: w.id,
    name: q.name,
    rawname: w.name == null ? client : `${client}:w:${w.name}`,
    addr: w.addr ?? `pid:${w.pid}`,
    pid: w.pid,
    started: w.started,
    age: String(Math.max(0, Math.floor((now - w.started) / 1000))),
    idle: String(Math.max(0, Math.floor((now - w.seen) / 1000))),
  }
}

const metricsMethods = {
  /**
   * Completed (or failed) jobs per minute, newest minute first, as BullMQ's getMetrics:
   * `{ meta: { count, prevTS, prevCount }, data, count }`. Counted once a Worker of the queue
   * has the option `metrics`.
   */
  async getMetrics(type, start = 0, end = -1) {
    if (type !== 'completed' && type !== 'failed') {
      throw rangeError('type', `must be 'completed' or 'failed', got ${v.describe(type)}`)
    }
    v.integerIn('start', start, -Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER)
    v.integerIn('end', end, -Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER)
    const m = await native(this._call(binding.getMetrics, type === 'failed', start, end))
    return { meta: { count: m.count, prevTS: m.prevTs, prevCount: m.prevCount }, data: m.data, count: m.len }
  },

  /**
   * The queue's live Workers: of this process on the embedded engine, of every process on
   * PostgreSQL. A Worker with worker threads or child processes is one.
   */
  async getWorkers() {
    const list = await native(this._call(binding.getWorkers))
    const now = Date.now()
    return list.map((w) => workerOf(this, w, now))
  },

  /** How many live Workers the queue has (see getWorkers). */
  async getWorkersCount() {
    return (await this.getWorkers()).length
  },

  /** BullMQ's key of one of the queue's structures, `prefix:name:type` (bull-board shows it). */
  toKey(type) {
    return `${this.qualifiedName}:${type}`
  },

  /**
   * The queue's metrics in Prometheus's text format: BullMQ's `bullmq_job_count` gauge by state,
   * then ferroqueue's: this process's finished jobs by outcome, their processing times, and its
   * engine's commit latency (a durable engine's). `globalVariables` become labels of every line.
   */
  async exportPrometheusMetrics(globalVariables) {
    const extra = extraLabels(globalVariables)
    const counts = await this.getJobCounts()
    const totals = await native(this._call(binding.finishTotals))
    const queue = `queue="${label(this.name)}"`
    const lines = ['# HELP bullmq_job_count Number of jobs in the queue by state', '# TYPE bullmq_job_count gauge']
    for (const [state, n] of Object.entries(counts)) lines.push(`bullmq_job_count{${queue},state="${state}"${extra}} ${n}`)
    lines.push('# HELP ferroqueue_jobs_finished_total Jobs that finished in this process since its engine opened, by outcome (failed: for good)')
    lines.push('# TYPE ferroqueue_jobs_finished_total counter')
    lines.push(`ferroqueue_jobs_finished_total{${queue},outcome="completed"${extra}} ${totals.completed}`)
    lines.push(`ferroqueue_jobs_finished_total{${queue},outcome="failed"${extra}} ${totals.failed}`)
    lines.push('# HELP ferroqueue_job_processing_seconds Time from a job\'s start (processedOn) to its finish (finishedOn), for jobs that finished in this process')
    lines.push('# TYPE ferroqueue_job_processing_seconds histogram')
    histogramLines(lines, 'ferroqueue_job_processing_seconds', `${queue}${extra}`, totals.processing, 1000)
    if (totals.commit) {
      lines.push('# HELP ferroqueue_commit_seconds Time each commit of this process\'s engine took (SQLite: a writer transaction; PostgreSQL: an ack batch)')
      lines.push('# TYPE ferroqueue_commit_seconds histogram')
      histogramLines(lines, 'ferroqueue_commit_seconds', `${queue}${extra}`, totals.commit, 1_000_000)
    }
    return lines.join('\n') + '\n'
  },
}

module.exports = { metricsMethods, metricsPoints, MetricsTime }
