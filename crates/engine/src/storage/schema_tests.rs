//! The file format: migrating a version-1 file, and the queries by state using the partial index.

use rusqlite::Connection;

use super::apply::{DROP_EVICTED, TRIM_EVICTED};
use super::recovery::{finished_page, JOB_SELECT, NEWEST_FINISHED, OLD_CUSTOM_IDS};
use super::schema::{migrate, migrate_to, SCHEMA_VERSION};

fn plan(c: &Connection, sql: &str) -> String {
    let mut stmt = c
        .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    let unbound = vec![rusqlite::types::Null; stmt.parameter_count()];
    let rows = stmt
        .query_map(rusqlite::params_from_iter(unbound), |r| {
            r.get::<_, String>(3)
        })
        .expect("plan rows");
    rows.map(|r| r.expect("plan row"))
        .collect::<Vec<_>>()
        .join("; ")
}

#[test]
fn reads_and_deletes_by_state_use_the_finished_index() {
    let c = Connection::open_in_memory().expect("database");
    migrate(&c, 0).expect("schema");
    let newest = format!("{JOB_SELECT} {NEWEST_FINISHED}");
    let (asc, desc) = (finished_page("ASC"), finished_page("DESC"));
    for sql in [
        TRIM_EVICTED,
        DROP_EVICTED,
        &newest,
        OLD_CUSTOM_IDS,
        &asc,
        &desc,
    ] {
        let p = plan(&c, sql);
        assert!(p.contains("jobs_finished"), "{sql}\n  plan: {p}");
        assert!(!p.contains("SCAN jobs"), "{sql}\n  plan: {p}");
    }
}

#[test]
fn a_version_1_file_migrates_and_keeps_its_rows() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("v1.db");
    {
        let c = Connection::open(&path).expect("open");
        migrate_to(&c, 0, 1).expect("version 1");
        c.execute_batch(
            "INSERT INTO queues VALUES ('q', 2, 0, 0);
             INSERT INTO jobs (queue, key, name, data, state, priority, delay, timestamp, run_at,
               ord, seq, processed_on, finished_on, attempts_made, attempts_started, returnvalue)
             VALUES ('q', 1, 'a', '{\"n\":1}', 0, 0, 0, 5, 0, 1, 0, 0, 0, 0, 0, NULL),
                    ('q', 2, 'b', '{\"n\":2}', 4, 0, 0, 6, 0, 0, 1, 7, 8, 0, 1, '\"ok\"');",
        )
        .expect("rows");
    }
    let e = crate::Engine::new(crate::EngineConfig {
        timer: false,
        path: Some(path.clone()),
        ..crate::EngineConfig::new(crate::wire::test_json::wire())
    })
    .expect("opens and migrates");
    let q = e.queue_ref("q").expect("queue");
    assert_eq!(e.state(&q, "1"), "waiting");
    let done = e.job_json(&q, "2").expect("finished row");
    assert!(done.contains("\"returnvalue\":\"ok\""), "{done}");
    e.close();
    let c = Connection::open(&path).expect("reopen");
    let version: i64 = c
        .query_row("SELECT max(version) FROM ferroqueue_migrations", [], |r| {
            r.get(0)
        })
        .expect("version");
    assert_eq!(version, SCHEMA_VERSION);
    let indexes: Vec<String> = c
        .prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE 'jobs_%'")
        .expect("indexes")
        .query_map([], |r| r.get(0))
        .expect("rows")
        .map(|r| r.expect("name"))
        .collect();
    assert_eq!(indexes, ["jobs_finished"]);
}
