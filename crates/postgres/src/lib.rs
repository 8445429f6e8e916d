//! ferroqueue on PostgreSQL: the database is the truth, shared by any number of processes on any
//! number of machines. This crate holds the schema and its migrations ([`schema`]), connecting
//! with clear errors ([`connect`]), and the batched statements the backend is built from:
//! [`jobs`] (bulk insert in one statement, claims of many jobs per round trip with `FOR UPDATE
//! SKIP LOCKED`, completions and failures of many over arrays with lease fencing, promotion of
//! due jobs), [`leases`] (renewal and the stall sweep) and [`events`] (the QueueEvents feed, read
//! in commit order). The design and what was measured are in `docs/postgres.md`; the `Backend`
//! implementation over these comes next (issue 9).

pub mod connect;
pub mod events;
pub mod jobs;
pub mod leases;
pub mod schema;

pub use connect::{connect, Target};
