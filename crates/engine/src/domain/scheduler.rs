//! Job schedulers (BullMQ v5's `upsertJobScheduler`): what a scheduler repeats and when. A
//! scheduler repeats `every` ms, or on a cron `pattern` (5 or 6 fields, seconds first when 6)
//! in a time zone (`tz`, IANA names; UTC without one), between `startDate` and `endDate`, at
//! most `limit` times. It keeps exactly one job pending (its next slot); the queue creates the
//! next one when that job starts (`queue/schedulers.rs`), for the first slot after that moment,
//! so slots missed while nothing ran are skipped, never replayed in a burst.

use std::str::FromStr;

use chrono::{DateTime, TimeZone, Utc};
use chrono_tz::Tz;
use croner::Cron;
use serde::{Deserialize, Serialize};

use crate::error::{EngineError, Result};

/// How a scheduler repeats, as the caller gave it (stored as this JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RepeatOptions {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub every: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tz: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_date: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_date: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub immediately: bool,
}

/// A checked [`RepeatOptions`], ready to give slots.
#[derive(Debug, Clone)]
pub struct Repeat {
    pub options: RepeatOptions,
    rule: Rule,
}

#[derive(Debug, Clone)]
enum Rule {
    Every(u64),
    Cron(Box<Cron>, Tz),
}

/// The longest `every`: a JS timer's limit (2^31 - 1 ms, about 24.8 days).
pub const MAX_EVERY_MS: u64 = i32::MAX as u64;

impl Repeat {
    /// Checks `options`, naming the option at fault: exactly one of `every` (1..=2^31-1 ms) and
    /// `pattern` (a valid cron pattern); `tz` a known IANA zone, only with `pattern`;
    /// `startDate` before `endDate`; `limit` at least 1.
    pub fn new(options: RepeatOptions) -> Result<Repeat> {
        let rule = match (&options.every, &options.pattern) {
            (Some(_), Some(_)) => {
                return Err(EngineError::type_error(
                    "repeat.pattern",
                    "cannot be given with repeat.every: a scheduler repeats one way",
                ))
            }
            (None, None) => {
                return Err(EngineError::type_error(
                    "repeat",
                    "needs every (ms) or pattern (a cron pattern)",
                ))
            }
            (Some(every), None) => {
                if *every == 0 || *every > MAX_EVERY_MS {
                    return Err(EngineError::range(
                        "repeat.every",
                        format!("must be an integer in 1..={MAX_EVERY_MS} ms, got {every}"),
                    ));
                }
                if options.tz.is_some() {
                    return Err(EngineError::type_error(
                        "repeat.tz",
                        "applies to a pattern only, not to every",
                    ));
                }
                Rule::Every(*every)
            }
            (None, Some(pattern)) => {
                let cron = Cron::from_str(pattern).map_err(|e| {
                    EngineError::range(
                        "repeat.pattern",
                        format!("is not a cron pattern ({e}): {pattern:?}"),
                    )
                })?;
                let tz = match &options.tz {
                    None => Tz::UTC,
                    Some(name) => Tz::from_str(name).map_err(|_| {
                        EngineError::range(
                            "repeat.tz",
                            format!("is not a known time zone (an IANA name such as Europe/Paris): {name:?}"),
                        )
                    })?,
                };
                Rule::Cron(Box::new(cron), tz)
            }
        };
        if let (Some(start), Some(end)) = (options.start_date, options.end_date) {
            if end <= start {
                return Err(EngineError::range(
                    "repeat.endDate",
                    format!("must be after startDate ({start}), got {end}"),
                ));
            }
        }
        if options.limit == Some(0) {
            return Err(EngineError::range(
                "repeat.limit",
                "must be at least 1, got 0",
            ));
        }
        Ok(Repeat { options, rule })
    }

    /// Parses and checks the JSON of [`RepeatOptions`].
    pub fn from_json(text: &str) -> Result<Repeat> {
        let options: RepeatOptions = serde_json::from_str(text)
            .map_err(|e| EngineError::type_error("repeat", format!("is not valid: {e}")))?;
        Repeat::new(options)
    }

    /// The first slot of a new scheduler at `now`: `every` runs at once (or at `startDate`), a
    /// pattern at its next occurrence (at once with `immediately`). `None` when there is none
    /// (past `endDate`).
    pub fn first(&self, now: u64) -> Option<u64> {
        let from = self.options.start_date.map_or(now, |s| s.max(now));
        let slot = match &self.rule {
            Rule::Every(_) => from,
            Rule::Cron(..) if self.options.immediately && from == now => now,
            Rule::Cron(..) => self.occurrence_after(from.saturating_sub(1))?,
        };
        self.within_end(slot)
    }

    /// The first slot after `now` that follows `last` (the slot that just started): for `every`,
    /// on the grid `last + k * every`; for a pattern, its next occurrence. Missed slots are
    /// skipped. `None` past `endDate`.
    pub fn next(&self, last: u64, now: u64) -> Option<u64> {
        let slot = match &self.rule {
            Rule::Every(every) => {
                let k = (now.saturating_sub(last) / every) + 1;
                last.saturating_add(k.saturating_mul(*every))
            }
            Rule::Cron(..) => self.occurrence_after(now.max(last))?,
        };
        self.within_end(slot)
    }

    fn within_end(&self, slot: u64) -> Option<u64> {
        match self.options.end_date {
            Some(end) if slot > end => None,
            _ => Some(slot),
        }
    }

    /// The pattern's first occurrence strictly after `after` (ms), in its time zone.
    fn occurrence_after(&self, after: u64) -> Option<u64> {
        let Rule::Cron(cron, tz) = &self.rule else {
            return None;
        };
        let at: DateTime<Utc> = Utc
            .timestamp_millis_opt(i64::try_from(after).ok()?)
            .single()?;
        let local = at.with_timezone(tz);
        let next = cron.find_next_occurrence(&local, false).ok()?;
        u64::try_from(next.timestamp_millis()).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repeat(json: &str) -> Repeat {
        Repeat::from_json(json).unwrap()
    }

    /// 2026-03-07T12:00:00Z, the day before New York moves to daylight saving time.
    const SAT_NOON_UTC: u64 = 1_772_884_800_000;
    const HOUR: u64 = 3_600_000;

    #[test]
    fn every_starts_at_once_and_skips_missed_slots_on_its_grid() {
        let r = repeat(r#"{"every":200}"#);
        assert_eq!(r.first(1_000), Some(1_000));
        // Started on time: the next slot is one step on.
        assert_eq!(r.next(1_000, 1_005), Some(1_200));
        // Started 1,050 ms late: slots 1,200..=2,000 were missed, the next is 2,200.
        assert_eq!(r.next(1_000, 2_050), Some(2_200));
        let later = repeat(r#"{"every":200,"startDate":5000,"endDate":5300}"#);
        assert_eq!(later.first(1_000), Some(5_000));
        assert_eq!(later.next(5_000, 5_000), Some(5_200));
        assert_eq!(later.next(5_200, 5_200), None);
    }

    #[test]
    fn a_pattern_lands_on_its_instants_in_its_time_zone_across_daylight_saving() {
        let r = repeat(r#"{"pattern":"0 9 * * *","tz":"America/New_York"}"#);
        // 09:00 in New York is 14:00 UTC in winter (EST, UTC-5)...
        let first = r.first(SAT_NOON_UTC).unwrap();
        assert_eq!(first, SAT_NOON_UTC + 2 * HOUR);
        // ...and 13:00 UTC from Sunday 8 March on (EDT, UTC-4): 23 hours later.
        let second = r.next(first, first).unwrap();
        assert_eq!(second - first, 23 * HOUR);
        let third = r.next(second, second).unwrap();
        assert_eq!(third - second, 24 * HOUR);
        // The same pattern in UTC.
        let utc = repeat(r#"{"pattern":"0 9 * * *"}"#);
        assert_eq!(utc.first(SAT_NOON_UTC), Some(SAT_NOON_UTC + 21 * HOUR));
        // Six fields: seconds first.
        let secs = repeat(r#"{"pattern":"*/10 * * * * *"}"#);
        assert_eq!(secs.first(SAT_NOON_UTC + 1), Some(SAT_NOON_UTC + 10_000));
        // immediately: the first run is now.
        let now = repeat(r#"{"pattern":"0 9 * * *","immediately":true}"#);
        assert_eq!(now.first(SAT_NOON_UTC), Some(SAT_NOON_UTC));
    }

    #[test]
    fn bad_options_name_their_option() {
        let bad = |json: &str| Repeat::from_json(json).unwrap_err().to_string();
        assert!(bad(r#"{"every":0}"#).contains("repeat.every"));
        assert!(bad(r#"{"every":10,"pattern":"* * * * *"}"#).contains("repeat.pattern"));
        assert!(bad(r#"{}"#).contains("repeat"));
        assert!(bad(r#"{"pattern":"61 * * * *"}"#).contains("repeat.pattern"));
        assert!(bad(r#"{"pattern":"* * * * *","tz":"Mars/Olympus"}"#).contains("repeat.tz"));
        assert!(bad(r#"{"every":10,"tz":"UTC"}"#).contains("repeat.tz"));
        assert!(bad(r#"{"every":10,"startDate":5,"endDate":5}"#).contains("repeat.endDate"));
        assert!(bad(r#"{"every":10,"limit":0}"#).contains("repeat.limit"));
        assert!(bad(r#"{"every":10,"cron":"x"}"#).contains("repeat"));
    }
}
