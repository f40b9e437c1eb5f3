//! reel-preflight: check a node before a job starts.
//!
//! One JSON object with every check on stdout, a table on stderr. Exits 0 when no check
//! failed (warnings and skipped checks do not fail), 1 when one did, 2 on bad arguments
//! or an unreadable configuration. The `reel-preflight` binary and `reel preflight` both
//! run [`run`].

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;
use reel_resilience::preflight::{self, PreflightConfig, Report, Status, Target};

const EXAMPLES: &str = "\
Examples:
  reel-preflight --cache /nvme/reel-cache --manifest train.arrow
  reel-preflight --cache /nvme0/reel --cache /nvme1/reel --config thresholds.toml --io-test-size 1GiB
  reel-preflight --cache /nvme/reel-cache --manifest 's3://robots/runs/42/train.arrow?region=eu-west-1'";

/// Check a node (cache disk, free space, working-set coverage, memory, clocks, GPUs)
/// before a job starts.
#[derive(Debug, Parser)]
#[command(name = "reel-preflight", version, after_help = EXAMPLES)]
pub struct Args {
    /// Node-local cache folder; repeat for a cache spread over several disks.
    #[arg(long, required = true)]
    cache: Vec<PathBuf>,
    /// Training manifest whose working set the cache should hold: a local path, or an
    /// object URI fetched once per node.
    #[arg(long)]
    manifest: Option<String>,
    /// Thresholds (TOML, a path or store URI; fields left out keep their defaults).
    #[arg(long)]
    config: Option<String>,
    /// Size of the throughput test file, e.g. 256MiB (overrides `io.test_mib`; rounded up
    /// to whole MiB).
    #[arg(long, value_parser = reel_cli::parse_size, value_name = "SIZE")]
    io_test_size: Option<u64>,
    /// The test file's size in MiB (the older spelling of --io-test-size).
    #[arg(long, hide = true, conflicts_with = "io_test_size")]
    io_test_mib: Option<u64>,
}

/// Reads a threshold file (a path or store URI).
fn read_config(input: &str) -> Result<PreflightConfig> {
    let text = reel_cli::read_text_input(input)?;
    Ok(PreflightConfig::from_toml(input, &text)?)
}

/// Runs every check; exit 0 when none failed, 1 when one did, 2 when the configuration
/// or the manifest could not be read.
pub fn run(args: Args) -> Result<ExitCode> {
    let usage_error = |e: anyhow::Error| {
        eprintln!("{}", reel_cli::error_line("reel-preflight", &e));
        Ok(ExitCode::from(2))
    };
    let mut config = match args.config.as_deref().map(read_config) {
        Some(Ok(config)) => config,
        Some(Err(e)) => return usage_error(e),
        None => PreflightConfig::default(),
    };
    if let Some(bytes) = args.io_test_size {
        config.io.test_mib = bytes.div_ceil(1 << 20);
    }
    if let Some(mib) = args.io_test_mib {
        config.io.test_mib = mib;
    }
    let manifest = match args.manifest.as_deref().map(reel_cli::local_manifest) {
        Some(Ok(path)) => Some(path),
        Some(Err(e)) => return usage_error(e.into()),
        None => None,
    };
    let target = Target {
        cache_dirs: args.cache,
        manifest,
    };
    let report = preflight::run(&target, &config);
    println!(
        "{}",
        serde_json::to_string(&report).context("encoding the report")?
    );
    eprint!("{}", table(&report));
    Ok(if report.passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The report as aligned lines for people.
fn table(report: &Report) -> String {
    let status = |s: Status| match s {
        Status::Pass => "pass",
        Status::Warn => "WARN",
        Status::Fail => "FAIL",
        Status::Skipped => "skip",
    };
    let width = report
        .checks
        .iter()
        .map(|c| c.name.len())
        .max()
        .unwrap_or(0);
    let mut out = format!("preflight on {}\n", report.host);
    for check in &report.checks {
        let subject = check
            .subject
            .as_deref()
            .map(|s| format!(" [{s}]"))
            .unwrap_or_default();
        out += &format!(
            "  {:4}  {:width$}  {}{subject}\n",
            status(check.status),
            check.name,
            check.reason
        );
    }
    let failed = report.failures().count();
    out += &if failed == 0 {
        "node OK\n".to_owned()
    } else {
        format!("node NOT OK: {failed} check(s) failed\n")
    };
    out
}
