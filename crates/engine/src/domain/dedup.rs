//! Deduplication (BullMQ's `deduplication: { id, ttl?, extend?, replace? }`): a key per
//! deduplication id names the job that holds it. While the key lives, adding a job with that id
//! adds nothing and answers the holder (the `deduplicated` event says so).
//!
//! - No `ttl`: the key lives until its job finishes (completed, or failed for good) or is
//!   removed.
//! - `ttl`: the key lives `ttl` ms from the add, whatever happens to its job, unless the job is
//!   removed; with `extend`, each duplicate add starts the window again.
//! - `replace` (with `ttl`): a duplicate add while the holder is still delayed replaces it: the
//!   holder is removed and the new job added, holding the key (with `extend`, a fresh window;
//!   else the one left). A holder that is no longer delayed makes the add a duplicate.
//!
//! No I/O, no clock: calls take `now` (ms).

use rustc_hash::FxHashMap;
use serde::Deserialize;

use super::job::JobKey;
use crate::error::{EngineError, Result};

/// The option, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deduplication {
    pub id: Box<str>,
    /// Ms the key lives from the add (`None`: until the job finishes).
    pub ttl: Option<u64>,
    pub extend: bool,
    pub replace: bool,
}

/// The option as JSON gives it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawDeduplication {
    id: Option<serde_json::Value>,
    ttl: Option<f64>,
    extend: Option<bool>,
    replace: Option<bool>,
    keep_last_if_active: Option<serde_json::Value>,
}

/// Longest deduplication id, as a custom job id.
const MAX_ID_BYTES: usize = 1024;

impl Deduplication {
    /// Validates the option (errors name `deduplication.<field>`).
    pub fn parse(raw: RawDeduplication) -> Result<Deduplication> {
        if raw.keep_last_if_active.is_some() {
            return Err(EngineError::Unsupported {
                option: "deduplication.keepLastIfActive".into(),
                reason: "is a BullMQ option that ferroqueue does not support yet".into(),
            });
        }
        let id = match raw.id {
            Some(serde_json::Value::String(s)) => s,
            Some(other) => {
                return Err(EngineError::type_error(
                    "deduplication.id",
                    format!("must be a string, got {other}"),
                ))
            }
            None => return Err(EngineError::type_error("deduplication.id", "is required")),
        };
        if id.is_empty() || id.len() > MAX_ID_BYTES || id.as_bytes().contains(&0) {
            return Err(EngineError::range(
                "deduplication.id",
                "must be a non-empty string of at most 1024 bytes without U+0000",
            ));
        }
        let ttl = match raw.ttl {
            None => None,
            Some(t) if t.is_finite() && t >= 1.0 && t.fract() == 0.0 && t <= 9007199254740992.0 => {
                Some(t as u64)
            }
            Some(t) => {
                return Err(EngineError::range(
                    "deduplication.ttl",
                    format!("must be an integer of ms in 1..=2^53, got {t}"),
                ))
            }
        };
        let replace = raw.replace.unwrap_or(false);
        if replace && ttl.is_none() {
            return Err(EngineError::type_error(
                "deduplication.replace",
                "needs a ttl (it replaces a delayed job within the ttl's window)",
            ));
        }
        Ok(Deduplication {
            id: id.into(),
            ttl,
            extend: raw.extend.unwrap_or(false),
            replace,
        })
    }

    /// When a key set now expires.
    fn until(&self, now: u64) -> Option<u64> {
        self.ttl.map(|t| now.saturating_add(t))
    }
}

/// A key: the job holding it, and until when (`None`: until the job finishes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DedupKey {
    pub job: JobKey,
    pub until: Option<u64>,
}

/// What an add with a deduplication id does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Add the job; it holds the key.
    Add,
    /// Remove this delayed holder, then add the job; it holds the key.
    Replace(JobKey),
    /// Add nothing: this job holds the key.
    Duplicate(JobKey),
}

/// A queue's deduplication keys.
#[derive(Debug, Default, Clone)]
pub struct DedupKeys {
    keys: FxHashMap<Box<str>, DedupKey>,
}

impl DedupKeys {
    /// The live key of `id` (an expired one is dropped: answers `None`).
    pub fn get(&mut self, id: &str, now: u64) -> Option<DedupKey> {
        let k = *self.keys.get(id)?;
        if k.until.is_some_and(|u| u <= now) {
            self.keys.remove(id);
            return None;
        }
        Some(k)
    }

    /// Decides an add of a job with `d` (`is_delayed`: whether a job is delayed), and keeps
    /// the key's window as the decision needs (`extend` restarts it on a duplicate). The caller
    /// sets the key with [`DedupKeys::hold`] once it added the job.
    pub fn decide(
        &mut self,
        d: &Deduplication,
        now: u64,
        is_delayed: impl Fn(JobKey) -> bool,
    ) -> Verdict {
        let Some(key) = self.get(&d.id, now) else {
            return Verdict::Add;
        };
        if d.replace && is_delayed(key.job) {
            return Verdict::Replace(key.job);
        }
        if d.extend && d.ttl.is_some() {
            if let Some(k) = self.keys.get_mut(&d.id) {
                k.until = d.until(now);
            }
        }
        Verdict::Duplicate(key.job)
    }

    /// `job` holds the key of `d` after `verdict` (a replacement keeps the window left unless
    /// `extend`); answers the key as set.
    pub fn hold(&mut self, d: &Deduplication, job: JobKey, verdict: Verdict, now: u64) -> DedupKey {
        let until = match (verdict, self.keys.get(&d.id)) {
            (Verdict::Replace(_), Some(old)) if !d.extend => old.until,
            _ => d.until(now),
        };
        let k = DedupKey { job, until };
        self.keys.insert(d.id.clone(), k);
        k
    }

    /// Puts a stored key back (at open).
    pub fn restore(&mut self, id: Box<str>, key: DedupKey) {
        self.keys.insert(id, key);
    }

    /// `job`, holder of the key of `id`, finished: a key without a window goes with it.
    /// Answers whether the key was removed.
    pub fn finished(&mut self, id: &str, job: JobKey) -> bool {
        match self.keys.get(id) {
            Some(k) if k.job == job && k.until.is_none() => {
                self.keys.remove(id);
                true
            }
            _ => false,
        }
    }

    /// `job` was removed: a key it holds goes with it. Answers whether the key was removed.
    pub fn removed(&mut self, id: &str, job: JobKey) -> bool {
        match self.keys.get(id) {
            Some(k) if k.job == job => {
                self.keys.remove(id);
                true
            }
            _ => false,
        }
    }

    /// Removes the key of `id` whoever holds it; answers whether there was a live one.
    pub fn remove(&mut self, id: &str, now: u64) -> bool {
        let live = self.get(id, now).is_some();
        self.keys.remove(id);
        live
    }

    /// Drops every key (obliterate).
    pub fn clear(&mut self) {
        self.keys.clear();
    }

    /// Every key (for tests and the model).
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether there is no key.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn d(ttl: Option<u64>, extend: bool, replace: bool) -> Deduplication {
        Deduplication {
            id: "k".into(),
            ttl,
            extend,
            replace,
        }
    }

    fn parse(json: &str) -> Result<Deduplication> {
        let raw: RawDeduplication = serde_json::from_str(json)
            .map_err(|e| EngineError::type_error("deduplication", e.to_string()))?;
        Deduplication::parse(raw)
    }

    #[test]
    fn options_are_checked_with_the_field_named() {
        assert_eq!(
            parse(r#"{"id":"a","ttl":5}"#).ok(),
            Some(Deduplication {
                id: "a".into(),
                ttl: Some(5),
                extend: false,
                replace: false
            })
        );
        for (json, named) in [
            (r#"{"ttl":5}"#, "deduplication.id"),
            (r#"{"id":3}"#, "deduplication.id"),
            (r#"{"id":""}"#, "deduplication.id"),
            (r#"{"id":"a","ttl":0}"#, "deduplication.ttl"),
            (r#"{"id":"a","ttl":1.5}"#, "deduplication.ttl"),
            (r#"{"id":"a","replace":true}"#, "deduplication.replace"),
            (
                r#"{"id":"a","keepLastIfActive":true}"#,
                "deduplication.keepLastIfActive",
            ),
        ] {
            let e = parse(json).unwrap_err();
            assert!(e.to_string().starts_with(named), "{json}: {e}");
        }
        assert!(parse(r#"{"id":"a","tll":5}"#).is_err(), "a typo is refused");
    }

    #[test]
    fn without_ttl_the_key_lives_until_its_job_finishes() {
        let mut k = DedupKeys::default();
        let o = d(None, false, false);
        assert_eq!(k.decide(&o, 0, |_| false), Verdict::Add);
        k.hold(&o, 1, Verdict::Add, 0);
        assert_eq!(k.decide(&o, u64::MAX / 2, |_| false), Verdict::Duplicate(1));
        assert!(!k.finished("k", 2), "only its holder releases it");
        assert!(k.finished("k", 1));
        assert_eq!(k.decide(&o, 5, |_| false), Verdict::Add);
    }

    #[test]
    fn a_ttl_is_a_window_that_extend_restarts() {
        let mut k = DedupKeys::default();
        let o = d(Some(100), false, false);
        k.hold(&o, 1, Verdict::Add, 0);
        assert!(!k.finished("k", 1), "a window outlives its job");
        assert_eq!(k.decide(&o, 99, |_| false), Verdict::Duplicate(1));
        assert_eq!(k.decide(&o, 100, |_| false), Verdict::Add);
        let e = d(Some(100), true, false);
        k.hold(&e, 2, Verdict::Add, 200);
        assert_eq!(k.decide(&e, 290, |_| false), Verdict::Duplicate(2));
        assert_eq!(k.decide(&e, 380, |_| false), Verdict::Duplicate(2));
        assert_eq!(k.decide(&e, 479, |_| false), Verdict::Duplicate(2));
        assert_eq!(k.decide(&e, 580, |_| false), Verdict::Add);
    }

    #[test]
    fn replace_swaps_a_delayed_holder_only() {
        let mut k = DedupKeys::default();
        let o = d(Some(100), false, true);
        k.hold(&o, 1, Verdict::Add, 0);
        assert_eq!(k.decide(&o, 10, |j| j == 1), Verdict::Replace(1));
        let set = k.hold(&o, 2, Verdict::Replace(1), 10);
        assert_eq!(
            set,
            DedupKey {
                job: 2,
                until: Some(100)
            },
            "the window left"
        );
        assert_eq!(k.decide(&o, 20, |_| false), Verdict::Duplicate(2));
        let e = d(Some(100), true, true);
        assert_eq!(k.hold(&e, 3, Verdict::Replace(2), 50).until, Some(150));
    }

    proptest! {
        /// Against a model (a map of id to holder and expiry, checked by brute force): the
        /// verdicts of adds, finishes and removals over time.
        #[test]
        fn keys_follow_the_model(ops in proptest::collection::vec((0u8..4, 0u64..60, any::<bool>(), any::<bool>()), 1..200)) {
            let mut k = DedupKeys::default();
            let mut model: Option<(JobKey, Option<u64>)> = None;
            let mut now = 0;
            let mut next = 1;
            for (op, gap, with_ttl, extend) in ops {
                now += gap;
                let o = d(with_ttl.then_some(50), extend, false);
                let live = model.filter(|(_, u)| u.is_none_or(|u| u > now));
                match op {
                    0 | 1 => {
                        let v = k.decide(&o, now, |_| false);
                        match live {
                            Some((j, _)) => {
                                prop_assert_eq!(v, Verdict::Duplicate(j));
                                if extend && with_ttl { model = Some((j, Some(now + 50))); }
                            }
                            None => {
                                prop_assert_eq!(v, Verdict::Add);
                                k.hold(&o, next, v, now);
                                model = Some((next, o.until(now)));
                                next += 1;
                            }
                        }
                    }
                    2 => {
                        if let Some((j, u)) = live {
                            prop_assert_eq!(k.finished("k", j), u.is_none());
                            if u.is_none() { model = None; }
                        }
                    }
                    _ => {
                        prop_assert_eq!(k.remove("k", now), live.is_some());
                        model = None;
                    }
                }
            }
        }
    }
}
