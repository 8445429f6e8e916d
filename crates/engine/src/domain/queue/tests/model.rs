//! Model-based property test: random operation sequences on a [`QueueState`] checked against a
//! deliberately simple model (one FIFO lane per priority, lifo pushed to the front, delayed jobs in
//! a list sorted on demand).

use std::collections::{BTreeMap, VecDeque};

use proptest::prelude::*;

use super::{page_ids, queue, take_fx, T0};
use crate::domain::job::JobState;
use crate::domain::listing::StateFilter;
use crate::domain::queue::{AckResult, Effects, NewJob, Outcome, QueueState};
use crate::error::EngineError;

const PRIORITIES: usize = 4;
const BACKOFF: u64 = 5;

#[derive(Debug, Clone)]
enum Op {
    Add {
        priority: u32,
        lifo: bool,
        delay: u64,
        attempts: u32,
        backoff: bool,
    },
    Take(usize),
    /// `how`: 0 completes, 1 fails, 2 releases.
    Ack {
        pick: usize,
        how: u8,
    },
    StaleAck(usize),
    Remove(usize),
    Advance(u64),
    Pause,
    Resume,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..PRIORITIES as u32, any::<bool>(), prop_oneof![Just(0u64), Just(5), Just(10)], 1..=3u32, any::<bool>())
            .prop_map(|(priority, lifo, delay, attempts, backoff)| Op::Add { priority, lifo, delay, attempts, backoff }),
        3 => (1..5usize).prop_map(Op::Take),
        3 => (any::<usize>(), 0..4u8).prop_map(|(pick, how)| Op::Ack { pick, how }),
        1 => any::<usize>().prop_map(Op::StaleAck),
        1 => any::<usize>().prop_map(Op::Remove),
        2 => (0..12u64).prop_map(Op::Advance),
        1 => Just(Op::Pause),
        1 => Just(Op::Resume),
    ]
}

struct MJob {
    state: JobState,
    priority: u32,
    attempts: u32,
    made: u32,
    backoff: bool,
    token: u64,
}

#[derive(Default)]
struct Model {
    jobs: BTreeMap<u64, MJob>,
    lanes: [VecDeque<u64>; PRIORITIES],
    /// (run_at, insertion seq, id)
    delayed: Vec<(u64, u64, u64)>,
    delayed_seq: u64,
    /// Active ids in activation order.
    active: Vec<u64>,
    paused: bool,
    next_id: u64,
}

impl Model {
    fn ready(&mut self, id: u64, front: bool) {
        let job = self.jobs.get_mut(&id).unwrap();
        job.state = if job.priority == 0 {
            JobState::Waiting
        } else {
            JobState::Prioritized
        };
        let lane = &mut self.lanes[job.priority as usize];
        if front {
            lane.push_front(id);
        } else {
            lane.push_back(id);
        }
    }

    fn delay(&mut self, id: u64, run_at: u64) {
        self.delayed_seq += 1;
        self.delayed.push((run_at, self.delayed_seq, id));
        self.jobs.get_mut(&id).unwrap().state = JobState::Delayed;
    }

    fn promote(&mut self, now: u64) -> usize {
        self.delayed.sort_unstable();
        let due = self
            .delayed
            .iter()
            .take_while(|(at, _, _)| *at <= now)
            .count();
        let promoted: Vec<u64> = self.delayed.drain(..due).map(|(_, _, id)| id).collect();
        for id in &promoted {
            self.ready(*id, false);
        }
        promoted.len()
    }

    fn take(&mut self, max: usize, now: u64) -> Vec<u64> {
        self.promote(now);
        let mut out = Vec::new();
        while !self.paused && out.len() < max {
            let Some(id) = self.lanes.iter_mut().find_map(|l| l.pop_front()) else {
                break;
            };
            self.jobs.get_mut(&id).unwrap().state = JobState::Active;
            self.active.push(id);
            out.push(id);
        }
        out
    }

    fn count(&self, s: JobState) -> usize {
        self.jobs.values().filter(|j| j.state == s).count()
    }

    fn ready_ids(&self, lanes: std::ops::Range<usize>) -> Vec<String> {
        self.lanes[lanes]
            .iter()
            .flatten()
            .map(u64::to_string)
            .collect()
    }
}

fn check(q: &QueueState, m: &Model) -> Result<(), TestCaseError> {
    let states = [
        JobState::Waiting,
        JobState::Prioritized,
        JobState::Delayed,
        JobState::Active,
        JobState::Completed,
        JobState::Failed,
    ];
    let mut seen = std::collections::BTreeSet::new();
    for s in states {
        prop_assert_eq!(
            q.count_of(StateFilter::State(s)),
            m.count(s),
            "count of {:?}",
            s
        );
        for k in q.keys_in(StateFilter::State(s)) {
            prop_assert!(seen.insert(k), "job {} is in two states", k);
            prop_assert_eq!(m.jobs.get(&k).map(|j| j.state), Some(s), "job {}", k);
        }
    }
    prop_assert_eq!(
        seen.len(),
        m.jobs.len(),
        "every job is in exactly one state"
    );
    for id in 1..=m.next_id {
        prop_assert_eq!(
            q.state_of(&id.to_string()),
            m.jobs.get(&id).map(|j| j.state)
        );
    }
    let ready = m.lanes.iter().map(VecDeque::len).sum::<usize>();
    prop_assert_eq!(
        q.count_of(StateFilter::Paused),
        0,
        "paused is never a count"
    );
    prop_assert_eq!(q.count(), ready + m.delayed.len());
    let waiting = page_ids(q, &[StateFilter::State(JobState::Waiting)], 0, -1, true);
    prop_assert_eq!(waiting, m.ready_ids(0..1));
    let prioritized = page_ids(q, &[StateFilter::State(JobState::Prioritized)], 0, -1, true);
    prop_assert_eq!(prioritized, m.ready_ids(1..PRIORITIES));
    let mut delayed = m.delayed.clone();
    delayed.sort_unstable();
    let want: Vec<String> = delayed.iter().map(|(_, _, id)| id.to_string()).collect();
    prop_assert_eq!(
        page_ids(q, &[StateFilter::State(JobState::Delayed)], 0, -1, true),
        want
    );
    Ok(())
}

fn apply(q: &mut QueueState, m: &mut Model, now: &mut u64, op: Op) -> Result<(), TestCaseError> {
    let fx = &mut Effects::default();
    match op {
        Op::Add {
            priority,
            lifo,
            delay,
            attempts,
            backoff,
        } => {
            let backoff = if backoff {
                format!(",\"backoff\":{BACKOFF}")
            } else {
                String::new()
            };
            let opts = format!(
                r#"{{"priority":{priority},"lifo":{lifo},"delay":{delay},"attempts":{attempts}{backoff}}}"#
            );
            let job = NewJob {
                name: "p".into(),
                data: "null".into(),
                opts: crate::domain::options::JobOptions::from_json(&opts).unwrap(),
                opts_json: None,
                timestamp: *now,
            };
            q.add(job, *now, fx);
            m.next_id += 1;
            let id = m.next_id;
            let job = MJob {
                state: JobState::Waiting,
                priority,
                attempts,
                made: 0,
                backoff: !backoff.is_empty(),
                token: 0,
            };
            m.jobs.insert(id, job);
            if delay > 0 {
                m.delay(id, *now + delay);
            } else {
                m.ready(id, lifo);
            }
        }
        Op::Take(max) => {
            let got = take_fx(q, max, *now, fx);
            let want = m.take(max, *now);
            let got_ids: Vec<u64> = got.iter().map(|(id, _)| id.parse().unwrap()).collect();
            prop_assert_eq!(&got_ids, &want, "pop order");
            for (id, token) in got {
                m.jobs.get_mut(&id.parse().unwrap()).unwrap().token = token;
            }
        }
        Op::Ack { pick, how } if !m.active.is_empty() => {
            let id = m.active.remove(pick % m.active.len());
            let job = m.jobs.get_mut(&id).unwrap();
            let outcome = match how {
                0 => Outcome::Completed("1".into()),
                1 => Outcome::Failed {
                    reason: "x".into(),
                    stack: None,
                    unrecoverable: false,
                    timed_out: false,
                    lost: false,
                    delay: None,
                },
                2 => Outcome::Released { started: true },
                _ => Outcome::Released { started: false },
            };
            if how == 1 {
                job.made += 1;
            }
            let (token, made, attempts, backoff) = (job.token, job.made, job.attempts, job.backoff);
            let want = match how {
                0 => {
                    job.state = JobState::Completed;
                    AckResult::Completed
                }
                1 if made >= attempts => {
                    job.state = JobState::Failed;
                    AckResult::Failed
                }
                1 if backoff => {
                    m.delay(id, *now + BACKOFF);
                    AckResult::Retrying { delay: BACKOFF }
                }
                1 => {
                    m.ready(id, false);
                    AckResult::Retrying { delay: 0 }
                }
                _ => {
                    m.ready(id, true);
                    AckResult::Released
                }
            };
            prop_assert_eq!(q.ack(id, token, outcome, None, *now, fx), want);
        }
        Op::Ack { .. } => {}
        Op::StaleAck(pick) => {
            if let Some((&id, job)) = m.jobs.iter().nth(pick % m.jobs.len().max(1)) {
                let r = q.ack(
                    id,
                    job.token + 1_000,
                    Outcome::Completed("1".into()),
                    None,
                    *now,
                    fx,
                );
                prop_assert_eq!(r, AckResult::Stale);
            }
        }
        Op::Remove(pick) if m.next_id > 0 => {
            let id = 1 + (pick as u64 % m.next_id);
            let got = q.remove(&id.to_string(), T0, fx);
            match m.jobs.get(&id).map(|j| j.state) {
                None => prop_assert_eq!(got, Ok(None)),
                Some(JobState::Active) => {
                    prop_assert_eq!(got, Err(EngineError::JobLocked(id.to_string())))
                }
                Some(s) => {
                    prop_assert_eq!(got, Ok(Some(s.as_str())));
                    m.jobs.remove(&id);
                    m.lanes.iter_mut().for_each(|l| l.retain(|k| *k != id));
                    m.delayed.retain(|(_, _, k)| *k != id);
                }
            }
        }
        Op::Remove(_) => {}
        Op::Advance(ms) => {
            *now += ms;
            let got = q.promote_due(*now, fx);
            prop_assert_eq!(got, m.promote(*now));
        }
        Op::Pause => {
            q.pause(fx);
            m.paused = true;
        }
        Op::Resume => {
            q.resume(fx);
            m.paused = false;
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn queue_matches_model(ops in prop::collection::vec(op(), 1..80), listeners in 0..2u32) {
        let mut q = queue();
        q.listeners = listeners;
        let mut m = Model::default();
        let mut now = T0;
        for op in ops {
            apply(&mut q, &mut m, &mut now, op)?;
            check(&q, &m)?;
        }
    }
}
