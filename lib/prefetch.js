'use strict'
// How many jobs a Worker claims beyond its free slots (its `prefetch`), so that the next claim's
// round trip overlaps the jobs running. Fixed when the option is given; left out, adaptive on
// PostgreSQL and 0 on the embedded engine, where a claim costs no round trip.

class Prefetch {
  /** `fixed`: the option (undefined when left out); `remote`: claims cost a round trip. */
  constructor(fixed, remote) {
    this.size = fixed ?? 0
    this.adaptive = fixed === undefined && remote
    this.starts = 0 // jobs started: the worker counts them
    this._rate = 0 // jobs started per ms, a moving average
    this._mark = null // where the current span of the rate began
    this._lastLatency = Infinity
  }

  /**
   * After a claim that took `latencyMs`: enough jobs to keep the slots busy for two round trips
   * at the rate jobs start, at most 8 × concurrency (and 4,096). A round trip counts as the
   * shorter of the last two, and 20 ms at most: one slow claim (the first on a new connection)
   * must not make a worker hoard. Long jobs start slowly, so a worker of long jobs holds none
   * back from the other workers; short ones get claims large enough to overlap their round trip.
   */
  adapt(latencyMs, concurrency, now = performance.now()) {
    if (!this.adaptive) return
    if (this._mark === null) this._mark = { at: now, starts: this.starts }
    const span = now - this._mark.at
    // The rate over spans of 10 ms at least: jobs start in bursts, after each claim.
    if (span >= 10) {
      const rate = (this.starts - this._mark.starts) / span
      this._mark = { at: now, starts: this.starts }
      this._rate = this._rate === 0 ? rate : 0.7 * this._rate + 0.3 * rate
    }
    const rtt = Math.min(latencyMs, this._lastLatency, 20)
    this._lastLatency = latencyMs
    this.size = Math.min(Math.floor(2 * this._rate * rtt), 8 * concurrency, 4096)
  }
}

module.exports = { Prefetch }
