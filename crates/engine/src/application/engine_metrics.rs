//! Metrics of the embedded engine: BullMQ's per-minute counts of finished jobs, this engine's
//! totals and processing times, and the durable writer's commit latency. The counts are kept
//! by each queue as its jobs finish (`domain/metrics.rs`); here they are read.

use super::engine::Engine;
use crate::backend::QueueRef;
use crate::domain::metrics::{FinishStats, Histogram, MetricsPage};

impl Engine {
    /// Records BullMQ's per-minute counts of `q` for the newest `points` minutes.
    pub fn keep_metrics(&self, q: &QueueRef, points: u32) {
        self.with(q, |qs, _, _| qs.keep_metrics(points));
    }

    /// BullMQ's `getMetrics` of `q`: completed (or `failed`) jobs per minute, data points
    /// `start..=end`, at the engine's clock.
    pub fn metrics(&self, q: &QueueRef, failed: bool, start: i64, end: i64) -> MetricsPage {
        let now = self.now();
        self.read(q, |qs| {
            let m = qs.metrics();
            let series = if failed { &m.failed } else { &m.completed };
            series.page(now, m.points, start, end)
        })
        .unwrap_or_default()
    }

    /// What finished on `q` since this engine opened.
    pub fn finish_stats(&self, q: &QueueRef) -> FinishStats {
        self.read(q, |qs| qs.metrics().stats.clone())
            .unwrap_or_default()
    }

    /// The names of the engine's queues (`prefix:name`, or the name in the default namespace),
    /// sorted.
    pub fn queue_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .inner
            .shards
            .iter()
            .flat_map(|s| s.lock().names().map(|n| n.to_string()).collect::<Vec<_>>())
            .collect();
        names.sort_unstable();
        names
    }

    /// The durable writer's commit latency, µs; `None` in memory.
    pub fn commit_latency(&self) -> Option<Histogram> {
        self.inner.storage.as_ref().map(|s| s.commit_latency())
    }
}
