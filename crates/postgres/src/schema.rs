//! The schema: created and migrated by ferroqueue itself, in its own PostgreSQL schema, versioned
//! (`meta.version`), every migration in one transaction under an advisory lock keyed by the
//! schema name, so processes starting together migrate once. A schema of a newer version, or one
//! that holds tables ferroqueue did not create, is refused and left untouched.
//!
//! Tables (see `docs/postgres.md`):
//! - `queues`: one row per queue: paused flag, automatic id and admission-order sequences.
//! - `jobs`: the hot table of unfinished jobs (waiting, prioritized, delayed, active), kept small:
//!   finished jobs leave it. Partial indexes per state: ready `(queue, priority, ord)`, delayed
//!   `(run_at)`, active `(token)` (acks, renewals and the sweep go by it). Fill factor 70 leaves
//!   room for in-page (HOT) updates: a lease renewal changes no indexed column.
//! - `finished`: completed and failed jobs, in about the order they finished (`seq`, taken at
//!   insert: concurrent batches interleave), for getters and retention.
//! - `job_ids`: custom ids (`jobId`), unique per queue across `jobs` and `finished`.
//! - `events`: QueueEvents' feed, written in the transaction of the change, read in commit order
//!   (by `xid`, below the reader's snapshot `xmin`).
//!
//! Version 2 adds the custom-id sequence of each queue (`queues.custom_seq`) and the wake-up
//! hint: statement triggers on `jobs` send `NOTIFY {schema}_ready, '<queue>'` once per queue
//! whenever a statement leaves jobs ready (an add, a retry, a promotion, a stalled job put back),
//! so idle workers in any process wake without polling; `{schema}_delayed` when a statement
//! leaves jobs delayed (the elected process recomputes its next promotion) and `{schema}_events`
//! when one writes events (QueueEvents readers read). Version 3 adds the token index
//! (`jobs_token`); version 4 drops the lease index, whose work the token index does; version 5
//! indexes events by time for their trim; version 6 adds each queue's limits and token bucket
//! (`queues.rate_max`, `rate_duration`, `concurrency`, `hold_until`, `tokens`, `refilled_at`);
//! version 7 the deduplication keys (`dedup`); version 8 job groups (`groups.rs`): each job's
//! `group_id` ('' for none), the ready index split into ungrouped jobs `(queue, priority, ord)`
//! and grouped ones `(queue, group_id, priority, ord)`, an index of grouped jobs by group and
//! state, the queue's `grouped` flag and the `groups` table (settings and turn of each group);
//! version 9 flows (`flows.rs`): `deps`, a parent's dependencies (a parent waits in state 6);
//! version 10 job schedulers (`backend/schedulers.rs`): `schedulers`, one row per scheduler with
//! its stored JSON and the slot of its pending job; version 11 `processed_by` on `jobs` and
//! `finished` (the name of the Worker that last took the job); version 12 the dead-letter queue:
//! `history` on `jobs` and `finished` (a job's failed attempts as JSON, `domain/dlq.rs`) and
//! `queues.dlq` (the queue's DLQ settings as JSON, NULL: the defaults); version 13 metrics
//! (`backend/metrics.rs`): `metrics`, BullMQ's per-minute counts of finished jobs,
//! `queues.metrics_points` (the most minutes a Worker asked to keep) and `workers`, a row per
//! live Worker of every process, renewed while it lives.

use ferroqueue_engine::structures::fnv1a;
use ferroqueue_engine::EngineError;
use tokio_postgres::Client;

use crate::connect::Target;

/// The schema version this build writes.
pub const VERSION: i32 = 13;

/// The tables whose rows belong to one queue (by their `queue` column): obliterate empties them.
pub const QUEUE_TABLES: [&str; 8] = [
    "jobs",
    "finished",
    "job_ids",
    "dedup",
    "groups",
    "deps",
    "schedulers",
    "metrics",
];

/// Migration `n` (1-based) takes a schema from version `n - 1` to `n`; `{s}` is the schema.
const MIGRATIONS: [&str; VERSION as usize] = [
    r#"
CREATE TABLE {s}.queues (
    name text PRIMARY KEY,
    paused boolean NOT NULL DEFAULT false,
    last_auto_id bigint NOT NULL DEFAULT 0,
    order_seq bigint NOT NULL DEFAULT 0
);
CREATE SEQUENCE {s}.tokens;
CREATE TABLE {s}.jobs (
    queue text NOT NULL,
    key bigint NOT NULL,
    custom_id text,
    name text NOT NULL,
    data text NOT NULL,
    opts text,
    state smallint NOT NULL,
    priority integer NOT NULL DEFAULT 0,
    ord bigint NOT NULL DEFAULT 0,
    delay bigint NOT NULL DEFAULT 0,
    run_at timestamptz,
    timestamp bigint NOT NULL,
    processed_on bigint,
    attempts_made integer NOT NULL DEFAULT 0,
    attempts_started integer NOT NULL DEFAULT 0,
    stalled_counter integer NOT NULL DEFAULT 0,
    token bigint,
    lease_until timestamptz,
    progress text,
    returnvalue text,
    failed_reason text,
    stacktrace text,
    logs text,
    PRIMARY KEY (queue, key)
) WITH (fillfactor = 70, autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_cost_delay = 0);
CREATE INDEX jobs_ready ON {s}.jobs (queue, priority, ord) WHERE state IN (0, 1);
CREATE INDEX jobs_delayed ON {s}.jobs (run_at) WHERE state = 2;
CREATE INDEX jobs_leases ON {s}.jobs (lease_until) WHERE state = 3;
CREATE TABLE {s}.finished (
    queue text NOT NULL,
    key bigint NOT NULL,
    custom_id text,
    name text NOT NULL,
    data text NOT NULL,
    opts text,
    state smallint NOT NULL,
    priority integer NOT NULL,
    delay bigint NOT NULL,
    timestamp bigint NOT NULL,
    processed_on bigint,
    finished_on bigint NOT NULL,
    attempts_made integer NOT NULL,
    attempts_started integer NOT NULL,
    stalled_counter integer NOT NULL,
    progress text,
    returnvalue text,
    failed_reason text,
    stacktrace text,
    logs text,
    seq bigint GENERATED ALWAYS AS IDENTITY,
    PRIMARY KEY (queue, key)
);
CREATE INDEX finished_order ON {s}.finished (queue, state, seq);
CREATE TABLE {s}.job_ids (
    queue text NOT NULL,
    custom_id text NOT NULL,
    key bigint NOT NULL,
    PRIMARY KEY (queue, custom_id)
);
CREATE TABLE {s}.events (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    xid xid8 NOT NULL DEFAULT pg_current_xact_id(),
    queue text NOT NULL,
    event text NOT NULL,
    payload text NOT NULL,
    at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX events_order ON {s}.events (xid, id);
"#,
    r#"
ALTER TABLE {s}.queues ADD COLUMN custom_seq bigint NOT NULL DEFAULT 0;
CREATE FUNCTION {s}.notify_ready() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('{s}_ready', q.queue)
    FROM (SELECT DISTINCT queue FROM ready_rows WHERE state IN (0, 1)) q;
    IF EXISTS (SELECT 1 FROM ready_rows WHERE state = 2) THEN
        PERFORM pg_notify('{s}_delayed', '');
    END IF;
    RETURN NULL;
END $$;
CREATE FUNCTION {s}.notify_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM written) THEN
        PERFORM pg_notify('{s}_events', '');
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER events_written AFTER INSERT ON {s}.events
    REFERENCING NEW TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION {s}.notify_events();
CREATE TRIGGER jobs_inserted_ready AFTER INSERT ON {s}.jobs
    REFERENCING NEW TABLE AS ready_rows FOR EACH STATEMENT EXECUTE FUNCTION {s}.notify_ready();
CREATE TRIGGER jobs_updated_ready AFTER UPDATE ON {s}.jobs
    REFERENCING NEW TABLE AS ready_rows FOR EACH STATEMENT EXECUTE FUNCTION {s}.notify_ready();
"#,
    // Acks and renewals find an activation by its token (unique: one sequence), so
    // their plans never depend on what ANALYZE last saw of the table (see acks.rs).
    r#"
CREATE UNIQUE INDEX jobs_token ON {s}.jobs (token) WHERE token IS NOT NULL;
"#,
    // The sweep finds expired leases through `jobs_token` (every active job has a token), so
    // `lease_until` is in no index: a renewal then changes no indexed column and is a HOT
    // update, in the page, with no index entry, and a claim writes one index entry fewer.
    r#"
DROP INDEX {s}.jobs_leases;
"#,
    // The trim of old events (every 5 s) read the whole table without it.
    r#"
CREATE INDEX events_at ON {s}.events (at);
"#,
    // A queue's limits (NULL: none; `limits.rs`): its own rate limit, its cap on active jobs,
    // its hold (`rateLimit(ms)`), and the token bucket's state, all under the queue row's lock.
    r#"
ALTER TABLE {s}.queues
    ADD COLUMN rate_max bigint,
    ADD COLUMN rate_duration bigint,
    ADD COLUMN concurrency bigint,
    ADD COLUMN hold_until timestamptz,
    ADD COLUMN tokens double precision,
    ADD COLUMN refilled_at timestamptz;
"#,
    // Deduplication keys (`dedup.rs`): the job holding each, until when (NULL: until it
    // finishes).
    r#"
CREATE TABLE {s}.dedup (
    queue text NOT NULL,
    id text NOT NULL,
    job_key bigint NOT NULL,
    until timestamptz,
    PRIMARY KEY (queue, id)
);
"#,
    // Job groups (`groups.rs`). The ready index holds ungrouped jobs only, so a claim of
    // ungrouped jobs never walks past grouped ones; grouped ones are ready per group in their
    // own index. A queue's `grouped` flag sends its claims through `claim_within`.
    r#"
ALTER TABLE {s}.jobs ADD COLUMN group_id text NOT NULL DEFAULT '';
DROP INDEX {s}.jobs_ready;
CREATE INDEX jobs_ready ON {s}.jobs (queue, priority, ord) WHERE state IN (0, 1) AND group_id = '';
CREATE INDEX jobs_group_ready ON {s}.jobs (queue, group_id, priority, ord)
    WHERE state IN (0, 1) AND group_id <> '';
CREATE INDEX jobs_group ON {s}.jobs (queue, group_id, state) WHERE group_id <> '';
ALTER TABLE {s}.queues ADD COLUMN grouped boolean NOT NULL DEFAULT false;
CREATE TABLE {s}.groups (
    queue text NOT NULL,
    id text NOT NULL,
    served bigint NOT NULL DEFAULT 0,
    concurrency bigint,
    rate_max bigint,
    rate_duration bigint,
    paused boolean NOT NULL DEFAULT false,
    tokens double precision,
    refilled_at timestamptz,
    PRIMARY KEY (queue, id)
);
CREATE INDEX groups_turn ON {s}.groups (queue, served);
"#,
    // Flows (`flows.rs`): one row per dependency of a parent, in the order added.
    r#"
CREATE TABLE {s}.deps (
    queue text NOT NULL,
    parent_id text NOT NULL,
    child_queue text NOT NULL,
    child_id text NOT NULL,
    seq bigserial,
    state smallint NOT NULL DEFAULT 0,
    value text,
    PRIMARY KEY (queue, parent_id, child_queue, child_id)
);
CREATE INDEX deps_order ON {s}.deps (queue, parent_id, seq);
"#,
    // Job schedulers (`backend/schedulers.rs`): the scheduler as the engine stores it (`body`)
    // and the slot of its pending job (`next`), by which they are listed and repaired.
    r#"
CREATE TABLE {s}.schedulers (
    queue text NOT NULL,
    id text NOT NULL,
    body text NOT NULL,
    next bigint,
    PRIMARY KEY (queue, id)
);
CREATE INDEX schedulers_next ON {s}.schedulers (queue, next, id);
"#,
    // The name of the Worker that last took a job (BullMQ's `processedBy`), kept when it
    // finishes.
    r#"
ALTER TABLE {s}.jobs ADD COLUMN processed_by text;
ALTER TABLE {s}.finished ADD COLUMN processed_by text;
"#,
    // The dead-letter queue: each job's failed attempts and each queue's settings.
    r#"
ALTER TABLE {s}.jobs ADD COLUMN history text;
ALTER TABLE {s}.finished ADD COLUMN history text;
ALTER TABLE {s}.queues ADD COLUMN dlq text;
"#,
    // Metrics: per-minute counts of finished jobs (minute -1: the total, -2: the first minute
    // counted), the minutes kept, and the live Workers of every process.
    r#"
CREATE TABLE {s}.metrics (
    queue text NOT NULL,
    failed boolean NOT NULL,
    minute bigint NOT NULL,
    count bigint NOT NULL,
    PRIMARY KEY (queue, failed, minute)
);
ALTER TABLE {s}.queues ADD COLUMN metrics_points integer NOT NULL DEFAULT 0;
CREATE TABLE {s}.workers (
    process text NOT NULL,
    holder integer NOT NULL,
    queue text NOT NULL,
    name text,
    started bigint NOT NULL,
    pid integer NOT NULL,
    addr text,
    seen_until timestamptz NOT NULL,
    PRIMARY KEY (process, holder)
);
CREATE INDEX workers_queue ON {s}.workers (queue);
"#,
];

/// The advisory lock that serialises migrations of one schema.
fn lock_key(schema: &str) -> i64 {
    i64::from(fnv1a(format!("ferroqueue:{schema}").as_bytes()))
}

/// Creates the schema or migrates it to [`VERSION`]; returns the version found before.
///
/// Errors: `ERR_STORAGE_VERSION` for a schema of a newer ferroqueue, `ERR_STORAGE_FOREIGN` for
/// a schema holding tables that are not ferroqueue's, `ERR_STORAGE_IO` when the server fails.
pub async fn migrate(client: &mut Client, t: &Target) -> Result<i32, EngineError> {
    let s = t.schema();
    let io = |e: tokio_postgres::Error| t.error("cannot migrate the schema", e);
    // Read committed whatever the server's default: after waiting for the lock, the statements
    // below must see what the process that held it committed.
    let tx = client
        .build_transaction()
        .isolation_level(tokio_postgres::IsolationLevel::ReadCommitted)
        .start()
        .await
        .map_err(io)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&lock_key(s)])
        .await
        .map_err(io)?;
    let tables: Vec<String> = tx
        .query(
            "SELECT table_name::text FROM information_schema.tables WHERE table_schema = $1",
            &[&s],
        )
        .await
        .map_err(io)?
        .iter()
        .map(|r| r.get(0))
        .collect();
    let found: i32 = if tables.iter().any(|n| n == "meta") {
        tx.query_opt(&format!("SELECT version FROM {s}.meta"), &[])
            .await
            .map_err(io)?
            .map_or(0, |r| r.get(0))
    } else if tables.is_empty() {
        tx.batch_execute(&format!(
            "CREATE SCHEMA IF NOT EXISTS {s}; CREATE TABLE {s}.meta (version integer NOT NULL)"
        ))
        .await
        .map_err(io)?;
        0
    } else {
        return Err(EngineError::StorageForeign {
            path: t.shown(),
            reason: format!(
                "schema {s} holds tables that ferroqueue did not create ({})",
                tables.join(", ")
            ),
        });
    };
    if found > VERSION {
        return Err(EngineError::StorageVersion {
            path: t.shown(),
            found: i64::from(found),
            supported: i64::from(VERSION),
        });
    }
    for sql in &MIGRATIONS[found.max(0) as usize..] {
        tx.batch_execute(&sql.replace("{s}", s)).await.map_err(io)?;
    }
    if found < VERSION {
        tx.execute(&format!("DELETE FROM {s}.meta"), &[])
            .await
            .map_err(io)?;
        tx.execute(
            &format!("INSERT INTO {s}.meta (version) VALUES ($1)"),
            &[&VERSION],
        )
        .await
        .map_err(io)?;
    }
    tx.commit().await.map_err(io)?;
    Ok(found)
}
