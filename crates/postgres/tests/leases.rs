//! Leases: renewal keeps a job, an expired lease makes it stalled (back to the head of waiting,
//! no attempt spent, its old token worthless), and past `maxStalledCount` it fails with BullMQ's
//! reason. Leases expire by the database clock; the tests move `lease_until` into the past
//! instead of sleeping.

mod support;

use ferroqueue_postgres::jobs::Statements;
use ferroqueue_postgres::leases::{Lease, LeaseStatements, Stalled, STALLED_TOO_OFTEN};
use ferroqueue_postgres::schema::migrate;
use ferroqueue_postgres::Target;
use tokio_postgres::Client;

use support::ready_row as row;

async fn expire(c: &Client, t: &Target, key: i64) {
    let s = t.schema();
    c.execute(
        &format!("UPDATE {s}.jobs SET lease_until = now() - interval '1 second' WHERE key = $1"),
        &[&key],
    )
    .await
    .expect("expire the lease");
}

fn lease(key: i64, token: i64) -> Lease {
    Lease {
        queue: "q".into(),
        key,
        token,
        lease_ms: 30_000,
    }
}

#[tokio::test]
async fn an_expired_lease_stalls_its_job_and_past_the_limit_it_fails() {
    let Some((t, mut c)) = support::fresh("leases").await else {
        return;
    };
    migrate(&mut c, &t).await.expect("schema");
    let st = Statements::prepare(&c, &t).await.expect("prepared");
    let ls = LeaseStatements::prepare(&c, &t).await.expect("prepared");
    st.add_bulk(&c, &t, "q", &[row("a"), row("b"), row("c")])
        .await
        .expect("added");
    let got = st.claim(&c, &t, "q", 2, 30_000).await.expect("claimed");
    let (a, b) = (&got[0], &got[1]);
    assert_eq!((&*a.job.name, &*b.job.name), ("a", "b"));
    expire(&c, &t, a.key).await;
    expire(&c, &t, b.key).await;
    // b's holder renews in time; a's does not.
    let held = ls
        .renew(&c, &t, &[lease(b.key, b.token)])
        .await
        .expect("renewed");
    assert_eq!(held, vec![("q".to_string(), b.key)]);
    let swept = ls.sweep(&c, &t, 100, 1).await.expect("swept");
    let stalled = Stalled {
        queue: "q".into(),
        key: a.key,
        failed: false,
        id: None,
        opts: None,
    };
    assert_eq!(swept, vec![stalled]);
    // QueueEvents hear it: `stalled`, then `waiting` from `active`.
    let events: Vec<(String, String)> = c
        .query(
            &format!(
                "SELECT event, payload FROM {}.events WHERE event IN ('stalled', 'waiting') \
                 AND payload LIKE '%\"prev\"%' OR event = 'stalled' ORDER BY id",
                t.schema()
            ),
            &[],
        )
        .await
        .expect("events")
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let id = a.key.to_string();
    assert_eq!(
        events,
        vec![
            ("stalled".into(), format!(r#"[{{"id" : "{id}"}}]"#)),
            (
                "waiting".into(),
                format!(r#"[{{"id" : "{id}", "prev" : "active"}}]"#)
            ),
        ]
    );
    assert!(ls.sweep(&c, &t, 100, 1).await.expect("again").is_empty());
    // a's old holder has lost it: its ack and its renewal change nothing.
    let late = st
        .complete(&c, &t, "q", &[a.completed("1")])
        .await
        .expect("acked");
    assert!(late.is_empty(), "a stale token completes nothing");
    let renewed = ls
        .renew(&c, &t, &[lease(a.key, a.token)])
        .await
        .expect("renewed");
    assert!(renewed.is_empty());
    // Back at the head of waiting, with no attempt spent.
    let again = st.claim(&c, &t, "q", 10, 30_000).await.expect("claimed");
    let names: Vec<&str> = again.iter().map(|j| &*j.job.name).collect();
    assert_eq!(names, ["a", "c"]);
    assert_eq!(
        (again[0].job.attempts_made, again[0].job.attempts_started),
        (0, 2)
    );
    // Stalled a second time with maxStalledCount 1: failed, with BullMQ's reason.
    expire(&c, &t, a.key).await;
    let swept = ls.sweep(&c, &t, 100, 1).await.expect("swept");
    assert_eq!(swept.len(), 1);
    assert!(swept[0].failed, "{swept:?}");
    let s = t.schema();
    let r = c
        .query_one(
            &format!(
                "SELECT state, failed_reason, stalled_counter FROM {s}.finished WHERE key = $1"
            ),
            &[&a.key],
        )
        .await
        .expect("a finished row");
    let (state, reason, counter): (i16, String, i32) = (r.get(0), r.get(1), r.get(2));
    assert_eq!((state, reason.as_str(), counter), (5, STALLED_TOO_OFTEN, 2));
}
