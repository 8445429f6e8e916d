//! Raw throughput of the hot path's statements on a real server, to compare with the guide's
//! raw-SQL figures (docs/postgres.md): bulk inserts, and claim + complete at batch sizes 1 to
//! 500 on one connection (a round trip each, no pipelining yet).
//!
//!   eval "$(bash scripts/postgres.sh start)"
//!   cargo bench -p ferroqueue-postgres --bench statements
//!   bash scripts/postgres.sh stop "$PG_TEST_DIR"

use std::time::Instant;

use ferroqueue_postgres::jobs::{Completion, NewRow, Statements};
use ferroqueue_postgres::schema::migrate;
use ferroqueue_postgres::{connect, Target};

const PAYLOAD: &str = r#"{"user":"u-000123","email":"someone@example.com","plan":"pro","tags":["a","b","c"],"note":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}"#;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let Ok(url) = std::env::var("FERROQUEUE_TEST_POSTGRES_URL") else {
        eprintln!("set FERROQUEUE_TEST_POSTGRES_URL (scripts/postgres.sh start)");
        return;
    };
    let t = Target::new(&url, Some("bench_statements")).expect("target");
    let mut c = connect(&t).await.expect("connect");
    c.batch_execute("DROP SCHEMA IF EXISTS bench_statements CASCADE")
        .await
        .expect("drop");
    migrate(&mut c, &t).await.expect("schema");
    let st = Statements::prepare(&c, &t).await.expect("prepare");
    let row = |i: usize| NewRow {
        name: "job".into(),
        data: PAYLOAD.into(),
        opts: None,
        priority: 0,
        delay: 0,
        due_in: 0,
        lifo: false,
        timestamp: i as i64,
        custom_id: None,
        group: None,
    };
    println!("| work | jobs/s |\n| --- | ---: |");
    for &(batch, n) in &[(100usize, 50_000usize), (1_000, 100_000)] {
        let rows: Vec<NewRow> = (0..batch).map(row).collect();
        let q = format!("add{batch}");
        let t0 = Instant::now();
        for _ in 0..n / batch {
            st.add_bulk(&c, &t, &q, &rows).await.expect("add");
        }
        let rate = n as f64 / t0.elapsed().as_secs_f64();
        println!("| addBulk, {batch} rows a statement | {rate:.0} |");
    }
    for &(batch, n) in &[
        (1usize, 2_000usize),
        (10, 10_000),
        (100, 50_000),
        (500, 100_000),
    ] {
        let q = format!("cycle{batch}");
        let rows: Vec<NewRow> = (0..1_000).map(row).collect();
        for _ in 0..n / 1_000 {
            st.add_bulk(&c, &t, &q, &rows).await.expect("add");
        }
        c.batch_execute("VACUUM ANALYZE bench_statements.jobs")
            .await
            .expect("vacuum");
        let t0 = Instant::now();
        let (mut done, mut claiming) = (0, std::time::Duration::ZERO);
        while done < n {
            let tc = Instant::now();
            let got = st
                .claim(&c, &t, &q, batch as i64, 30_000)
                .await
                .expect("claim");
            claiming += tc.elapsed();
            let acks: Vec<Completion> = got.iter().map(|j| j.completed("null")).collect();
            done += st
                .complete(&c, &t, &q, &acks)
                .await
                .expect("complete")
                .len();
        }
        let all = t0.elapsed();
        let rate = n as f64 / all.as_secs_f64();
        let share = 100.0 * claiming.as_secs_f64() / all.as_secs_f64();
        println!(
            "| claim + complete, batch {batch} (claims {share:.0} % of the time) | {rate:.0} |"
        );
    }
    if std::env::var_os("FERROQUEUE_BENCH_KEEP").is_none() {
        c.batch_execute("DROP SCHEMA bench_statements CASCADE")
            .await
            .expect("drop");
    }
}
