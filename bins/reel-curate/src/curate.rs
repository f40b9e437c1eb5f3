//! `reel-curate`: one SQL query over the episode warehouse, written as a
//! memory-mapped Arrow training manifest. Prints one JSON line (rows,
//! samples, snapshot, seconds) on stdout.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use clap::Parser;
use reel_curate::{AsOf, CurationOptions, Warehouse, curate_from_file, curate_to_manifest_with};
use reel_manifest::SamplingRule;

const EXAMPLES: &str = "\
Examples:
  reel-curate --warehouse store/ --sql \"SELECT * FROM episodes WHERE task = 'fold_towel'\" -o train.arrow
  reel-curate --warehouse store/ --sql-file s3://robots/queries/train.sql -o train.arrow \\
    --anchor-hz 30 --before 2 --after 1 --upload manifests/run-1.arrow
  reel-curate --warehouse store/ --from picked-in-spark.parquet -o train.arrow";

/// Curate a training set: SELECT … FROM episodes WHERE … → manifest.arrow.
#[derive(Debug, Parser)]
#[command(name = "reel-curate", version, after_help = EXAMPLES)]
pub struct Args {
    /// The warehouse: a local folder or s3://bucket/prefix?endpoint=….
    #[arg(long)]
    warehouse: String,
    /// The query; the tables are `episodes` (one row per episode, its latest ingestion),
    /// `ingestions` (every ingestion) and the metadata database's captured tables.
    #[arg(
        long,
        conflicts_with_all = ["sql_file", "from"],
        required_unless_present_any = ["sql_file", "from"]
    )]
    sql: Option<String>,
    /// Read the query from a file (a path or store URI).
    #[arg(long, conflicts_with = "from")]
    sql_file: Option<String>,
    /// Write the episodes a curation made elsewhere lists instead of running a query: a
    /// Parquet or Arrow file, or a Delta table (folder or s3:// URI), with an
    /// `episode_id` column. Every id must be in the warehouse's episodes (at --as-of's
    /// versions, or the latest).
    #[arg(long = "from", value_name = "FILE")]
    from: Option<String>,
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
    /// episode instead of 83, no copy of their rows) where the warehouse was compacted
    /// and the query keeps the table's rows whole (SELECT *); a self-contained manifest
    /// where not, saying why. Episodes committed since the compaction are written beside
    /// it (`<name>.newer-<hash>.arrow`), and go wherever it goes.
    #[arg(long)]
    by_position: bool,
    /// Run the query at these table versions: `episodes@12 ingestions@12`, or a manifest
    /// (path or store URI) whose versions to take, to write that manifest again (within
    /// the warehouse's retention).
    #[arg(long)]
    as_of: Option<String>,
}

/// Runs the query and writes the manifest.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let sql = match (&args.sql, &args.sql_file, &args.from) {
        (Some(sql), _, _) => Some(sql.clone()),
        (None, Some(file), _) => Some(reel_cli::read_text_input(file)?),
        (None, None, _) => None,
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
    let warehouse = match &args.as_of {
        None => Warehouse::open(&args.warehouse)?,
        Some(as_of) => Warehouse::open_as_of(&args.warehouse, &AsOf::resolve(as_of)?)?,
    };
    eprintln!(
        "reel-curate: {} ({} files of episodes)",
        warehouse.snapshot_id(),
        warehouse.files().len()
    );
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
    let summary = match (&sql, &args.from) {
        (Some(sql), _) => curate_to_manifest_with(&warehouse, sql, rule, &args.output, options)?,
        (None, Some(file)) => curate_from_file(&warehouse, file, rule, &args.output, options)?,
        (None, None) => anyhow::bail!("give --sql, --sql-file or --from"),
    };
    if summary.listed_twice > 0 {
        eprintln!(
            "reel-curate: {} episodes were listed more than once; each is in the manifest once",
            summary.listed_twice
        );
    }
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
            "listed_twice": summary.listed_twice,
            "beside": summary.beside,
            "seconds": seconds,
        })
    );
    Ok(ExitCode::SUCCESS)
}
