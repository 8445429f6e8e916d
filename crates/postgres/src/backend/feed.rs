//! Hints and events from the database. One connection listens for the triggers' `NOTIFY`
//! hints (jobs ready in a queue, a delayed job added, events written) and wakes whoever waits
//! for them; after a reconnect it wakes everyone, since hints sent meanwhile are lost. The feed
//! reader pages the `events` table in commit order (`events.rs`) for the queues that have
//! listeners and hands the events to the binding.
//!
//! An event row holds one statement's batch: a JSON array of one object per job (`[]` for
//! queue-wide events). [`expand`] turns a row into the engine's [`Event`]s, the ones the
//! embedded engine emits for the same change.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use ferroqueue_engine::domain::event::{Event, EventKind};
use serde_json::Value;
use tokio_postgres::AsyncMessage;

use super::Shared;
use crate::connect::connect_driven;
use crate::events::{Cursor, EventRow};

/// Waits after a failed connection before trying again.
const RETRY: Duration = Duration::from_millis(500);

/// Events read per statement.
const PAGE: i64 = 1_000;

/// Listens for hints until the backend closes, reconnecting as needed.
pub(super) async fn listen(s: Arc<Shared>) {
    let sch = s.target().schema().to_string();
    let (ready, delayed, events) = (
        format!("{sch}_ready"),
        format!("{sch}_delayed"),
        format!("{sch}_events"),
    );
    while !s.closed.load(Ordering::Acquire) {
        if s.pool.migrated().await.is_err() {
            tokio::time::sleep(RETRY).await;
            continue;
        }
        let Ok((client, mut conn)) = connect_driven(s.target()).await else {
            tokio::time::sleep(RETRY).await;
            continue;
        };
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let driver = tokio::spawn(async move {
            while let Some(Ok(m)) = std::future::poll_fn(|cx| conn.poll_message(cx)).await {
                if let AsyncMessage::Notification(n) = m {
                    if tx.send(n).is_err() {
                        break;
                    }
                }
            }
        });
        let sql = format!("LISTEN {ready}; LISTEN {delayed}; LISTEN {events}");
        if client.batch_execute(&sql).await.is_ok() {
            // Hints sent while no one listened are lost: everyone looks again.
            s.wake_all();
            s.feed.notify_one();
            s.upkeep.notify_one();
            while let Some(n) = rx.recv().await {
                let channel = n.channel();
                if channel == ready {
                    s.wake(n.payload());
                } else if channel == delayed {
                    s.upkeep.notify_one();
                } else if channel == events {
                    s.feed.notify_one();
                }
            }
        }
        driver.abort();
        drop(client);
        if !s.closed.load(Ordering::Acquire) {
            tokio::time::sleep(RETRY).await;
        }
    }
}

/// The feed reader: reads the events of queues with listeners, after each hint (and every
/// 200 ms, for rows held back behind a transaction still open at the last read).
pub(super) async fn read(s: Arc<Shared>) {
    let mut cursor: Option<Cursor> = None;
    while !s.closed.load(Ordering::Acquire) {
        let wanted = s.subs_wanted.load(Ordering::Acquire);
        let queues: Vec<String> = s.listeners.lock().keys().map(|q| q.to_string()).collect();
        if queues.is_empty() {
            cursor = None;
            s.subs_ready.send_replace(wanted);
            let _ = tokio::time::timeout(Duration::from_secs(1), s.feed.notified()).await;
            continue;
        }
        let Ok(c) = s.pool.get().await else {
            tokio::time::sleep(RETRY).await;
            continue;
        };
        let from = match cursor {
            Some(at) => at,
            None => match start(&s, &c).await {
                Some(at) => at,
                None => {
                    tokio::time::sleep(RETRY).await;
                    continue;
                }
            },
        };
        cursor = Some(from);
        // From here on, every change this process makes is after the cursor.
        s.subs_ready.send_replace(wanted);
        let names: Vec<&str> = queues.iter().map(String::as_str).collect();
        let Ok(rows) = c
            .events
            .read(&c.client, s.target(), from, &names, PAGE)
            .await
        else {
            tokio::time::sleep(RETRY).await;
            continue;
        };
        let full = rows.len() as i64 == PAGE;
        if let Some(last) = rows.last() {
            cursor = Some(last.at);
            let mut out = Vec::new();
            for r in &rows {
                expand(r, &mut out);
            }
            if !out.is_empty() {
                s.events.lock().extend(out);
                let n = s.notifier.lock().clone();
                if let Some(n) = n {
                    n();
                }
            }
        }
        if !full {
            let _ = tokio::time::timeout(Duration::from_millis(200), s.feed.notified()).await;
        }
    }
}

/// The cursor of "from now on": after every transaction that has committed.
async fn start(s: &Shared, c: &crate::pool::Conn) -> Option<Cursor> {
    let rows = c
        .query(
            s.target(),
            "cannot start the event feed",
            "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::int8",
            &[],
        )
        .await
        .ok()?;
    let xmin: i64 = rows.first()?.get(0);
    Some(Cursor {
        xid: xmin - 1,
        id: i64::MAX,
    })
}

fn text(v: &Value, key: &str) -> String {
    match v.get(key) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

fn number(v: &Value, key: &str) -> u64 {
    v.get(key).and_then(Value::as_u64).unwrap_or(0)
}

/// A state's name as events carry it (the `state` column's number, or a name).
fn state_name(v: Option<&Value>) -> &'static str {
    let name = match v {
        Some(Value::Number(n)) => {
            return ferroqueue_engine::domain::job::JobState::as_str(crate::record::state_of(
                n.as_i64().unwrap_or(0) as i16,
            ))
        }
        Some(Value::String(s)) => s.as_str(),
        _ => "",
    };
    ferroqueue_engine::domain::job::JobState::parse(name).map_or("waiting", |s| s.as_str())
}

/// The engine's events for one event row, appended to `out`.
pub(super) fn expand(row: &EventRow, out: &mut Vec<Event>) {
    let queue: Arc<str> = Arc::from(row.queue.as_str());
    let items: Vec<Value> = serde_json::from_str(&row.payload).unwrap_or_default();
    let mut push = |kind| {
        out.push(Event {
            queue: queue.clone(),
            kind,
        })
    };
    match row.event.as_str() {
        "paused" => return push(EventKind::Paused),
        "resumed" => return push(EventKind::Resumed),
        "drained" => return push(EventKind::Drained),
        "cleaned" => {
            let count = items.first().and_then(Value::as_u64).unwrap_or(0) as usize;
            return push(EventKind::Cleaned { count });
        }
        _ => {}
    }
    for v in &items {
        let job_id = text(v, "id");
        match row.event.as_str() {
            "added" => {
                let at = number(v, "at");
                push(EventKind::Added {
                    job_id: job_id.clone(),
                    name: Arc::from(crate::text::load(text(v, "name"))),
                });
                push(match at {
                    0 => EventKind::Waiting { job_id, prev: None },
                    at => EventKind::Delayed { job_id, delay: at },
                });
            }
            "duplicated" => push(EventKind::Duplicated { job_id }),
            "stalled" => push(EventKind::Stalled { job_id }),
            "deduplicated" => push(EventKind::Deduplicated {
                job_id,
                deduplication_id: text(v, "dedup"),
                deduplicated_job_id: text(v, "dropped"),
            }),
            "active" => push(EventKind::Active {
                job_id,
                prev: "waiting",
            }),
            "completed" => push(EventKind::Completed {
                job_id,
                returnvalue: v.get("rv").map_or("null".into(), |x| x.to_string().into()),
            }),
            "failed" => {
                let exhausted = v.get("exhausted").and_then(Value::as_u64);
                push(EventKind::Failed {
                    job_id: job_id.clone(),
                    failed_reason: crate::text::load(text(v, "reason")).into(),
                });
                if let Some(n) = exhausted {
                    push(EventKind::RetriesExhausted {
                        job_id,
                        attempts_made: n.min(u32::MAX as u64) as u32,
                    });
                }
            }
            "retried" => push(match number(v, "at") {
                0 => EventKind::Waiting {
                    job_id,
                    prev: Some("failed"),
                },
                at => EventKind::Delayed { job_id, delay: at },
            }),
            "delayed" => push(EventKind::Delayed {
                job_id,
                delay: number(v, "at"),
            }),
            "waiting" => push(EventKind::Waiting {
                job_id,
                prev: Some(state_name(v.get("prev"))),
            }),
            "removed" => push(EventKind::Removed {
                job_id,
                prev: state_name(v.get("prev")),
            }),
            "progress" => push(EventKind::Progress {
                job_id,
                data: v
                    .get("data")
                    .map_or("null".into(), |x| x.to_string().into()),
            }),
            _ => {}
        }
    }
}
