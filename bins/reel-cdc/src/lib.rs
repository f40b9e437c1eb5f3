//! reel-cdc: capture the metadata database's changes (PostgreSQL logical replication,
//! pgoutput) into the warehouse, where curation joins them with `episodes`.
//!
//! One JSON line per flush goes to stdout (the LSN now covered, changes by table, the
//! lag of its oldest commit); a line per flush and a summary go to stderr. Safe to kill
//! at any moment and run again: it resumes from the last durable flush, each change
//! landing once. The `reel-cdc` binary and `reel cdc` both run [`run`].

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Parser;
use reel_cdc::{CaptureOptions, Until};
use reel_io::Store;
use reel_manifest::changes::lsn_text;

const EXAMPLES: &str = "\
Examples:
  reel-cdc --postgres postgresql://reel@127.0.0.1:5432/metadata --warehouse warehouse/
  reel-cdc --postgres postgresql://reel@db:5432/metadata --warehouse warehouse/ --once
  reel-cdc --postgres postgresql://reel@db:5432/metadata --tables annotations,qc_overrides \\
    --warehouse 's3://robots/warehouse?region=eu-west-1' --flush-ms 500
  reel-cdc --postgres postgresql://reel@db:5432/metadata --drop";

/// Capture the metadata database's changes into the warehouse.
#[derive(Debug, Parser)]
#[command(name = "reel-cdc", version, after_help = EXAMPLES)]
pub struct Args {
    /// The database: `postgresql://user:password@host:port/database` (TCP; the server
    /// needs `wal_level = logical`, the user the REPLICATION attribute).
    #[arg(long)]
    postgres: String,
    /// Warehouse store the change log is written to: a local folder or `s3://…`.
    #[arg(long, required_unless_present = "drop")]
    warehouse: Option<String>,
    /// Tables to capture (schema `public`, each with a primary key), comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "episodes,annotations,qc_overrides"
    )]
    tables: Vec<String>,
    /// Replication slot: one per capture.
    #[arg(long, default_value = "reel")]
    slot: String,
    /// Publication naming the captured tables.
    #[arg(long, default_value = "reel")]
    publication: String,
    /// Longest a committed change waits before it is written, in milliseconds.
    #[arg(long, default_value_t = 200)]
    flush_ms: u64,
    /// Changes that make a flush before its deadline (bounds memory).
    #[arg(long, default_value_t = 50_000)]
    flush_rows: usize,
    /// Stop once every change committed before the start is in the warehouse.
    #[arg(long)]
    once: bool,
    /// Remove the replication slot and publication (the server stops keeping WAL for
    /// them) and exit.
    #[arg(long)]
    drop: bool,
    /// No human output on stderr.
    #[arg(long)]
    quiet: bool,
}

/// Runs `reel-cdc` with parsed arguments.
pub fn run(args: Args) -> Result<ExitCode> {
    if args.drop {
        let dropped = reel_cdc::drop_capture(&args.postgres, &args.slot, &args.publication)?;
        println!(
            "{}",
            serde_json::json!({"slot": args.slot, "dropped": dropped})
        );
        if !args.quiet {
            let what = if dropped { "dropped" } else { "was not there" };
            eprintln!(
                "slot {}: {what}; publication {} removed",
                args.slot, args.publication
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    let warehouse = args
        .warehouse
        .as_deref()
        .context("--warehouse is required")?;
    let store = Store::open(warehouse)?;
    let options = CaptureOptions {
        tables: args.tables.clone(),
        slot: args.slot.clone(),
        publication: args.publication.clone(),
        flush_interval: Duration::from_millis(args.flush_ms),
        flush_rows: args.flush_rows.max(1),
        until: if args.once {
            Until::CaughtUp
        } else {
            Until::Forever
        },
        ..CaptureOptions::new(&args.postgres)
    };
    let quiet = args.quiet;
    let summary = reel_cdc::capture(&options, store, &mut |flush| {
        let oldest = flush.commits_ns.iter().min().copied();
        let lag_ms = oldest.map(|t| (flush.visible_ns - t) as f64 / 1e6);
        let line = serde_json::json!({
            "lsn": lsn_text(flush.lsn),
            "snapshot": flush.snapshot,
            "changes": flush.changes,
            "commits": flush.commits_ns.len(),
            "lag_ms": lag_ms,
        });
        println!("{line}");
        if !quiet {
            let total: usize = flush.changes.values().sum();
            let kind = if flush.snapshot {
                "snapshot"
            } else {
                "changes"
            };
            eprintln!(
                "{} {kind}: {total} rows in {} tables",
                lsn_text(flush.lsn),
                flush.changes.len()
            );
        }
    })?;
    if !quiet {
        eprintln!(
            "captured {} changes up to {}{}",
            summary.changes,
            lsn_text(summary.lsn),
            if summary.snapshot_taken {
                " (initial snapshot taken)"
            } else {
                ""
            }
        );
    }
    println!(
        "{}",
        serde_json::json!({"summary": {
            "lsn": lsn_text(summary.lsn),
            "changes": summary.changes,
            "snapshot_taken": summary.snapshot_taken,
        }})
    );
    Ok(ExitCode::SUCCESS)
}
