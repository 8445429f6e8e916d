//! The baseline of `queue.rs`: a naive FIFO job queue over std collections.
//!
//! A `HashMap` of jobs and a `VecDeque` of waiting ids; a token per activation; completed jobs stay
//! in the map. No priorities, no LIFO, no delayed set, no ordered per-state sets. It stores the
//! same data as the engine's job record and writes the same JSON shape on take.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt::Write as _;
use std::sync::Arc;

use super::{Hot, BATCH, NOW};
use ferroqueue_engine::NewJob;

/// FIFO only, one map of jobs, a token per activation, names interned.
#[derive(Default)]
pub struct Naive {
    jobs: HashMap<u64, NaiveJob>,
    waiting: VecDeque<u64>,
    names: HashSet<Arc<str>>,
    last_id: u64,
    last_token: u64,
}

#[derive(Default)]
struct NaiveJob {
    name: Arc<str>,
    data: Box<str>,
    timestamp: u64,
    active: bool,
    token: u64,
    attempts_started: u32,
    processed_on: u64,
    finished_on: u64,
    returnvalue: Option<Box<str>>,
}

impl Hot for Naive {
    fn add(&mut self, job: NewJob) {
        let name = match self.names.get(job.name.as_str()) {
            Some(n) => n.clone(),
            None => {
                let n: Arc<str> = job.name.into();
                self.names.insert(n.clone());
                n
            }
        };
        self.last_id += 1;
        let (data, timestamp) = (job.data, job.timestamp);
        let record = NaiveJob {
            name,
            data,
            timestamp,
            ..Default::default()
        };
        self.jobs.insert(self.last_id, record);
        self.waiting.push_back(self.last_id);
    }

    /// Same record shape as the engine's `take` (plain names, so no escaping needed).
    fn take(&mut self, out: &mut String) -> usize {
        out.push('[');
        let mut n = 0;
        while n < BATCH {
            let Some(id) = self.waiting.pop_front() else {
                break;
            };
            let Some(j) = self.jobs.get_mut(&id) else {
                continue;
            };
            self.last_token += 1;
            (j.active, j.token, j.processed_on) = (true, self.last_token, NOW);
            j.attempts_started += 1;
            if n > 0 {
                out.push(',');
            }
            let _ = write!(
                out,
                r#"{{"id":"{id}","name":"{}","data":{},"opts":{{}},"progress":0,"returnvalue":null,"failedReason":null,"stacktrace":[],"attemptsMade":0,"attemptsStarted":{},"timestamp":{},"delay":0,"priority":0,"processedOn":{},"finishedOn":null,"token":{}}}"#,
                j.name, j.data, j.attempts_started, j.timestamp, j.processed_on, j.token
            );
            n += 1;
        }
        out.push(']');
        n
    }

    fn ack(&mut self, taken: &mut Vec<(String, u64)>) -> usize {
        let mut done = 0;
        for (id, token) in taken.drain(..) {
            let Some(j) = id.parse().ok().and_then(|k| self.jobs.get_mut(&k)) else {
                continue;
            };
            if j.active && j.token == token {
                (j.active, j.finished_on) = (false, NOW);
                j.returnvalue = Some("null".into());
                done += 1;
            }
        }
        done
    }
}
