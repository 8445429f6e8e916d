//! The application layer: the [`engine::Engine`] that routes operations to shards, runs the
//! delayed-job timer, serves long-poll pulls and fans events out through the [`events::EventHub`].

pub(crate) mod commit_notice;
pub mod dlq;
mod durability;
mod embedded;
pub mod engine;
mod engine_bulk;
mod engine_disk;
pub mod engine_flows;
mod engine_groups;
mod engine_leases;
mod engine_metrics;
mod engine_ops;
mod engine_pull;
mod engine_schedulers;
pub mod events;
mod tickets;
mod timer;

#[cfg(test)]
mod engine_tests;
