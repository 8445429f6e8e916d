//! Connecting to PostgreSQL: a URL (`postgresql://user@host:5432/db`) and the schema ferroqueue
//! keeps its tables in (default `ferroqueue`). Errors name what was wrong and never the password.

use ferroqueue_engine::EngineError;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, NoTls, Row, Statement};

/// The schema ferroqueue uses unless told otherwise.
pub const DEFAULT_SCHEMA: &str = "ferroqueue";

/// Where a backend keeps its queues. Its `Debug` form, like its errors, leaves out the user and
/// password.
#[derive(Clone, PartialEq, Eq)]
pub struct Target {
    url: String,
    schema: String,
}

impl Target {
    /// A target; the schema must be a plain lower-case identifier (`[a-z_][a-z0-9_]*`, at most
    /// 63 bytes), so it can be written into statements unquoted.
    ///
    /// Errors: `ERR_INVALID_OPTION` naming `connection` or `schema`.
    pub fn new(url: &str, schema: Option<&str>) -> Result<Target, EngineError> {
        if !(url.starts_with("postgresql://") || url.starts_with("postgres://")) {
            return Err(EngineError::range(
                "connection",
                "must be a PostgreSQL URL (postgresql://user@host:5432/database)",
            ));
        }
        url.parse::<tokio_postgres::Config>().map_err(|e| {
            EngineError::range("connection", format!("is not a valid PostgreSQL URL: {e}"))
        })?;
        let schema = schema.unwrap_or(DEFAULT_SCHEMA);
        let plain = !schema.is_empty()
            && schema.len() <= 63
            && schema
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
            && !schema.as_bytes()[0].is_ascii_digit();
        if !plain {
            return Err(EngineError::range(
                "schema",
                format!(
                    "must be a lower-case identifier ([a-z_][a-z0-9_]*, at most 63 bytes), \
                     got {schema:?}"
                ),
            ));
        }
        Ok(Target {
            url: url.to_string(),
            schema: schema.to_string(),
        })
    }

    /// The schema name.
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// The server as errors show it: host, port and database, no user or password.
    pub fn shown(&self) -> String {
        match self.url.parse::<tokio_postgres::Config>() {
            Ok(c) => {
                let host = c
                    .get_hosts()
                    .first()
                    .map(|h| match h {
                        tokio_postgres::config::Host::Tcp(s) => s.clone(),
                        tokio_postgres::config::Host::Unix(p) => p.display().to_string(),
                    })
                    .unwrap_or_default();
                let port = c.get_ports().first().copied().unwrap_or(5432);
                let db = c.get_dbname().unwrap_or("");
                format!("postgresql://{host}:{port}/{db} (schema {})", self.schema)
            }
            Err(_) => format!("PostgreSQL (schema {})", self.schema),
        }
    }

    /// A storage error about this target: what failed, and the server's own message (with its
    /// detail and hint) when it answered one.
    pub fn error(&self, what: &str, e: tokio_postgres::Error) -> EngineError {
        let reason = match e.as_db_error() {
            Some(db) => {
                let mut r = format!("{what}: {} ({})", db.message(), db.code().code());
                if let Some(d) = db.detail() {
                    r.push_str(&format!("; {d}"));
                }
                if let Some(h) = db.hint() {
                    r.push_str(&format!("; hint: {h}"));
                }
                r
            }
            None => match std::error::Error::source(&e) {
                Some(cause) => format!("{what}: {e}: {cause}"),
                None => format!("{what}: {e}"),
            },
        };
        EngineError::StorageIo {
            path: self.shown(),
            reason,
        }
    }
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown())
    }
}

/// Opens one connection, driven on the current tokio runtime until the client is dropped.
///
/// Errors: `ERR_STORAGE_IO` naming the server (not the password) when it cannot be reached or
/// refuses the credentials.
pub async fn connect(target: &Target) -> Result<Client, EngineError> {
    let (client, connection) = tokio_postgres::connect(&target.url, NoTls)
        .await
        .map_err(|e| target.error("cannot connect", e))?;
    tokio::spawn(async move {
        // The client sees a dropped connection as errors on its calls.
        let _ = connection.await;
    });
    client
        .batch_execute(SESSION)
        .await
        .map_err(|e| target.error("cannot configure the connection", e))?;
    Ok(client)
}

/// How every connection plans, so that no plan depends on what ANALYZE last saw of a queue's
/// tables (they go from empty to 100,000 jobs and back within seconds) or on cost estimates:
/// - indexes, never sequential or bitmap scans where an index applies: a claim walks the ready
///   index in its order and stops at its limit. A bitmap scan, chosen on a table analyzed while
///   nearly empty, read and sorted all 20,000 ready jobs of a queue to claim 50 (24 ms against
///   0.8 ms); a generic plan, which guesses a tenth of the table for `LIMIT $n`, chose a
///   sequential scan and a sort. A plain index scan also marks the entries of dead rows it
///   passes, so the next scans skip them, where a bitmap scan reads them again until VACUUM (a
///   sweep read 50,000 dead entries per round: 64 ms);
/// - nested loops only: every join here matches a batch against an index, one lookup per
///   element (a merge join read the whole token index per ack);
/// - generic plans, made once per prepared statement (and again when ANALYZE changes a table's
///   statistics): custom plans re-planned each claim and ack, about 1 ms of planning per call.
///
/// - no JIT: these statements run in well under a millisecond, and a plan left with no index to
///   use (a sequential scan is then costed at 10^10) compiled itself for 40-400 ms on every run
///   (seen when an index was missing).
///
/// Measured: processing 15-18k -> 17-20k jobs/s on a fresh schema.
const SESSION: &str = "SET enable_seqscan = off; SET enable_bitmapscan = off; \
    SET enable_hashjoin = off; SET enable_mergejoin = off; \
    SET plan_cache_mode = force_generic_plan; SET jit = off";

/// Opens one connection that the caller drives itself (to receive `NOTIFY` messages).
///
/// Errors: as [`connect`].
pub async fn connect_driven(
    target: &Target,
) -> Result<
    (
        Client,
        tokio_postgres::Connection<tokio_postgres::Socket, tokio_postgres::tls::NoTlsStream>,
    ),
    EngineError,
> {
    tokio_postgres::connect(&target.url, NoTls)
        .await
        .map_err(|e| target.error("cannot connect", e))
}

/// Prepares `sql` on `client`.
///
/// Errors: `ERR_STORAGE_IO` naming the server.
pub async fn prepare(client: &Client, t: &Target, sql: &str) -> Result<Statement, EngineError> {
    client
        .prepare(sql)
        .await
        .map_err(|e| t.error("cannot prepare a statement", e))
}

/// Whether a statement failed only because another ran at the same time: PostgreSQL chose it as
/// a deadlock's victim (two statements that lock a queue row and job rows in opposite orders,
/// such as a failure and an obliterate) or as a serialization failure, and rolled it back, so
/// running it again is safe.
pub fn transient(e: &tokio_postgres::Error) -> bool {
    e.code().is_some_and(|c| {
        *c == SqlState::T_R_DEADLOCK_DETECTED || *c == SqlState::T_R_SERIALIZATION_FAILURE
    })
}

/// How many times a statement runs again after a [`transient`] failure.
pub const RETRIES: u32 = 4;

/// Runs a prepared statement, again after a [`transient`] failure (up to [`RETRIES`] times,
/// after a short, growing pause).
pub async fn query_retrying(
    client: &Client,
    st: &Statement,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Vec<Row>, tokio_postgres::Error> {
    let mut tries = 0;
    loop {
        match client.query(st, params).await {
            Err(e) if transient(&e) && tries < RETRIES => {
                tries += 1;
                tokio::time::sleep(std::time::Duration::from_millis(5 << tries)).await;
            }
            r => return r,
        }
    }
}
