//! `reel-pack`: landing recording (MCAP, or a rosbag2 folder's `metadata.yaml`) →
//! canonical episode MCAP.
//!
//! Inputs and outputs are local paths or S3 URIs. One JSON line per input on stdout (the
//! pack report, or `{"input", "error"}`); progress on stderr. Exits non-zero if any input
//! failed. The `reel-pack` binary and `reel pack` both run [`run`]: the pipeline's
//! as-recorded profile (`reel_pipeline::pack`), every topic written at its recorded times.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Mutex;

use anyhow::{Context, bail};
use clap::Parser;
use rayon::prelude::*;
use reel_io::StoreOptions;
use reel_pipeline::PipelineConfig;

const EXAMPLES: &str = "\
Examples:
  reel-pack landing/ep-000.mcap -o canonical/ep-000.mcap
  reel-pack landing/*.mcap -o canonical/ --gop 30 --crf 23 -j 4
  reel-pack landing/run-3 -o canonical/   # a rosbag2 bag (its folder, metadata.yaml or a .db3): canonical/run-3.mcap
  reel-pack 's3://robots/landing/ep-7.mcap?region=eu-west-1' -o 's3://robots/canonical?region=eu-west-1' \\
    --config s3://robots/config/pack.toml";

/// Pack landing recordings (MCAP or rosbag2; ROS 2 cdr or Foxglove protobuf/JSON, decoded
/// from the schemas they carry) into canonical topic-group MCAPs with H.264 cameras.
#[derive(Debug, Parser)]
#[command(name = "reel-pack", version, after_help = EXAMPLES)]
pub struct Args {
    /// Landing MCAP files, or rosbag2 bags named by their folder, `metadata.yaml` or any
    /// of their `.db3` files (paths or s3:// URIs).
    #[arg(required = true)]
    inputs: Vec<String>,
    /// Output file for one input; output folder (or S3 prefix) for several.
    #[arg(short, long)]
    output: String,
    /// TOML config: topic → group rules, skips, encoder settings (a path or store URI).
    #[arg(long)]
    config: Option<String>,
    /// A named encoding, before --gop, --crf and --structure: `canonical` (the default)
    /// or `random-access` (short GOPs and uncompressed chunks, for globally shuffled
    /// training; see docs/FORMAT.md).
    #[arg(long, value_parser = reel_landing::EncodeConfig::NAMES)]
    encoding: Option<String>,
    /// Frames per GOP (and per camera chunk).
    #[arg(long)]
    gop: Option<u32>,
    /// x264 CRF.
    #[arg(long)]
    crf: Option<f32>,
    /// GOP structure: `chain` (each frame predicts from the one before) or `star` (each
    /// from its keyframe alone: any frame decodes from two access units).
    #[arg(long, value_parser = ["chain", "star"])]
    structure: Option<String>,
    /// Leave out topics Reel does not read instead of keeping them as recorded.
    #[arg(long)]
    skip_unknown: bool,
    /// Drop landing frames that do not decode instead of failing.
    #[arg(long)]
    skip_bad_frames: bool,
    /// Inputs packed in parallel (default: all cores).
    #[arg(short, long)]
    jobs: Option<usize>,
    /// No progress bar.
    #[arg(short, long)]
    quiet: bool,
}

/// Whether a path or URI names an `.mcap` file (ignoring an S3 URI's query).
fn names_mcap_file(path: &str) -> bool {
    path.split('?')
        .next()
        .unwrap_or_default()
        .ends_with(".mcap")
}

fn output_for(args: &Args, input: &str) -> String {
    if args.inputs.len() == 1 && names_mcap_file(&args.output) {
        return args.output.clone();
    }
    let path = input.split('?').next().unwrap_or(input);
    let stem = reel_landing::recording_stem(path);
    let file = format!("{}.mcap", stem.rsplit('/').next().unwrap_or(stem));
    let (dir, query) = match args.output.split_once('?') {
        Some((d, q)) => (d, format!("?{q}")),
        None => (args.output.as_str(), String::new()),
    };
    format!("{}/{file}{query}", dir.trim_end_matches('/'))
}

/// Packs every input; one JSON line each on stdout.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    reel_video::quiet_ffmpeg_logs();
    let mut config = match &args.config {
        Some(path) => PipelineConfig::from_pack_toml(path, &reel_cli::read_text_input(path)?)?,
        None => PipelineConfig::as_recorded(&Default::default()),
    };
    if let Some(name) = &args.encoding {
        config.encode = config
            .encode
            .with_encoding(name)
            .with_context(|| format!("--encoding `{name}` is not a known encoding"))?;
    }
    if let Some(gop) = args.gop {
        if gop == 0 {
            bail!("--gop must be at least 1");
        }
        config.encode.gop = gop;
    }
    if let Some(crf) = args.crf {
        if !(0.0..=51.0).contains(&crf) {
            bail!("--crf must be in 0..=51");
        }
        config.encode.crf = crf;
    }
    match args.structure.as_deref() {
        Some("star") => config.encode.structure = reel_landing::EncodeStructure::Star,
        Some(_) => config.encode.structure = reel_landing::EncodeStructure::Chain,
        None => {}
    }
    config.topics.skip_unknown |= args.skip_unknown;
    config.topics.skip_bad_frames |= args.skip_bad_frames;
    if args.inputs.len() > 1 && names_mcap_file(&args.output) {
        bail!("several inputs need an output folder, not {}", args.output);
    }
    let single_file = args.inputs.len() == 1 && names_mcap_file(&args.output);
    if !(args.output.starts_with("s3://") || single_file) {
        std::fs::create_dir_all(&args.output)
            .with_context(|| format!("creating {}", args.output))?;
    }

    // The split files of one bag (or the bag named twice) are one recording: packed once.
    let mut seen = std::collections::HashSet::new();
    let inputs: Vec<&String> = args
        .inputs
        .iter()
        .filter(|input| {
            let path = input.split('?').next().unwrap_or(input);
            seen.insert(reel_landing::recording_stem(path).to_owned())
        })
        .collect();
    let options = StoreOptions::default();
    let bar = reel_cli::progress_bar(
        inputs.len() as u64,
        "{bar:40} {pos}/{len} episodes {elapsed} {msg}",
        args.quiet,
    );
    let stdout = Mutex::new(std::io::stdout());
    let failures = Mutex::new(0usize);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(args.jobs.unwrap_or(0))
        .build()?;
    pool.install(|| {
        inputs.par_iter().for_each(|input| {
            let output = output_for(&args, input);
            let line = match reel_pipeline::pack(input, &output, &config, &options) {
                Ok(report) => serde_json::to_string(&report).unwrap_or_default(),
                Err(e) => {
                    *failures.lock().unwrap_or_else(|p| p.into_inner()) += 1;
                    bar.suspend(|| {
                        eprintln!(
                            "reel-pack: error: {}",
                            reel_io::redact_secrets(&e.to_string())
                        )
                    });
                    serde_json::json!({ "input": input, "error": e.to_string() }).to_string()
                }
            };
            // Input and output URIs may carry credentials: never echoed.
            let line = reel_io::redact_secrets(&line);
            let mut out = stdout.lock().unwrap_or_else(|p| p.into_inner());
            let _ = writeln!(out, "{line}");
            bar.inc(1);
        });
    });
    bar.finish_and_clear();
    let failures = *failures.lock().unwrap_or_else(|p| p.into_inner());
    if failures > 0 {
        bail!("{failures} of {} inputs failed", inputs.len());
    }
    Ok(ExitCode::SUCCESS)
}
