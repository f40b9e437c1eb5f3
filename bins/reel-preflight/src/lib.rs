//! reel-preflight: check a node before a job starts.
//!
//! One JSON object with every check on stdout, a table on stderr. Exits 0 when no check
//! failed (warnings and skipped checks do not fail), 1 when one did, 2 on bad arguments
//! or an unreadable configuration.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;
use reel_resilience::preflight::{self, PreflightConfig, Report, Status, Target};

#[derive(Debug, Parser)]
#[command(name = "reel-preflight", version, about)]
struct Args {
    /// Node-local cache folder; repeat for a cache spread over several disks.
    #[arg(long, required = true)]
    cache: Vec<PathBuf>,
    /// Training manifest whose working set the cache should hold.
    #[arg(long)]
    manifest: Option<PathBuf>,
    /// Thresholds (TOML; fields left out keep their defaults).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Size of the throughput test file in MiB (overrides `io.test_mib`).
    #[arg(long)]
    io_test_mib: Option<u64>,
}

fn main() -> Result<ExitCode> {
    let args = Args::parse();
    let mut config = match args.config.as_deref().map(PreflightConfig::from_toml_file) {
        Some(Ok(config)) => config,
        Some(Err(e)) => {
            eprintln!("reel-preflight: {e}");
            return Ok(ExitCode::from(2));
        }
        None => PreflightConfig::default(),
    };
    if let Some(mib) = args.io_test_mib {
        config.io.test_mib = mib;
    }
    let target = Target {
        cache_dirs: args.cache,
        manifest: args.manifest,
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
