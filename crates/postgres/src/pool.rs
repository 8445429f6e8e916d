//! A few connections, shared: every call is one statement (or one pipelined group), so callers
//! never need a connection to themselves, and tokio-postgres pipelines the queries in flight on
//! each. A connection that dropped is replaced by the next caller that picks it, so a database
//! restart costs the calls in flight then, not the backend. The schema is migrated once, by the
//! first connection.
//!
//! Why not deadpool-postgres, as the issue suggested: a pool hands each caller a connection of
//! its own until it is done, which is what transactions need and what these single statements do
//! not; sharing lets concurrent callers (a worker's pull, another's ack, a producer's add) travel
//! together on one socket.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use ferroqueue_engine::EngineError;
use parking_lot::Mutex;
use tokio::sync::OnceCell;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Row, Statement};

use crate::connect::{connect, prepare, Target};
use crate::events::EventStatements;
use crate::jobs::Statements;
use crate::leases::LeaseStatements;
use crate::schema::migrate;

/// One connection with every prepared statement of the backend.
pub struct Conn {
    pub client: Client,
    pub jobs: Statements,
    pub leases: LeaseStatements,
    pub events: EventStatements,
    /// Statements of the less frequent calls, prepared on first use.
    cache: Mutex<HashMap<String, Statement>>,
}

impl Conn {
    /// Connects and prepares (the schema is migrated).
    pub async fn open(t: &Target) -> Result<Conn, EngineError> {
        let client = connect(t).await?;
        let jobs = Statements::prepare(&client, t).await?;
        let leases = LeaseStatements::prepare(&client, t).await?;
        let events = EventStatements::prepare(&client, t).await?;
        Ok(Conn {
            client,
            jobs,
            leases,
            events,
            cache: Mutex::new(HashMap::new()),
        })
    }

    /// Runs `work` in a transaction on this connection (the backend's own: see
    /// [`Pool::exclusive`]): committed when it succeeds, rolled back otherwise. `what` names
    /// the call in errors. A transaction that a dropped future left open is ended first.
    pub async fn transaction<T>(
        &self,
        t: &Target,
        what: &str,
        work: impl std::future::Future<Output = Result<T, EngineError>>,
    ) -> Result<T, EngineError> {
        let io = |e| t.error(what, e);
        self.client
            .batch_execute("ROLLBACK; BEGIN")
            .await
            .map_err(io)?;
        let r = work.await;
        let end = if r.is_ok() { "COMMIT" } else { "ROLLBACK" };
        let ended = self.client.batch_execute(end).await.map_err(io);
        let value = r?;
        ended?;
        Ok(value)
    }

    /// The statement of `sql`, prepared once per connection.
    pub async fn statement(&self, t: &Target, sql: &str) -> Result<Statement, EngineError> {
        if let Some(st) = self.cache.lock().get(sql).cloned() {
            return Ok(st);
        }
        let st = prepare(&self.client, t, sql).await?;
        self.cache.lock().insert(sql.to_string(), st.clone());
        Ok(st)
    }

    /// Runs `sql` (prepared once per connection) with `params`; `what` names the call in errors.
    pub async fn query(
        &self,
        t: &Target,
        what: &str,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, EngineError> {
        let st = self.statement(t, sql).await?;
        crate::connect::query_retrying(&self.client, &st, params)
            .await
            .map_err(|e| t.error(what, e))
    }
}

/// The shared connections of one backend.
pub struct Pool {
    target: Target,
    slots: Vec<tokio::sync::Mutex<Option<Arc<Conn>>>>,
    next: AtomicUsize,
    migrated: OnceCell<()>,
    /// A connection of its own for transactions of several statements (claims within limits):
    /// the shared ones interleave the statements of concurrent calls.
    exclusive: tokio::sync::Mutex<Option<Conn>>,
}

impl Pool {
    /// A pool of `size` connections (at least 1), opened as they are first needed.
    pub fn new(target: Target, size: usize) -> Pool {
        Pool {
            target,
            slots: (0..size.max(1))
                .map(|_| tokio::sync::Mutex::new(None))
                .collect(),
            next: AtomicUsize::new(0),
            migrated: OnceCell::new(),
            exclusive: tokio::sync::Mutex::new(None),
        }
    }

    /// Where the pool connects.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// Creates or migrates the schema, once (a failure is tried again by the next call).
    pub async fn migrated(&self) -> Result<(), EngineError> {
        self.migrated
            .get_or_try_init(|| async {
                let mut c = connect(&self.target).await?;
                migrate(&mut c, &self.target).await.map(|_| ())
            })
            .await
            .map(|_| ())
    }

    /// A connection, the next in turn; reconnected first if it dropped.
    pub async fn get(&self) -> Result<Arc<Conn>, EngineError> {
        self.migrated().await?;
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.slots.len();
        let mut slot = self.slots[i].lock().await;
        if let Some(c) = slot.as_ref() {
            if !c.client.is_closed() {
                return Ok(c.clone());
            }
        }
        let c = Arc::new(Conn::open(&self.target).await?);
        *slot = Some(c.clone());
        Ok(c)
    }

    /// The connection for transactions, held until the guard drops (callers wait their turn);
    /// opened when first needed, reconnected if it dropped.
    pub async fn exclusive(&self) -> Result<tokio::sync::MappedMutexGuard<'_, Conn>, EngineError> {
        self.migrated().await?;
        let mut slot = self.exclusive.lock().await;
        if slot.as_ref().is_none_or(|c| c.client.is_closed()) {
            *slot = Some(Conn::open(&self.target).await?);
        }
        tokio::sync::MutexGuard::try_map(slot, Option::as_mut)
            .map_err(|_| EngineError::Internal("the exclusive connection is missing".into()))
    }

    /// Drops every connection (their sockets close).
    pub async fn clear(&self) {
        for s in &self.slots {
            *s.lock().await = None;
        }
        *self.exclusive.lock().await = None;
    }
}
