//! Flows on PostgreSQL: the last two children of a parent finishing at once on two connections
//! (two processes) move the parent on exactly once; a failure rule fails the parent and its own
//! parent hears.

mod support;

use ferroqueue_engine::domain::flow::{ChildEnd, ChildRef, Notice, OnChildFailure};
use ferroqueue_postgres::flows;
use ferroqueue_postgres::jobs::{AddedRow, NewRow};
use ferroqueue_postgres::pool::Conn;
use ferroqueue_postgres::schema::migrate;
use ferroqueue_postgres::Target;

fn notice(parent: &str, child: &str, end: ChildEnd) -> Notice {
    Notice {
        queue: "p".into(),
        id: parent.into(),
        child: ChildRef {
            queue: "c".into(),
            id: child.into(),
        },
        end,
    }
}

/// A parent in `p` waiting for children "1" and "2" of `c`.
async fn ready(name: &str) -> Option<(Target, Conn, Conn)> {
    let (t, mut c) = support::fresh(name).await?;
    migrate(&mut c, &t).await.expect("schema");
    let (a, b) = (
        Conn::open(&t).await.expect("a"),
        Conn::open(&t).await.expect("b"),
    );
    let got = a
        .jobs
        .add_bulk(&a.client, &t, "p", &[support::ready_row("parent")])
        .await
        .expect("parent");
    let AddedRow::New(key) = got[0] else {
        panic!("{got:?}")
    };
    flows::wait_for_children(&a, &t, "p", &[key])
        .await
        .expect("waits");
    let kids: Vec<NewRow> = ["a", "b"].map(support::ready_row).to_vec();
    a.jobs
        .add_bulk(&a.client, &t, "c", &kids)
        .await
        .expect("kids");
    let children = ["1", "2"].map(|id| ChildRef {
        queue: "c".into(),
        id: id.into(),
    });
    flows::add_edges(&a, &t, "p", "1", &children)
        .await
        .expect("edges");
    Some((t, a, b))
}

async fn in_tx(c: &Conn, t: &Target, n: Notice) {
    c.client.batch_execute("BEGIN").await.expect("begin");
    flows::resolve(c, t, vec![n]).await.expect("resolve");
    c.client.batch_execute("COMMIT").await.expect("commit");
}

async fn parent_state(c: &Conn, t: &Target) -> i16 {
    let sql = format!("SELECT state FROM {}.jobs WHERE queue = 'p'", t.schema());
    c.client.query_one(&sql, &[]).await.map_or(-1, |r| r.get(0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_two_children_at_once_move_the_parent_on() {
    for round in 0..5 {
        let Some((t, a, b)) = ready(&format!("last{round}")).await else {
            return;
        };
        tokio::join!(
            in_tx(&a, &t, notice("1", "1", ChildEnd::Completed("1".into()))),
            in_tx(&b, &t, notice("1", "2", ChildEnd::Completed("2".into())))
        );
        assert_eq!(parent_state(&a, &t).await, 0, "waiting after both");
        let d = flows::dependencies(&a, &t, "p", "1")
            .await
            .expect("read")
            .expect("deps");
        assert_eq!((d.pending.len(), d.processed.len()), (0, 2));
    }
}

#[tokio::test]
async fn fail_parent_on_failure_fails_the_parent() {
    let Some((t, a, _b)) = ready("failparent").await else {
        return;
    };
    let end = ChildEnd::Failed("boom".into(), OnChildFailure::FailParent);
    in_tx(&a, &t, notice("1", "1", end)).await;
    assert_eq!(parent_state(&a, &t).await, -1, "left the jobs table");
    let sql = format!(
        "SELECT state, failed_reason FROM {}.finished WHERE queue = 'p'",
        t.schema()
    );
    let r = a.client.query_one(&sql, &[]).await.expect("finished");
    assert_eq!(r.get::<_, i16>(0), 5);
    assert_eq!(r.get::<_, String>(1), "child bull:c:1 failed");
}
