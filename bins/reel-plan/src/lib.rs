//! `reel-plan`: list a landing folder or S3 prefix and bin-pack its episodes by bytes into
//! balanced batches, one per worker of a Kubernetes Indexed Job or a Slurm array.
//!
//! Writes the plan (JSON) atomically, prints one JSON line with its shape on stdout and
//! the imbalance on stderr. The `reel-plan` binary and `reel plan` both run [`run`].

use std::collections::BTreeSet;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Parser;
use reel_import::zarr::{ZarrOptions, ZarrReplayBuffer};
use reel_io::Store;
use reel_pipeline::{BatchTarget, current_landing_keys, list_landing, list_rlds_shards, make_plan};

const EXAMPLES: &str = "\
Examples:
  reel-plan landing/ -o plan.json --batches 4
  reel-plan 's3://robots/landing?region=eu-west-1' -o plan.json --batch-bytes 20GiB
  reel-plan landing/ -o stale.json --stale-in store/ --pipeline-version 0.2.0
  reel-plan --rlds ~/tensorflow_datasets/droid/1.0.0 -o droid-plan.json --batches 64
  reel-plan --zarr umi/cup_in_the_wild.zarr.zip -o umi-plan.json --batches 16";

/// Bin-pack landing episodes into balanced ingest batches (first-fit decreasing by bytes).
#[derive(Debug, Parser)]
#[command(name = "reel-plan", version, after_help = EXAMPLES)]
pub struct Args {
    /// Landing folder or `s3://bucket/prefix?endpoint=…` (episodes are its `*.mcap` objects
    /// and the rosbag2 recordings in its folders).
    landing: String,
    /// Plan file to write.
    #[arg(short, long)]
    output: String,
    /// Number of batches (balanced by bytes).
    #[arg(long, conflicts_with = "batch_bytes")]
    batches: Option<usize>,
    /// Batch capacity (first-fit decreasing): bytes, or a size such as 512MiB or 20GB.
    #[arg(long, value_parser = reel_cli::parse_size, value_name = "SIZE")]
    batch_bytes: Option<u64>,
    /// Plan an RLDS build's TFRecord shards instead (LANDING is the build's version
    /// folder), for `reel-import rlds --plan`.
    #[arg(long, conflicts_with = "stale_in")]
    rlds: bool,
    /// Plan a Zarr replay buffer's episodes instead (LANDING is the buffer: a folder or a
    /// `.zip`), sized by their steps' bytes, for `reel-import zarr --plan`.
    #[arg(long, conflicts_with_all = ["stale_in", "rlds"])]
    zarr: bool,
    /// Leave out episodes whose canonical episode in this store is already of
    /// `--pipeline-version` (plan only the stale and the new).
    #[arg(long, requires = "pipeline_version")]
    stale_in: Option<String>,
    /// Pipeline version for `--stale-in`.
    #[arg(long)]
    pipeline_version: Option<String>,
}

/// Lists the landing store, plans and writes the plan.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let target = match (args.batches, args.batch_bytes) {
        (Some(0), _) => bail!("--batches must be at least 1"),
        (_, Some(0)) => bail!("--batch-bytes must be at least 1"),
        (Some(n), None) => BatchTarget::Count(n),
        (None, Some(b)) => BatchTarget::Bytes(b),
        (None, None) => BatchTarget::Count(1),
        (Some(_), Some(_)) => bail!("give --batches or --batch-bytes, not both"),
    };
    let mut episodes = if args.zarr {
        let options = ZarrOptions::default();
        ZarrReplayBuffer::open(std::path::Path::new(&args.landing), &options)?.plan_episodes()
    } else {
        let landing =
            Store::open(&args.landing).with_context(|| format!("opening {}", args.landing))?;
        match args.rlds {
            true => list_rlds_shards(&landing)?,
            false => list_landing(&landing, "")?,
        }
    };
    let listed = episodes.len();
    if let (Some(store), Some(version)) = (&args.stale_in, &args.pipeline_version) {
        let store = Store::open(store).with_context(|| format!("opening {store}"))?;
        let current: BTreeSet<String> = current_landing_keys(&store, version)?;
        episodes.retain(|e| !current.contains(&e.key));
    }
    if episodes.is_empty() {
        eprintln!("no episodes to plan ({listed} listed in {})", args.landing);
    }
    // Workers may start elsewhere: record a local landing folder as an absolute path.
    let landing_uri = match &args.landing {
        uri if uri.starts_with("s3://") => uri.clone(),
        path => std::path::absolute(path.strip_prefix("file://").unwrap_or(path))
            .with_context(|| format!("resolving {path}"))?
            .to_string_lossy()
            .into_owned(),
    };
    let plan = make_plan(&landing_uri, episodes, target);
    reel_io::write_file_atomic(std::path::Path::new(&args.output), &plan.to_json())
        .with_context(|| format!("writing {}", args.output))?;
    let sizes: Vec<u64> = plan.batches.iter().map(|b| b.bytes).collect();
    eprintln!(
        "{} episodes, {:.1} MB in {} batches (largest {:.1} MB, smallest {:.1} MB); imbalance {:.3} (largest / mean)",
        plan.batches.iter().map(|b| b.episodes.len()).sum::<usize>(),
        plan.total_bytes as f64 / 1e6,
        plan.batches.len(),
        sizes.iter().max().copied().unwrap_or(0) as f64 / 1e6,
        sizes.iter().min().copied().unwrap_or(0) as f64 / 1e6,
        plan.imbalance,
    );
    println!(
        "{}",
        serde_json::json!({
            "plan": args.output,
            "plan_id": plan.plan_id,
            "landing": plan.landing,
            "episodes": plan.batches.iter().map(|b| b.episodes.len()).sum::<usize>(),
            "listed": listed,
            "batches": plan.batches.len(),
            "total_bytes": plan.total_bytes,
            "imbalance": plan.imbalance,
        })
    );
    Ok(ExitCode::SUCCESS)
}
