//! `reel-export`: the episodes of a curated manifest written as a dataset other tools
//! read: `reel-export lerobot` writes a LeRobot v3.0 dataset that LeRobot opens, iterates
//! and trains on.
//!
//! One JSON line per episode on stdout (`{"episode": …}`), then one `{"export_report": …}`
//! line; a progress bar on stderr. Episodes that cannot be exported are reported and left
//! out; the dataset appears under its name only when whole.
//!
//! The `reel-export` binary and `reel export` both run [`run`].

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Mutex;

use anyhow::Context;
use clap::{Parser, Subcommand};
use reel_import::lerobot::export::{ExportOptions, export};
use reel_io::Store;
use reel_manifest::{node_manifest_dir, open_uri};
use reel_video::Mp4Encoding;

const EXAMPLES: &str = "\
Examples:
  reel-export lerobot --manifest train.arrow --store store/ -o pusht_curated > export.jsonl
  reel-export lerobot --manifest s3://robots/runs/42/train.arrow --store s3://robots/store -o out/ds
  reel-export lerobot --manifest m.arrow --store store/ -o ds --vcodec libx264 --g 30 --crf 23 --preset medium";

/// Write a curated manifest's episodes as a dataset other tools read.
#[derive(Debug, Parser)]
#[command(name = "reel-export", version, after_help = EXAMPLES)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// A LeRobot v3.0 dataset: every camera a video feature, every numeric stream a
    /// float32 feature on the dataset's fps grid, tasks and stats. Video settings are
    /// LeRobot's defaults (SVT-AV1, GOP 2, CRF 30, preset 12) unless given.
    #[command(after_help = EXAMPLES)]
    Lerobot(LerobotArgs),
}

#[derive(Debug, clap::Args)]
struct LerobotArgs {
    /// The manifest (`reel-curate`'s output): a path or store URI.
    #[arg(long)]
    manifest: String,
    /// The store holding the manifest's canonical episodes.
    #[arg(long)]
    store: String,
    /// The dataset folder to create (it must not exist).
    #[arg(long, short)]
    output: PathBuf,
    /// Frames per second (default: the first episode's).
    #[arg(long)]
    fps: Option<u32>,
    /// FFmpeg's video encoder: libsvtav1 (LeRobot's default), libx264, libaom-av1, libx265.
    #[arg(long, default_value = "libsvtav1")]
    vcodec: String,
    /// Frames per GOP (LeRobot's default: 2).
    #[arg(long, default_value_t = 2)]
    g: u32,
    /// Constant rate factor, in the encoder's scale (LeRobot's default: 30).
    #[arg(long, default_value_t = 30)]
    crf: u32,
    /// The encoder's preset (default: 12 for libsvtav1, the encoder's own otherwise).
    #[arg(long)]
    preset: Option<String>,
    /// `robot_type` of the dataset (default: the first episode's robot).
    #[arg(long)]
    robot_type: Option<String>,
    /// Episodes exported in parallel (default: all cores).
    #[arg(short, long)]
    jobs: Option<usize>,
    /// No progress bar.
    #[arg(long, short)]
    quiet: bool,
}

/// Runs one export.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    reel_video::quiet_ffmpeg_logs();
    let Command::Lerobot(args) = cli.command;
    let manifest = open_uri(&args.manifest, &node_manifest_dir())
        .with_context(|| format!("opening manifest {}", args.manifest))?;
    let store =
        Store::open_existing(&args.store).with_context(|| format!("opening {}", args.store))?;
    let preset = args
        .preset
        .clone()
        .or_else(|| (args.vcodec == "libsvtav1").then(|| "12".to_owned()));
    let options = ExportOptions {
        encoding: Mp4Encoding {
            encoder: args.vcodec.clone(),
            gop: args.g,
            crf: args.crf,
            preset,
        },
        fps: args.fps,
        robot_type: args.robot_type.clone(),
    };
    let bar = reel_cli::progress_bar(
        manifest.len() as u64,
        "{bar:40} {pos}/{len} episodes {per_sec} eta {eta}",
        args.quiet,
    );
    let stdout = Mutex::new(std::io::stdout());
    let output_failure: Mutex<Option<anyhow::Error>> = Mutex::new(None);
    let emit = |value: serde_json::Value| {
        let mut out = stdout.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(e) = writeln!(out, "{value}") {
            let mut failure = output_failure.lock().unwrap_or_else(|p| p.into_inner());
            failure.get_or_insert(e.into());
        }
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(args.jobs.unwrap_or(0))
        .build()?;
    let report = pool.install(|| {
        export(&manifest, &store, &args.output, &options, &|episode| {
            emit(serde_json::json!({ "episode": episode }));
            if let Some(error) = &episode.error {
                bar.suspend(|| eprintln!("{}: {error}", episode.episode_id));
            }
            bar.inc(1);
        })
    });
    bar.finish_and_clear();
    let report = report?;
    let failed = report.failed().count();
    if !args.quiet {
        eprintln!(
            "{}: {} episodes at {} fps ({}), {failed} left out",
            report.output,
            report.episodes.len() - failed,
            report.fps,
            report.features.join(", ")
        );
        if !report.left_out.is_empty() {
            eprintln!(
                "streams no LeRobot feature holds, left out: {}",
                report.left_out.join(", ")
            );
        }
    }
    emit(serde_json::json!({ "export_report": report }));
    match output_failure
        .into_inner()
        .unwrap_or_else(|p| p.into_inner())
    {
        Some(e) => Err(e.context("writing the JSON lines to stdout")),
        None => Ok(ExitCode::SUCCESS),
    }
}
