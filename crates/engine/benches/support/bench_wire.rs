//! The record shape the naive queue writes (`naive_queue.rs`), as a [`Wire`] for the engine: the
//! binding's JSON writer lives in the binding crate, so the benches write records this way, the
//! same on every side of the comparison. Names and payloads need no escaping here.

use std::fmt::Write as _;

use ferroqueue_engine::domain::event::Event;
use ferroqueue_engine::domain::job::Job;
use ferroqueue_engine::Wire;

/// Full records with the token, as the naive queue writes them.
pub struct BenchWire;

impl Wire for BenchWire {
    fn record(&self, j: &Job, _for_worker: bool, out: &mut String) {
        let _ = write!(
            out,
            r#"{{"id":"{}","name":"{}","data":{},"opts":{{}},"progress":0,"returnvalue":null,"failedReason":null,"stacktrace":[],"attemptsMade":0,"attemptsStarted":{},"timestamp":{},"delay":0,"priority":0,"processedOn":{},"finishedOn":null,"token":{}}}"#,
            j.key, j.name, j.data, j.attempts_started, j.timestamp, j.processed_on, j.lock
        );
    }

    fn event(&self, e: &Event, out: &mut String) {
        let _ = write!(out, "[\"{}\",\"{}\",{{}}]", e.queue, e.kind.name());
    }
}
