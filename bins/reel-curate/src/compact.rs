//! `reel-compact`: the warehouse's tables compacted as the format does it (large sorted
//! files, a base manifest beside each `episodes` file, checkpoints), files no version
//! within the retention reads removed (`--vacuum`), or a warehouse of the earlier layout
//! moved into the tables (`--migrate`). Run it after ingest. Prints one JSON line on
//! stdout.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use reel_curate::{DEFAULT_RETENTION, Warehouse, compact, migrate, vacuum};

const EXAMPLES: &str = "\
Examples:
  reel-compact --warehouse store/
  reel-compact --warehouse store/ --vacuum --retention-hours 168
  reel-compact --warehouse store/ --migrate
  reel-compact --warehouse 's3://robots/warehouse?region=eu-west-1'";

/// Compact, vacuum or migrate the warehouse's tables.
#[derive(Debug, Parser)]
#[command(name = "reel-compact", version, after_help = EXAMPLES)]
pub struct Args {
    /// The warehouse: a local folder or s3://bucket/prefix?endpoint=….
    #[arg(long)]
    warehouse: String,
    /// Also remove the files no version within the retention reads, and the log before it
    /// (a selection or `reel-curate --as-of` older than the retention then fails, naming
    /// the version).
    #[arg(long)]
    vacuum: bool,
    /// The retention --vacuum keeps, in hours (default 168: 7 days, Delta's; at least 1).
    #[arg(long, requires = "vacuum")]
    retention_hours: Option<f64>,
    /// Move a warehouse of the earlier layout (Parquet parts under episodes/, compacted/)
    /// into the tables first, checked, and remove the earlier layout.
    #[arg(long)]
    migrate: bool,
}

/// Migrates, compacts and vacuums, as asked.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    let mut report = serde_json::Map::new();
    if args.migrate {
        let migrated = migrate(&args.warehouse)?;
        eprintln!(
            "reel-compact: migrated {} parts: {} ingestions, {} episodes; {} objects of the earlier layout removed",
            migrated.parts, migrated.ingestions, migrated.episodes, migrated.removed
        );
        report.insert(
            "migrated".into(),
            serde_json::json!({
                "parts": migrated.parts,
                "ingestions": migrated.ingestions,
                "episodes": migrated.episodes,
                "removed": migrated.removed,
            }),
        );
    }
    let warehouse = Warehouse::open(&args.warehouse)?;
    eprintln!(
        "reel-compact: {} ({} files of episodes)",
        warehouse.snapshot_id(),
        warehouse.files().len()
    );
    let summary = compact(&warehouse)?;
    match summary.episodes_version {
        Some(version) => eprintln!(
            "reel-compact: {} episodes, {} files → {} (episodes@{version}), {} base manifests",
            summary.rows, summary.files_before, summary.files, summary.bases
        ),
        None => eprintln!("reel-compact: already compact ({} files)", summary.files),
    }
    for (table, rows) in &summary.db_tables {
        eprintln!("reel-compact: database table {table}: {rows} current rows");
    }
    report.insert("episodes_version".into(), summary.episodes_version.into());
    report.insert(
        "ingestions_version".into(),
        summary.ingestions_version.into(),
    );
    report.insert("rows".into(), summary.rows.into());
    report.insert("files".into(), summary.files.into());
    report.insert("bases".into(), summary.bases.into());
    report.insert(
        "db_tables".into(),
        summary
            .db_tables
            .iter()
            .map(|(t, rows)| serde_json::json!({"table": t, "rows": rows}))
            .collect(),
    );
    if args.vacuum {
        let retention = match args.retention_hours {
            // Shorter, a vacuum could remove the files a writer has written and not yet
            // committed (a compaction takes minutes), as Delta's own check refuses.
            Some(hours) if hours >= 1.0 => Duration::try_from_secs_f64(hours * 3600.0)
                .map_err(|e| anyhow::anyhow!("--retention-hours {hours}: {e}"))?,
            Some(hours) => anyhow::bail!(
                "--retention-hours must be at least 1 ({hours}): a shorter retention may remove \
                 files that writers have written and not yet committed"
            ),
            None => DEFAULT_RETENTION,
        };
        let vacuumed = vacuum(&Warehouse::open(&args.warehouse)?, retention)?;
        let mut tables = Vec::new();
        for (table, removed) in &vacuumed.tables {
            eprintln!(
                "reel-compact: vacuumed {table}: {} files and {} log entries removed; versions from {} kept",
                removed.files.len(),
                removed.log_entries.len(),
                removed.oldest_version
            );
            tables.push(serde_json::json!({
                "table": table,
                "files_removed": removed.files.len(),
                "log_entries_removed": removed.log_entries.len(),
                "oldest_version": removed.oldest_version,
            }));
        }
        report.insert("vacuumed".into(), tables.into());
        report.insert(
            "retention_hours".into(),
            (retention.as_secs_f64() / 3600.0).into(),
        );
    }
    report.insert("seconds".into(), started.elapsed().as_secs_f64().into());
    println!("{}", serde_json::Value::Object(report));
    Ok(ExitCode::SUCCESS)
}
