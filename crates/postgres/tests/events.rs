//! The event feed is read in commit order: an event whose transaction commits late holds back
//! the later ones until it commits, and is never skipped.

mod support;

use ferroqueue_postgres::connect;
use ferroqueue_postgres::events::{Cursor, EventStatements};
use ferroqueue_postgres::schema::migrate;

#[tokio::test]
async fn a_late_commit_holds_later_events_back_and_is_never_skipped() {
    let Some((t, mut reader)) = support::fresh("events").await else {
        return;
    };
    migrate(&mut reader, &t).await.expect("schema");
    let ev = EventStatements::prepare(&reader, &t)
        .await
        .expect("prepared");
    let s = t.schema();
    let insert = format!("INSERT INTO {s}.events (queue, event, payload) VALUES ($1, $2, '{{}}')");
    let mut slow = connect(&t).await.expect("connect");
    let fast = connect(&t).await.expect("connect");
    // The slow writer's transaction starts first (older xid) and commits last.
    let tx = slow.transaction().await.expect("begin");
    tx.execute(&insert, &[&"q", &"first"])
        .await
        .expect("insert");
    fast.execute(&insert, &[&"q", &"second"])
        .await
        .expect("insert");
    fast.execute(&insert, &[&"other", &"elsewhere"])
        .await
        .expect("insert");
    let early = ev
        .read(&reader, &t, Cursor::default(), &["q"], 100)
        .await
        .expect("read");
    assert!(
        early.is_empty(),
        "nothing past a running transaction: {early:?}"
    );
    tx.commit().await.expect("commit");
    let all = ev
        .read(&reader, &t, Cursor::default(), &["q"], 100)
        .await
        .expect("read");
    let names: Vec<&str> = all.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(names, ["first", "second"], "commit order, this queue only");
    let after = ev
        .read(&reader, &t, all[0].at, &["q"], 100)
        .await
        .expect("read");
    assert_eq!(after.len(), 1);
    assert_eq!(after[0].event, "second");
    assert!(ev
        .read(&reader, &t, all[1].at, &["q"], 100)
        .await
        .expect("read")
        .is_empty());
    assert_eq!(ev.trim(&reader, &t, 3_600_000).await.expect("trim"), 0);
    assert_eq!(ev.trim(&reader, &t, -1_000).await.expect("trim"), 3);
}
