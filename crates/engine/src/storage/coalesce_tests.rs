//! Folding a group's writes must leave the file exactly as applying them one by one would.

use std::sync::Arc;

use proptest::prelude::*;
use rusqlite::Connection;

use super::apply::{apply, apply_writes};
use super::coalesce::{coalesce, Write};
use super::rows::{ExtraCols, JobRow, QueueRow, StateCols, StorageOp};
use super::schema::migrate;
use crate::domain::changes::EvictedOp;
use crate::domain::job::JobState;
use crate::domain::limits::{LimitSettings, RateLimit};

fn state(state: JobState, seq: u64) -> StateCols {
    StateCols {
        state,
        priority: (seq % 3) as u32,
        delay: 0,
        run_at: 0,
        ord: seq as i64,
        seq,
        processed_on: seq * 10,
        finished_on: seq * 20,
        attempts_made: (seq % 2) as u32,
        attempts_started: 1,
    }
}

fn extra(n: u64) -> Box<ExtraCols> {
    Box::new(ExtraCols {
        progress: Some(n.to_string().into()),
        returnvalue: n.is_multiple_of(2).then(|| format!("\"r{n}\"").into()),
        failed_reason: None,
        stacktrace: None,
        logs: n.is_multiple_of(3).then(|| format!("[\"l{n}\"]")),
        deps: None,
        stalled_counter: 0,
        processed_by: None,
        history: None,
    })
}

fn row(key: u64, seq: u64) -> Box<JobRow> {
    Box::new(JobRow {
        key,
        custom_id: None,
        name: Arc::from("job"),
        data: format!("{{\"k\":{key}}}").into(),
        opts: None,
        timestamp: seq,
        state: state(JobState::Waiting, seq),
        extra: *extra(seq),
    })
}

const STATES: [JobState; 4] = [
    JobState::Waiting,
    JobState::Active,
    JobState::Completed,
    JobState::Failed,
];

/// Builds one op from generated numbers; `n` makes every written value distinct.
fn op(kind: u8, queue: &Arc<str>, key: u64, n: u64) -> StorageOp {
    let q = queue.clone();
    match kind {
        0 | 1 => StorageOp::Insert(q, row(key, n)),
        2..=4 => StorageOp::State(q, key, state(STATES[(n % 4) as usize], n)),
        5 | 6 => StorageOp::Extra(q, key, extra(n)),
        7 => StorageOp::Data(q, key, format!("{{\"d\":{n}}}").into()),
        8 => StorageOp::Delete(q, key),
        9 => StorageOp::Queue(
            q,
            QueueRow {
                last_auto_id: n,
                custom_seq: 0,
                paused: n.is_multiple_of(2),
                limits: LimitSettings {
                    rate: n.is_multiple_of(3).then_some(RateLimit {
                        max: n as u32 + 1,
                        duration: 1_000,
                    }),
                    concurrency: n.is_multiple_of(5).then_some(n as u32),
                },
                dlq: Default::default(),
            },
        ),
        10 => StorageOp::Evicted(q, EvictedOp::Delete { key, reply: None }),
        11 => StorageOp::Evicted(
            q,
            EvictedOp::Trim {
                state: JobState::Completed,
                keep: n % 3,
                below_seq: n,
            },
        ),
        _ => StorageOp::Wipe(q),
    }
}

fn db() -> Connection {
    let c = Connection::open_in_memory().expect("in-memory database");
    migrate(&c, 0).expect("schema");
    c
}

fn dump(c: &Connection) -> Vec<String> {
    let mut out = Vec::new();
    for table in ["jobs", "queues"] {
        let mut stmt = c
            .prepare(&format!("SELECT * FROM {table} ORDER BY 1, 2"))
            .expect("select");
        let n = stmt.column_count();
        let mut rows = stmt.query([]).expect("query");
        while let Some(r) = rows.next().expect("row") {
            let cols: Vec<String> = (0..n)
                .map(|i| format!("{:?}", r.get_ref(i).expect("column")))
                .collect();
            out.push(format!("{table}: {}", cols.join("|")));
        }
    }
    out
}

#[test]
fn a_workers_three_writes_become_one_update() {
    let q: Arc<str> = Arc::from("q");
    let ops = vec![
        StorageOp::State(q.clone(), 1, state(JobState::Active, 1)),
        StorageOp::State(q.clone(), 2, state(JobState::Active, 2)),
        StorageOp::State(q.clone(), 1, state(JobState::Completed, 3)),
        StorageOp::Extra(q.clone(), 1, extra(4)),
    ];
    let out = coalesce(ops);
    assert_eq!(out.len(), 2);
    match &out[0] {
        Write::Update(u) => {
            assert_eq!(u.key, 1);
            assert_eq!(u.state, Some(state(JobState::Completed, 3)));
            assert_eq!(u.extra, Some(extra(4)));
        }
        other => panic!("expected an update, got {other:?}"),
    }
}

#[test]
fn changes_fold_into_a_row_inserted_in_the_same_group() {
    let q: Arc<str> = Arc::from("q");
    let out = coalesce(vec![
        StorageOp::Insert(q.clone(), row(7, 1)),
        StorageOp::State(q.clone(), 7, state(JobState::Active, 2)),
        StorageOp::Data(q.clone(), 7, "{\"new\":1}".into()),
    ]);
    assert_eq!(out.len(), 1);
    match &out[0] {
        Write::Op(StorageOp::Insert(_, r)) => {
            assert_eq!(r.state, state(JobState::Active, 2));
            assert_eq!(&*r.data, "{\"new\":1}");
        }
        other => panic!("expected the insert, got {other:?}"),
    }
}

#[test]
fn nothing_folds_across_a_delete_or_a_deleting_query() {
    let q: Arc<str> = Arc::from("q");
    let out = coalesce(vec![
        StorageOp::State(q.clone(), 1, state(JobState::Completed, 1)),
        StorageOp::Delete(q.clone(), 1),
        StorageOp::State(q.clone(), 1, state(JobState::Active, 2)),
        StorageOp::Wipe(q.clone()),
        StorageOp::State(q.clone(), 1, state(JobState::Failed, 3)),
    ]);
    assert_eq!(out.len(), 5);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn folded_writes_leave_the_same_file(
        groups in prop::collection::vec(
            prop::collection::vec((0u8..13, 0u64..6, any::<bool>()), 0..40),
            1..4,
        )
    ) {
        let one_by_one = db();
        let folded = db();
        let queues: [Arc<str>; 2] = [Arc::from("a"), Arc::from("b")];
        let mut n = 0;
        for group in groups {
            let mut raw = Vec::new();
            let mut fold = Vec::new();
            for (kind, key, second) in group {
                n += 1;
                let queue = &queues[usize::from(second)];
                raw.push(op(kind, queue, key, n));
                fold.push(op(kind, queue, key, n));
            }
            one_by_one.execute_batch("BEGIN").expect("begin");
            apply_writes(&one_by_one, raw.into_iter().map(Write::Op).collect()).expect("raw");
            one_by_one.execute_batch("COMMIT").expect("commit");
            folded.execute_batch("BEGIN").expect("begin");
            apply(&folded, fold).expect("folded");
            folded.execute_batch("COMMIT").expect("commit");
        }
        prop_assert_eq!(dump(&one_by_one), dump(&folded));
    }
}
