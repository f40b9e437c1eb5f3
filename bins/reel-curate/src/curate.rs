//! `reel-curate`: one SQL query over the episode warehouse, written as a
//! memory-mapped Arrow training manifest. Prints one JSON line (rows,
//! samples, snapshot, seconds) on stdout.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use clap::Parser;
use reel_curate::{CompactionState, CurationOptions, Warehouse, curate_to_manifest_with};
use reel_manifest::SamplingRule;

const EXAMPLES: &str = "\
Examples:
  reel-curate --warehouse store/ --sql \"SELECT * FROM episodes WHERE task = 'fold_towel'\" -o train.arrow
  reel-curate --warehouse store/ --sql-file s3://robots/queries/train.sql -o train.arrow \\
    --anchor-hz 30 --before 2 --after 1 --upload manifests/run-1.arrow";

/// Curate a training set: SELECT … FROM episodes WHERE … → manifest.arrow.
#[derive(Debug, Parser)]
#[command(name = "reel-curate", version, after_help = EXAMPLES)]
pub struct Args {
    /// The warehouse: a local folder or s3://bucket/prefix?endpoint=….
    #[arg(long)]
    warehouse: String,
    /// The query; the table is `episodes` (latest ingestion of each episode).
    #[arg(
        long,
        conflicts_with = "sql_file",
        required_unless_present = "sql_file"
    )]
    sql: Option<String>,
    /// Read the query from a file (a path or store URI).
    #[arg(long)]
    sql_file: Option<String>,
    /// The manifest to write (atomically).
    #[arg(short, long)]
    output: PathBuf,
    /// Anchor rate of training samples, Hz.
    #[arg(long, default_value_t = 10.0)]
    anchor_hz: f64,
    /// History each sample needs before its anchor, seconds.
    #[arg(long, default_value_t = 1.0)]
    before: f64,
    /// Future each sample needs after its anchor, seconds.
    #[arg(long, default_value_t = 1.0)]
    after: f64,
    /// Also upload the manifest to this store key (e.g. manifests/run-1.arrow).
    #[arg(long)]
    upload: Option<String>,
    /// Store for --upload (default: the warehouse's store).
    #[arg(long)]
    store: Option<String>,
    /// Write an empty manifest (with a warning) when the query selects no
    /// episodes; without it an empty result is an error and nothing is written.
    #[arg(long)]
    allow_empty: bool,
    /// Keep every row's path in a `uri` column, as format 1 manifests have it, even
    /// where one template gives them all (a third more bytes).
    #[arg(long, conflicts_with = "by_position")]
    uri_column: bool,
    /// Write a selection of the compaction's bases (manifest format 3: 16 bytes an
    /// episode instead of 83, no copy of their rows) where the warehouse has a current
    /// compaction and the query keeps the table's rows whole (SELECT *); a
    /// self-contained manifest where not. Episodes ingested since the compaction are
    /// written beside it (`<name>.newer-<hash>.arrow`), and go wherever it goes.
    #[arg(long)]
    by_position: bool,
}

/// Runs the query and writes the manifest.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let sql = match (&args.sql, &args.sql_file) {
        (Some(sql), _) => sql.clone(),
        (None, Some(file)) => reel_cli::read_text_input(file)?,
        (None, None) => anyhow::bail!("give --sql or --sql-file"),
    };
    anyhow::ensure!(
        args.anchor_hz > 0.0 && args.anchor_hz.is_finite(),
        "--anchor-hz must be positive"
    );
    anyhow::ensure!(
        args.before >= 0.0 && args.after >= 0.0,
        "--before and --after must not be negative"
    );
    let started = Instant::now();
    let warehouse = Warehouse::open(&args.warehouse)?;
    eprintln!(
        "reel-curate: {} warehouse files, snapshot {}",
        warehouse.files().len(),
        warehouse.snapshot_id()
    );
    match warehouse.compaction_state() {
        CompactionState::None => eprintln!(
            "reel-curate: no compaction: deduplicating the whole log (reel-compact makes this fast)"
        ),
        CompactionState::Current { id, delta, .. } => {
            eprintln!("reel-curate: reading compaction {id} and {delta} files ingested since")
        }
        CompactionState::Stale { id, reason } => eprintln!(
            "reel-curate: compaction {id} is stale ({reason}): deduplicating the whole log"
        ),
    }
    let rule = SamplingRule::at_hz(args.anchor_hz, args.before, args.after);
    let options = if args.allow_empty {
        CurationOptions::allowing_empty()
    } else {
        CurationOptions::default()
    };
    let options = match (args.uri_column, args.by_position) {
        (true, _) => options.with_uri_column(),
        (_, true) => options.by_position(),
        _ => options,
    };
    let summary = curate_to_manifest_with(&warehouse, &sql, rule, &args.output, options)?;
    if summary.rows == 0 {
        eprintln!("reel-curate: warning: the query selected no episodes; the manifest is empty");
    }
    if let Some(reason) = &summary.declined {
        eprintln!("reel-curate: wrote a self-contained manifest, not a selection: {reason}");
    }
    let seconds = started.elapsed().as_secs_f64();
    if let Some(key) = &args.upload {
        let store = reel_io::Store::open(args.store.as_deref().unwrap_or(&args.warehouse))?;
        // What the manifest names beside it goes first: a reader never finds it without.
        let folder = key.rsplit_once('/').map_or("", |(folder, _)| folder);
        for file in &summary.beside {
            let name = file.file_name().map(|n| n.to_string_lossy().into_owned());
            let name = name.context("a file beside the manifest has no name")?;
            let bytes =
                std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
            let beside_key = match folder {
                "" => name,
                folder => format!("{folder}/{name}"),
            };
            store.write_atomic(&beside_key, bytes)?;
        }
        let bytes = std::fs::read(&args.output)
            .with_context(|| format!("reading {}", args.output.display()))?;
        store.write_atomic(key, bytes)?;
        eprintln!(
            "reel-curate: uploaded to {}",
            reel_io::redact(&store.object_uri(key))
        );
    }
    eprintln!(
        "reel-curate: {} episodes, {} samples at {} Hz → {} in {seconds:.2} s",
        summary.rows,
        summary.samples,
        args.anchor_hz,
        args.output.display()
    );
    println!(
        "{}",
        serde_json::json!({
            "manifest": args.output,
            "rows": summary.rows,
            "samples": summary.samples,
            "snapshot": summary.snapshot,
            "selection": summary.selection,
            "declined": summary.declined,
            "beside": summary.beside,
            "seconds": seconds,
        })
    );
    Ok(ExitCode::SUCCESS)
}
