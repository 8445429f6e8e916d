//! Folds the writes that one commit group holds for the same job into one statement.
//!
//! A worker's job typically produces three writes before the writer gets to them: the move to
//! active, the move to completed and its return value. They land in the same transaction, so
//! only the last state columns and the last extra columns matter. A job inserted in the same
//! group takes its later changes into the inserted row. Ops are only folded backwards over ops
//! on other jobs and queue rows; a delete of the job ends its fold (later writes start a new one)
//! and an op that deletes rows by query (wipe, evicted-row deletes) ends every fold, so no write
//! moves across an op whose result could depend on it.

use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::rows::{ExtraCols, StateCols, StorageOp};
use crate::domain::job::JobKey;

/// One write of a transaction after folding.
#[derive(Debug)]
pub enum Write {
    Op(StorageOp),
    /// Column changes of an existing row.
    Update(Box<Update>),
}

/// The latest column changes of one job in a group.
#[derive(Debug, PartialEq)]
pub struct Update {
    pub queue: Arc<str>,
    pub key: JobKey,
    pub state: Option<StateCols>,
    pub extra: Option<Box<ExtraCols>>,
    pub data: Option<Box<str>>,
}

/// Folds `ops` (in submission order) into the writes to execute, in order.
pub fn coalesce(ops: Vec<StorageOp>) -> Vec<Write> {
    let mut out: Vec<Write> = Vec::with_capacity(ops.len());
    let mut at: FxHashMap<(Arc<str>, JobKey), usize> = FxHashMap::default();
    for op in ops {
        match op {
            StorageOp::Insert(q, row) => {
                at.insert((q.clone(), row.key), out.len());
                out.push(Write::Op(StorageOp::Insert(q, row)));
            }
            // `slot` only yields inserts and updates; the fallback arms write an op as it is.
            StorageOp::State(q, key, s) => match slot(&mut out, &mut at, &q, key) {
                Some(Write::Op(StorageOp::Insert(_, r))) => r.state = s,
                Some(Write::Update(u)) => u.state = Some(s),
                _ => out.push(Write::Op(StorageOp::State(q, key, s))),
            },
            StorageOp::Extra(q, key, e) => match slot(&mut out, &mut at, &q, key) {
                Some(Write::Op(StorageOp::Insert(_, r))) => r.extra = *e,
                Some(Write::Update(u)) => u.extra = Some(e),
                _ => out.push(Write::Op(StorageOp::Extra(q, key, e))),
            },
            StorageOp::Data(q, key, d) => match slot(&mut out, &mut at, &q, key) {
                Some(Write::Op(StorageOp::Insert(_, r))) => r.data = d,
                Some(Write::Update(u)) => u.data = Some(d),
                _ => out.push(Write::Op(StorageOp::Data(q, key, d))),
            },
            StorageOp::Delete(q, key) => {
                at.remove(&(q.clone(), key));
                out.push(Write::Op(StorageOp::Delete(q, key)));
            }
            op @ (StorageOp::Queue(..)
            | StorageOp::Dedup(..)
            | StorageOp::Group(..)
            | StorageOp::Scheduler(..)) => out.push(Write::Op(op)),
            op @ (StorageOp::Wipe(..) | StorageOp::Evicted(..)) => {
                at.clear();
                out.push(Write::Op(op));
            }
        }
    }
    out
}

/// The pending insert or update of job `key` that later changes fold into; a new, empty update
/// at the end when there is none.
fn slot<'a>(
    out: &'a mut Vec<Write>,
    at: &mut FxHashMap<(Arc<str>, JobKey), usize>,
    queue: &Arc<str>,
    key: JobKey,
) -> Option<&'a mut Write> {
    let i = *at.entry((queue.clone(), key)).or_insert_with(|| {
        out.push(Write::Update(Box::new(Update {
            queue: queue.clone(),
            key,
            state: None,
            extra: None,
            data: None,
        })));
        out.len() - 1
    });
    out.get_mut(i)
}
