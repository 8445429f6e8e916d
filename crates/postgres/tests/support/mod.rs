//! Shared by the PostgreSQL tests: the test server's URL and a fresh schema per test.
//!
//! `scripts/test.sh` starts a server (`scripts/postgres.sh`) and sets
//! `FERROQUEUE_TEST_POSTGRES_URL` and `FERROQUEUE_REQUIRE_POSTGRES=1`; a plain `cargo test`
//! without a server skips these tests with a message, but `npm test` never does.

use ferroqueue_postgres::jobs::NewRow;
use ferroqueue_postgres::{connect, Target};
use tokio_postgres::Client;

/// The test server, `None` (after saying so) when there is none and none is required.
pub fn url() -> Option<String> {
    match std::env::var("FERROQUEUE_TEST_POSTGRES_URL") {
        Ok(u) if !u.is_empty() => Some(u),
        _ if std::env::var_os("FERROQUEUE_REQUIRE_POSTGRES").is_some() => {
            panic!("FERROQUEUE_REQUIRE_POSTGRES is set but FERROQUEUE_TEST_POSTGRES_URL is not")
        }
        _ => {
            eprintln!("skipped: no FERROQUEUE_TEST_POSTGRES_URL (scripts/test.sh starts a server)");
            None
        }
    }
}

/// A target in a schema of its own (dropped first if a previous run left it).
pub async fn fresh(name: &str) -> Option<(Target, Client)> {
    let url = url()?;
    let schema = format!("t_{name}_{}", std::process::id());
    let t = Target::new(&url, Some(&schema)).expect("a valid target");
    let c = connect(&t).await.expect("the test server answers");
    c.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .await
        .expect("drop an old schema");
    Some((t, c))
}

/// A ready job named `name` with an empty payload and no options.
#[allow(dead_code)] // not every test file adds jobs this way
pub fn ready_row(name: &str) -> NewRow {
    NewRow {
        name: name.into(),
        data: "{}".into(),
        opts: None,
        priority: 0,
        delay: 0,
        due_in: 0,
        lifo: false,
        timestamp: 1,
        custom_id: None,
        group: None,
    }
}
