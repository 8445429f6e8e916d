//! A lease holder's terms: what a Worker says about the leases of the jobs it takes (BullMQ's
//! `lockDuration`, `lockRenewTime`, `stalledInterval`, `maxStalledCount`, `skipStalledCheck`).
//! Each backend reads what applies to it: in one process the engine holds a lease for as long
//! as its holder lives and stalls its jobs when it is gone, so only `max_stalled` matters there;
//! on PostgreSQL every lease has a length and is renewed, and processes sweep expired ones.

use crate::error::{EngineError, Result};

/// The longest duration an option here takes, ms (a JS timer's limit, 2^31 - 1).
pub const MAX_LEASE_MS: u64 = i32::MAX as u64;

/// A lease holder's terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseTerms {
    /// The length of a lease, ms (`lockDuration`, default 30 s).
    pub lock_ms: u32,
    /// How often leases are renewed, ms (`lockRenewTime`, default half of `lock_ms`).
    pub renew_ms: u32,
    /// How often expired leases are looked for, ms (`stalledInterval`, default 30 s).
    pub stalled_interval_ms: u32,
    /// How many times a job may stall and still run again (`maxStalledCount`, default 1).
    pub max_stalled: u32,
    /// Whether this holder takes no part in looking for expired leases (`skipStalledCheck`).
    pub skip_stalled_check: bool,
}

impl Default for LeaseTerms {
    fn default() -> LeaseTerms {
        LeaseTerms {
            lock_ms: 30_000,
            renew_ms: 15_000,
            stalled_interval_ms: 30_000,
            max_stalled: super::MAX_STALLED_COUNT,
            skip_stalled_check: false,
        }
    }
}

impl LeaseTerms {
    /// Checks the terms (every duration in 1..=2^31-1 ms, renewals within the lease), naming
    /// the option at fault.
    pub fn checked(self) -> Result<LeaseTerms> {
        for (option, v) in [
            ("lockDuration", self.lock_ms),
            ("lockRenewTime", self.renew_ms),
            ("stalledInterval", self.stalled_interval_ms),
        ] {
            if v == 0 || u64::from(v) > MAX_LEASE_MS {
                return Err(EngineError::range(
                    option,
                    format!("must be an integer in 1..={MAX_LEASE_MS} ms, got {v}"),
                ));
            }
        }
        if self.renew_ms >= self.lock_ms {
            return Err(EngineError::range(
                "lockRenewTime",
                format!(
                    "must be less than lockDuration ({} ms) so that a lease is renewed before it ends, got {}",
                    self.lock_ms, self.renew_ms
                ),
            ));
        }
        Ok(self)
    }
}

/// Who a lease holder is: the Worker `getWorkers` lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HolderInfo {
    /// The queue it works (its qualified name).
    pub queue: std::sync::Arc<str>,
    /// The Worker's `name` option.
    pub name: Option<String>,
    /// When it opened, ms since the epoch.
    pub started: u64,
}

/// A live Worker, as `getWorkers` answers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerInfo {
    /// Unique among the Workers listed: its lease holder (on PostgreSQL with its process's id).
    pub id: String,
    /// Its `name` option.
    pub name: Option<String>,
    /// When it opened, ms since the epoch.
    pub started: u64,
    /// When it was last known alive, ms since the epoch (its process renews it on
    /// PostgreSQL; in one process, now).
    pub seen: u64,
    /// Its process's id.
    pub pid: u32,
    /// The address its process connects from (PostgreSQL's view of the client); `None` in
    /// one process, or over a Unix socket.
    pub addr: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_bullmqs_and_valid() {
        let d = LeaseTerms::default();
        assert_eq!((d.lock_ms, d.renew_ms, d.max_stalled), (30_000, 15_000, 1));
        assert_eq!(d.checked().ok(), Some(d));
    }

    #[test]
    fn bad_terms_name_their_option() {
        let bad = |t: LeaseTerms| t.checked().unwrap_err().to_string();
        let d = LeaseTerms::default();
        assert!(bad(LeaseTerms { lock_ms: 0, ..d }).contains("lockDuration"));
        assert!(bad(LeaseTerms {
            stalled_interval_ms: 0,
            ..d
        })
        .contains("stalledInterval"));
        assert!(bad(LeaseTerms {
            renew_ms: 30_000,
            ..d
        })
        .contains("lockRenewTime"));
        let big = LeaseTerms {
            lock_ms: u32::MAX,
            ..d
        };
        assert!(bad(big).contains("lockDuration"));
    }
}
