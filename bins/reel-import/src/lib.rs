//! `reel-import`: an existing dataset into a store (a local folder or `s3://…`): each
//! episode as a landing log under `landing/lerobot/`, `landing/hdf5/`, `landing/rlds/` or
//! `landing/zarr/`, then ingested into a canonical episode and its warehouse row, episodes
//! in parallel.
//!
//! One JSON line per episode landed (`{"landed": …}`) and per episode and pipeline step
//! on stdout, then one `{"import_report": …}` line; a progress bar on stderr. Episodes
//! that cannot be read are reported and do not fail the run; store errors do (rerun the
//! same command to resume: landed episodes are not read again, finished steps are
//! skipped).
//!
//! The `reel-import` binary and `reel import` both run [`run`].

use std::io::Write;
use std::process::ExitCode;
use std::sync::Mutex;

use anyhow::Context;
use clap::{Parser, Subcommand};
use reel_import::hdf5::{Hdf5Files, Mapping};
use reel_import::rlds::{RldsDataset, RldsOptions};
use reel_import::zarr::{ZarrOptions, ZarrReplayBuffer};
use reel_import::{ImportEvent, Source, config_for, import, lerobot::Dataset};
use reel_io::Store;
use reel_pipeline::{Event, PIPELINE_VERSION, PipelineConfig, Plan, RunOptions};

const EXAMPLES: &str = "\
Examples:
  reel-import lerobot ~/datasets/aloha_sim_insertion --store store/ > import.jsonl
  reel-import lerobot ~/.cache/huggingface/hub/datasets--lerobot--pusht/snapshots/<rev> --store s3://robots/store -j 8
  reel-import lerobot data/pusht --store store/ --encoding random-access -q
  reel-import hdf5 aloha/sim_insertion_scripted/episode_*.hdf5 --store store/
  reel-import hdf5 robomimic/lift/ph/image.hdf5 --store store/
  reel-import hdf5 recordings/*.h5 --mapping my-layout.toml --store store/
  reel-import rlds --list ~/tensorflow_datasets/droid/1.0.0
  reel-import rlds ~/tensorflow_datasets/droid/1.0.0 --store store/
  reel-import rlds ~/tensorflow_datasets/droid/1.0.0 --plan droid-plan.json --store store/   # in a Slurm array
  reel-import rlds s3://oxe/bridge_dataset/1.0.0 --split train --store s3://robots/store
  reel-import zarr --list data/pusht/pusht_cchi_v7_replay.zarr
  reel-import zarr data/pusht/pusht_cchi_v7_replay.zarr --fps 10 --store store/
  reel-import zarr umi/cup_in_the_wild.zarr.zip --fps 60 --plan umi-plan.json --store store/   # in a Slurm array";

/// Import existing datasets into a Reel store: canonical episodes, quality checks,
/// provenance and warehouse rows, resumable.
#[derive(Debug, Parser)]
#[command(name = "reel-import", version, after_help = EXAMPLES)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// A LeRobot dataset (v3.0, or v2.0/v2.1): a local folder or a Hugging Face cache snapshot (nothing is
    /// downloaded). Every feature becomes a topic at the dataset's fps; state and action
    /// values are kept exactly; video is kept when it is canonical H.264, else re-encoded.
    #[command(after_help = EXAMPLES)]
    Lerobot {
        /// The dataset folder (the one holding meta/info.json).
        path: String,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// HDF5 files in the ALOHA layout (one episode per file: /observations/images/<cam>
    /// raw or JPEG, /observations/qpos, qvel, effort, /action) or robomimic's (demos under
    /// data/: obs/*, actions, rewards, dones, states), told apart by their groups; any
    /// other layout with --mapping.
    #[command(after_help = EXAMPLES)]
    Hdf5 {
        /// The files.
        #[arg(required = true)]
        files: Vec<std::path::PathBuf>,
        /// Frames per second, for files that do not record theirs (default: ALOHA's 50,
        /// robomimic's control_freq, else 20).
        #[arg(long)]
        fps: Option<f64>,
        /// A TOML mapping of another layout: which groups are episodes, which datasets
        /// are signals (and of what kind) and cameras (docs/FORMAT.md; a path or store URI).
        #[arg(long)]
        mapping: Option<String>,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// An RLDS build as TensorFlow Datasets writes it (Open X-Embodiment, DROID,
    /// BridgeData V2), read without TensorFlow: the version folder holding
    /// dataset_info.json, features.json and the TFRecord shards. Numeric step features
    /// become topics at the dataset's fps, pictures cameras, language instructions and
    /// episode metadata the episode record (`--list` shows the mapping).
    #[command(after_help = EXAMPLES)]
    Rlds {
        /// The build's version folder (e.g. droid/1.0.0): a path or store URI.
        path: String,
        /// Frames per second (known for DROID, 15, and Bridge, 5; other datasets need it).
        #[arg(long)]
        fps: Option<f64>,
        /// One split (default: every split of the build).
        #[arg(long)]
        split: Option<String>,
        #[command(flatten)]
        read: ReadArgs,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// A Zarr replay buffer as Diffusion Policy and UMI write it (Zarr v2 or v3, a folder
    /// or a `.zip`): `data/<key>` arrays of a row per step and `meta/episode_ends`.
    /// `[steps, height, width, 3]` arrays become cameras, the others signals at --fps
    /// (`--list` shows the mapping).
    #[command(after_help = EXAMPLES)]
    Zarr {
        /// The buffer: a folder, or a zip of one (UMI's `.zarr.zip`).
        path: std::path::PathBuf,
        /// Frames per second (replay buffers do not record theirs; needed but with --list).
        #[arg(long)]
        fps: Option<f64>,
        /// The buffer's name, which its episode ids start with (default: the file or
        /// folder name without .zip and .zarr; after its folder's name for names many
        /// buffers share, such as replay_buffer).
        #[arg(long)]
        name: Option<String>,
        #[command(flatten)]
        read: ReadArgs,
        #[command(flatten)]
        common: CommonArgs,
    },
}

/// Listing, checking, and one batch of a plan: for the datasets `reel-plan` splits (RLDS
/// builds by shard, Zarr replay buffers by episode).
#[derive(Debug, clap::Args)]
struct ReadArgs {
    /// Print how each feature or array maps (one JSON line each on stdout) and import
    /// nothing.
    #[arg(long)]
    list: bool,
    /// Read every episode (checksums, values, pictures) and write nothing: one JSON line
    /// per episode on stdout; exits 1 when any episode does not read.
    #[arg(long, conflicts_with = "list")]
    check: bool,
    /// Import only one batch of a plan made by `reel-plan --rlds` or `--zarr` (a path or
    /// store URI): a Slurm array's or Kubernetes Indexed Job's tasks import a large
    /// dataset in parallel.
    #[arg(long)]
    plan: Option<String>,
    /// The plan's batch (default: $JOB_COMPLETION_INDEX or $SLURM_ARRAY_TASK_ID).
    #[arg(long, requires = "plan")]
    batch: Option<usize>,
}

impl ReadArgs {
    /// The keys of the plan's batch (shards or episodes), when a plan is given.
    fn plan_keys(&self) -> anyhow::Result<Option<Vec<String>>> {
        let Some(input) = &self.plan else {
            return Ok(None);
        };
        let plan = Plan::from_json(input, &reel_cli::read_input(input)?)?;
        let index = reel_cli::batch_index(self.batch)?;
        let batch = plan.batches.get(index).with_context(|| {
            format!("{input}: no batch {index} (it has {})", plan.batches.len())
        })?;
        Ok(Some(batch.episodes.iter().map(|e| e.key.clone()).collect()))
    }
}

#[derive(Debug, clap::Args)]
struct CommonArgs {
    /// Output store: landing logs, canonical episodes, warehouse, state (required but
    /// with `--list` and `--check`).
    #[arg(long)]
    store: Option<String>,
    /// Ingest settings (`resample` rates are set to the dataset's fps; without this file,
    /// Reel's defaults with video re-encoded at CRF 12): TOML, or JSON when the name ends
    /// in `.json`; a path or store URI.
    #[arg(long)]
    config: Option<String>,
    /// A named encoding for cameras and chunks: `canonical` (the default) or
    /// `random-access` (see docs/FORMAT.md).
    #[arg(long, value_parser = reel_pipeline::EncodeConfig::NAMES)]
    encoding: Option<String>,
    /// Recompute what is already recorded done.
    #[arg(long)]
    replay: bool,
    /// Episodes processed in parallel (default: all cores).
    #[arg(short, long)]
    jobs: Option<usize>,
    /// No progress bar.
    #[arg(long, short)]
    quiet: bool,
}

fn run_import(source: &dyn Source, fps: f64, args: CommonArgs) -> anyhow::Result<ExitCode> {
    let mut base = match &args.config {
        Some(input) => PipelineConfig::from_named(input, &reel_cli::read_text_input(input)?)?,
        None => reel_import::default_config(),
    };
    base.pipeline_version = PIPELINE_VERSION.to_owned();
    if let Some(name) = &args.encoding {
        base.encode = base
            .encode
            .with_encoding(name)
            .with_context(|| format!("--encoding `{name}` is not a known encoding"))?;
    }
    let config = config_for(fps, &base);
    let uri = args.store.as_deref().context("--store is required")?;
    let store = Store::open(uri).with_context(|| format!("opening {uri}"))?;
    let episodes = source.episodes().len() as u64;
    if !args.quiet {
        eprintln!("{}: {episodes} episodes at {fps} fps", source.name());
    }
    // Landing, then the pipeline's three steps.
    let bar = reel_cli::progress_bar(
        episodes * 4,
        "{bar:40} {pos}/{len} episode-steps {per_sec} eta {eta} {msg}",
        args.quiet,
    );
    bar.set_message(source.name().to_owned());
    let stdout = Mutex::new(std::io::stdout());
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
    let options = RunOptions {
        replay: args.replay,
        ..RunOptions::default()
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(args.jobs.unwrap_or(0))
        .build()?;
    let report = pool.install(|| {
        import(source, &store, config, &options, &|event| match event {
            ImportEvent::Landed(landed) => {
                emit(serde_json::to_string(
                    &serde_json::json!({ "landed": landed }),
                ));
                if let Some(error) = &landed.error {
                    bar.suspend(|| eprintln!("episode {}: {error}", landed.episode_index));
                }
                bar.inc(1);
            }
            ImportEvent::Ingest(Event::Episode(e)) => {
                emit(serde_json::to_string(e));
                bar.inc(1);
            }
            ImportEvent::Ingest(Event::StepSkipped { episodes, .. }) => bar.inc(*episodes as u64),
            ImportEvent::Ingest(_) => {}
        })
    });
    bar.finish_and_clear();
    let report = report?;
    let failed = report.failed().count();
    for q in &report.ingest.quarantined {
        eprintln!("quarantined {}: {}", q.landing_key, q.reason);
    }
    if !args.quiet {
        eprintln!(
            "{}: {} episodes imported, {failed} unreadable, {} quarantined",
            source.name(),
            report.landed.len() - failed - report.ingest.quarantined.len(),
            report.ingest.quarantined.len()
        );
    }
    emit(serde_json::to_string(
        &serde_json::json!({ "import_report": report }),
    ));
    match output_failure
        .into_inner()
        .unwrap_or_else(|p| p.into_inner())
    {
        Some(e) => Err(e.context("writing the JSON lines to stdout")),
        None => Ok(ExitCode::SUCCESS),
    }
}

/// Reads every episode of `source` without writing; one JSON line each.
fn check_episodes(
    source: &dyn Source,
    jobs: Option<usize>,
    quiet: bool,
) -> anyhow::Result<ExitCode> {
    let bar = reel_cli::progress_bar(
        source.episodes().len() as u64,
        "{bar:40} {pos}/{len} episodes {per_sec} eta {eta}",
        quiet,
    );
    let stdout = Mutex::new(std::io::stdout());
    let output_failure: Mutex<Option<anyhow::Error>> = Mutex::new(None);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(jobs.unwrap_or(0))
        .build()?;
    let checked = pool.install(|| {
        reel_import::check(source, &|episode| {
            let written = serde_json::to_string(episode)
                .map_err(anyhow::Error::from)
                .and_then(|line| {
                    let mut out = stdout.lock().unwrap_or_else(|p| p.into_inner());
                    writeln!(out, "{line}").map_err(anyhow::Error::from)
                });
            if let Err(e) = written {
                let mut failure = output_failure.lock().unwrap_or_else(|p| p.into_inner());
                failure.get_or_insert(e);
            }
            if let Some(error) = &episode.error {
                bar.suspend(|| eprintln!("{}: {error}", episode.episode_id));
            }
            bar.inc(1);
        })
    })?;
    bar.finish_and_clear();
    if let Some(e) = output_failure
        .into_inner()
        .unwrap_or_else(|p| p.into_inner())
    {
        return Err(e.context("writing the JSON lines to stdout"));
    }
    let failed = checked.iter().filter(|c| c.error.is_some()).count();
    if !quiet {
        let messages: usize = checked.iter().map(|c| c.messages).sum();
        eprintln!(
            "{}: {} episodes read ({messages} messages), {failed} unreadable",
            source.name(),
            checked.len() - failed
        );
    }
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Prints each mapping as a JSON line on stdout, and as a line of text on stderr.
fn print_mappings<T: serde::Serialize>(
    mappings: &[T],
    text: impl Fn(&T) -> String,
    quiet: bool,
) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    for mapping in mappings {
        if !quiet {
            eprintln!("{}", text(mapping));
        }
        writeln!(out, "{}", serde_json::to_string(mapping)?)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs one import.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    reel_video::quiet_ffmpeg_logs();
    match cli.command {
        Command::Lerobot { path, common } => {
            let dataset = Dataset::open(&path)?;
            let fps = dataset.info().fps;
            if !common.quiet {
                eprintln!("{}: LeRobot {}", dataset.name(), dataset.revision());
            }
            run_import(&dataset, fps, common)
        }
        Command::Hdf5 {
            files,
            fps,
            mapping,
            common,
        } => {
            let mapping = match &mapping {
                Some(input) => Some(Mapping::parse(input, &reel_cli::read_text_input(input)?)?),
                None => None,
            };
            let set = Hdf5Files::open_with(&files, fps, mapping)?;
            let rate = set.fps()?;
            run_import(&set, rate, common)
        }
        Command::Rlds {
            path,
            fps,
            split,
            read,
            common,
        } => {
            let shards = read.plan_keys()?;
            let options = RldsOptions { fps, split, shards };
            let dataset = RldsDataset::open(&path, &options)?;
            if read.list {
                return print_mappings(
                    &dataset.mappings(),
                    |m| format!("{:40} {:32} -> {}", m.feature, m.tfds, m.reel),
                    common.quiet,
                );
            }
            if read.check {
                // Reading an episode needs its rate: one error, not one per episode.
                dataset.fps()?;
                return check_episodes(&dataset, common.jobs, common.quiet);
            }
            if !common.quiet {
                eprintln!(
                    "{}: RLDS {}, {} shards",
                    dataset.name(),
                    dataset.version(),
                    dataset.shards().len()
                );
            }
            let rate = dataset.fps()?;
            run_import(&dataset, rate, common)
        }
        Command::Zarr {
            path,
            fps,
            name,
            read,
            common,
        } => {
            let episodes = read.plan_keys()?;
            let options = ZarrOptions {
                fps,
                name,
                episodes,
            };
            let buffer = ZarrReplayBuffer::open(&path, &options)?;
            if read.list {
                return print_mappings(
                    &buffer.mappings(),
                    |m| format!("{:32} {:40} -> {}", m.array, m.zarr, m.reel),
                    common.quiet,
                );
            }
            let rate = buffer.fps()?;
            if read.check {
                return check_episodes(&buffer, common.jobs, common.quiet);
            }
            if !common.quiet {
                eprintln!(
                    "{}: {}, {} steps",
                    buffer.name(),
                    buffer.revision(),
                    buffer.steps()
                );
            }
            run_import(&buffer, rate, common)
        }
    }
}
