//! Job options as JSON gives them: one pass over the object's keys, where only a name that is
//! no known option is allocated (kept to name it in the error). `options.rs` validates them.

use std::fmt;

use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;

use super::dedup::RawDeduplication;
use super::flow::RawParent;
use super::groups::option::RawGroup;

#[derive(Default)]
pub(super) struct RawOptions {
    pub(super) job_id: Option<String>,
    pub(super) delay: Option<f64>,
    pub(super) priority: Option<f64>,
    pub(super) lifo: Option<bool>,
    pub(super) attempts: Option<f64>,
    pub(super) backoff: Option<RawBackoff>,
    pub(super) remove_on_complete: Option<RawKeep>,
    pub(super) remove_on_fail: Option<RawKeep>,
    pub(super) keep_logs: Option<f64>,
    pub(super) timestamp: Option<f64>,
    pub(super) timeout: Option<f64>,
    pub(super) deduplication: Option<RawDeduplication>,
    pub(super) group: Option<RawGroup>,
    pub(super) parent: Option<RawParent>,
    pub(super) fail_parent: Option<bool>,
    pub(super) ignore_dependency: Option<bool>,
    pub(super) remove_dependency: Option<bool>,
    pub(super) continue_parent: Option<bool>,
    /// The first name that is not one of [`super::options::JOB_OPTIONS`].
    pub(super) other: Option<String>,
}

/// A key of the options object; only a name that is no known option is allocated.
enum Field {
    JobId,
    Delay,
    Priority,
    Lifo,
    Attempts,
    Backoff,
    RemoveOnComplete,
    RemoveOnFail,
    KeepLogs,
    Timestamp,
    Timeout,
    Deduplication,
    Group,
    Parent,
    FailParent,
    IgnoreDependency,
    RemoveDependency,
    ContinueParent,
    Other(String),
}

impl<'de> Deserialize<'de> for Field {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct FieldVisitor;
        impl Visitor<'_> for FieldVisitor {
            type Value = Field;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an option name")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> std::result::Result<Field, E> {
                Ok(match v {
                    "jobId" => Field::JobId,
                    "delay" => Field::Delay,
                    "priority" => Field::Priority,
                    "lifo" => Field::Lifo,
                    "attempts" => Field::Attempts,
                    "backoff" => Field::Backoff,
                    "removeOnComplete" => Field::RemoveOnComplete,
                    "removeOnFail" => Field::RemoveOnFail,
                    "keepLogs" => Field::KeepLogs,
                    "timestamp" => Field::Timestamp,
                    "timeout" => Field::Timeout,
                    "deduplication" => Field::Deduplication,
                    "group" => Field::Group,
                    "parent" => Field::Parent,
                    "failParentOnFailure" => Field::FailParent,
                    "ignoreDependencyOnFailure" => Field::IgnoreDependency,
                    "removeDependencyOnFailure" => Field::RemoveDependency,
                    "continueParentOnFailure" => Field::ContinueParent,
                    other => Field::Other(other.to_string()),
                })
            }
        }
        d.deserialize_identifier(FieldVisitor)
    }
}

impl<'de> Deserialize<'de> for RawOptions {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct OptionsVisitor;
        impl<'de> Visitor<'de> for OptionsVisitor {
            type Value = RawOptions;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object of job options")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<RawOptions, A::Error> {
                let mut o = RawOptions::default();
                while let Some(field) = map.next_key::<Field>()? {
                    match field {
                        Field::JobId => o.job_id = map.next_value()?,
                        Field::Delay => o.delay = map.next_value()?,
                        Field::Priority => o.priority = map.next_value()?,
                        Field::Lifo => o.lifo = map.next_value()?,
                        Field::Attempts => o.attempts = map.next_value()?,
                        Field::Backoff => o.backoff = map.next_value()?,
                        Field::RemoveOnComplete => o.remove_on_complete = map.next_value()?,
                        Field::RemoveOnFail => o.remove_on_fail = map.next_value()?,
                        Field::KeepLogs => o.keep_logs = map.next_value()?,
                        Field::Timestamp => o.timestamp = map.next_value()?,
                        Field::Timeout => o.timeout = map.next_value()?,
                        Field::Deduplication => o.deduplication = map.next_value()?,
                        Field::Group => o.group = map.next_value()?,
                        Field::Parent => o.parent = map.next_value()?,
                        Field::FailParent => o.fail_parent = map.next_value()?,
                        Field::IgnoreDependency => o.ignore_dependency = map.next_value()?,
                        Field::RemoveDependency => o.remove_dependency = map.next_value()?,
                        Field::ContinueParent => o.continue_parent = map.next_value()?,
                        Field::Other(name) => {
                            map.next_value::<IgnoredAny>()?;
                            if o.other.is_none() {
                                o.other = Some(name);
                            }
                        }
                    }
                }
                Ok(o)
            }
        }
        d.deserialize_map(OptionsVisitor)
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum RawBackoff {
    Delay(f64),
    Spec {
        #[serde(rename = "type")]
        kind: String,
        delay: Option<f64>,
        jitter: Option<f64>,
    },
}

/// `removeOnComplete` / `removeOnFail` as BullMQ takes them.
#[derive(Deserialize, Debug, Clone, Copy)]
#[serde(untagged)]
pub enum RawKeep {
    Flag(bool),
    Count(f64),
    Spec {
        age: Option<f64>,
        count: Option<f64>,
    },
}
