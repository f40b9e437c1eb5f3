//! `reel-synth`: write realistic synthetic landing episodes.
//!
//! One JSON line per episode on stdout (path, bytes, duration, counts per
//! topic); a progress bar on stderr. The output is a local folder or any store
//! URI (`s3://bucket/landing?endpoint=…`), so landing episodes can go straight
//! to object storage. The `reel-synth` binary and `reel synth` both run [`run`].

use std::collections::BTreeMap;
use std::io::Write;
use std::process::ExitCode;
use std::sync::Mutex;

use anyhow::{Context, bail};
use clap::{Parser, ValueEnum};
use rayon::prelude::*;
use reel_io::Store;
use reel_synth::{
    EpisodeReport, FaultKind, FaultRates, Flavor, SynthConfig, generate_episode, write_episode,
};

#[derive(Debug, Clone, Copy, ValueEnum)]
enum FlavorArg {
    Ros2,
    Foxglove,
}

const EXAMPLES: &str = "\
Examples:
  reel-synth -o landing/ --episodes 100 --seconds 60 --fault-rate 1 > landing.jsonl
  reel-synth -o landing/ --episodes 10 --first 100 --flavor foxglove --cameras 2
  reel-synth -o 's3://robots/landing?region=eu-west-1' --episodes 1000 -j 16 --quiet";

/// Write realistic synthetic robot landing episodes (MCAP) with optional,
/// ground-truthed fault injection.
#[derive(Debug, Parser)]
#[command(name = "reel-synth", version, after_help = EXAMPLES)]
pub struct Args {
    /// Output folder (created if missing) or store URI (`s3://bucket/prefix?…`).
    #[arg(short, long, alias = "out")]
    output: String,
    /// Number of episodes.
    #[arg(long, default_value_t = 4)]
    episodes: u64,
    /// Length of each episode in seconds.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Seed: the same seed gives byte-identical files.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Index of the first episode (to extend a corpus with new episodes).
    #[arg(long, default_value_t = 0)]
    first: u64,
    /// Cameras per episode (1-6).
    #[arg(long, default_value_t = 3)]
    cameras: usize,
    /// Depth cameras per episode (16UC1 millimetres), paired with the first cameras.
    #[arg(long, default_value_t = 0)]
    depth_cameras: usize,
    #[arg(long, default_value_t = 320)]
    width: u32,
    #[arg(long, default_value_t = 240)]
    height: u32,
    #[arg(long, default_value_t = 30.0)]
    camera_hz: f64,
    #[arg(long, default_value_t = 200.0)]
    joint_hz: f64,
    #[arg(long, default_value_t = 50.0)]
    action_hz: f64,
    #[arg(long, default_value_t = 30.0)]
    hand_hz: f64,
    /// Clock jitter as a fraction of each stream's period.
    #[arg(long, default_value_t = 0.1)]
    jitter: f64,
    /// Probability that a message is lost in transport.
    #[arg(long, default_value_t = 0.002)]
    drop_probability: f64,
    #[arg(long, default_value_t = 90)]
    jpeg_quality: u8,
    /// Faults per episode-minute, for every fault kind (0 = none).
    #[arg(long, default_value_t = 0.0)]
    fault_rate: f64,
    /// Per-kind fault rate, KIND=PER_MINUTE (repeatable); kinds: camera_blackout,
    /// frozen_frames, corrupt_frame, joint_jump, choppy_joints, hand_pose_dropout, timestamp_gap.
    #[arg(long = "fault", value_name = "KIND=RATE")]
    fault: Vec<String>,
    #[arg(long, value_enum, default_value_t = FlavorArg::Ros2)]
    flavor: FlavorArg,
    /// Episodes written in parallel (default: all cores).
    #[arg(short, long, alias = "threads")]
    jobs: Option<usize>,
    /// No progress bar.
    #[arg(short, long)]
    quiet: bool,
}

fn fault_rates(args: &Args) -> anyhow::Result<FaultRates> {
    let mut rates = if args.fault_rate > 0.0 {
        FaultRates::uniform(args.fault_rate)
    } else {
        FaultRates::none()
    };
    for spec in &args.fault {
        let (kind, rate) = spec
            .split_once('=')
            .with_context(|| format!("--fault {spec}: expected KIND=RATE"))?;
        let Some(kind) = FaultKind::from_name(kind) else {
            bail!("--fault {spec}: unknown fault kind {kind:?}")
        };
        let rate: f64 = rate
            .parse()
            .with_context(|| format!("--fault {spec}: rate is not a number"))?;
        rates = rates.with(kind, rate);
    }
    Ok(rates)
}

/// Writes the episodes; one JSON line each on stdout, a summary on stderr.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let config = SynthConfig {
        seed: args.seed,
        seconds: args.seconds,
        cameras: args.cameras,
        depth_cameras: args.depth_cameras,
        width: args.width,
        height: args.height,
        camera_hz: args.camera_hz,
        joint_hz: args.joint_hz,
        action_hz: args.action_hz,
        hand_hz: args.hand_hz,
        jitter: args.jitter,
        drop_probability: args.drop_probability,
        jpeg_quality: args.jpeg_quality,
        faults: fault_rates(&args)?,
        flavor: match args.flavor {
            FlavorArg::Ros2 => Flavor::Ros2,
            FlavorArg::Foxglove => Flavor::Foxglove,
        },
    };
    // A pool of our own, not the global one: `reel synth` may run inside a process whose
    // global pool is already built.
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(args.jobs.unwrap_or(0))
        .build()?;
    let progress = reel_cli::progress_bar(
        args.episodes,
        "{spinner} synth {pos}/{len} episodes [{bar:30}] {per_sec} eta {eta}",
        args.quiet,
    );
    progress.set_style(progress.style().progress_chars("=> "));
    let store = Store::open(&args.output).with_context(|| format!("opening {}", args.output))?;
    let stdout = Mutex::new(std::io::stdout());
    let summary = Mutex::new(Summary::default());
    let failures: Vec<String> = pool.install(|| {
        (args.first..args.first + args.episodes)
            .into_par_iter()
            .filter_map(|index| {
                let result = write_to(&store, &config, index)
                    .and_then(|written| Ok((serde_json::to_string(&written)?, written)));
                progress.inc(1);
                match result {
                    Ok((line, written)) => {
                        summary
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .add(&written.report);
                        let mut out = stdout.lock().unwrap_or_else(|e| e.into_inner());
                        writeln!(out, "{line}")
                            .err()
                            .map(|e| format!("episode {index}: stdout: {e}"))
                    }
                    Err(e) => Some(format!("episode {index}: {e:#}")),
                }
            })
            .collect()
    });
    progress.finish_and_clear();
    for failure in &failures {
        eprintln!("reel-synth: {failure}");
    }
    let summary = summary.into_inner().unwrap_or_else(|e| e.into_inner());
    summary.print(&args.output, config.cameras);
    if !failures.is_empty() {
        bail!("{} of {} episodes failed", failures.len(), args.episodes);
    }
    Ok(ExitCode::SUCCESS)
}

/// One episode as written, for the JSON line on stdout.
#[derive(Debug, serde::Serialize)]
struct Written {
    /// Local path or object URI of the episode.
    path: String,
    /// Local path or object URI of its fault sidecar.
    faults_path: String,
    #[serde(flatten)]
    report: EpisodeReport,
}

/// Writes episode `index` into `store`: straight to disk (temporary name, then
/// rename) for a local folder, else generated in memory and put as two objects,
/// the sidecar first so an episode is never listed without its ground truth.
fn write_to(store: &Store, config: &SynthConfig, index: u64) -> anyhow::Result<Written> {
    if let Some(root) = store.local_root() {
        let written = write_episode(config, index, root)?;
        return Ok(Written {
            path: written.path.display().to_string(),
            faults_path: written.faults_path.display().to_string(),
            report: written.report,
        });
    }
    let episode = generate_episode(config, index)?;
    let mcap_key = format!("{}.mcap", episode.name);
    let faults_key = format!("{}.faults.json", episode.name);
    store.write_atomic(&faults_key, serde_json::to_vec_pretty(&episode.faults)?)?;
    store.write_atomic(&mcap_key, episode.mcap)?;
    Ok(Written {
        path: store.object_uri(&mcap_key),
        faults_path: store.object_uri(&faults_key),
        report: episode.report,
    })
}

/// Totals over the episodes written, for the human summary on stderr.
#[derive(Debug, Default)]
struct Summary {
    episodes: u64,
    seconds: f64,
    bytes: u64,
    messages: BTreeMap<String, u64>,
    faults: BTreeMap<FaultKind, u64>,
}

impl Summary {
    fn add(&mut self, report: &EpisodeReport) {
        self.episodes += 1;
        self.seconds += report.duration_s;
        self.bytes += report.bytes;
        for (topic, n) in &report.counts {
            *self.messages.entry(topic.clone()).or_default() += n;
        }
        for (kind, n) in &report.faults {
            *self.faults.entry(*kind).or_default() += n;
        }
    }

    fn print(&self, out: &str, cameras: usize) {
        let row = |name: String, value: String| eprintln!("  {name:<52} {value:>10}");
        eprintln!("reel-synth: wrote {} episodes to {}", self.episodes, out);
        row(
            "episode-hours".into(),
            format!("{:.3}", self.seconds / 3600.0),
        );
        row(
            "MB on disk".into(),
            format!("{:.1}", self.bytes as f64 / 1e6),
        );
        let camera_minutes = self.seconds / 60.0 * cameras as f64;
        if camera_minutes > 0.0 {
            let per_minute = self.bytes as f64 / 1e6 / camera_minutes;
            row(
                "MB per camera-minute (JPEG landing)".into(),
                format!("{per_minute:.1}"),
            );
        }
        for (topic, n) in &self.messages {
            row(format!("messages {topic}"), n.to_string());
        }
        for (kind, n) in &self.faults {
            row(format!("faults {}", kind.name()), n.to_string());
        }
    }
}
