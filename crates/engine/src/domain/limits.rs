//! A queue's flow limits, checked when workers take jobs: a token-bucket rate limit (the queue's
//! own, `setGlobalRateLimit`, or else the taking worker's `limiter`), a cap on jobs active at
//! once across every worker (`setGlobalConcurrency`) and a hold (`rateLimit(ms)`: nothing starts
//! before a time). No clock: every call takes `now` (ms).
//!
//! The bucket holds at most `max` tokens and gains `max` per `duration`, continuously; a started
//! job spends one. It starts full, so over any span of `t` ms at most `max + max * t / duration`
//! jobs start, and over a long run the rate is `max / duration`. Credit is counted in integer
//! units of `1 / duration` token, so refills are exact however small the steps.

use std::sync::Arc;

use super::groups::GroupDefaults;
use crate::error::{EngineError, Result};

/// At most `max` jobs per `duration` ms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    pub max: u32,
    pub duration: u64,
}

/// What a taking worker brings: its `limiter`, its `group` option's defaults, the lease holder
/// its jobs are held by (0: none; see `queue/stall.rs`), and its name (BullMQ's Worker `name`,
/// stamped on the jobs it takes as `processedBy`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkerLimits {
    pub rate: Option<RateLimit>,
    pub group: GroupDefaults,
    pub holder: u32,
    pub name: Option<Arc<str>>,
}

impl WorkerLimits {
    /// Limits of a worker with only a `limiter`.
    pub fn rate(rate: Option<RateLimit>) -> WorkerLimits {
        WorkerLimits {
            rate,
            ..WorkerLimits::default()
        }
    }
}

/// Longest rate-limit window: 2^53 ms, the largest whole number a JS number holds exactly.
pub const MAX_DURATION: u64 = 1 << 53;

impl RateLimit {
    /// A rate limit from JS numbers, refused (a `RangeError` naming `{option}.max` or
    /// `{option}.duration`) unless `max` is an integer in 1..=2^32-1 and `duration` one in
    /// 1..=2^53 ms.
    pub fn checked(option: &str, max: f64, duration: f64) -> Result<RateLimit> {
        let max = whole(&format!("{option}.max"), max, u32::MAX as u64)? as u32;
        let duration = whole(&format!("{option}.duration"), duration, MAX_DURATION)?;
        Ok(RateLimit { max, duration })
    }
}

/// A cap on active jobs from a JS number: an integer in 1..=2^32-1 (a `RangeError` naming
/// `option` otherwise).
pub fn checked_concurrency(option: &str, n: f64) -> Result<u32> {
    Ok(whole(option, n, u32::MAX as u64)? as u32)
}

fn whole(option: &str, v: f64, hi: u64) -> Result<u64> {
    if !v.is_finite() || v.fract() != 0.0 || v < 1.0 || v > hi as f64 {
        return Err(EngineError::range(
            option,
            format!("must be an integer in 1..={hi}, got {v}"),
        ));
    }
    Ok(v as u64)
}

/// The queue's limit settings, as stored.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LimitSettings {
    /// The queue's own rate limit (it overrides the workers' `limiter`).
    pub rate: Option<RateLimit>,
    /// Most jobs active at once across every worker.
    pub concurrency: Option<u32>,
}

/// One change of a queue's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitChange {
    /// Sets (or with `None` removes) the queue's own rate limit.
    Rate(Option<RateLimit>),
    /// Sets (or with `None` removes) the cap on active jobs.
    Concurrency(Option<u32>),
    /// No job starts for this many ms from now (0: lifts a hold).
    HoldFor(u64),
}

/// A token bucket; `rate` is the limit it was last counted for.
#[derive(Debug, Clone, Copy, Default)]
pub struct TokenBucket {
    rate: Option<RateLimit>,
    /// Tokens times `rate.duration`.
    credit: u128,
    refilled_at: u64,
}

impl TokenBucket {
    /// Brings the bucket to `now` under `rate`: a new or changed limit starts full (a smaller
    /// `max` keeps no more than `max` tokens).
    pub fn refill(&mut self, rate: RateLimit, now: u64) {
        let full = rate.max as u128 * rate.duration as u128;
        match self.rate {
            Some(old) if old == rate => {
                let elapsed = now.saturating_sub(self.refilled_at) as u128;
                self.credit = (self.credit + elapsed * rate.max as u128).min(full);
            }
            Some(old) => {
                let tokens = self.credit / old.duration.max(1) as u128;
                self.credit = (tokens * rate.duration as u128).min(full);
            }
            None => self.credit = full,
        }
        self.rate = Some(rate);
        self.refilled_at = self.refilled_at.max(now);
    }

    /// Whole tokens held (call [`TokenBucket::refill`] first).
    pub fn tokens(&self) -> u128 {
        self.rate
            .map_or(0, |r| self.credit / r.duration.max(1) as u128)
    }

    /// Spends `n` tokens (after [`TokenBucket::tokens`] showed them).
    pub fn spend(&mut self, n: u64) {
        if let Some(r) = self.rate {
            let cost = n as u128 * r.duration as u128;
            self.credit = self.credit.saturating_sub(cost);
        }
    }

    /// When the next whole token is there (`now` if one is).
    pub fn next_token_at(&self, now: u64) -> u64 {
        let Some(r) = self.rate else { return now };
        let per = r.duration as u128;
        if self.credit >= per {
            return now;
        }
        let missing = per - self.credit;
        let wait = missing.div_ceil(r.max.max(1) as u128);
        self.refilled_at
            .max(now)
            .saturating_add(u64::try_from(wait).unwrap_or(u64::MAX))
    }
}

/// A queue's limits and the state they keep.
#[derive(Debug, Clone, Default)]
pub struct Limits {
    settings: LimitSettings,
    bucket: TokenBucket,
    hold_until: u64,
}

impl Limits {
    /// The settings (as stored).
    pub fn settings(&self) -> LimitSettings {
        self.settings
    }

    /// Restores stored settings.
    pub fn restore(&mut self, s: LimitSettings) {
        self.settings = s;
    }

    /// Applies a change; answers whether the stored settings changed.
    pub fn change(&mut self, c: LimitChange, now: u64) -> bool {
        let before = self.settings;
        match c {
            LimitChange::Rate(r) => self.settings.rate = r,
            LimitChange::Concurrency(n) => self.settings.concurrency = n,
            LimitChange::HoldFor(ms) => self.hold_until = now.saturating_add(ms),
        }
        self.settings != before
    }

    /// Whether nothing limits takes, whatever the worker's own limiter (the fast path).
    pub fn is_unlimited(&self) -> bool {
        self.settings.rate.is_none() && self.settings.concurrency.is_none() && self.hold_until == 0
    }

    /// The rate that applies to a worker with limiter `worker`: the queue's own first.
    fn rate(&self, worker: Option<RateLimit>) -> Option<RateLimit> {
        self.settings.rate.or(worker)
    }

    /// How many of `want` jobs may start now with `active` jobs running, for a worker whose own
    /// limiter is `worker`. Spends nothing: call [`Limits::spend`] with what was taken.
    pub fn budget(
        &mut self,
        want: usize,
        active: usize,
        worker: Option<RateLimit>,
        now: u64,
    ) -> usize {
        if now < self.hold_until {
            return 0;
        }
        self.hold_until = 0;
        let mut n = want;
        if let Some(c) = self.settings.concurrency {
            n = n.min((c as usize).saturating_sub(active));
        }
        if let Some(r) = self.rate(worker) {
            self.bucket.refill(r, now);
            n = n.min(usize::try_from(self.bucket.tokens()).unwrap_or(usize::MAX));
        }
        n
    }

    /// Spends the tokens of `n` started jobs (after [`Limits::budget`] allowed them).
    pub fn spend(&mut self, n: usize, worker: Option<RateLimit>) {
        if let Some(r) = self.rate(worker) {
            let cost = n as u128 * r.duration as u128;
            self.bucket.credit = self.bucket.credit.saturating_sub(cost);
        }
    }

    /// When a take that found no budget can next succeed by waiting alone: the end of a hold,
    /// or the next token. `None` when time does not help (the concurrency cap is reached: a
    /// finished job frees a slot) or nothing blocks.
    pub fn retry_at(&self, active: usize, worker: Option<RateLimit>, now: u64) -> Option<u64> {
        if now < self.hold_until {
            return Some(self.hold_until);
        }
        if let Some(c) = self.settings.concurrency {
            if active >= c as usize {
                return None;
            }
        }
        self.rate(worker)?;
        let at = self.bucket.next_token_at(now);
        (at > now).then_some(at)
    }

    /// Ms until the queue takes jobs again by a hold or an empty bucket (0: it does now), as
    /// BullMQ's `getRateLimitTtl`.
    pub fn ttl(&mut self, worker: Option<RateLimit>, now: u64) -> u64 {
        let hold = self.hold_until.saturating_sub(now);
        let Some(r) = self.rate(worker) else {
            return hold;
        };
        self.bucket.refill(r, now);
        hold.max(self.bucket.next_token_at(now).saturating_sub(now))
    }

    /// Whether a take of one job would get nothing now by these limits (nothing changes).
    pub fn would_hold_back(&self, active: usize, worker: Option<RateLimit>, now: u64) -> bool {
        self.clone().budget(1, active, worker, now) == 0
    }

    /// Whether the cap on active jobs applies (a finished job then frees a slot others wait for).
    pub fn caps_active(&self) -> bool {
        self.settings.concurrency.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const FIVE_PER_500: RateLimit = RateLimit {
        max: 5,
        duration: 500,
    };

    fn take(l: &mut Limits, want: usize, active: usize, w: Option<RateLimit>, now: u64) -> usize {
        let n = l.budget(want, active, w, now);
        l.spend(n, w);
        n
    }

    #[test]
    fn a_bucket_starts_full_then_refills_at_its_rate() {
        let mut l = Limits::default();
        l.change(LimitChange::Rate(Some(FIVE_PER_500)), 0);
        assert_eq!(take(&mut l, 10, 0, None, 1_000), 5);
        assert_eq!(take(&mut l, 10, 0, None, 1_000), 0);
        assert_eq!(l.retry_at(0, None, 1_000), Some(1_100));
        assert_eq!(take(&mut l, 10, 0, None, 1_099), 0);
        assert_eq!(take(&mut l, 10, 0, None, 1_100), 1);
        assert_eq!(take(&mut l, 10, 0, None, 1_350), 2);
        assert_eq!(l.retry_at(0, None, 1_350), Some(1_400));
    }

    #[test]
    fn the_queues_rate_overrides_the_workers() {
        let mut l = Limits::default();
        let slow = RateLimit {
            max: 1,
            duration: 1_000,
        };
        assert_eq!(l.budget(10, 0, None, 0), 10);
        assert_eq!(take(&mut l, 10, 0, Some(slow), 0), 1);
        assert_eq!(take(&mut l, 10, 0, Some(slow), 10), 0);
        l.change(LimitChange::Rate(Some(FIVE_PER_500)), 10);
        // One token left of 1 becomes one of 5 (a changed limit keeps the tokens it had).
        assert_eq!(take(&mut l, 10, 0, Some(slow), 10), 0);
        assert_eq!(take(&mut l, 10, 0, Some(slow), 110), 1);
    }

    #[test]
    fn concurrency_caps_active_jobs_and_waiting_does_not_help() {
        let mut l = Limits::default();
        l.change(LimitChange::Concurrency(Some(3)), 0);
        assert_eq!(l.budget(10, 0, None, 0), 3);
        assert_eq!(l.budget(10, 2, None, 0), 1);
        assert_eq!(l.budget(10, 3, None, 0), 0);
        assert_eq!(l.budget(10, 7, None, 0), 0);
        assert_eq!(l.retry_at(3, None, 0), None);
        assert!(l.caps_active());
        assert!(l.change(LimitChange::Concurrency(None), 0));
        assert!(l.is_unlimited());
    }

    #[test]
    fn a_hold_stops_every_take_until_it_ends() {
        let mut l = Limits::default();
        assert!(!l.change(LimitChange::HoldFor(250), 1_000));
        assert_eq!(l.budget(10, 0, None, 1_249), 0);
        assert_eq!(l.retry_at(0, None, 1_100), Some(1_250));
        assert_eq!(l.ttl(None, 1_100), 150);
        assert_eq!(l.budget(10, 0, None, 1_250), 10);
    }

    #[test]
    fn limits_from_js_numbers_are_checked_with_the_option_named() {
        assert_eq!(
            RateLimit::checked("limiter", 5.0, 500.0).ok(),
            Some(FIVE_PER_500)
        );
        for (max, duration, named) in [
            (0.0, 500.0, "limiter.max"),
            (1.5, 500.0, "limiter.max"),
            (f64::NAN, 500.0, "limiter.max"),
            (4294967296.0, 500.0, "limiter.max"),
            (5.0, 0.0, "limiter.duration"),
            (5.0, -1.0, "limiter.duration"),
            (5.0, f64::INFINITY, "limiter.duration"),
            (5.0, 9007199254740994.0, "limiter.duration"),
        ] {
            let e = RateLimit::checked("limiter", max, duration).unwrap_err();
            assert_eq!(e.code(), "ERR_INVALID_OPTION");
            assert!(e.to_string().starts_with(named), "{e}");
        }
        assert_eq!(checked_concurrency("concurrency", 3.0).ok(), Some(3));
        assert!(checked_concurrency("concurrency", 0.0).is_err());
    }

    #[test]
    fn huge_limits_do_not_overflow() {
        let mut l = Limits::default();
        let r = RateLimit {
            max: u32::MAX,
            duration: 1 << 53,
        };
        l.change(LimitChange::Rate(Some(r)), 0);
        assert_eq!(
            take(&mut l, usize::MAX, 0, None, u64::MAX),
            u32::MAX as usize
        );
        assert!(l
            .retry_at(0, None, u64::MAX)
            .is_none_or(|at| at >= u64::MAX / 2));
    }

    proptest! {
        /// Against a model: over any span of `t` ms starting at a take, at most
        /// `max + max * t / duration` jobs start, and a take refused by the rate succeeds at
        /// `retry_at` (never earlier than needed: one ms before, it is still refused).
        #[test]
        fn starts_never_outrun_the_bucket(
            max in 1u32..20,
            duration in 1u64..2_000,
            steps in proptest::collection::vec((0u64..300, 0usize..8), 1..200),
        ) {
            let rate = RateLimit { max, duration };
            let mut l = Limits::default();
            let mut now = 0u64;
            // (time, jobs started then)
            let mut starts: Vec<(u64, u128)> = Vec::new();
            for (gap, want) in steps {
                now += gap;
                let n = take(&mut l, want, 0, Some(rate), now);
                starts.push((now, n as u128));
                if n < want {
                    let at = l.retry_at(0, Some(rate), now).expect("refused by the rate");
                    prop_assert!(at > now);
                    let mut probe = l.clone();
                    prop_assert_eq!(probe.budget(1, 0, Some(rate), at - 1), 0);
                    prop_assert_eq!(probe.budget(1, 0, Some(rate), at), 1);
                }
            }
            for i in 0..starts.len() {
                let mut count = 0u128;
                for &(to, n) in &starts[i..] {
                    count += n;
                    let span = (to - starts[i].0) as u128;
                    let allowed = max as u128 + max as u128 * span / duration as u128;
                    prop_assert!(count <= allowed, "{} starts in {} ms", count, span);
                }
            }
        }

        /// The long-run rate is the limit: asking all the time for `T` ms starts
        /// `max + floor(max * T / duration)` jobs.
        #[test]
        fn a_busy_queue_runs_at_its_rate(max in 1u32..50, duration in 1u64..1_000, span in 1u64..20_000) {
            let rate = RateLimit { max, duration };
            let mut l = Limits::default();
            let mut started = 0u128;
            for now in 0..=span {
                started += take(&mut l, usize::MAX, 0, Some(rate), now) as u128;
            }
            prop_assert_eq!(started, max as u128 + max as u128 * span as u128 / duration as u128);
        }
    }
}
