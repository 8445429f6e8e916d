//! The schema is created once, migrated idempotently under concurrency, and a newer or foreign
//! schema is refused untouched.

mod support;

use ferroqueue_postgres::schema::{migrate, VERSION};
use ferroqueue_postgres::{connect, Target};

#[tokio::test]
async fn creates_then_finds_the_current_version() {
    let Some((t, mut c)) = support::fresh("create").await else {
        return;
    };
    assert_eq!(migrate(&mut c, &t).await.expect("created"), 0);
    assert_eq!(migrate(&mut c, &t).await.expect("already there"), VERSION);
    let n: i64 = c
        .query_one(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = $1",
            &[&t.schema()],
        )
        .await
        .expect("count")
        .get(0);
    assert_eq!(
        n, 12,
        "meta, queues, jobs, finished, job_ids, events, dedup, groups, deps, schedulers, metrics, workers"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_starting_together_migrate_once() {
    let Some((t, _c)) = support::fresh("together").await else {
        return;
    };
    let mut tasks = Vec::new();
    for _ in 0..6 {
        let t = t.clone();
        tasks.push(tokio::spawn(async move {
            let mut c = connect(&t).await.expect("connect");
            migrate(&mut c, &t).await
        }));
    }
    let mut found = Vec::new();
    for task in tasks {
        found.push(task.await.expect("task").expect("migrated"));
    }
    found.sort_unstable();
    assert_eq!(found[0], 0, "one of them created it");
    assert!(found[1..].iter().all(|v| *v == VERSION), "{found:?}");
}

#[tokio::test]
async fn a_newer_schema_is_refused_untouched() {
    let Some((t, mut c)) = support::fresh("newer").await else {
        return;
    };
    migrate(&mut c, &t).await.expect("created");
    let s = t.schema();
    c.batch_execute(&format!("UPDATE {s}.meta SET version = {}", VERSION + 1))
        .await
        .expect("bump");
    let e = migrate(&mut c, &t).await.expect_err("newer refused");
    assert_eq!(e.code(), "ERR_STORAGE_VERSION");
    assert!(e.to_string().contains(&format!("schema {s}")), "{e}");
    let v: i32 = c
        .query_one(&format!("SELECT version FROM {s}.meta"), &[])
        .await
        .expect("read")
        .get(0);
    assert_eq!(v, VERSION + 1, "left untouched");
}

#[tokio::test]
async fn a_schema_with_other_tables_is_refused() {
    let Some((t, mut c)) = support::fresh("foreign").await else {
        return;
    };
    let s = t.schema();
    c.batch_execute(&format!(
        "CREATE SCHEMA {s}; CREATE TABLE {s}.jobs (id int)"
    ))
    .await
    .expect("a foreign schema");
    let e = migrate(&mut c, &t).await.expect_err("foreign refused");
    assert_eq!(e.code(), "ERR_STORAGE_FOREIGN");
    assert!(e.to_string().contains("jobs"), "{e}");
}

#[tokio::test]
async fn bad_targets_are_clear_errors() {
    let e = Target::new("redis://localhost:6379", None).expect_err("not PostgreSQL");
    assert_eq!(e.code(), "ERR_INVALID_OPTION");
    assert!(e.to_string().starts_with("connection "), "{e}");
    let e = Target::new("postgresql://u@h/db", Some("Bad-Name")).expect_err("bad schema");
    assert!(e.to_string().starts_with("schema "), "{e}");
    // A server that is not there: a clear error at once, without the password.
    let t = Target::new("postgresql://user:secret@127.0.0.1:1/db", None).expect("valid");
    let e = connect(&t).await.expect_err("nothing listens on port 1");
    assert_eq!(e.code(), "ERR_STORAGE_IO");
    let text = e.to_string();
    assert!(
        text.contains("127.0.0.1:1/db") && !text.contains("secret"),
        "{text}"
    );
}
