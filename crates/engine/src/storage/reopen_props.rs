//! Property: a durable engine closed and reopened is observably identical to one never closed.
//!
//! Two durable engines get the same random sequence of every operation (adds with each option,
//! takes, acks of every outcome, retry, remove, clean, pause/resume, priority and delay changes,
//! promote, progress, logs, data, drain, obliterate, time passing), with a small in-memory bound
//! so finished jobs are evicted to the file and revived from it. Then every active job is given
//! back, one engine is closed and reopened, and both are compared through the [`Backend`]: every
//! job's record, state and logs, the counts, the lists of every state in order, the paused flag,
//! the order of the next takes and the next ids. Any change the domain makes without recording
//! it for storage shows up here as a difference.

use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;

use crate::backend::{Backend, JobChange, Page};
use crate::clock::MockClock;
use crate::domain::job::JobState;
use crate::domain::limits::WorkerLimits;
use crate::domain::listing::StateFilter;
use crate::domain::queue::{NewJob, Outcome};
use crate::{Ack, Engine, EngineConfig, JobOptions, QueueRef};

/// Finished jobs per state kept in memory: small, so evictions and revivals happen.
const BOUND: usize = 3;
const CUSTOM: [&str; 3] = ["a", "b", "c"];

#[derive(Debug, Clone)]
enum Op {
    Add(usize),
    AddBulk(Vec<usize>),
    Take(usize),
    Ack {
        pick: usize,
        how: u8,
    },
    Retry {
        id: usize,
        completed: bool,
        reset: bool,
    },
    Remove(usize),
    Clean {
        grace: u64,
        limit: usize,
        state: u8,
    },
    Pause,
    Resume,
    Priority {
        id: usize,
        priority: u32,
        lifo: bool,
    },
    Delay {
        id: usize,
        delay: u64,
    },
    Promote(usize),
    Progress(usize),
    Log {
        id: usize,
        keep: usize,
    },
    Data(usize),
    Drain(bool),
    Obliterate,
    Advance(u64),
}

/// Job options by index: none, and each option the engine stores.
const OPTIONS: [&str; 12] = [
    "{}",
    "{\"priority\":2}",
    "{\"priority\":1,\"lifo\":true}",
    "{\"lifo\":true}",
    "{\"delay\":50}",
    "{\"jobId\":\"a\"}",
    "{\"jobId\":\"b\",\"priority\":3}",
    "{\"jobId\":\"c\",\"delay\":20}",
    "{\"attempts\":3,\"backoff\":{\"type\":\"fixed\",\"delay\":10}}",
    "{\"attempts\":2,\"backoff\":{\"type\":\"exponential\",\"delay\":5},\"removeOnFail\":2}",
    "{\"removeOnComplete\":2,\"keepLogs\":2}",
    "{\"removeOnComplete\":{\"age\":1},\"removeOnFail\":true}",
];

fn op() -> impl Strategy<Value = Op> {
    let id = 0usize..12;
    prop_oneof![
        6 => (0..OPTIONS.len()).prop_map(Op::Add),
        2 => prop::collection::vec(0..OPTIONS.len(), 1..6).prop_map(Op::AddBulk),
        5 => (1usize..4).prop_map(Op::Take),
        6 => (0usize..8, 0u8..5).prop_map(|(pick, how)| Op::Ack { pick, how }),
        2 => (id.clone(), any::<bool>(), any::<bool>())
            .prop_map(|(id, completed, reset)| Op::Retry { id, completed, reset }),
        1 => id.clone().prop_map(Op::Remove),
        1 => (0u64..100, 0usize..3, 0u8..4)
            .prop_map(|(grace, limit, state)| Op::Clean { grace, limit, state }),
        1 => Just(Op::Pause),
        1 => Just(Op::Resume),
        1 => (id.clone(), 0u32..4, any::<bool>())
            .prop_map(|(id, priority, lifo)| Op::Priority { id, priority, lifo }),
        1 => (id.clone(), 0u64..80).prop_map(|(id, delay)| Op::Delay { id, delay }),
        1 => id.clone().prop_map(Op::Promote),
        1 => id.clone().prop_map(Op::Progress),
        2 => (id.clone(), 0usize..3).prop_map(|(id, keep)| Op::Log { id, keep }),
        1 => id.clone().prop_map(Op::Data),
        1 => any::<bool>().prop_map(Op::Drain),
        1 => Just(Op::Obliterate),
        3 => (1u64..60).prop_map(Op::Advance),
    ]
}

/// An id from a small universe: auto ids 1..=9 and the custom ids.
fn id_of(i: usize) -> String {
    match i {
        0..=8 => (i + 1).to_string(),
        _ => CUSTOM[(i - 9) % CUSTOM.len()].to_string(),
    }
}

fn open(path: &Path, clock: Arc<MockClock>) -> Engine {
    Engine::new(EngineConfig {
        clock,
        timer: false,
        path: Some(path.to_path_buf()),
        finished_in_memory: Some(BOUND),
        shards: Some(1),
        ..EngineConfig::new(crate::wire::test_json::wire())
    })
    .expect("open")
}

/// One engine under test and what it handed out.
struct Side {
    e: Engine,
    q: QueueRef,
    clock: Arc<MockClock>,
    /// Activations: (id, token), oldest first.
    active: Vec<(String, u64)>,
    /// Results of every operation, compared between the sides as they go.
    log: Vec<String>,
}

fn new_job(e: &Engine, opts: &str, n: usize) -> NewJob {
    NewJob {
        name: format!("n{n}"),
        data: format!("{{\"n\":{n}}}").into(),
        opts: JobOptions::from_json(opts).expect("options"),
        opts_json: (opts != "{}").then(|| opts.into()),
        timestamp: e.now(),
    }
}

/// A result as text: the value, or the error's code (messages may name times).
fn shown<T: std::fmt::Debug>(r: crate::Result<T>) -> String {
    match r {
        Ok(v) => format!("{v:?}"),
        Err(e) => e.code().to_string(),
    }
}

impl Side {
    async fn apply(&mut self, op: &Op, step: usize) {
        let (e, q) = (&self.e, &self.q);
        let out = match op {
            Op::Add(o) => shown(
                Backend::add(e, q, new_job(e, OPTIONS[*o], step))
                    .wait()
                    .await,
            ),
            Op::AddBulk(os) => {
                let jobs = os.iter().map(|o| new_job(e, OPTIONS[*o], step)).collect();
                shown(Backend::add_bulk(e, q, jobs).wait().await)
            }
            Op::Take(n) => {
                let text = Backend::take(e, q, *n, WorkerLimits::default())
                    .wait()
                    .await
                    .expect("take");
                let records: Vec<serde_json::Value> = serde_json::from_str(&text).expect("json");
                for r in &records {
                    let id = crate::domain::job::record_id(&r["id"]);
                    self.active.push((id, r["token"].as_u64().expect("token")));
                }
                format!("took {}", records.len())
            }
            Op::Ack { pick, how } => {
                if self.active.is_empty() {
                    return;
                }
                let (id, token) = self.active.remove(pick % self.active.len());
                let outcome = match how {
                    0 => Outcome::Completed(format!("\"done {step}\"").into()),
                    1 => Outcome::Failed {
                        reason: format!("failed {step}").into(),
                        stack: Some("at step".into()),
                        unrecoverable: false,
                        timed_out: false,
                        lost: false,
                        delay: None,
                    },
                    2 => Outcome::Failed {
                        reason: "for good".into(),
                        stack: None,
                        unrecoverable: true,
                        timed_out: false,
                        lost: false,
                        delay: None,
                    },
                    3 => Outcome::Released { started: true },
                    _ => Outcome::Released { started: false },
                };
                let ack = Ack {
                    id,
                    token,
                    outcome,
                    keep: None,
                };
                shown(Backend::ack(e, q, vec![ack]).wait().await)
            }
            Op::Retry {
                id,
                completed,
                reset,
            } => {
                let from = if *completed {
                    JobState::Completed
                } else {
                    JobState::Failed
                };
                let change = JobChange::Retry {
                    from,
                    reset_attempts: *reset,
                };
                shown(Backend::change(e, q, &id_of(*id), change).wait().await)
            }
            Op::Remove(id) => shown(Backend::remove(e, q, &id_of(*id)).wait().await),
            Op::Clean {
                grace,
                limit,
                state,
            } => {
                let state = match state {
                    0 => JobState::Completed,
                    1 => JobState::Failed,
                    2 => JobState::Delayed,
                    _ => JobState::Waiting,
                };
                let r = Backend::clean(e, q, *grace, *limit, StateFilter::State(state));
                shown(r.wait().await)
            }
            Op::Pause => shown(Backend::pause(e, q).wait().await),
            Op::Resume => shown(Backend::resume(e, q).wait().await),
            Op::Priority { id, priority, lifo } => {
                let change = JobChange::Priority {
                    priority: *priority,
                    lifo: *lifo,
                };
                shown(Backend::change(e, q, &id_of(*id), change).wait().await)
            }
            Op::Delay { id, delay } => {
                let change = JobChange::Delay(*delay);
                shown(Backend::change(e, q, &id_of(*id), change).wait().await)
            }
            Op::Promote(id) => {
                let r = Backend::change(e, q, &id_of(*id), JobChange::Promote);
                shown(r.wait().await)
            }
            Op::Progress(id) => {
                let change = JobChange::Progress(format!("{step}").into());
                shown(Backend::change(e, q, &id_of(*id), change).wait().await)
            }
            Op::Log { id, keep } => {
                let change = JobChange::Log {
                    row: format!("\"row {step}\"").into(),
                    keep: *keep,
                };
                shown(Backend::change(e, q, &id_of(*id), change).wait().await)
            }
            Op::Data(id) => {
                let change = JobChange::Data(format!("{{\"changed\":{step}}}").into());
                shown(Backend::change(e, q, &id_of(*id), change).wait().await)
            }
            Op::Drain(delayed) => shown(Backend::drain(e, q, *delayed).wait().await),
            Op::Obliterate => {
                let r = shown(Backend::obliterate(e, q, true).wait().await);
                self.active.clear();
                r
            }
            Op::Advance(ms) => {
                self.clock.advance(*ms);
                e.promote_due();
                format!("{:?}", e.now())
            }
        };
        self.log.push(out);
    }

    /// Gives back every activation (an active job at close would be recovered as stalled).
    async fn release_all(&mut self) {
        let acks: Vec<Ack> = self
            .active
            .drain(..)
            .map(|(id, token)| Ack {
                id,
                token,
                outcome: Outcome::Released { started: true },
                keep: None,
            })
            .collect();
        let r = Backend::ack(&self.e, &self.q, acks).wait().await;
        self.log.push(shown(r));
    }

    /// Everything a user can observe, as text.
    async fn observe(&self) -> Vec<String> {
        let (e, q) = (&self.e, &self.q);
        let mut seen = Vec::new();
        let all: Vec<StateFilter> = StateFilter::ALL
            .iter()
            .filter_map(|s| StateFilter::parse(s))
            .collect();
        let counts = Backend::counts(e, q, all.clone()).wait().await;
        seen.push(format!("counts {counts:?}"));
        seen.push(format!(
            "paused {:?}",
            Backend::is_paused(e, q).wait().await
        ));
        for s in &all {
            let page = Page {
                start: 0,
                end: -1,
                asc: true,
            };
            let list = Backend::jobs(e, q, vec![*s], page).wait().await;
            seen.push(format!(
                "{s:?} {}",
                list.map_or_else(|e| e.code().into(), ids)
            ));
        }
        for i in 0..12 {
            let id = id_of(i);
            let record = Backend::job(e, q, &id).wait().await;
            seen.push(format!("{id} {}", shown(record.map(|r| r.map(stable)))));
            seen.push(format!(
                "{id} {:?}",
                shown(Backend::state(e, q, &id).wait().await)
            ));
            let page = Page {
                start: 0,
                end: -1,
                asc: true,
            };
            seen.push(format!(
                "{id} logs {}",
                shown(Backend::logs(e, q, &id, page).wait().await)
            ));
        }
        seen
    }

    /// What comes next: the order of every take once all is due and the queue runs, then the
    /// next automatic id. Changes the engine.
    async fn next(&mut self) -> Vec<String> {
        let (e, q) = (&self.e, &self.q);
        let mut seen = Vec::new();
        let _ = Backend::resume(e, q).wait().await;
        self.clock.advance(1_000_000);
        e.promote_due();
        let text = Backend::take(e, q, 1_000, WorkerLimits::default())
            .wait()
            .await
            .expect("take");
        seen.push(format!("takes {}", ids(text)));
        let added = Backend::add(e, q, new_job(e, "{}", 0)).wait().await;
        seen.push(format!("next id {}", shown(added)));
        seen
    }
}

/// The ids of a JSON array of records, in order.
fn ids(text: String) -> String {
    let v: Vec<serde_json::Value> = serde_json::from_str(&text).expect("json");
    v.iter()
        .map(|r| crate::domain::job::record_id(&r["id"]))
        .collect::<Vec<_>>()
        .join(",")
}

/// A record without what legitimately differs: nothing today (tokens appear only in takes).
fn stable(text: String) -> serde_json::Value {
    serde_json::from_str(&text).expect("json")
}

async fn run(ops: Vec<Op>) -> std::result::Result<(), TestCaseError> {
    let dir = tempfile::tempdir().expect("dir");
    let mut sides = Vec::new();
    for name in ["kept.db", "reopened.db"] {
        let clock = Arc::new(MockClock::new(1_000_000));
        let e = open(&dir.path().join(name), clock.clone());
        let q = e.queue_ref("q").expect("queue");
        sides.push(Side {
            e,
            q,
            clock,
            active: Vec::new(),
            log: Vec::new(),
        });
    }
    for (step, op) in ops.iter().enumerate() {
        for side in sides.iter_mut() {
            side.apply(op, step).await;
        }
        prop_assert_eq!(
            &sides[0].log,
            &sides[1].log,
            "the engines diverged at {:?}",
            op
        );
    }
    for side in sides.iter_mut() {
        side.release_all().await;
    }
    // Close the second and open its file again.
    let reopened = &mut sides[1];
    reopened.e.close();
    reopened.e = open(&dir.path().join("reopened.db"), reopened.clock.clone());
    reopened.q = reopened.e.queue_ref("q").expect("queue");
    let kept = sides[0].observe().await;
    let again = sides[1].observe().await;
    for (a, b) in kept.iter().zip(&again) {
        prop_assert_eq!(a, b);
    }
    let kept = sides[0].next().await;
    let again = sides[1].next().await;
    prop_assert_eq!(kept, again);
    sides[0].e.close();
    // Recovery is recorded too: closed with jobs active, the engine that recovered them (as
    // stalled) equals the one opened after it.
    let side = &mut sides[1];
    let _ = Backend::add_bulk(&side.e, &side.q, vec![new_job(&side.e, "{}", 1); 3])
        .wait()
        .await;
    let _ = Backend::take(&side.e, &side.q, 2, WorkerLimits::default())
        .wait()
        .await;
    let mut seen = Vec::new();
    for _ in 0..2 {
        side.e.close();
        side.e = open(&dir.path().join("reopened.db"), side.clock.clone());
        side.q = side.e.queue_ref("q").expect("queue");
        seen.push(side.observe().await);
    }
    for (a, b) in seen[0].iter().zip(&seen[1]) {
        prop_assert_eq!(a, b);
    }
    side.e.close();
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn a_reopened_engine_is_the_engine_that_was_closed(ops in prop::collection::vec(op(), 1..80)) {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(run(ops))?;
    }
}
