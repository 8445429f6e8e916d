//! The job option `group: { id, priority? }` (BullMQ Pro's), validated.

use std::sync::Arc;

use serde::Deserialize;

use crate::domain::options::priority;
use crate::error::{EngineError, Result};

/// Longest group id, as a custom job id.
const MAX_ID_BYTES: usize = 1024;

/// A job's group: its id and its priority within the group (0 first, then lower numbers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobGroup {
    pub id: Arc<str>,
    pub priority: u32,
}

/// The option as JSON gives it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawGroup {
    id: Option<serde_json::Value>,
    priority: Option<f64>,
    max_size: Option<serde_json::Value>,
}

impl JobGroup {
    /// Validates the option (errors name `group.<field>`). An id may be a string or a safe
    /// integer (kept as its decimal text, so `7` and `"7"` are one group).
    pub fn parse(raw: RawGroup) -> Result<JobGroup> {
        if raw.max_size.is_some() {
            return Err(EngineError::Unsupported {
                option: "group.maxSize".into(),
                reason: "is a BullMQ Pro option that ferroqueue does not support yet".into(),
            });
        }
        let id = match raw.id {
            Some(serde_json::Value::String(s)) => s,
            Some(serde_json::Value::Number(n)) => match n.as_i64() {
                Some(i) if i.unsigned_abs() <= (1 << 53) => i.to_string(),
                _ => {
                    return Err(EngineError::type_error(
                        "group.id",
                        format!("must be a string or a safe integer, got {n}"),
                    ))
                }
            },
            Some(other) => {
                return Err(EngineError::type_error(
                    "group.id",
                    format!("must be a string or a safe integer, got {other}"),
                ))
            }
            None => return Err(EngineError::type_error("group.id", "is required")),
        };
        let priority = match raw.priority {
            Some(p) => priority("group.priority", p)?,
            None => 0,
        };
        Ok(JobGroup {
            id: checked_id("group.id", &id)?.into(),
            priority,
        })
    }
}

/// Checks a group id given to a queue method or a job: a non-empty string of at most 1024
/// bytes without U+0000 (a `RangeError` naming `option` otherwise).
pub fn checked_id<'a>(option: &str, id: &'a str) -> Result<&'a str> {
    if id.is_empty() || id.len() > MAX_ID_BYTES || id.as_bytes().contains(&0) {
        return Err(EngineError::range(
            option,
            "must be a non-empty string of at most 1024 bytes without U+0000",
        ));
    }
    Ok(id)
}
