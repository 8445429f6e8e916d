//! Listing jobs by state: the state names getters, counts and `clean` take, and BullMQ's
//! inclusive, Redis-style page bounds.

use super::job::JobState;

/// A state name as getters and counts take it: a job state or `paused`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateFilter {
    State(JobState),
    /// BullMQ's `paused` list, which BullMQ 5+ keeps empty: a paused queue's jobs stay in
    /// `waiting` / `prioritized`. Always empty here, so no job is counted twice.
    Paused,
}

impl StateFilter {
    /// Parses BullMQ's names (`wait` is `waiting`). `None` for unknown names.
    pub fn parse(s: &str) -> Option<StateFilter> {
        if s == "paused" {
            return Some(StateFilter::Paused);
        }
        JobState::parse(s).map(StateFilter::State)
    }

    /// Every state `getJobCounts()` reports when none is asked.
    pub const ALL: [&'static str; 8] = [
        "waiting",
        "active",
        "completed",
        "failed",
        "delayed",
        "prioritized",
        "waiting-children",
        "paused",
    ];
}

/// Parses state names for getters, counts and clean; an unknown one is a range error on `option`.
pub fn parse_states(option: &str, names: &[String]) -> crate::error::Result<Vec<StateFilter>> {
    names
        .iter()
        .map(|n| {
            StateFilter::parse(n).ok_or_else(|| {
                crate::error::EngineError::range(
                    option,
                    format!(
                        "has an unknown state '{n}'; expected one of {}",
                        StateFilter::ALL.join(", ")
                    ),
                )
            })
        })
        .collect()
}

/// Resolves inclusive Redis-style bounds over `len` items; `None` when the page is empty.
pub fn page_bounds(len: usize, start: i64, end: i64) -> Option<(usize, usize)> {
    let len_i = len as i64;
    let norm = |i: i64| if i < 0 { len_i + i } else { i };
    let from = norm(start).max(0);
    let to = norm(end).min(len_i - 1);
    if len == 0 || from > to {
        return None;
    }
    Some((from as usize, to as usize))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_bounds_follow_redis() {
        assert_eq!(page_bounds(10, 0, -1), Some((0, 9)));
        assert_eq!(page_bounds(10, 2, 4), Some((2, 4)));
        assert_eq!(page_bounds(10, -3, -1), Some((7, 9)));
        assert_eq!(page_bounds(10, 5, 100), Some((5, 9)));
        assert_eq!(page_bounds(10, 8, 2), None);
        assert_eq!(page_bounds(0, 0, -1), None);
        assert_eq!(page_bounds(3, -10, 0), Some((0, 0)));
    }
}
