//! Job groups on PostgreSQL: claims from two connections at once never pass a group's
//! concurrency, take ungrouped jobs first and the groups in turn, each FIFO; the rows of groups
//! that hold nothing go, settings keep theirs; a job retried from `finished` is in its group again.

mod support;

use std::collections::HashMap;

use ferroqueue_engine::domain::groups::{GroupChange, GroupDefaults};
use ferroqueue_engine::domain::limits::WorkerLimits;
use ferroqueue_postgres::groups;
use ferroqueue_postgres::jobs::{Claimed, Completion, NewRow};
use ferroqueue_postgres::limits::claim_within;
use ferroqueue_postgres::pool::Conn;
use ferroqueue_postgres::schema::migrate;
use ferroqueue_postgres::Target;

fn row(name: &str, group: Option<&str>) -> NewRow {
    NewRow {
        opts: group.map(|g| format!(r#"{{"group":{{"id":"{g}"}}}}"#)),
        group: group.map(String::from),
        ..support::ready_row(name)
    }
}

async fn ready(name: &str, rows: &[NewRow]) -> Option<(Target, Conn, Conn)> {
    let (t, mut c) = support::fresh(name).await?;
    migrate(&mut c, &t).await.expect("schema");
    let (a, b) = (
        Conn::open(&t).await.expect("a"),
        Conn::open(&t).await.expect("b"),
    );
    a.jobs
        .add_bulk(&a.client, &t, "q", rows)
        .await
        .expect("added");
    Some((t, a, b))
}

fn names(c: &[Claimed]) -> Vec<String> {
    c.iter().map(|j| j.job.name.to_string()).collect()
}

async fn complete(c: &Conn, t: &Target, j: &Claimed) {
    let fin = Completion {
        key: j.key,
        token: j.token,
        returnvalue: "null".into(),
        keep: true,
    };
    c.jobs
        .complete(&c.client, t, "q", &[fin])
        .await
        .expect("ack");
}

#[tokio::test]
async fn ungrouped_first_then_groups_in_turn_each_fifo() {
    let rows = [
        row("a1", Some("A")),
        row("a2", Some("A")),
        row("a3", Some("A")),
        row("b1", Some("B")),
        row("u1", None),
    ];
    let Some((t, a, _b)) = ready("turns", &rows).await else {
        return;
    };
    // The plain claim takes nothing from a queue with groups.
    let plain = a.jobs.claim(&a.client, &t, "q", 10, 30_000).await;
    assert!(plain.expect("plain").is_empty());
    let w = claim_within(&a, &t, "q", 3, 30_000, &WorkerLimits::default())
        .await
        .expect("claims");
    assert_eq!(names(&w.claimed), ["u1", "a1", "b1"]);
    let w = claim_within(&a, &t, "q", 10, 30_000, &WorkerLimits::default())
        .await
        .expect("claims");
    assert_eq!(names(&w.claimed), ["a2", "a3"]);
}

#[tokio::test]
async fn two_connections_never_pass_a_groups_concurrency() {
    let rows: Vec<NewRow> = (0..30)
        .map(|i| row(&format!("j{i}"), Some(["x", "y", "z"][i % 3])))
        .collect();
    let Some((t, a, b)) = ready("serial", &rows).await else {
        return;
    };
    let one = WorkerLimits {
        rate: None,
        group: GroupDefaults {
            concurrency: Some(1),
            rate: None,
        },
        holder: 0,
        name: None,
    };
    let mut active: Vec<Claimed> = Vec::new();
    let mut done = 0;
    while done < 30 {
        let (x, y) = tokio::join!(
            claim_within(&a, &t, "q", 10, 30_000, &one),
            claim_within(&b, &t, "q", 10, 30_000, &one)
        );
        for w in [x.expect("a claims"), y.expect("b claims")] {
            active.extend(w.claimed);
        }
        let mut per: HashMap<String, usize> = HashMap::new();
        for j in &active {
            let g = j.job.group().map(|g| g.to_string()).unwrap_or_default();
            *per.entry(g).or_default() += 1;
        }
        assert!(per.values().all(|n| *n == 1), "{per:?}");
        assert!(!active.is_empty());
        let j = active.remove(0);
        complete(&a, &t, &j).await;
        done += 1;
    }
    // Every group is empty and has no settings: its row is gone at the next claim.
    let w = claim_within(&a, &t, "q", 10, 30_000, &one)
        .await
        .expect("claims");
    assert!(w.claimed.is_empty());
    let left: i64 = a
        .client
        .query_one(&format!("SELECT count(*) FROM {}.groups", t.schema()), &[])
        .await
        .expect("count")
        .get(0);
    assert_eq!(left, 0);
}

#[tokio::test]
async fn settings_are_kept_and_change_reports_what_changed() {
    let Some((t, a, _b)) = ready("settings", &[row("a1", Some("A"))]).await else {
        return;
    };
    assert!(groups::change(&a, &t, "q", "C", GroupChange::Paused(true))
        .await
        .expect("pause"));
    assert!(!groups::change(&a, &t, "q", "C", GroupChange::Paused(true))
        .await
        .expect("again"));
    assert!(
        !groups::change(&a, &t, "q", "D", GroupChange::Paused(false))
            .await
            .expect("resume a group never paused")
    );
    // A claim leaves the paused group's row, though it holds no job.
    let w = claim_within(&a, &t, "q", 10, 30_000, &WorkerLimits::default())
        .await
        .expect("claims");
    assert_eq!(names(&w.claimed), ["a1"]);
    let info = groups::info(&a, &t, "q", "C").await.expect("info");
    assert!(info.settings.paused);
    let info = groups::info(&a, &t, "q", "A").await.expect("info");
    assert_eq!((info.waiting, info.active), (0, 1));
}
