//! `reel-compact`: writes the warehouse's `episodes` view (the latest ingestion
//! of each episode) as sorted Parquet, so curation queries scan it instead of
//! deduplicating the whole ingest log. Run it after ingest; files ingested
//! later are merged at query time until the next compaction. Prints one JSON
//! line (id, rows, parts, bytes, covered files, written, seconds) on stdout.

use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use reel_curate::{CompactionState, Warehouse, compact};

const EXAMPLES: &str = "\
Examples:
  reel-compact --warehouse store/
  reel-compact --warehouse 's3://robots/warehouse?region=eu-west-1'";

/// Compact the episode warehouse for fast curation.
#[derive(Debug, Parser)]
#[command(name = "reel-compact", version, after_help = EXAMPLES)]
pub struct Args {
    /// The warehouse: a local folder or s3://bucket/prefix?endpoint=….
    #[arg(long)]
    warehouse: String,
}

/// Compacts the warehouse (nothing to do when its compaction is current).
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    let warehouse = Warehouse::open(&args.warehouse)?;
    match warehouse.compaction_state() {
        CompactionState::None => eprintln!(
            "reel-compact: {} episode files, no compaction yet",
            warehouse.files().len()
        ),
        CompactionState::Current { id, covered, delta } => eprintln!(
            "reel-compact: compaction {id} covers {covered} files; {delta} ingested since"
        ),
        CompactionState::Stale { id, reason } => {
            eprintln!("reel-compact: compaction {id} is stale ({reason}); rebuilding from the log")
        }
    }
    let summary = compact(&warehouse)?;
    let seconds = started.elapsed().as_secs_f64();
    if summary.written {
        eprintln!(
            "reel-compact: {} episodes → {} parts, {:.1} MB, in {seconds:.1} s",
            summary.rows,
            summary.parts,
            summary.bytes as f64 / 1e6
        );
    } else {
        eprintln!("reel-compact: already current ({})", summary.id);
    }
    for (table, rows) in &summary.db_tables {
        eprintln!("reel-compact: database table {table}: {rows} current rows");
    }
    println!(
        "{}",
        serde_json::json!({
            "id": summary.id,
            "rows": summary.rows,
            "parts": summary.parts,
            "bytes": summary.bytes,
            "covered_files": summary.covered,
            "written": summary.written,
            "db_tables": summary.db_tables.iter().map(|(t, rows)| serde_json::json!({"table": t, "rows": rows})).collect::<Vec<_>>(),
            "seconds": seconds,
        })
    );
    Ok(ExitCode::SUCCESS)
}
