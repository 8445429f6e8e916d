//! The hot path's statements: bulk add, batched claims in BullMQ's order, lease fencing on
//! completion, no job claimed twice by concurrent claimers, paused queues, delayed promotion.

mod support;

use std::collections::HashSet;
use std::sync::Arc;

use ferroqueue_engine::domain::dlq::{parse_history, AttemptEnd};
use ferroqueue_postgres::jobs::{AddedRow, Completion, Failed, Failure, NewRow, Statements};
use ferroqueue_postgres::schema::migrate;
use ferroqueue_postgres::{connect, Target};
use tokio_postgres::Client;

fn row(name: &str, priority: i32, lifo: bool, delay: i64) -> NewRow {
    NewRow {
        name: name.into(),
        data: format!("{{\"n\":\"{name}\"}}"),
        opts: None,
        priority,
        delay,
        due_in: delay,
        lifo,
        timestamp: 1,
        custom_id: None,
        group: None,
    }
}

async fn ready(name: &str) -> Option<(Target, Client, Statements)> {
    let (t, mut c) = support::fresh(name).await?;
    migrate(&mut c, &t).await.expect("schema");
    let st = Statements::prepare(&c, &t).await.expect("prepared");
    Some((t, c, st))
}

/// The names of every job a claim of up to 10 takes from queue `q`, in claim order.
async fn claimed_names(st: &Statements, c: &Client, t: &Target) -> Vec<String> {
    let got = st.claim(c, t, "q", 10, 30_000).await.expect("claimed");
    got.into_iter().map(|j| j.job.name.to_string()).collect()
}

#[tokio::test]
async fn claims_follow_priority_then_admission_with_lifo_first() {
    let Some((t, c, st)) = ready("order").await else {
        return;
    };
    let rows = [
        row("p3", 3, false, 0),
        row("a", 0, false, 0),
        row("p1", 1, false, 0),
        row("b", 0, false, 0),
        row("l", 0, true, 0),
        row("p1b", 1, false, 0),
    ];
    let keys = st.add_bulk(&c, &t, "q", &rows).await.expect("added");
    let new = |k: Vec<i64>| k.into_iter().map(AddedRow::New).collect::<Vec<_>>();
    assert_eq!(keys, new(vec![1, 2, 3, 4, 5, 6]), "automatic ids in order");
    let more = st
        .add_bulk(&c, &t, "q", &[row("c", 0, false, 0)])
        .await
        .expect("added");
    assert_eq!(more, new(vec![7]));
    let got = st.claim(&c, &t, "q", 10, 30_000).await.expect("claimed");
    let names: Vec<&str> = got.iter().map(|j| &*j.job.name).collect();
    assert_eq!(names, ["l", "a", "b", "c", "p1", "p1b", "p3"]);
    assert!(got
        .iter()
        .all(|j| j.job.attempts_started == 1 && j.job.processed_on > 0));
    assert!(st
        .claim(&c, &t, "q", 10, 30_000)
        .await
        .expect("none")
        .is_empty());
}

#[tokio::test]
async fn a_stale_token_completes_nothing() {
    let Some((t, c, st)) = ready("fence").await else {
        return;
    };
    st.add_bulk(&c, &t, "q", &[row("a", 0, false, 0), row("b", 0, false, 0)])
        .await
        .expect("added");
    let got = st.claim(&c, &t, "q", 2, 30_000).await.expect("claimed");
    let done = [
        Completion {
            key: got[0].key,
            token: got[0].token,
            returnvalue: "42".into(),
            keep: true,
        },
        Completion {
            key: got[1].key,
            token: got[1].token + 1000,
            returnvalue: "null".into(),
            keep: true,
        },
    ];
    let completed = st.complete(&c, &t, "q", &done).await.expect("acked");
    assert_eq!(completed, vec![got[0].key]);
    let s = t.schema();
    let (state, rv): (i16, Option<String>) = {
        let r = c
            .query_one(
                &format!("SELECT state, returnvalue FROM {s}.finished WHERE key = $1"),
                &[&got[0].key],
            )
            .await
            .expect("finished row");
        (r.get(0), r.get(1))
    };
    assert_eq!((state, rv.as_deref()), (4, Some("42")));
    let active: i64 = c
        .query_one(
            &format!("SELECT count(*) FROM {s}.jobs WHERE state = 3"),
            &[],
        )
        .await
        .expect("count")
        .get(0);
    assert_eq!(active, 1, "the stale ack left its job active");
    let again = st.complete(&c, &t, "q", &done[..1]).await.expect("acked");
    assert!(
        again.is_empty(),
        "a second ack of the same activation is stale"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_claimers_never_share_a_job() {
    let Some((t, c, st)) = ready("skiplocked").await else {
        return;
    };
    let n = 2_000;
    let rows: Vec<NewRow> = (0..n).map(|i| row(&format!("j{i}"), 0, false, 0)).collect();
    for chunk in rows.chunks(500) {
        st.add_bulk(&c, &t, "q", chunk).await.expect("added");
    }
    let t = Arc::new(t);
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let t = t.clone();
        tasks.push(tokio::spawn(async move {
            let c = connect(&t).await.expect("connect");
            let st = Statements::prepare(&c, &t).await.expect("prepared");
            let mut mine = Vec::new();
            loop {
                let got = st.claim(&c, &t, "q", 50, 30_000).await.expect("claimed");
                if got.is_empty() {
                    return mine;
                }
                let done: Vec<Completion> = got.iter().map(|j| j.completed("null")).collect();
                let completed = st.complete(&c, &t, "q", &done).await.expect("acked");
                assert_eq!(completed.len(), got.len(), "every fresh token completes");
                mine.extend(completed);
            }
        }));
    }
    let mut seen = HashSet::new();
    for task in tasks {
        for key in task.await.expect("claimer") {
            assert!(seen.insert(key), "job {key} completed twice");
        }
    }
    assert_eq!(seen.len(), n);
}

#[tokio::test]
async fn paused_queues_give_nothing_and_due_delayed_jobs_become_ready() {
    let Some((t, c, st)) = ready("paused").await else {
        return;
    };
    let s = t.schema();
    st.add_bulk(
        &c,
        &t,
        "q",
        &[row("now", 0, false, 0), row("later", 2, false, 60_000)],
    )
    .await
    .expect("added");
    c.execute(
        &format!("UPDATE {s}.queues SET paused = true WHERE name = 'q'"),
        &[],
    )
    .await
    .expect("pause");
    assert!(st
        .claim(&c, &t, "q", 10, 30_000)
        .await
        .expect("paused")
        .is_empty());
    c.execute(
        &format!("UPDATE {s}.queues SET paused = false WHERE name = 'q'"),
        &[],
    )
    .await
    .expect("resume");
    assert!(st
        .promote_due(&c, &t, 100)
        .await
        .expect("none due")
        .is_empty());
    // Due now by the database's clock (no sleeping): its run-at moves into the past.
    c.execute(
        &format!("UPDATE {s}.jobs SET run_at = now() - interval '1 second' WHERE key = 2"),
        &[],
    )
    .await
    .expect("make it due");
    let promoted = st.promote_due(&c, &t, 100).await.expect("promoted");
    assert_eq!(promoted, vec![("q".to_string(), 2)]);
    let names = claimed_names(&st, &c, &t).await;
    assert_eq!(
        names,
        ["now", "later"],
        "the promoted job keeps its priority"
    );
}

#[tokio::test]
async fn a_promoted_job_goes_to_the_back_of_its_priority() {
    let Some((t, c, st)) = ready("promoted").await else {
        return;
    };
    let s = t.schema();
    // A delayed lifo job added first: once due it still queues behind the jobs already waiting.
    st.add_bulk(
        &c,
        &t,
        "q",
        &[row("delayed", 0, true, 60_000), row("a", 0, false, 0)],
    )
    .await
    .expect("added");
    c.execute(
        &format!("UPDATE {s}.jobs SET run_at = now() - interval '1 second' WHERE key = 1"),
        &[],
    )
    .await
    .expect("make it due");
    assert_eq!(
        st.promote_due(&c, &t, 100).await.expect("promoted").len(),
        1
    );
    st.add_bulk(&c, &t, "q", &[row("b", 0, false, 0)])
        .await
        .expect("added");
    let names = claimed_names(&st, &c, &t).await;
    assert_eq!(names, ["a", "delayed", "b"]);
}

#[tokio::test]
async fn failures_retry_now_later_or_for_good_and_keep_ten_stack_traces() {
    let Some((t, c, st)) = ready("failures").await else {
        return;
    };
    let s = t.schema();
    let rows = [
        row("now", 0, false, 0),
        row("later", 0, false, 0),
        row("never", 0, false, 0),
    ];
    st.add_bulk(&c, &t, "q", &rows).await.expect("added");
    let got = st.claim(&c, &t, "q", 3, 30_000).await.expect("claimed");
    st.add_bulk(&c, &t, "q", &[row("waiting", 0, false, 0)])
        .await
        .expect("added");
    let fail = |i: usize, retry_in: Option<i64>| Failure {
        key: got[i].key,
        token: got[i].token,
        reason: format!("boom {i}"),
        stack: Some(format!("at line {i}")),
        retry_in,
        exhausted: retry_in.is_none(),
        keep: true,
        kind: AttemptEnd::Error,
    };
    let mut stale = fail(0, Some(0));
    stale.token += 1000;
    let out = st
        .fail(
            &c,
            &t,
            "q",
            &[
                fail(0, Some(0)),
                fail(1, Some(60_000)),
                fail(2, None),
                stale,
            ],
        )
        .await
        .expect("failed");
    assert_eq!(out.len(), 3, "the stale failure changed nothing: {out:?}");
    assert!(out.contains(&Failed::Retrying(got[0].key)));
    assert!(out.contains(&Failed::Retrying(got[1].key)));
    assert!(out.contains(&Failed::Final(got[2].key)));
    let r = c
        .query_one(
            &format!("SELECT state, failed_reason, stacktrace, attempts_made FROM {s}.finished"),
            &[],
        )
        .await
        .expect("the final failure is finished");
    let (state, reason, stack, made): (i16, String, String, i32) =
        (r.get(0), r.get(1), r.get(2), r.get(3));
    assert_eq!(
        (state, reason.as_str(), stack.as_str(), made),
        (5, "boom 2", r#"["at line 2"]"#, 1)
    );
    let history: String = c
        .query_one(&format!("SELECT history FROM {s}.finished"), &[])
        .await
        .expect("its history")
        .get(0);
    let history = parse_history(&history);
    assert_eq!(history.len(), 1);
    assert!(history[0].last);
    assert_eq!(&*history[0].error, "boom 2");
    let delayed: i16 = c
        .query_one(
            &format!("SELECT state FROM {s}.jobs WHERE key = $1"),
            &[&got[1].key],
        )
        .await
        .expect("the delayed retry")
        .get(0);
    assert_eq!(delayed, 2);
    // Retried at once: behind the job that was already waiting.
    let again = st.claim(&c, &t, "q", 10, 30_000).await.expect("claimed");
    let names: Vec<&str> = again.iter().map(|j| &*j.job.name).collect();
    assert_eq!(names, ["waiting", "now"]);
    // Eleven more failures of one job keep its newest ten stack traces.
    let mut job = again[1].clone();
    for n in 0..11 {
        let f = Failure {
            key: job.key,
            token: job.token,
            reason: "again".into(),
            stack: Some(format!("trace {n}")),
            retry_in: Some(0),
            exhausted: false,
            keep: true,
            kind: AttemptEnd::Timeout,
        };
        st.fail(&c, &t, "q", &[f]).await.expect("failed");
        if n < 10 {
            job = st.claim(&c, &t, "q", 1, 30_000).await.expect("claimed")[0].clone();
        }
    }
    let stack: String = c
        .query_one(
            &format!("SELECT stacktrace FROM {s}.jobs WHERE key = $1"),
            &[&got[0].key],
        )
        .await
        .expect("its row")
        .get(0);
    let traces: Vec<String> = (1..11).map(|n| format!("\"trace {n}\"")).collect();
    assert_eq!(stack, format!("[{}]", traces.join(", ")));
    // Each failure is an attempt of its history, none of them final (all retried).
    let history: String = c
        .query_one(
            &format!("SELECT history FROM {s}.jobs WHERE key = $1"),
            &[&got[0].key],
        )
        .await
        .expect("its row")
        .get(0);
    let history = parse_history(&history);
    assert_eq!(history.len(), 12, "{history:?}");
    assert!(history.iter().all(|a| !a.last));
    assert_eq!(history[0].kind, AttemptEnd::Error);
    assert_eq!(history[11].kind, AttemptEnd::Timeout);
    assert_eq!(history[11].attempt, 12);
}

/// A claim walks the ready index in its order and stops at its limit, whatever ANALYZE last
/// saw: here it saw none of the queue's jobs (the plan a prepared claim gets).
#[tokio::test]
async fn a_claim_walks_the_ready_index_whatever_analyze_saw() {
    let Some((t, c, st)) = ready("plan").await else {
        return;
    };
    let s = t.schema();
    // ANALYZE sees only another queue's jobs: to the planner, "q" is a rare value.
    let rows: Vec<NewRow> = (0..20_000).map(|_| row("j", 0, false, 0)).collect();
    st.add_bulk(&c, &t, "other", &rows).await.expect("added");
    c.batch_execute(&format!("ANALYZE {s}.jobs; DELETE FROM {s}.jobs"))
        .await
        .expect("analyzed");
    st.add_bulk(&c, &t, "q", &rows).await.expect("added");
    // Costs that favour reading the whole queue (random reads dear): the plan must not change.
    c.batch_execute("SET random_page_cost = 1000")
        .await
        .expect("costs");
    c.batch_execute(&format!(
        "PREPARE candidates(text, int8) AS
         SELECT ctid FROM {s}.jobs WHERE queue = $1 AND state IN (0, 1) AND group_id = ''
         ORDER BY priority, ord LIMIT $2 FOR UPDATE SKIP LOCKED"
    ))
    .await
    .expect("prepared");
    let mut plan = String::new();
    for m in c
        .simple_query("EXPLAIN EXECUTE candidates('q', 50)")
        .await
        .expect("explained")
    {
        if let tokio_postgres::SimpleQueryMessage::Row(r) = m {
            plan.push_str(r.get(0).unwrap_or_default());
            plan.push('\n');
        }
    }
    assert!(plan.contains("Index Scan using jobs_ready"), "{plan}");
    assert!(!plan.contains("Sort") && !plan.contains("Bitmap"), "{plan}");
    let got = st.claim(&c, &t, "q", 50, 30_000).await.expect("claimed");
    assert_eq!(got.len(), 50);
}

#[tokio::test]
async fn jobs_given_back_lead_waiting_in_order_and_unstarted_ones_count_no_start() {
    let Some((t, c, st)) = ready("release").await else {
        return;
    };
    let rows = [
        row("a", 0, false, 0),
        row("b", 0, false, 0),
        row("c", 0, false, 0),
    ];
    st.add_bulk(&c, &t, "q", &rows).await.expect("added");
    let got = st.claim(&c, &t, "q", 3, 30_000).await.expect("claimed");
    // Given back last first (as the worker does): each goes to the head of waiting.
    let back: Vec<(i64, i64, bool)> = got
        .iter()
        .rev()
        .map(|j| (j.key, j.token, j.job.name.as_ref() != "b"))
        .collect();
    let keys = st
        .acks
        .release(&c, &t, "q", &back)
        .await
        .expect("given back");
    assert_eq!(keys.len(), 3);
    let again = st
        .claim(&c, &t, "q", 3, 30_000)
        .await
        .expect("claimed again");
    let seen: Vec<(&str, u32)> = again
        .iter()
        .map(|j| (&*j.job.name, j.job.attempts_started))
        .collect();
    assert_eq!(seen, [("a", 2), ("b", 1), ("c", 2)]);
}

#[tokio::test]
async fn a_claim_that_takes_the_last_ready_jobs_writes_drained() {
    let Some((t, c, st)) = ready("drained").await else {
        return;
    };
    let rows = [
        row("a", 0, false, 0),
        row("b", 1, false, 0),
        row("c", 0, false, 0),
    ];
    st.add_bulk(&c, &t, "q", &rows).await.expect("added");
    let s = t.schema();
    let drained = || async {
        let n: i64 = c
            .query_one(
                &format!("SELECT count(*) FROM {s}.events WHERE event = 'drained'"),
                &[],
            )
            .await
            .expect("count")
            .get(0);
        n
    };
    assert_eq!(
        st.claim(&c, &t, "q", 2, 30_000)
            .await
            .expect("claimed")
            .len(),
        2
    );
    assert_eq!(drained().await, 0, "a prioritized job is still ready");
    assert_eq!(
        st.claim(&c, &t, "q", 2, 30_000)
            .await
            .expect("claimed")
            .len(),
        1
    );
    assert_eq!(drained().await, 1);
    assert!(st
        .claim(&c, &t, "q", 2, 30_000)
        .await
        .expect("none")
        .is_empty());
    assert_eq!(drained().await, 1, "an empty claim drains nothing");
}
