//! `clean` of finished jobs walks the finished set from its oldest end (finish times never go
//! back within a queue): checked against a model that sorts every finished job.

use proptest::prelude::*;

use super::*;

/// Completes one job per entry of `finish_at` (the clock at each completion, which may go
/// back), then cleans with `grace` at `now` and `limit`; answers the cleaned ids and, from the
/// model, the ids that should be: finished before `now - grace` by their recorded finish time,
/// oldest first, at most `limit`.
fn clean_vs_model(
    finish_at: &[u64],
    grace: u64,
    now: u64,
    limit: usize,
) -> (Vec<String>, Vec<String>) {
    let mut q = queue();
    for _ in finish_at {
        add(&mut q, "{}", T0);
    }
    for &at in finish_at {
        run_one(&mut q, ok(), None, at);
    }
    let mut model: Vec<(u64, u64, String)> = (1..=finish_at.len())
        .map(|i| {
            let j = json(&q, &i.to_string());
            (j["finishedOn"].as_u64().unwrap(), i as u64, i.to_string())
        })
        .collect();
    model.sort();
    let cutoff = now.saturating_sub(grace);
    let want: Vec<String> = model
        .into_iter()
        .filter(|(f, _, _)| *f < cutoff)
        .map(|(_, _, id)| id)
        .take(if limit == 0 { usize::MAX } else { limit })
        .collect();
    let got = q.clean(
        grace,
        limit,
        StateFilter::parse("completed").unwrap(),
        now,
        &mut Effects::default(),
    );
    (got, want)
}

#[test]
fn a_clock_that_goes_back_does_not_reorder_finished_jobs() {
    let (got, want) = clean_vs_model(&[T0 + 100, T0 + 50, T0 + 200], 0, T0 + 150, 0);
    // The second job finished "at" T0 + 100 (the clock went back): it is as old as the first.
    assert_eq!(got, strs(&["1", "2"]));
    assert_eq!(got, want);
}

proptest! {
    #[test]
    fn clean_removes_exactly_the_old_finished_jobs(
        steps in proptest::collection::vec(0u64..50, 1..60),
        back in proptest::collection::vec(any::<bool>(), 60),
        grace in 0u64..500,
        now_after in 0u64..800,
        limit in 0usize..10,
    ) {
        // A clock that mostly moves on, sometimes back.
        let mut t = T0 + 1_000;
        let finish_at: Vec<u64> = steps
            .iter()
            .zip(back.iter())
            .map(|(&d, &b)| {
                t = if b { t - d } else { t + d };
                t
            })
            .collect();
        let (got, want) = clean_vs_model(&finish_at, grace, T0 + 1_000 + now_after, limit);
        prop_assert_eq!(got, want);
    }
}

#[test]
fn retry_finished_moves_the_oldest_batch_before_the_cut() {
    let mut q = queue();
    for _ in 0..5 {
        add(&mut q, r#"{"attempts":1}"#, T0);
    }
    for i in 0..5 {
        run_one(&mut q, fail(), None, T0 + i * 10);
    }
    let failed = StateFilter::parse("failed").unwrap();
    let mut fx = Effects::default();
    // Finished before T0 + 35: jobs 1..=4; two per batch.
    assert_eq!(q.retry_finished(JobState::Failed, T0 + 35, 2, &mut fx), 2);
    assert_eq!(q.retry_finished(JobState::Failed, T0 + 35, 2, &mut fx), 2);
    assert_eq!(q.retry_finished(JobState::Failed, T0 + 35, 2, &mut fx), 0);
    assert_eq!(q.count_of(failed), 1);
    assert_eq!(take_ids(&mut q, 10, T0 + 50), strs(&["1", "2", "3", "4"]));
    // Completed jobs are not failed ones.
    assert_eq!(
        q.retry_finished(JobState::Completed, u64::MAX, 10, &mut fx),
        0
    );
}

#[test]
fn promote_delayed_moves_the_earliest_due_first() {
    let mut q = queue();
    add(&mut q, r#"{"delay":300}"#, T0);
    add(&mut q, r#"{"delay":100}"#, T0);
    add(&mut q, r#"{"delay":200}"#, T0);
    let mut fx = Effects::default();
    assert_eq!(q.promote_delayed(2, &mut fx), 2);
    assert_eq!(counts(&q), "waiting=2 delayed=1");
    assert_eq!(take_ids(&mut q, 10, T0), strs(&["2", "3"]));
    assert_eq!(q.promote_delayed(5, &mut fx), 1);
    assert_eq!(json(&q, "1")["delay"].as_u64(), Some(0));
}
