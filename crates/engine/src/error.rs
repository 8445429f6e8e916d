//! Engine errors with stable codes. The binding maps each to a JS error whose `code` is
//! [`EngineError::code`] and whose class follows [`EngineError::kind`].

/// Which JS error class an error becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// A value of the wrong type (`TypeError`).
    Type,
    /// A value out of its range (`RangeError`).
    Range,
    /// Anything else (`QueueError`).
    Queue,
}

/// Everything an engine call can refuse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    /// An option or argument is invalid; `option` names it.
    #[error("{option} {reason}")]
    InvalidOption {
        option: String,
        reason: String,
        kind: ErrorKind,
    },
    /// A BullMQ option that ferroqueue does not implement (yet); `option` names it.
    #[error("{option} {reason}")]
    Unsupported { option: String, reason: String },
    /// The queue (or engine) was closed.
    #[error("queue \"{0}\" is closed")]
    QueueClosed(String),
    /// No job with that id.
    #[error("job {0} not found")]
    JobNotFound(String),
    /// The job is not in a state that allows the operation.
    #[error("job {id} is {state}; {operation} needs it {expected}")]
    InvalidState {
        id: String,
        state: &'static str,
        operation: &'static str,
        expected: &'static str,
    },
    /// The job is active (held by a worker) and cannot be removed.
    #[error("job {0} is active (locked by a worker) and cannot be removed")]
    JobLocked(String),
    /// `obliterate` without `force` on a queue with active jobs.
    #[error("queue \"{queue}\" has {active} active job(s); pass {{ force: true }} to obliterate it anyway")]
    QueueActive { queue: String, active: usize },
    /// Another engine (in this or another process) holds the database file.
    #[error("{0} is in use by another ferroqueue engine (one engine per file)")]
    StorageLocked(String),
    /// The file exists but is not a ferroqueue database; it was left untouched.
    #[error("{path} is not a ferroqueue database ({reason}); it was left untouched")]
    StorageForeign { path: String, reason: String },
    /// The file was written by a newer ferroqueue.
    #[error("{path} has schema version {found}, newer than this ferroqueue supports ({supported}); it was left untouched")]
    StorageVersion {
        path: String,
        found: i64,
        supported: i64,
    },
    /// The database is damaged.
    #[error("{path} is corrupt ({reason}); it was left untouched")]
    StorageCorrupt { path: String, reason: String },
    /// Reading or writing the database failed.
    #[error("storage error on {path}: {reason}")]
    StorageIo { path: String, reason: String },
    /// A `parent` that is no job of that queue in this engine.
    #[error("parent job {id} not found in queue \"{queue}\" (a flow's jobs must live in one engine: the same dataPath, memory, or the same PostgreSQL schema)")]
    ParentNotFound { queue: String, id: String },
    /// A `parent` that has finished already.
    #[error("parent job {id} of queue \"{queue}\" is {state}: it can take no more children")]
    ParentFinished {
        queue: String,
        id: String,
        state: &'static str,
    },
    /// A flow job's `jobId` is taken: nothing of the flow was added.
    #[error("a job with id {id} exists in queue \"{queue}\"; nothing of the flow was added")]
    FlowJobExists { queue: String, id: String },
    /// A flow's job on another engine than the flow's (another dataPath, memory vs a file, or
    /// another database or schema).
    #[error("queue \"{queue}\" is on another engine than the flow ({reason}); a flow's jobs must live in one engine")]
    FlowCrossEngine { queue: String, reason: String },
    /// A bug: an invariant did not hold. Never expected.
    #[error("internal error: {0}")]
    Internal(String),
}

impl EngineError {
    /// The stable code string carried to JS.
    pub fn code(&self) -> &'static str {
        match self {
            EngineError::InvalidOption { .. } => "ERR_INVALID_OPTION",
            EngineError::Unsupported { .. } => "ERR_UNSUPPORTED_OPTION",
            EngineError::QueueClosed(_) => "ERR_QUEUE_CLOSED",
            EngineError::JobNotFound(_) => "ERR_JOB_NOT_FOUND",
            EngineError::InvalidState { .. } => "ERR_JOB_STATE",
            EngineError::JobLocked(_) => "ERR_JOB_LOCKED",
            EngineError::QueueActive { .. } => "ERR_QUEUE_ACTIVE",
            EngineError::StorageLocked(_) => "ERR_STORAGE_LOCKED",
            EngineError::StorageForeign { .. } => "ERR_STORAGE_FOREIGN",
            EngineError::StorageVersion { .. } => "ERR_STORAGE_VERSION",
            EngineError::StorageCorrupt { .. } => "ERR_STORAGE_CORRUPT",
            EngineError::StorageIo { .. } => "ERR_STORAGE_IO",
            EngineError::ParentNotFound { .. } => "ERR_PARENT_NOT_FOUND",
            EngineError::ParentFinished { .. } => "ERR_PARENT_FINISHED",
            EngineError::FlowJobExists { .. } => "ERR_FLOW_JOB_EXISTS",
            EngineError::FlowCrossEngine { .. } => "ERR_FLOW_CROSS_ENGINE",
            EngineError::Internal(_) => "ERR_INTERNAL",
        }
    }

    /// The JS error class this becomes.
    pub fn kind(&self) -> ErrorKind {
        match self {
            EngineError::InvalidOption { kind, .. } => *kind,
            EngineError::Unsupported { .. } => ErrorKind::Type,
            _ => ErrorKind::Queue,
        }
    }

    /// Shorthand for a range error on `option`.
    pub fn range(option: impl Into<String>, reason: impl Into<String>) -> Self {
        EngineError::InvalidOption {
            option: option.into(),
            reason: reason.into(),
            kind: ErrorKind::Range,
        }
    }

    /// Shorthand for a type error on `option`.
    pub fn type_error(option: impl Into<String>, reason: impl Into<String>) -> Self {
        EngineError::InvalidOption {
            option: option.into(),
            reason: reason.into(),
            kind: ErrorKind::Type,
        }
    }
}

/// Result of engine calls.
pub type Result<T> = std::result::Result<T, EngineError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_messages_name_the_option() {
        let e = EngineError::range("priority", "must be an integer in 0..=2097152, got -1");
        assert_eq!(e.code(), "ERR_INVALID_OPTION");
        assert_eq!(e.kind(), ErrorKind::Range);
        assert!(e.to_string().starts_with("priority must be"));
        assert_eq!(
            EngineError::QueueClosed("q".into()).code(),
            "ERR_QUEUE_CLOSED"
        );
        assert_eq!(EngineError::JobLocked("1".into()).kind(), ErrorKind::Queue);
    }
}
