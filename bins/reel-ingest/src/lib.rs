//! `reel-ingest`: run the ingest DAG over one batch of a plan, or one episode, against a
//! store (a local folder or `s3://…`).
//!
//! One JSON line per episode and step on stdout, then one `{"batch_report": …}` line;
//! a progress bar with episodes/s and ETA on stderr. Quarantined episodes are reported and
//! do not fail the run; store errors do (rerun the same command to resume).
//!
//! `reel-ingest stale --store S --pipeline-version X` lists episodes whose canonical
//! episode was made by another version, one JSON line each.
//!
//! The `reel-ingest` binary and `reel ingest` both run [`run`].

use std::collections::BTreeSet;
use std::io::Write;
use std::process::ExitCode;
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use reel_io::{Store, split_object_uri};
use reel_pipeline::{
    BatchSpec, Event, PIPELINE_VERSION, Pipeline, PipelineConfig, Plan, Profile, RunOptions,
    stale_episodes, start_jitter,
};

const EXAMPLES: &str = "\
Examples:
  reel-ingest --plan plan.json --batch 0 --store store/ > ingest-0.jsonl
  reel-ingest --plan s3://robots/plans/p1.json --store 's3://robots/store?region=eu-west-1' -j 8 -q
  reel-ingest --episode landing/ep-000.mcap --store store/ --config ingest.toml
  reel-ingest --plan plan.json --batch 3 --store store/ --profile relabel --replay
  reel-ingest stale --store store/";

/// Ingest landing episodes: resample, quality-check, encode canonical MCAPs, write
/// warehouse rows and labels, with durable per-batch state.
#[derive(Debug, Parser)]
#[command(
    name = "reel-ingest",
    version,
    after_help = EXAMPLES,
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// List episodes whose canonical episode is of another pipeline version.
    #[command(after_help = "\
Examples:
  reel-ingest stale --store store/
  reel-ingest stale --store store/ --pipeline-version 0.2.0 | jq -r .landing_key")]
    Stale {
        /// Output store.
        #[arg(long)]
        store: String,
        /// The current pipeline version.
        #[arg(long, default_value = PIPELINE_VERSION)]
        pipeline_version: String,
    },
}

#[derive(Debug, clap::Args)]
struct RunArgs {
    /// Plan written by `reel-plan` (a path or store URI).
    #[arg(long, conflicts_with = "episode")]
    plan: Option<String>,
    /// Batch of the plan (default: $JOB_COMPLETION_INDEX, then $SLURM_ARRAY_TASK_ID).
    #[arg(long)]
    batch: Option<usize>,
    /// One landing episode (path or s3:// URI) instead of a plan: a collection trigger.
    #[arg(long)]
    episode: Option<String>,
    /// Output store: canonical episodes, warehouse, labels, state.
    #[arg(long)]
    store: Option<String>,
    /// Landing store, overriding the plan's.
    #[arg(long)]
    landing: Option<String>,
    /// Steps to run: full, metadata (re-index only) or relabel (enrichment only).
    #[arg(long, default_value = "full")]
    profile: String,
    /// Recompute what is already recorded done (all episodes, or those of --episodes).
    #[arg(long)]
    replay: bool,
    /// Only these episodes (ids or landing keys, comma-separated).
    #[arg(long, value_delimiter = ',')]
    episodes: Vec<String>,
    /// Pipeline version stamped on outputs.
    #[arg(long, default_value = PIPELINE_VERSION)]
    pipeline_version: String,
    /// Settings (`pipeline_version`, `resample`, `qc`, `encode`): TOML, or JSON when the
    /// name ends in `.json`; a path or store URI.
    #[arg(long)]
    config: Option<String>,
    /// A named encoding for cameras and chunks, in place of the config's `encode` table's
    /// codec settings: `canonical` (the default) or `random-access` (short GOPs and
    /// uncompressed chunks, for globally shuffled training; see docs/FORMAT.md).
    #[arg(long, value_parser = reel_pipeline::EncodeConfig::NAMES)]
    encoding: Option<String>,
    /// Episodes processed in parallel (default: all cores).
    #[arg(short, long, alias = "threads")]
    jobs: Option<usize>,
    /// Wait a deterministic delay in [0, this) before starting, so that workers launched
    /// together reach the store spread out.
    #[arg(long, default_value_t = 0)]
    start_jitter_ms: u64,
    /// No progress bar.
    #[arg(long, short)]
    quiet: bool,
}

fn run_batch(args: RunArgs) -> anyhow::Result<()> {
    let Some(store_uri) = &args.store else {
        bail!("--store is required");
    };
    let profile = Profile::from_name(&args.profile).with_context(|| {
        format!(
            "--profile `{}`: expected full, metadata or relabel",
            args.profile
        )
    })?;
    let mut config = match &args.config {
        Some(input) => PipelineConfig::from_named(input, &reel_cli::read_text_input(input)?)?,
        None => PipelineConfig::default(),
    };
    config.pipeline_version = args.pipeline_version.clone();
    if let Some(name) = &args.encoding {
        config.encode = config
            .encode
            .with_encoding(name)
            .with_context(|| format!("--encoding `{name}` is not a known encoding"))?;
    }

    let (landing_uri, batch, jitter_key) = match (&args.plan, &args.episode) {
        (Some(path), None) => {
            let text = reel_cli::read_input(path)?;
            let plan = Plan::from_json(path, &text)?;
            let index = reel_cli::batch_index(args.batch)?;
            let batch = BatchSpec::from_plan(&plan, index)?;
            let landing = args.landing.clone().unwrap_or_else(|| plan.landing.clone());
            (landing, batch, (plan.plan_id.clone(), index))
        }
        (None, Some(uri)) => {
            let (landing, key) = split_object_uri(uri)?;
            let landing = args.landing.clone().unwrap_or(landing);
            let batch = BatchSpec::single(&key);
            let jitter = (batch.key.clone(), 0);
            (landing, batch, jitter)
        }
        _ => bail!("give --plan (with --batch) or --episode"),
    };
    let delay = start_jitter(
        &jitter_key.0,
        jitter_key.1,
        Duration::from_millis(args.start_jitter_ms),
    );
    if !delay.is_zero() {
        if !args.quiet {
            eprintln!(
                "batch {}: staggered start, waiting {:.1} s",
                batch.key,
                delay.as_secs_f64()
            );
        }
        std::thread::sleep(delay);
    }

    let landing = Store::open(&landing_uri).with_context(|| format!("opening {landing_uri}"))?;
    let store = Store::open(store_uri).with_context(|| format!("opening {store_uri}"))?;
    let pipeline = Pipeline::new(landing, store, config)?;
    let options = RunOptions {
        profile,
        replay: args.replay,
        only: (!args.episodes.is_empty())
            .then(|| args.episodes.iter().cloned().collect::<BTreeSet<_>>()),
    };

    let total = (batch.landing_keys.len() * profile.steps().len()) as u64;
    let bar = reel_cli::progress_bar(
        total,
        "{bar:40} {pos}/{len} episode-steps {per_sec} eta {eta} {msg}",
        args.quiet,
    );
    bar.set_message(batch.key.clone());
    let stdout = Mutex::new(std::io::stdout());
    // The first JSON line that could not be made or written: the run goes on (its work
    // is recorded in the store either way), then fails, so no consumer mistakes
    // incomplete output for a complete one.
    let output_failure: Mutex<Option<anyhow::Error>> = Mutex::new(None);
    let emit = |line: serde_json::Result<String>| {
        let written = line.map_err(anyhow::Error::from).and_then(|line| {
            let mut out = stdout.lock().unwrap_or_else(|p| p.into_inner());
            writeln!(out, "{line}").map_err(anyhow::Error::from)
        });
        if let Err(e) = written {
            let mut failure = output_failure.lock().unwrap_or_else(|p| p.into_inner());
            failure.get_or_insert(e);
        }
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(args.jobs.unwrap_or(0))
        .build()?;
    let report = pool.install(|| {
        pipeline.run(&batch, &options, &|event| match event {
            Event::Episode(e) => {
                emit(serde_json::to_string(e));
                bar.inc(1);
            }
            Event::StepSkipped { step, .. } => {
                bar.inc(batch.landing_keys.len() as u64);
                bar.suspend(|| eprintln!("{}: step {} already complete", batch.key, step.name()));
            }
            Event::StepStarted { .. } | Event::StepCommitted { .. } => {}
        })
    });
    bar.finish_and_clear();
    let report = report?;
    for q in &report.quarantined {
        eprintln!("quarantined {}: {}", q.landing_key, q.reason);
    }
    emit(serde_json::to_string(
        &serde_json::json!({ "batch_report": report }),
    ));
    match output_failure
        .into_inner()
        .unwrap_or_else(|p| p.into_inner())
    {
        Some(e) => Err(e.context("writing the JSON lines to stdout")),
        None => Ok(()),
    }
}

/// Runs one batch (or episode), or lists stale episodes.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    reel_video::quiet_ffmpeg_logs();
    match cli.command {
        Some(Command::Stale {
            store,
            pipeline_version,
        }) => {
            let store = Store::open(&store).with_context(|| format!("opening {store}"))?;
            let stale = stale_episodes(&store, &pipeline_version)?;
            let mut out = std::io::stdout().lock();
            for e in &stale {
                // A reader that stops early (`| head`) ends the run quietly (reel-cli).
                writeln!(out, "{}", serde_json::to_string(e)?)?;
            }
            eprintln!(
                "{} stale episodes (not of pipeline version {pipeline_version})",
                stale.len()
            );
            Ok(ExitCode::SUCCESS)
        }
        None => run_batch(cli.run).map(|()| ExitCode::SUCCESS),
    }
}
