//! Queue names as BullMQ users write them: a name, optionally under a `prefix` (a namespace).

use crate::error::{EngineError, Result};

/// Longest queue name accepted, in bytes.
pub const MAX_QUEUE_NAME: usize = 255;

/// BullMQ's default prefix: the namespace of plain queue names.
pub const DEFAULT_PREFIX: &str = "bull";

/// The name a queue is known by inside the engine and its file: `name` itself under the default
/// prefix, `prefix:name` under any other (names never contain `:`, so the last `:` separates).
///
/// Errors: [`EngineError::InvalidOption`] naming `name` or `prefix`.
pub fn qualified_name(prefix: Option<&str>, name: &str) -> Result<String> {
    check_name_part("name", "(queue name) ", name)?;
    if name.contains(':') {
        return Err(EngineError::range(
            "name",
            format!("(queue name) must not contain ':', got {name:?}"),
        ));
    }
    match prefix {
        None | Some(DEFAULT_PREFIX) => Ok(name.to_string()),
        Some(p) => {
            check_name_part("prefix", "", p)?;
            Ok(format!("{p}:{name}"))
        }
    }
}

fn check_name_part(option: &str, what: &str, v: &str) -> Result<()> {
    if v.is_empty() {
        return Err(EngineError::range(
            option,
            format!("{what}must not be empty"),
        ));
    }
    if v.len() > MAX_QUEUE_NAME {
        return Err(EngineError::range(
            option,
            format!(
                "{what}must be at most {MAX_QUEUE_NAME} bytes, got {}",
                v.len()
            ),
        ));
    }
    if v.chars().any(char::is_control) {
        return Err(EngineError::range(
            option,
            format!("{what}must not contain control characters, got {v:?}"),
        ));
    }
    Ok(())
}
