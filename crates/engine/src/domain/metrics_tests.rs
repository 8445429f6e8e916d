use super::*;
use proptest::prelude::*;

const M: u64 = MINUTE_MS;

#[test]
fn an_empty_series_answers_nothing() {
    let s = MinuteSeries::default();
    assert_eq!(s.page(10 * M, 60, 0, -1), MetricsPage::default());
}

#[test]
fn finished_minutes_read_newest_first_with_zeros_between() {
    let mut s = MinuteSeries::default();
    s.record(3 * M + 5, 1, 60);
    s.record(3 * M + 59_999, 1, 60);
    s.record(5 * M, 1, 60);
    s.record(7 * M + 1, 4, 60);
    let p = s.page(7 * M + 30_000, 60, 0, -1);
    // Minutes 6, 5, 4, 3; minute 7 is the current one.
    assert_eq!(p.data, vec![0, 1, 0, 2]);
    assert_eq!(p.len, 4);
    assert_eq!(p.count, 7);
    assert_eq!(p.prev_ts, 7 * M);
    assert_eq!(p.prev_count, 3);
    assert_eq!(s.page(7 * M, 60, 1, 2).data, vec![1, 0]);
    assert_eq!(s.page(7 * M, 60, -2, -1).data, vec![0, 2]);
    assert_eq!(s.page(7 * M, 60, 9, 20).data, Vec::<u64>::new());
}

#[test]
fn only_the_newest_max_points_minutes_are_kept() {
    let mut s = MinuteSeries::default();
    for minute in 0..100 {
        s.record(minute * M, 1, 10);
    }
    assert!(s.minutes.len() <= 11);
    let p = s.page(100 * M, 10, 0, -1);
    assert_eq!(p.data, vec![1; 10]);
    assert_eq!(p.len, 10);
    assert_eq!(p.count, 100);
}

#[test]
fn a_stored_series_reads_as_the_one_recorded() {
    let mut s = MinuteSeries::default();
    for (t, n) in [(3 * M, 2), (9 * M + 1, 1), (12 * M, 5)] {
        s.record(t, n, 5);
    }
    let stored = MinuteSeries::from_parts(8, Some(3), [(12, 5), (9, 1)], 5);
    assert_eq!(stored.page(14 * M, 5, 0, -1), s.page(14 * M, 5, 0, -1));
}

#[test]
fn histogram_buckets_are_inclusive_upper_bounds() {
    let mut h = Histogram::new(&[10, 100]);
    for v in [0, 10, 11, 100, 101, 5_000] {
        h.observe(v);
    }
    assert_eq!(h.cumulative(), vec![2, 4, 6]);
    assert_eq!(h.count(), 6);
    assert_eq!(h.sum(), 5_222);
    let mut twice = h.clone();
    twice.merge(&h);
    assert_eq!(twice.cumulative(), vec![4, 8, 12]);
}

#[test]
fn queue_metrics_count_always_and_record_minutes_once_asked() {
    let mut q = QueueMetrics::default();
    q.finished(true, 2 * M, 2 * M - 30);
    assert_eq!(q.stats.completed, 1);
    assert_eq!(q.completed.page(3 * M, 60, 0, -1).count, 0);
    q.keep_points(60);
    q.keep_points(5);
    assert_eq!(q.points, 60);
    q.finished(false, 2 * M, 2 * M - 3_000);
    assert_eq!(q.stats.failed, 1);
    assert_eq!(q.failed.page(3 * M, 60, 0, -1).data, vec![1]);
    assert_eq!(q.stats.processing_ms.cumulative()[1], 0); // 30 ms is above 10 ms
    assert_eq!(q.stats.processing_ms.count(), 2);
}

proptest! {
    /// Against a model that keeps every finish time: any order of finishes, any range.
    #[test]
    fn pages_match_a_model(
        times in prop::collection::vec(0u64..40 * M, 0..60),
        counts in prop::collection::vec(1u64..4, 60),
        extra in 0u64..5 * M,
        points in 1u32..50,
        start in -60i64..60,
        end in -60i64..60,
    ) {
        let mut s = MinuteSeries::default();
        let mut model: Vec<(u64, u64)> = Vec::new();
        for (t, n) in times.iter().zip(&counts) {
            s.record(*t, *n, points);
            model.push((*t / M, *n));
        }
        let now = times.iter().max().copied().unwrap_or(0) + extra;
        let current = now / M;
        let got = s.page(now, points, start, end);
        let total: u64 = model.iter().map(|(_, n)| n).sum();
        let Some(first) = model.iter().map(|(m, _)| *m).min() else {
            prop_assert_eq!(got, MetricsPage::default());
            return Ok(());
        };
        let len = (current - first).min(u64::from(points));
        let all: Vec<u64> = (0..len)
            .map(|i| model.iter().filter(|(m, _)| *m == current - 1 - i).map(|(_, n)| n).sum())
            .collect();
        // LRANGE by hand.
        let l = len as i64;
        let s0 = if start < 0 { (l + start).max(0) } else { start };
        let e0 = if end < 0 { l + end } else { end.min(l - 1) };
        let want: Vec<u64> = if s0 <= e0 && s0 < l && e0 >= 0 { all[s0 as usize..=e0 as usize].to_vec() } else { Vec::new() };
        let this_minute: u64 = model.iter().filter(|(m, _)| *m == current).map(|(_, n)| n).sum();
        prop_assert_eq!(got.data, want);
        prop_assert_eq!(got.len, len);
        prop_assert_eq!(got.count, total);
        prop_assert_eq!(got.prev_count, total - this_minute);
        prop_assert_eq!(got.prev_ts, current * M);
        prop_assert!(s.minutes.len() as u64 <= u64::from(points) + 1);
    }

    /// Cumulative counts against a model that sorts the observations.
    #[test]
    fn histogram_matches_a_model(values in prop::collection::vec(0u64..400_000, 0..100)) {
        let mut h = Histogram::new(PROCESSING_BOUNDS_MS);
        for v in &values {
            h.observe(*v);
        }
        let mut want: Vec<u64> = PROCESSING_BOUNDS_MS
            .iter()
            .map(|b| values.iter().filter(|v| **v <= *b).count() as u64)
            .collect();
        want.push(values.len() as u64);
        prop_assert_eq!(h.cumulative(), want);
        prop_assert_eq!(h.sum(), values.iter().sum::<u64>());
    }
}
