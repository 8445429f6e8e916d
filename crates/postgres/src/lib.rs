//! ferroqueue on PostgreSQL: the database is the truth, shared by any number of processes on any
//! number of machines. This crate holds the schema and its migrations ([`schema`]), connecting
//! with clear errors ([`connect`]), and the batched statements the backend is built from:
//! [`jobs`] and [`acks`] (bulk insert in one statement, claims of many jobs per round trip with
//! `FOR UPDATE SKIP LOCKED`, completions and failures of many over arrays with lease fencing,
//! promotion of due jobs), [`leases`] (renewal and the stall sweep) and [`events`] (the QueueEvents feed, read
//! in commit order), and [`backend`], the engine's `Backend` over them. The design and what was
//! measured are in `docs/postgres.md`.

pub mod acks;
pub mod backend;
pub mod connect;
pub mod dedup;
pub mod events;
pub mod flows;
pub mod groups;
pub mod jobs;
pub mod leases;
pub mod limits;
pub mod pool;
pub mod record;
pub mod schema;
pub mod text;

pub use backend::{PgBackend, PgConfig};
pub use connect::{connect, Target};
