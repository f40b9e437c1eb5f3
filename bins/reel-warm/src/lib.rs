//! reel-warm: fetch a manifest's working set into the node-local block cache before
//! training starts, and pin it there.
//!
//! Human output (plan, progress bar, summary) goes to stderr; one JSON line with the
//! report and the cache metrics goes to stdout. Exits non-zero, before fetching anything,
//! if the working set cannot fit in the cache. Safe to rerun after a crash: blocks already
//! cached are kept and only missing ones are fetched. The `reel-warm` binary and
//! `reel warm` both run [`run`], a thin layer over [`reel_loader::PreparedWarm`], which
//! `reel.warm` runs too.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Parser;
use reel_loader::{PinChoice, PreparedWarm, SampleSpec, WarmRequest};

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

impl Args {
    /// The warm these flags ask for, the spec read from its path or URI.
    fn request(&self) -> Result<WarmRequest> {
        let mut request = WarmRequest::new(&self.manifest, &self.store, PathBuf::new());
        request.cache_dirs.clone_from(&self.cache);
        request.capacity = self.capacity;
        request.block_size = self.block_size;
        request.concurrency = self.concurrency;
        request.verify = self.verify;
        request.pin = match (&self.pin, self.no_pin) {
            (_, true) => PinChoice::Unpinned,
            (Some(name), false) => PinChoice::Named(name.clone()),
            (None, false) => PinChoice::Default,
        };
        if let Some(path) = &self.spec {
            let spec = reel_cli::read_text_input(path)
                .map_err(anyhow::Error::from)
                .and_then(|text| Ok(SampleSpec::from_toml_str(&text)?))
                .with_context(|| format!("reading sample spec {path}"))?;
            request.spec = Some(spec);
        }
        Ok(request)
    }
}

/// Plans, pins and fetches the working set; one JSON line with the report on stdout.
pub fn run(args: Args) -> Result<ExitCode> {
    let warm = PreparedWarm::prepare(&args.request()?)?;
    let plan = warm.plan();
    eprintln!(
        "reel-warm: {} episodes, {} blocks, {} ({} cached, {} to fetch); cache {} of {} capacity, {} pinned by others",
        plan.objects().len(),
        plan.blocks,
        human(plan.total_bytes),
        human(plan.cached_bytes),
        human(plan.missing_bytes),
        human(plan.disk_bytes),
        human(warm.cache().config().capacity),
        human(plan.pinned_by_others),
    );

    let bar = reel_cli::progress_bar(
        plan.missing_bytes,
        "{bar:40} {bytes}/{total_bytes} {binary_bytes_per_sec} ETA {eta}",
        args.quiet,
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    let outcome = warm.run(|p| bar.set_position(p.fetched_bytes));
    bar.finish_and_clear();
    let outcome = outcome?;

    let report = &outcome.report;
    eprintln!(
        "reel-warm: fetched {} in {:.1} s ({}/s, {} requests); working set of {} warm{}",
        human(report.fetched_bytes),
        report.seconds,
        human(report.bytes_per_second() as u64),
        report.requests,
        human(report.total_bytes),
        outcome
            .pin
            .as_ref()
            .map(|p| format!(", pinned as `{p}`"))
            .unwrap_or_default(),
    );
    for (name, value) in outcome.metrics.alluxio_names() {
        eprintln!("  {name} = {value}");
    }
    let mut line = serde_json::Map::new();
    line.insert("event".into(), "warm".into());
    line.insert("manifest".into(), args.manifest.into());
    line.insert("store".into(), args.store.into());
    line.extend(outcome.to_json());
    // The URIs given may carry credentials: never echoed.
    let line = serde_json::Value::Object(line).to_string();
    println!("{}", reel_io::redact_secrets(&line));
    Ok(ExitCode::SUCCESS)
}

fn human(bytes: u64) -> String {
    indicatif::BinaryBytes(bytes).to_string()
}
