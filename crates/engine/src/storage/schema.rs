//! Opening a database file: the one-engine-per-file lock, recognising (and refusing) files that
//! are not ours, are newer or are corrupt — without touching them — then pragmas and migrations.
//!
//! Pragmas: `journal_mode=WAL` (readers never block the writer; a commit is one append to the
//! WAL), `synchronous=NORMAL` (a committed transaction survives a process crash; `FULL`, for
//! durability `fsync`, also survives power loss), `foreign_keys=OFF` (no cross-table references),
//! `temp_store=MEMORY`, `cache_size=-16384` (16 MiB page cache per connection), a WAL
//! auto-checkpoint every 4,000 pages (SQLite's default is 1,000: fewer, larger checkpoints keep
//! the writer's commit round trip short under load; see docs/storage.md). `application_id` marks the file as ferroqueue's and the
//! `ferroqueue_migrations` table records applied schema versions.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::Read;
use std::path::Path;

use rusqlite::{Connection, ErrorCode, OpenFlags};

use crate::error::{EngineError, Result};

/// `PRAGMA application_id` of ferroqueue files ("FRQ1").
pub const APPLICATION_ID: i64 = 0x4652_5131;
/// Newest schema version this build knows.
pub const SCHEMA_VERSION: i64 = 10;

const MIGRATIONS: [&str; 10] = [
    // 1: tables
    r#"
CREATE TABLE queues (
    name TEXT PRIMARY KEY,
    last_auto_id INTEGER NOT NULL,
    custom_seq INTEGER NOT NULL,
    paused INTEGER NOT NULL
);
CREATE TABLE jobs (
    queue TEXT NOT NULL,
    key INTEGER NOT NULL,
    custom_id TEXT,
    name TEXT NOT NULL,
    data TEXT NOT NULL,
    opts TEXT,
    state INTEGER NOT NULL,
    priority INTEGER NOT NULL,
    delay INTEGER NOT NULL,
    timestamp INTEGER NOT NULL,
    run_at INTEGER NOT NULL,
    ord INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    processed_on INTEGER NOT NULL,
    finished_on INTEGER NOT NULL,
    attempts_made INTEGER NOT NULL,
    attempts_started INTEGER NOT NULL,
    progress TEXT,
    returnvalue TEXT,
    failed_reason TEXT,
    stacktrace TEXT,
    logs TEXT,
    PRIMARY KEY (queue, key)
);
CREATE INDEX jobs_by_state ON jobs (queue, state, seq);
"#,
    // 2: only finished rows are read by state (evicted jobs), so only they are indexed: a job's
    // inserts and moves through waiting and active no longer touch the index.
    r#"
DROP INDEX jobs_by_state;
CREATE INDEX jobs_finished ON jobs (queue, state, seq) WHERE state IN (4, 5);
"#,
    // 3: a queue's limits (NULL: none): its own rate limit and its cap on active jobs.
    r#"
ALTER TABLE queues ADD COLUMN rate_max INTEGER;
ALTER TABLE queues ADD COLUMN rate_duration INTEGER;
ALTER TABLE queues ADD COLUMN concurrency INTEGER;
"#,
    // 4: deduplication keys: the job holding each, until when (NULL: until it finishes).
    r#"
CREATE TABLE dedup (
    queue TEXT NOT NULL,
    id TEXT NOT NULL,
    job_key INTEGER NOT NULL,
    until INTEGER,
    PRIMARY KEY (queue, id)
);
"#,
    // 5: job groups' own settings (a row only while a group has any).
    r#"
CREATE TABLE groups (
    queue TEXT NOT NULL,
    id TEXT NOT NULL,
    concurrency INTEGER,
    rate_max INTEGER,
    rate_duration INTEGER,
    paused INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, id)
);
"#,
    // 6: a flow parent's dependencies (JSON: pending children, values of completed ones,
    // failed and ignored ones); a child's parent is in its options.
    r#"
ALTER TABLE jobs ADD COLUMN deps TEXT;
"#,
    // 7: how many times a job stalled (its process stopped while it was active).
    r#"
ALTER TABLE jobs ADD COLUMN stalled_counter INTEGER NOT NULL DEFAULT 0;
"#,
    // 8: job schedulers: each as JSON (how it repeats, its job template, its count and the slot
    // of its pending job; `domain/queue/schedulers.rs`).
    r#"
CREATE TABLE schedulers (
    queue TEXT NOT NULL,
    id TEXT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (queue, id)
);
"#,
    // 9: the name of the Worker that last took a job (BullMQ's `processedBy`).
    r#"
ALTER TABLE jobs ADD COLUMN processed_by TEXT;
"#,
    // 10: the dead-letter queue: each job's failed attempts (JSON) and each queue's DLQ
    // settings (JSON, NULL: the defaults).
    r#"
ALTER TABLE jobs ADD COLUMN history TEXT;
ALTER TABLE queues ADD COLUMN dlq TEXT;
"#,
];

/// Maps a SQLite error to an engine error about `path`.
pub fn classify(path: &str, e: rusqlite::Error) -> EngineError {
    match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseCorrupt) | Some(ErrorCode::NotADatabase) => {
            EngineError::StorageCorrupt {
                path: path.to_string(),
                reason: e.to_string(),
            }
        }
        Some(ErrorCode::DatabaseBusy) | Some(ErrorCode::DatabaseLocked) => {
            EngineError::StorageLocked(path.to_string())
        }
        _ => EngineError::StorageIo {
            path: path.to_string(),
            reason: e.to_string(),
        },
    }
}

fn io(path: &str, e: std::io::Error) -> EngineError {
    EngineError::StorageIo {
        path: path.to_string(),
        reason: e.to_string(),
    }
}

/// Takes the engine's exclusive lock on the database file (creating it empty if absent). The
/// lock is an advisory `flock` held for the engine's life, independent of SQLite's own locks.
///
/// Errors: [`EngineError::StorageLocked`] when another engine holds it.
pub fn lock_file(path: &Path) -> Result<File> {
    let shown = path.display().to_string();
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| io(&shown, e))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(TryLockError::WouldBlock) => Err(EngineError::StorageLocked(shown)),
        Err(TryLockError::Error(e)) => Err(io(&shown, e)),
    }
}

/// Opens (creating or migrating) a ferroqueue database. Refuses foreign, newer or corrupt files
/// before changing anything in them.
pub fn open(path: &Path, lock: &File, sync_full: bool) -> Result<Connection> {
    let shown = path.display().to_string();
    let len = lock.metadata().map_err(|e| io(&shown, e))?.len();
    if len > 0 {
        let mut header = [0u8; 16];
        let mut f = File::open(path).map_err(|e| io(&shown, e))?;
        let n = f.read(&mut header).map_err(|e| io(&shown, e))?;
        if n < 16 || &header != b"SQLite format 3\0" {
            return Err(EngineError::StorageForeign {
                path: shown,
                reason: "not an SQLite database".into(),
            });
        }
    }
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| classify(&shown, e))?;
    let err = |e| classify(&shown, e);
    let app_id: i64 = conn
        .pragma_query_value(None, "application_id", |r| r.get(0))
        .map_err(err)?;
    let tables: i64 = conn
        .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
        .map_err(err)?;
    let fresh = app_id == 0 && tables == 0;
    if !fresh && app_id != APPLICATION_ID {
        return Err(EngineError::StorageForeign {
            path: shown,
            reason: format!("application_id is {app_id:#x}, not ferroqueue's"),
        });
    }
    let version: i64 = if fresh {
        0
    } else {
        conn.query_row(
            "SELECT coalesce(max(version), 0) FROM ferroqueue_migrations",
            [],
            |r| r.get(0),
        )
        .map_err(err)?
    };
    if version > SCHEMA_VERSION {
        return Err(EngineError::StorageVersion {
            path: shown,
            found: version,
            supported: SCHEMA_VERSION,
        });
    }
    if !fresh {
        let check: String = conn
            .query_row("PRAGMA quick_check(1)", [], |r| r.get(0))
            .map_err(err)?;
        if check != "ok" {
            return Err(EngineError::StorageCorrupt {
                path: shown,
                reason: check,
            });
        }
    }
    // From here on the file is ours and may be changed.
    conn.pragma_update(None, "journal_mode", "WAL")
        .map_err(err)?;
    conn.pragma_update(
        None,
        "synchronous",
        if sync_full { "FULL" } else { "NORMAL" },
    )
    .map_err(err)?;
    conn.execute_batch(
        "PRAGMA foreign_keys=OFF; PRAGMA temp_store=MEMORY; PRAGMA cache_size=-16384; PRAGMA wal_autocheckpoint=4000;",
    )
    .map_err(err)?;
    migrate(&conn, version).map_err(err)?;
    Ok(conn)
}

pub(super) fn migrate(conn: &Connection, from: i64) -> rusqlite::Result<()> {
    migrate_to(conn, from, SCHEMA_VERSION)
}

/// Applies migrations `from + 1 ..= to` in one transaction.
pub(super) fn migrate_to(conn: &Connection, from: i64, to: i64) -> rusqlite::Result<()> {
    if from >= to {
        return Ok(());
    }
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let run = || -> rusqlite::Result<()> {
        if from == 0 {
            conn.execute_batch(
                "CREATE TABLE IF NOT EXISTS ferroqueue_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL);",
            )?;
            conn.pragma_update(None, "application_id", APPLICATION_ID)?;
        }
        for v in (from + 1)..=to {
            conn.execute_batch(MIGRATIONS[(v - 1) as usize])?;
            conn.execute(
                "INSERT INTO ferroqueue_migrations (version, applied_at) VALUES (?1, strftime('%s','now') * 1000)",
                [v],
            )?;
        }
        Ok(())
    };
    match run() {
        Ok(()) => conn.execute_batch("COMMIT"),
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            Err(e)
        }
    }
}

/// Opens a second, read-only connection for reads off the JS thread.
pub fn open_reader(path: &Path) -> Result<Connection> {
    let shown = path.display().to_string();
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| classify(&shown, e))?;
    conn.execute_batch("PRAGMA cache_size=-8192;")
        .map_err(|e| classify(&shown, e))?;
    Ok(conn)
}
