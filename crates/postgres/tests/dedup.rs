//! Deduplication on PostgreSQL: adds of one id from connections of different "processes" at
//! once make one job; the key is given up lazily when its job finishes (no window) or lives its
//! window; removal answers whether a live key went.

mod support;

use ferroqueue_engine::domain::dedup::Deduplication;
use ferroqueue_engine::Added;
use ferroqueue_postgres::dedup;
use ferroqueue_postgres::jobs::Completion;
use ferroqueue_postgres::pool::Conn;
use ferroqueue_postgres::schema::migrate;
use ferroqueue_postgres::Target;

fn d(ttl: Option<u64>) -> Option<Deduplication> {
    Some(Deduplication {
        id: "k".into(),
        ttl,
        extend: false,
        replace: false,
    })
}

async fn ready(name: &str) -> Option<(Target, Conn, Conn)> {
    let (t, mut c) = support::fresh(name).await?;
    migrate(&mut c, &t).await.expect("schema");
    let a = Conn::open(&t).await.expect("a");
    let b = Conn::open(&t).await.expect("b");
    Some((t, a, b))
}

#[tokio::test]
async fn adds_of_one_id_at_once_make_one_job() {
    let Some((t, a, b)) = ready("dd_race").await else {
        return;
    };
    for round in 0..10 {
        let id = format!("r{round}");
        let dd = Some(Deduplication {
            id: id.as_str().into(),
            ttl: None,
            extend: false,
            replace: false,
        });
        let x = [(support::ready_row("x"), dd.clone())];
        let y = [(support::ready_row("y"), dd)];
        let (rx, ry) = tokio::join!(dedup::add(&a, &t, "q", &x), dedup::add(&b, &t, "q", &y));
        let got = [rx.expect("a adds")[0], ry.expect("b adds")[0]];
        let new: Vec<_> = got.iter().filter(|g| matches!(g, Added::New(_))).collect();
        assert_eq!(new.len(), 1, "round {round}: {got:?}");
        let Added::New(key) = *new[0] else {
            unreachable!()
        };
        assert!(got.contains(&Added::Deduplicated(key)), "{got:?}");
        assert_eq!(
            dedup::holder(&a, &t, "q", &id).await.expect("read"),
            Some(key.to_string())
        );
    }
}

#[tokio::test]
async fn a_key_without_a_window_goes_with_its_job() {
    let Some((t, a, _b)) = ready("dd_finish").await else {
        return;
    };
    let first = dedup::add(&a, &t, "q", &[(support::ready_row("j"), d(None))])
        .await
        .expect("added");
    assert_eq!(first, [Added::New(1)]);
    let got = a
        .jobs
        .claim(&a.client, &t, "q", 1, 30_000)
        .await
        .expect("claimed");
    let again = dedup::add(&a, &t, "q", &[(support::ready_row("j"), d(None))])
        .await
        .expect("added");
    assert_eq!(again, [Added::Deduplicated(1)], "active still holds it");
    let done = Completion {
        key: got[0].key,
        token: got[0].token,
        returnvalue: "null".into(),
        keep: true,
    };
    a.jobs
        .complete(&a.client, &t, "q", &[done])
        .await
        .expect("completed");
    assert_eq!(dedup::holder(&a, &t, "q", "k").await.expect("read"), None);
    // The duplicate used up id 2.
    let next = dedup::add(&a, &t, "q", &[(support::ready_row("j"), d(Some(60_000)))])
        .await
        .expect("added");
    assert_eq!(next, [Added::New(3)]);
    assert!(!dedup::remove(&a, &t, "q", "k", Some("1"))
        .await
        .expect("not 1's"));
    assert!(dedup::remove(&a, &t, "q", "k", Some("3"))
        .await
        .expect("3's"));
    assert!(!dedup::remove(&a, &t, "q", "k", None).await.expect("gone"));
}
