//! reel-warm: fetch a manifest's working set into the node-local block cache before
//! training starts, and pin it there.
//!
//! Human output (plan, progress bar, summary) goes to stderr; one JSON line with the
//! report and the cache metrics goes to stdout. Exits non-zero, before fetching anything,
//! if the working set cannot fit in the cache. Safe to rerun after a crash: blocks already
//! cached are kept and only missing ones are fetched. The `reel-warm` binary and
//! `reel warm` both run [`run`].

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Parser;
use reel_cache::{CacheConfig, WarmOptions};
use reel_io::Store;

const EXAMPLES: &str = "\
Examples:
  reel-warm --manifest train.arrow --store store/ --cache /nvme/reel-cache
  reel-warm --manifest 's3://robots/runs/42/train.arrow?region=eu-west-1' \\
    --store 's3://robots/store?region=eu-west-1' --cache /nvme0/reel --cache /nvme1/reel \\
    --capacity 1.5TiB --spec s3://robots/runs/42/spec.toml --quiet
  reel-warm --manifest train.arrow --store store/ --cache /nvme/reel-cache --verify --pin run-42";

/// Fetch a manifest's working set into the node-local block cache before training starts.
#[derive(Debug, Parser)]
#[command(name = "reel-warm", version, after_help = EXAMPLES)]
pub struct Args {
    /// Training manifest (Arrow IPC) naming the episodes to warm: a local path, or an
    /// object URI (`s3://bucket/runs/42/train.arrow?…`) fetched once per node.
    #[arg(long)]
    manifest: String,
    /// Store the manifest's episode paths are relative to: a local folder or
    /// `s3://bucket/prefix?endpoint=...&region=...` (credentials from AWS_* variables).
    #[arg(long)]
    store: String,
    /// Cache folder; repeat to spread blocks over several disks.
    #[arg(long, required = true)]
    cache: Vec<PathBuf>,
    /// Cache capacity: bytes or a size (`800GiB`, `2T`; bare K, M, G, T are powers of
    /// 1024, KB, MB, GB, TB powers of 1000). Default: what the cache holds now plus 90% of
    /// the free space of the first cache folder's disk.
    #[arg(long, value_parser = reel_cli::parse_size, value_name = "SIZE")]
    capacity: Option<u64>,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Check every checksum of blocks already cached (refetching bad ones), not just
    /// their headers.
    #[arg(long)]
    verify: bool,
    /// Block size (must match every reader of the cache).
    #[arg(long, value_parser = reel_cli::parse_size, default_value = "4MiB", value_name = "SIZE")]
    block_size: u64,
    /// Name of the pin list protecting the warmed set from eviction. Default: the
    /// manifest's file name and a hash of its absolute path.
    #[arg(long)]
    pin: Option<String>,
    /// Do not pin the warmed set.
    #[arg(long, conflicts_with = "pin")]
    no_pin: bool,
    /// Warm only what a loader with this sample spec (TOML, a path or store URI) reads:
    /// each episode's summary and the chunks holding the spec's topics (a state-only spec
    /// skips every camera chunk). Default: whole episodes.
    #[arg(long)]
    spec: Option<String>,
    /// No progress bar.
    #[arg(long, short)]
    quiet: bool,
}

/// Plans, pins and fetches the working set; one JSON line with the report on stdout.
pub fn run(args: Args) -> Result<ExitCode> {
    let manifest = reel_manifest::open_uri(&args.manifest, &reel_manifest::node_manifest_dir())
        .with_context(|| format!("opening manifest {}", args.manifest))?;
    let store = Store::open_existing(&args.store)
        .with_context(|| format!("opening store {}", reel_io::redact(&args.store)))?;
    let items = match &args.spec {
        Some(path) => {
            let spec = reel_cli::read_text_input(path)
                .map_err(anyhow::Error::from)
                .and_then(|text| Ok(reel_loader::SampleSpec::from_toml_str(&text)?))
                .with_context(|| format!("reading sample spec {path}"))?;
            reel_loader::working_set(&manifest, &spec, &store)
                .context("finding what the loader reads")?
        }
        None => reel_loader::whole_episodes(&manifest)?.warm_items(),
    };

    let mut config = CacheConfig::new(args.cache[0].clone(), 0);
    config.dirs = args.cache.clone();
    config.block_size = args.block_size;
    config.max_concurrent_fetches = args.concurrency.max(1);
    let cache = reel_cache::open_with_capacity(config, &store, args.capacity)?;

    let options = WarmOptions {
        concurrency: args.concurrency.max(1),
        verify: args.verify,
        pin: if args.no_pin {
            None
        } else {
            Some(
                args.pin
                    .clone()
                    .unwrap_or_else(|| reel_cache::default_pin_name(manifest.path())),
            )
        },
    };
    let plan = cache
        .plan_warm(&items, &options)
        .with_context(|| format!("planning the warm of {}", args.manifest))?;
    eprintln!(
        "reel-warm: {} episodes, {} blocks, {} ({} cached, {} to fetch); cache {} of {} capacity, {} pinned by others",
        plan.objects().len(),
        plan.blocks,
        human(plan.total_bytes),
        human(plan.cached_bytes),
        human(plan.missing_bytes),
        human(plan.disk_bytes),
        human(cache.config().capacity),
        human(plan.pinned_by_others),
    );

    let bar = reel_cli::progress_bar(
        plan.missing_bytes,
        "{bar:40} {bytes}/{total_bytes} {binary_bytes_per_sec} ETA {eta}",
        args.quiet,
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    let report = cache.warm(plan, &options, |p| bar.set_position(p.fetched_bytes));
    bar.finish_and_clear();
    let report = report.context("warming")?;

    let metrics = cache.metrics();
    eprintln!(
        "reel-warm: fetched {} in {:.1} s ({}/s, {} requests); working set of {} warm{}",
        human(report.fetched_bytes),
        report.seconds,
        human(report.bytes_per_second() as u64),
        report.requests,
        human(report.total_bytes),
        options
            .pin
            .as_ref()
            .map(|p| format!(", pinned as `{p}`"))
            .unwrap_or_default(),
    );
    for (name, value) in metrics.alluxio_names() {
        eprintln!("  {name} = {value}");
    }
    let line = serde_json::json!({
        "event": "warm",
        "manifest": args.manifest,
        "store": args.store,
        "pin": options.pin,
        "report": report,
        "metrics": metrics.to_json(),
    });
    // The URIs given may carry credentials: never echoed.
    println!("{}", reel_io::redact_secrets(&line.to_string()));
    Ok(ExitCode::SUCCESS)
}

fn human(bytes: u64) -> String {
    indicatif::BinaryBytes(bytes).to_string()
}
