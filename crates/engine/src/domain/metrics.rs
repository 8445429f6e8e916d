//! What a queue's finished jobs add up to: BullMQ's per-minute counts of completed and failed
//! jobs (the Worker option `metrics: { maxDataPoints }`, `queue.getMetrics`), and the totals and
//! processing-time histogram that `exportPrometheusMetrics` reports. Plain data: each call takes
//! the time it is about.

use std::collections::VecDeque;

/// One data point: a minute.
pub const MINUTE_MS: u64 = 60_000;

/// Upper bounds (ms) of the processing-time histogram's buckets: from `processedOn` to
/// `finishedOn` of each job that completed or failed for good.
pub const PROCESSING_BOUNDS_MS: &[u64] = &[
    5, 10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000, 60_000, 300_000,
];

/// Upper bounds (µs) of the commit-latency histogram of a durable engine's writer.
pub const COMMIT_BOUNDS_US: &[u64] = &[
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 1_000_000,
];

/// The per-minute counts of one kind of finish (completed, or failed for good). Only minutes
/// with jobs are stored, at most the newest `maxDataPoints` + 1; the minutes between read as 0.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MinuteSeries {
    total: u64,
    first_minute: Option<u64>,
    /// `(minute, count)`, oldest first, minutes with jobs only.
    minutes: VecDeque<(u64, u64)>,
}

/// [`MinuteSeries::page`]: BullMQ's `getMetrics` answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetricsPage {
    /// Jobs counted since counting began (`meta.count`).
    pub count: u64,
    /// The start of the current minute, ms (`meta.prevTS`); 0 while nothing was counted.
    pub prev_ts: u64,
    /// `count` without the jobs of the current minute (`meta.prevCount`).
    pub prev_count: u64,
    /// The counts of the finished minutes asked for, newest first (`data`).
    pub data: Vec<u64>,
    /// How many finished minutes the series holds (`count`: the length of BullMQ's list).
    pub len: u64,
}

impl MinuteSeries {
    /// Counts `n` jobs finished at `at` (ms), keeping the newest `max_points` minutes.
    pub fn record(&mut self, at: u64, n: u64, max_points: u32) {
        let minute = at / MINUTE_MS;
        self.total += n;
        self.first_minute = Some(self.first_minute.map_or(minute, |f| f.min(minute)));
        match self.minutes.back_mut() {
            Some((m, c)) if *m == minute => *c += n,
            Some((m, _)) if *m > minute => {
                // A finish time from before the newest one (another process's clock): in place.
                let i = self.minutes.partition_point(|(m, _)| *m < minute);
                match self.minutes.get_mut(i) {
                    Some((m, c)) if *m == minute => *c += n,
                    _ => self.minutes.insert(i, (minute, n)),
                }
            }
            _ => self.minutes.push_back((minute, n)),
        }
        let newest = self.minutes.back().map_or(minute, |(m, _)| *m);
        let oldest = newest.saturating_sub(u64::from(max_points));
        while self.minutes.front().is_some_and(|(m, _)| *m < oldest) {
            self.minutes.pop_front();
        }
    }

    /// A series as stored elsewhere (PostgreSQL's rows): its total, the first minute counted,
    /// and counts of minutes, in any order.
    pub fn from_parts(
        total: u64,
        first_minute: Option<u64>,
        minutes: impl IntoIterator<Item = (u64, u64)>,
        max_points: u32,
    ) -> MinuteSeries {
        let mut s = MinuteSeries::default();
        let mut minutes: Vec<(u64, u64)> = minutes.into_iter().collect();
        minutes.sort_unstable();
        for (minute, n) in minutes {
            s.record(minute.saturating_mul(MINUTE_MS), n, max_points);
        }
        s.total = total;
        if let Some(f) = first_minute {
            s.first_minute = Some(s.first_minute.map_or(f, |m| m.min(f)));
        }
        s
    }

    /// The answer at `now` (ms) for the data points `start..=end` (indexes as Redis's
    /// `LRANGE`: newest first, negative ones from the end), of at most `max_points` minutes.
    pub fn page(&self, now: u64, max_points: u32, start: i64, end: i64) -> MetricsPage {
        let Some(first) = self.first_minute else {
            return MetricsPage::default();
        };
        let current = now / MINUTE_MS;
        let len = current.saturating_sub(first).min(u64::from(max_points));
        let this_minute: u64 = self
            .minutes
            .iter()
            .rev()
            .take_while(|(m, _)| *m >= current)
            .map(|(_, c)| c)
            .sum();
        let data = match lrange(start, end, len) {
            None => Vec::new(),
            Some((from, to)) => (from..=to)
                .map(|i| self.count_at(current - 1 - i))
                .collect(),
        };
        MetricsPage {
            count: self.total,
            prev_ts: current * MINUTE_MS,
            prev_count: self.total.saturating_sub(this_minute),
            data,
            len,
        }
    }

    fn count_at(&self, minute: u64) -> u64 {
        let i = self.minutes.partition_point(|(m, _)| *m < minute);
        match self.minutes.get(i) {
            Some((m, c)) if *m == minute => *c,
            _ => 0,
        }
    }
}

/// Redis's `LRANGE` indexes over a list of `len`: the inclusive range, or `None` when empty.
fn lrange(start: i64, end: i64, len: u64) -> Option<(u64, u64)> {
    let len = i64::try_from(len).unwrap_or(i64::MAX);
    let start = if start < 0 {
        (len + start).max(0)
    } else {
        start
    };
    let end = if end < 0 { len + end } else { end.min(len - 1) };
    (start <= end && start < len && end >= 0).then_some((start as u64, end as u64))
}

/// A histogram with fixed bucket bounds (`le`, inclusive), as Prometheus exposes one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Histogram {
    bounds: &'static [u64],
    /// One count per bound, and one above the last.
    counts: Vec<u64>,
    sum: u64,
}

impl Histogram {
    /// An empty histogram over `bounds` (ascending).
    pub fn new(bounds: &'static [u64]) -> Histogram {
        Histogram {
            bounds,
            counts: vec![0; bounds.len() + 1],
            sum: 0,
        }
    }

    /// Counts one observation of `value`.
    pub fn observe(&mut self, value: u64) {
        let i = self.bounds.partition_point(|b| *b < value);
        self.counts[i] += 1;
        self.sum = self.sum.saturating_add(value);
    }

    /// Adds another histogram over the same bounds.
    pub fn merge(&mut self, other: &Histogram) {
        debug_assert_eq!(self.bounds, other.bounds);
        for (c, o) in self.counts.iter_mut().zip(&other.counts) {
            *c += o;
        }
        self.sum = self.sum.saturating_add(other.sum);
    }

    /// The bounds, ascending.
    pub fn bounds(&self) -> &'static [u64] {
        self.bounds
    }

    /// Cumulative counts: one per bound, then the total (`+Inf`).
    pub fn cumulative(&self) -> Vec<u64> {
        self.counts
            .iter()
            .scan(0u64, |acc, c| {
                *acc += c;
                Some(*acc)
            })
            .collect()
    }

    /// How many observations.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The sum of the observations.
    pub fn sum(&self) -> u64 {
        self.sum
    }
}

/// What this engine saw finish on one queue since it opened (Prometheus's counters: they start
/// at 0 with each process, as counters do).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FinishStats {
    /// Jobs completed.
    pub completed: u64,
    /// Jobs failed for good (not the attempts that were retried).
    pub failed: u64,
    /// Their processing times, ms.
    pub processing_ms: Histogram,
}

impl FinishStats {
    /// A job finished at `at` (ms): completed, or failed for good. It started at `processed_on`.
    pub fn finished(&mut self, completed: bool, at: u64, processed_on: u64) {
        if completed {
            self.completed += 1;
        } else {
            self.failed += 1;
        }
        self.processing_ms.observe(at.saturating_sub(processed_on));
    }
}

impl Default for FinishStats {
    fn default() -> FinishStats {
        FinishStats {
            completed: 0,
            failed: 0,
            processing_ms: Histogram::new(PROCESSING_BOUNDS_MS),
        }
    }
}

/// A queue's metrics: BullMQ's per-minute series (recorded once a Worker asks for them, for
/// `points` minutes) and the engine's own totals (always).
#[derive(Debug, Clone, Default)]
pub struct QueueMetrics {
    /// `maxDataPoints`: the most any Worker of the queue asked for; 0: not recorded.
    pub points: u32,
    pub completed: MinuteSeries,
    pub failed: MinuteSeries,
    pub stats: FinishStats,
}

impl QueueMetrics {
    /// A job finished at `at` (ms): completed, or failed for good. It started at `processed_on`.
    pub fn finished(&mut self, completed: bool, at: u64, processed_on: u64) {
        self.stats.finished(completed, at, processed_on);
        if self.points > 0 {
            let series = if completed {
                &mut self.completed
            } else {
                &mut self.failed
            };
            series.record(at, 1, self.points);
        }
    }

    /// A Worker asks for `points` minutes (`metrics.maxDataPoints`); the most asked for wins.
    pub fn keep_points(&mut self, points: u32) {
        self.points = self.points.max(points);
    }
}

#[cfg(test)]
#[path = "metrics_tests.rs"]
mod tests;
