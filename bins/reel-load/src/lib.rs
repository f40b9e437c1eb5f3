//! `reel-load`: runs the loader over a manifest for K batches and reports what a trainer
//! would see — samples/s, frames decoded/s, batch latency, time to first batch, peak RSS —
//! or (`--dump`) writes the batches to stdout as an Arrow IPC stream for shell pipelines.
//! The `reel-load` binary and `reel load` both run [`run`].

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Parser, ValueEnum};
use reel_cache::CacheConfig;
use reel_loader::{
    ArrowStreamWriter, LoaderOptions, LoaderState, MixtureEntry, ResumeCheck, SampleSpec,
    SavedState, Shuffle, SkippedEpisode, open_loader,
};
use serde::Serialize;

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Order {
    Global,
    Locality,
}

const EXAMPLES: &str = "\
Examples:
  reel-load --manifest train.arrow --spec testdata/spec.toml --batches 100 --json
  reel-load --manifest train.arrow --spec spec.toml --store store/ --cache /nvme/reel-cache \\
    --cache-capacity 64GiB -j 4 --batches 100 --dump | python my_consumer.py
  reel-load --manifest 's3://robots/runs/42/train.arrow?region=eu-west-1' \\
    --spec s3://robots/runs/42/spec.toml --rank 3 --world 8 --shuffle global --quiet";

/// Run the Reel dataloader over a manifest and report throughput, or dump batches as Arrow.
#[derive(Debug, Parser)]
#[command(name = "reel-load", version, after_help = EXAMPLES)]
pub struct Args {
    /// Training manifest (Arrow IPC file, memory-mapped): a local path, or an object URI
    /// (`s3://bucket/runs/42/train.arrow?…`) fetched once per node.
    #[arg(long, required_unless_present = "mixture", conflicts_with = "mixture")]
    manifest: Option<String>,
    /// A weighted mixture of manifests instead (TOML: `[[source]]` tables of `manifest`,
    /// `weight` and optionally `store`): each fills its weight's share of every epoch.
    #[arg(long, value_name = "MIX.toml", conflicts_with = "store")]
    mixture: Option<String>,
    /// Sample spec (TOML): a path or store URI.
    #[arg(long)]
    spec: String,
    /// Store the manifest's URIs are relative to: a folder or s3://bucket/prefix.
    /// Defaults to the manifest's folder.
    #[arg(long)]
    store: Option<String>,
    /// Read through the node's block cache in this folder.
    #[arg(long)]
    cache: Option<PathBuf>,
    /// Cache capacity (with --cache): bytes or a size such as 64GiB or 500GB.
    #[arg(long, value_parser = reel_cli::parse_size, default_value = "64GiB", value_name = "SIZE")]
    cache_capacity: u64,
    /// Cache capacity in GiB (the older spelling of --cache-capacity).
    #[arg(long, hide = true, conflicts_with = "cache_capacity")]
    cache_gib: Option<f64>,
    #[arg(long, default_value_t = 8)]
    batch_size: usize,
    /// Decoding worker threads.
    #[arg(short, long, alias = "workers", default_value_t = 2)]
    jobs: usize,
    /// Batches to deliver (continuing into the next epochs when one ends).
    #[arg(long, default_value_t = 50)]
    batches: u64,
    #[arg(long, default_value_t = 4)]
    prefetch: usize,
    #[arg(long, default_value_t = 0)]
    rank: usize,
    #[arg(long, default_value_t = 1)]
    world: usize,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Epoch to start in.
    #[arg(long, default_value_t = 0, conflicts_with = "resume")]
    epoch: u64,
    /// Resume from saved states: JSON files, each one rank's state (the `state` of a
    /// `--json` report, or the whole report). One state serves a world of its size; the
    /// states of all its ranks resume on any --world, the new ranks together delivering
    /// the rest of the epoch once.
    #[arg(long, value_name = "STATE.json", num_args = 1..)]
    resume: Vec<PathBuf>,
    /// With --resume: go on from a state of a changed run (another manifest, spec, seed,
    /// shuffle or batch size) at its epoch and batch in this loader's order, instead of
    /// refusing it. That epoch's rest may then repeat or miss samples.
    #[arg(long, requires = "resume")]
    resume_changed: bool,
    #[arg(long, value_enum, default_value_t = Order::Locality)]
    shuffle: Order,
    /// Samples drawn from each opened window (locality shuffle).
    #[arg(long, default_value_t = 10)]
    run: u64,
    /// Fail when more than this share of an epoch's samples is skipped (their episode
    /// corrupt or not what the manifest says).
    #[arg(long, default_value_t = 0.01, value_name = "FRACTION")]
    max_skipped: f64,
    /// Print the report as one JSON object on stdout.
    #[arg(long, conflicts_with = "dump")]
    json: bool,
    /// Write the batches to stdout as an Arrow IPC stream.
    #[arg(long)]
    dump: bool,
    /// Also pack each batch's valid steps of --pack-stream into rows of this many tokens
    /// and report the padding fraction.
    #[arg(long)]
    pack_budget: Option<usize>,
    /// Numeric stream (spec name) to pack.
    #[arg(long, default_value = "state")]
    pack_stream: String,
    /// Allocate batches in page-locked memory through this CUDA device (built with
    /// feature `cuda`; pageable memory where CUDA is absent, as the report says).
    #[arg(long, value_name = "DEVICE")]
    pin_memory: Option<usize>,
    /// No progress bar.
    #[arg(short, long)]
    quiet: bool,
}

#[derive(Debug, Serialize)]
struct Report {
    batches: u64,
    samples: u64,
    skipped: u64,
    /// The episodes whose samples were skipped, with how many and why.
    skipped_episodes: Vec<SkippedEpisode>,
    workers: usize,
    batch_size: usize,
    shuffle: String,
    seconds: f64,
    samples_per_s: f64,
    cpu_seconds: f64,
    samples_per_cpu_s: f64,
    frames_decoded: u64,
    frames_decoded_per_s: f64,
    chunks_read: u64,
    /// The share of wanted frames found already decoded in the GOP cache the workers share.
    gop_cache_hit_rate: f64,
    time_to_first_batch_s: f64,
    batch_wait_p50_ms: f64,
    batch_wait_p99_ms: f64,
    peak_rss_mib: f64,
    cache_hit_rate: Option<f64>,
    pack_padding_fraction: Option<f64>,
    pinned_memory: bool,
    /// Samples delivered from each source (one entry for one manifest).
    samples_by_source: Vec<u64>,
    /// Where this rank stands after the batches delivered, for `--resume`.
    state: SavedState,
}

/// Loads the batches; the report on stderr (and stdout with `--json`), or the batches on
/// stdout with `--dump`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    reel_video::quiet_ffmpeg_logs();
    let started = Instant::now();
    let cpu_at_start = cpu_seconds();
    let spec = SampleSpec::from_toml_str(&reel_cli::read_text_input(&args.spec)?)
        .with_context(|| format!("reading sample spec {}", args.spec))?;
    let (entries, named) = match (&args.manifest, &args.mixture) {
        (Some(manifest), _) => {
            let only = MixtureEntry {
                manifest: manifest.clone(),
                weight: 1.0,
                store: args.store.clone(),
            };
            (vec![only], manifest.clone())
        }
        (None, Some(mixture)) => {
            let text = reel_cli::read_text_input(mixture)?;
            let entries = MixtureEntry::from_toml_str(&text)
                .map_err(|e| anyhow::anyhow!("mixture {mixture}: {e}"))?;
            (entries, mixture.clone())
        }
        (None, None) => bail!("give --manifest or --mixture"),
    };
    let cache = args.cache.as_ref().map(|dir| {
        let capacity = match args.cache_gib {
            Some(gib) => (gib * (1u64 << 30) as f64) as u64,
            None => args.cache_capacity,
        };
        CacheConfig::new(dir, capacity)
    });
    let options = LoaderOptions {
        batch_size: args.batch_size,
        workers: args.jobs,
        prefetch: args.prefetch,
        seed: args.seed,
        rank: args.rank,
        world: args.world,
        shuffle: match args.shuffle {
            Order::Global => Shuffle::Global,
            Order::Locality => Shuffle::Locality { run: args.run },
        },
        pin_memory: args.pin_memory,
        max_skipped: args.max_skipped,
        ..LoaderOptions::default()
    };
    let loader = open_loader(&entries, &spec, cache, options)
        .with_context(|| format!("opening the loader over {named}"))?;
    let cache = loader.cache().cloned();
    if cache.as_ref().is_some_and(|c| c.store_missing()) {
        eprintln!("reel-load: the store folder is missing: serving what the cache holds");
    }
    let pinned_memory = loader.host_memory().is_pinned();
    if args.pin_memory.is_some() && !pinned_memory {
        eprintln!(
            "reel-load: no CUDA here (or built without feature cuda): batches in pageable memory"
        );
    }
    if loader.total_samples() == 0 {
        bail!("{named}: no samples under this spec");
    }

    let progress = reel_cli::progress_bar(
        args.batches,
        "{bar:40} {pos}/{len} batches {per_sec} eta {eta}",
        args.quiet || args.dump,
    );
    let mut dump = args
        .dump
        .then(|| ArrowStreamWriter::new(std::io::stdout().lock()));
    let mut waits: Vec<Duration> = Vec::new();
    let mut first_batch = None;
    let mut padded = (0u64, 0u64);
    let mut samples_by_source = vec![0u64; loader.num_sources()];
    let loading = Instant::now();
    let start = if args.resume.is_empty() {
        LoaderState::at(args.epoch, 0)
    } else {
        let saved = args
            .resume
            .iter()
            .map(|path| read_state(path))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let check = if args.resume_changed {
            ResumeCheck::KeepPosition
        } else {
            ResumeCheck::SameRun
        };
        loader.restore(&saved, check)?
    };
    let mut epochs = loader.epochs(start);
    for _ in 0..args.batches {
        let asked = Instant::now();
        let Some(batch) = epochs.next() else { break };
        let batch = batch?;
        waits.push(asked.elapsed());
        first_batch.get_or_insert_with(|| started.elapsed());
        for s in &batch.skipped {
            eprintln!("skipped {} at {}: {}", s.uri, s.anchor_ns, s.reason);
        }
        let sources = batch
            .get("source")
            .and_then(|t| t.as_i64())
            .unwrap_or_default();
        for &k in sources {
            if let Some(n) = samples_by_source.get_mut(k as usize) {
                *n += 1;
            }
        }
        if let Some(budget) = args.pack_budget {
            let packed = reel_loader::pack(&batch, &args.pack_stream, budget)?;
            let total = packed.tokens.shape[0] * budget;
            padded.0 += (packed.padding_fraction * total as f64).round() as u64;
            padded.1 += total as u64;
        }
        if let Some(dump) = dump.as_mut() {
            dump.write(batch)?;
        }
        progress.inc(1);
    }
    let (stats, state, skipped_episodes) =
        (epochs.stats(), epochs.state(), epochs.skipped_episodes());
    // Samples skipped in batches that came out empty at the end, which no batch reported.
    for s in epochs.skipped_after_last_batch() {
        eprintln!("skipped {} at {}: {}", s.uri, s.anchor_ns, s.reason);
    }
    // Stopping the workers is part of the run's time.
    drop(epochs);
    let seconds = loading.elapsed().as_secs_f64();
    progress.finish_and_clear();
    if let Some(dump) = dump {
        dump.finish()?.flush()?;
    }
    let cpu = cpu_seconds() - cpu_at_start;
    waits.sort();
    let quantile = |q: f64| {
        waits
            .get(((waits.len() as f64 - 1.0) * q).round() as usize)
            .map_or(0.0, |d| d.as_secs_f64() * 1e3)
    };
    let samples = stats.samples;
    let report = Report {
        batches: stats.batches,
        samples,
        skipped: stats.skipped,
        skipped_episodes,
        workers: args.jobs,
        batch_size: args.batch_size,
        shuffle: match args.shuffle {
            Order::Global => "global".into(),
            Order::Locality => format!("locality(run={})", args.run),
        },
        seconds,
        samples_per_s: samples as f64 / seconds,
        cpu_seconds: cpu,
        samples_per_cpu_s: samples as f64 / cpu.max(1e-9),
        frames_decoded: stats.frames_decoded,
        frames_decoded_per_s: stats.frames_decoded as f64 / seconds,
        chunks_read: stats.chunks_read,
        gop_cache_hit_rate: stats.frames_cached as f64 / stats.frames_wanted.max(1) as f64,
        time_to_first_batch_s: first_batch.map_or(0.0, |d| d.as_secs_f64()),
        batch_wait_p50_ms: quantile(0.5),
        batch_wait_p99_ms: quantile(0.99),
        peak_rss_mib: peak_rss_mib(),
        cache_hit_rate: cache.map(|c| c.metrics().hit_rate()),
        pack_padding_fraction: args
            .pack_budget
            .map(|_| padded.0 as f64 / padded.1.max(1) as f64),
        pinned_memory,
        samples_by_source,
        state: loader.saved_state(state),
    };
    eprintln!(
        "{} batches, {} samples ({} skipped) in {:.2} s: {:.1} samples/s, {:.1} samples per CPU-second, \
         {:.0} frames decoded/s, first batch after {:.3} s, wait p50 {:.1} ms p99 {:.1} ms, peak RSS {:.0} MiB{}",
        report.batches,
        report.samples,
        report.skipped,
        report.seconds,
        report.samples_per_s,
        report.samples_per_cpu_s,
        report.frames_decoded_per_s,
        report.time_to_first_batch_s,
        report.batch_wait_p50_ms,
        report.batch_wait_p99_ms,
        report.peak_rss_mib,
        report
            .cache_hit_rate
            .map(|h| format!(", cache hit rate {:.1}%", h * 100.0))
            .unwrap_or_default()
    );
    if args.json {
        let mut out = std::io::stdout().lock();
        serde_json::to_writer(&mut out, &report)?;
        writeln!(out)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn usage() -> libc::rusage {
    // SAFETY: getrusage fills the zeroed struct it is given; RUSAGE_SELF is always valid.
    unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    }
}

/// User plus system CPU time of this process (all threads), seconds.
fn cpu_seconds() -> f64 {
    let u = usage();
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 * 1e-6;
    t(u.ru_utime) + t(u.ru_stime)
}

fn peak_rss_mib() -> f64 {
    // Linux reports ru_maxrss in KiB.
    usage().ru_maxrss as f64 / 1024.0
}

/// A saved state from `path`: a state as `--json` reports it, or the whole report.
fn read_state(path: &std::path::Path) -> anyhow::Result<SavedState> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading loader state {}", path.display()))?;
    let value: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{}: not JSON", path.display()))?;
    let state = value.get("state").cloned().unwrap_or(value);
    serde_json::from_value(state).with_context(|| {
        format!(
            "{}: not a loader state saved by reel-load --json (or a Reel checkpoint)",
            path.display()
        )
    })
}
