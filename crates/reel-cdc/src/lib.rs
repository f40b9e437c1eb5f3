//! Change data capture from the metadata database (PostgreSQL) into the warehouse.
//!
//! Operations write episodes' status, annotations and QC decisions into PostgreSQL;
//! curation reads them beside the warehouse's `episodes`, seconds behind. A capture
//! keeps a publication and a logical replication slot (pgoutput), takes one consistent
//! snapshot of the captured tables, then streams every commit into the warehouse: each
//! captured table a Delta table `db_<table>` holding the database's current rows, which
//! any Delta reader reads as they are (layout: [`reel_manifest::changes`]).
//!
//! Exactly once across crashes: a flush is one commit per table, and each commit carries
//! the capture's position (Delta's `txn`, the LSN) atomically with its changes; only once
//! every table has committed is that LSN confirmed to the server. A restart streams from
//! the oldest position a table holds and each table skips the commits it holds already.
//! A snapshot that did not finish is taken again from a new slot.
//!
//! ```no_run
//! use reel_cdc::{CaptureOptions, Until, capture};
//! use reel_io::Store;
//!
//! let mut options = CaptureOptions::new("postgresql://reel@127.0.0.1:5432/metadata");
//! options.until = Until::CaughtUp;
//! let summary = capture(&options, Store::open("/data/warehouse")?, &mut |flush| {
//!     eprintln!("{} tables up to {}", flush.changes.len(), flush.lsn);
//! })?;
//! println!("{} changes", summary.changes);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod capture;
mod change_log;
pub mod database;
mod error;
mod table_log;
#[cfg(feature = "test-support")]
pub mod test_support;

pub use capture::{CaptureOptions, CaptureSummary, Until, capture, drop_capture};
pub use change_log::Flush;
pub use database::Database;
pub use error::{Error, ErrorKind, Result};

/// The metadata database's schema (`docs/METADATA.md`): `episodes`, `annotations`,
/// `qc_overrides`. Safe to run again.
pub const SCHEMA_SQL: &str = include_str!("../schema.sql");
