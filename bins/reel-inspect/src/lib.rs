//! `reel-inspect`: what is inside an MCAP. Without a subcommand, the layout of each file
//! (a table on stdout, or one JSON line per file); `doctor` checks files against the MCAP
//! specification and the canonical episode rules; `cat` prints messages as JSON lines;
//! `lineage` follows a checkpoint (or a manifest) down to the landing recordings.
//! The `reel-inspect` binary and `reel inspect` both run [`run`].

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use reel_io::{StoreOptions, open_object};
use reel_mcap::{DoctorOptions, EpisodeReader, MessageJson};

const EXAMPLES: &str = "\
Examples:
  reel-inspect canonical/ep-000.mcap
  reel-inspect --json --no-gops 's3://robots/canonical/ep-000.mcap?region=eu-west-1'
  reel-inspect doctor canonical/*.mcap
  reel-inspect doctor --mcap-only landing/ep-000.mcap
  reel-inspect cat canonical/ep-000.mcap --topic /joint_states | head
  reel-inspect lineage checkpoints/step-0000001000";

/// Show the layout of MCAP files: channels, schemas, topic groups, chunks per group (count,
/// sizes, time ranges, topics), GOP statistics and compression ratio.
#[derive(Debug, Parser)]
#[command(
    name = "reel-inspect",
    version,
    after_help = EXAMPLES,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
pub struct Args {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    layout: LayoutArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check MCAP files against the MCAP specification (magic, footer, records, summary,
    /// chunk CRCs) and the canonical episode rules of docs/FORMAT.md (metadata, channels,
    /// topic groups, zstd chunks, GOP-aligned camera chunks); exits 1 if anything is wrong.
    #[command(after_help = "\
Examples:
  reel-inspect doctor canonical/ep-000.mcap canonical/ep-001.mcap
  reel-inspect doctor --json canonical/*.mcap > doctor.jsonl
  reel-inspect doctor --mcap-only landing/ep-000.mcap")]
    Doctor(DoctorArgs),
    /// Print messages of chosen topics as JSON lines (topic, log_time, publish_time, and
    /// the decoded message where Reel can decode it, else the payload's length and base64).
    #[command(after_help = "\
Examples:
  reel-inspect cat canonical/ep-000.mcap --topic /joint_states
  reel-inspect cat canonical/ep-000.mcap -t /action -t /hand/left/pose | jq .message.values
  reel-inspect cat landing/ep-000.mcap | wc -l")]
    Cat(CatArgs),
    /// What a checkpoint saw: its loader states, each manifest they loaded (query,
    /// warehouse snapshot, CDC position, creation time) and each episode's canonical
    /// object and landing recording with their digests. Manifests and objects replaced
    /// since are reported as CHANGED (exit 1).
    #[command(after_help = "\
Examples:
  reel-inspect lineage checkpoints/step-0000001000
  reel-inspect lineage checkpoints/ --json | jq 'select(.kind == \"episode\")'
  reel-inspect lineage train.arrow --limit 10 --no-verify")]
    Lineage(LineageArgs),
}

#[derive(Debug, clap::Args)]
struct LineageArgs {
    /// A checkpoint folder (`step-N`, as `reel.save_checkpoint` and `train-policy` write
    /// it, with `loader.json`), a folder of checkpoints (its newest), or a manifest.
    path: std::path::PathBuf,
    /// One JSON object per link (`kind`: checkpoint, loader_state, manifest, episode).
    #[arg(long)]
    json: bool,
    /// Read only each episode's metadata, not the whole object (no digest check).
    #[arg(long)]
    no_verify: bool,
    /// At most this many episodes of each manifest.
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// The store the manifests' episode paths are relative to (default: the one the
    /// loader state recorded, else beside each manifest).
    #[arg(long)]
    store: Option<String>,
}

#[derive(Debug, clap::Args)]
struct LayoutArgs {
    /// MCAP files (paths or s3:// URIs).
    #[arg(required = true)]
    files: Vec<String>,
    /// One JSON object per file (with every chunk) instead of a table.
    #[arg(long)]
    json: bool,
    /// Skip GOP statistics (they read every camera chunk).
    #[arg(long)]
    no_gops: bool,
}

#[derive(Debug, clap::Args)]
struct DoctorArgs {
    /// MCAP files (paths or s3:// URIs).
    #[arg(required = true)]
    files: Vec<String>,
    /// One JSON report per file on stdout instead of text.
    #[arg(long)]
    json: bool,
    /// Check the MCAP specification only (for landing logs and other MCAPs).
    #[arg(long)]
    mcap_only: bool,
}

#[derive(Debug, clap::Args)]
struct CatArgs {
    /// MCAP file (path or s3:// URI).
    file: String,
    /// Topic to print; repeat for several (default: every topic).
    #[arg(short, long = "topic", value_name = "TOPIC")]
    topics: Vec<String>,
}

/// Runs the layout report, `doctor` or `cat`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        None => layout(args.layout),
        Some(Command::Doctor(doctor)) => run_doctor(doctor),
        Some(Command::Cat(cat)) => run_cat(cat),
        Some(Command::Lineage(lineage)) => run_lineage(lineage),
    }
}

fn run_lineage(args: LineageArgs) -> anyhow::Result<ExitCode> {
    let lineage = reel_lineage::Lineage::new(reel_lineage::LineageOptions {
        verify: !args.no_verify,
        limit: args.limit,
        store: args.store,
    });
    let mut changed = 0usize;
    let mut out = std::io::stdout().lock();
    lineage
        .walk(&args.path, &mut |record| {
            use reel_lineage::{Record, Status};
            let status = match &record {
                Record::Manifest(m) => Some(m.status),
                Record::Episode(e) => Some(e.status),
                _ => None,
            };
            changed += usize::from(matches!(status, Some(Status::Changed | Status::Missing)));
            if args.json {
                serde_json::to_writer(&mut out, &record).map_err(std::io::Error::from)?;
                writeln!(out)?;
            } else {
                writeln!(out, "{}", record.text())?;
            }
            Ok(())
        })
        .with_context(|| format!("lineage of {}", args.path.display()))?;
    if changed > 0 {
        eprintln!("reel-inspect: {changed} manifests or episodes changed or missing since");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

fn layout(args: LayoutArgs) -> anyhow::Result<ExitCode> {
    let mut failures = 0;
    for file in &args.files {
        let report = open_object(file, &StoreOptions::default())
            .map_err(reel_mcap::Error::from)
            .and_then(|source| reel_mcap::inspect(source, !args.no_gops));
        if let Ok(report) = &report {
            for warning in &report.warnings {
                eprintln!(
                    "reel-inspect: warning: {}",
                    reel_io::redact_secrets(warning)
                );
            }
        }
        match report {
            Ok(report) if args.json => println!("{}", serde_json::to_string(&report)?),
            Ok(report) => println!("{}", report.to_table()),
            // One file: its error is the whole story.
            Err(e) if args.files.len() == 1 => return Err(e.into()),
            Err(e) => {
                failures += 1;
                eprintln!(
                    "reel-inspect: error: {}",
                    reel_io::redact_secrets(&e.to_string())
                );
            }
        }
    }
    if failures > 0 {
        bail!("{failures} of {} files failed", args.files.len());
    }
    Ok(ExitCode::SUCCESS)
}

fn run_doctor(args: DoctorArgs) -> anyhow::Result<ExitCode> {
    let options = DoctorOptions {
        canonical: !args.mcap_only,
    };
    let mut out = std::io::stdout().lock();
    let (mut unhealthy, mut unreadable) = (0, 0);
    for file in &args.files {
        let report = open_object(file, &StoreOptions::default())
            .map_err(reel_mcap::Error::from)
            .and_then(|source| reel_mcap::doctor(source, options));
        match report {
            Ok(report) => {
                unhealthy += usize::from(!report.is_ok());
                if args.json {
                    writeln!(out, "{}", serde_json::to_string(&report)?)?;
                } else {
                    write!(out, "{}", report.to_text())?;
                }
            }
            Err(e) if args.files.len() == 1 => return Err(e.into()),
            Err(e) => {
                unreadable += 1;
                eprintln!(
                    "reel-inspect: error: {}",
                    reel_io::redact_secrets(&e.to_string())
                );
            }
        }
    }
    if unreadable > 0 {
        bail!(
            "{unreadable} of {} files could not be read",
            args.files.len()
        );
    }
    Ok(if unhealthy > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn run_cat(args: CatArgs) -> anyhow::Result<ExitCode> {
    let source = open_object(&args.file, &StoreOptions::default())
        .with_context(|| format!("opening {}", args.file))?;
    let reader = EpisodeReader::open(source)?;
    for warning in reader.warnings() {
        eprintln!(
            "reel-inspect: warning: {}",
            reel_io::redact_secrets(warning)
        );
    }
    let topics: Vec<&str> = args.topics.iter().map(String::as_str).collect();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    reel_mcap::cat_messages(&reader, &topics, |message: MessageJson| {
        // Written as an io::Error (not through serde_json's writer), so a reader that
        // stops early (`| head`) ends the run quietly.
        writeln!(out, "{}", serde_json::to_string(&message)?)?;
        anyhow::Ok(())
    })?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
