//! Engine errors as JS errors. The message is `CODE\u{1}Class\u{1}text`; the JS layer splits it
//! into an error of class `Class` (`TypeError`, `RangeError` or `QueueError`) with `code` = CODE.

use ferroqueue_engine::{EngineError, ErrorKind};
use napi::{Error, Status};

/// Separator between the parts of an encoded error message.
const SEP: char = '\u{1}';

/// Encodes an engine error for the JS layer.
pub fn to_napi(e: EngineError) -> Error {
    let class = match e.kind() {
        ErrorKind::Type => "TypeError",
        ErrorKind::Range => "RangeError",
        ErrorKind::Queue => "QueueError",
    };
    Error::new(
        Status::GenericFailure,
        format!("{}{SEP}{class}{SEP}{e}", e.code()),
    )
}

/// A range error on `option`.
pub fn range(option: &str, reason: impl Into<String>) -> Error {
    to_napi(EngineError::range(option, reason))
}

/// Converts a JS number that must be a count: an integer >= 0.
pub fn count_arg(option: &str, v: f64) -> napi::Result<usize> {
    if !v.is_finite() || v < 0.0 || v.fract() != 0.0 {
        return Err(range(
            option,
            format!("must be an integer >= 0 (a count), got {v}"),
        ));
    }
    Ok(v.min(usize::MAX as f64) as usize)
}

/// Converts a JS number that must be a non-negative integer-ish millisecond value.
pub fn ms(option: &str, v: f64) -> napi::Result<u64> {
    ferroqueue_engine::domain::options::non_negative_ms(option, v).map_err(to_napi)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_errors_carry_code_and_class() {
        let e = to_napi(EngineError::range("priority", "must be an integer, got -1"));
        let parts: Vec<&str> = e.reason.split(SEP).collect();
        assert_eq!(
            parts,
            [
                "ERR_INVALID_OPTION",
                "RangeError",
                "priority must be an integer, got -1"
            ]
        );
        let e = to_napi(EngineError::QueueClosed("q".into()));
        assert!(e.reason.starts_with("ERR_QUEUE_CLOSED\u{1}QueueError\u{1}"));
        let e = range("limit", "must be >= 0");
        assert!(e.reason.ends_with("limit must be >= 0"));
        assert_eq!(ms("delay", 12.9).ok(), Some(12));
        assert!(ms("delay", -1.0)
            .unwrap_err()
            .reason
            .contains("delay must be"));
    }
}
