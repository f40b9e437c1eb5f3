//! reel-supervise: run a trainer and restart it from the last complete checkpoint when
//! it crashes or hangs.
//!
//! One JSON line per event on stdout (preflight, checkpoint_skipped, start, exit, hang,
//! restart, give_up, done, signal), a human line per event on stderr. The trainer's own
//! stdout goes to stderr, so stdout stays machine-readable. SIGTERM, SIGINT and SIGHUP
//! are forwarded to the trainer's process group and end supervision.
//!
//! Exit status: 0 when the trainer finished, 1 when it failed more often than allowed,
//! 3 when the node checks failed (the trainer never started), 128 + N after signal N.
//! The `reel-supervise` binary and `reel supervise` both run [`run`].

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Parser;
use reel_resilience::preflight::{PreflightConfig, Target};
use reel_resilience::supervise::{self, Event, Outcome, SuperviseConfig};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

const EXAMPLES: &str = "\
Examples:
  reel-supervise --checkpoints ckpt/ --heartbeat hb --hang-after 300 -- python train.py
  reel-supervise --max-restarts 10 --preflight-cache /nvme/reel-cache \\
    --preflight-manifest 's3://robots/runs/42/train.arrow?region=eu-west-1' -- ./train --config run.toml";

/// Run a trainer; restart it from the last complete checkpoint when it crashes or hangs.
#[derive(Debug, Parser)]
#[command(name = "reel-supervise", version, after_help = EXAMPLES)]
pub struct Args {
    /// Restarts allowed before giving up.
    #[arg(long, default_value_t = 3)]
    max_restarts: u32,
    /// Delay before the first restart in milliseconds; doubles with each restart.
    #[arg(long, default_value_t = 1000)]
    backoff_ms: u64,
    /// Longest delay between restarts in milliseconds.
    #[arg(long, default_value_t = 60_000)]
    max_backoff_ms: u64,
    /// Heartbeat file the trainer touches as it makes progress (passed to it as
    /// REEL_HEARTBEAT_FILE).
    #[arg(long, requires = "hang_after")]
    heartbeat: Option<PathBuf>,
    /// Seconds without a heartbeat after which the trainer counts as hung.
    #[arg(long, requires = "heartbeat")]
    hang_after: Option<f64>,
    /// Checkpoint folder to resume from (passed to the trainer as REEL_CHECKPOINT_DIR).
    #[arg(long)]
    checkpoints: Option<PathBuf>,
    /// Milliseconds between SIGTERM and SIGKILL when stopping the trainer.
    #[arg(long, default_value_t = 10_000)]
    kill_grace_ms: u64,
    /// Run the node checks on this cache folder before starting (repeatable).
    #[arg(long)]
    preflight_cache: Vec<PathBuf>,
    /// Manifest for the node checks' working-set checks: a local path, or an object URI
    /// fetched once per node.
    #[arg(long, requires = "preflight_cache")]
    preflight_manifest: Option<String>,
    /// Thresholds for the node checks (TOML, a path or store URI).
    #[arg(long, requires = "preflight_cache")]
    preflight_config: Option<String>,
    /// Run the node checks again before every restart.
    #[arg(long, requires = "preflight_cache")]
    preflight_on_restart: bool,
    /// The trainer command.
    #[arg(last = true, required = true)]
    command: Vec<OsString>,
}

/// Supervises the trainer until it finishes, gives up, fails its node checks or is
/// signalled.
pub fn run(args: Args) -> Result<ExitCode> {
    let mut config = SuperviseConfig::new(args.command);
    config.max_restarts = args.max_restarts;
    config.backoff = Duration::from_millis(args.backoff_ms);
    config.max_backoff = Duration::from_millis(args.max_backoff_ms);
    config.heartbeat = args.heartbeat;
    if let Some(secs) = args.hang_after {
        config.hang_after = Duration::try_from_secs_f64(secs).context("--hang-after")?;
    }
    config.checkpoints = args.checkpoints;
    config.kill_grace = Duration::from_millis(args.kill_grace_ms);
    config.trainer_stdout_to_stderr = true;
    if !args.preflight_cache.is_empty() {
        let thresholds: PreflightConfig = match &args.preflight_config {
            Some(input) => PreflightConfig::from_toml(input, &reel_cli::read_text_input(input)?)?,
            None => PreflightConfig::default(),
        };
        let manifest = args
            .preflight_manifest
            .as_deref()
            .map(reel_cli::local_manifest)
            .transpose()?;
        let target = Target {
            cache_dirs: args.preflight_cache,
            manifest,
        };
        config.preflight = Some((target, thresholds));
        config.preflight_on_restart = args.preflight_on_restart;
    }

    // Orphans of the trainer's tree come to this process, so none escapes a kill.
    supervise::adopt_orphans().context("becoming the child subreaper")?;
    let stop = Arc::new(AtomicUsize::new(0));
    for signal in [SIGTERM, SIGINT, SIGHUP] {
        signal_hook::flag::register_usize(signal, Arc::clone(&stop), signal as usize)
            .context("installing signal handlers")?;
    }

    let outcome = supervise::supervise(&config, &stop, |event| {
        if let Ok(line) = serde_json::to_string(event) {
            println!("{line}");
        }
        eprintln!("reel-supervise: {}", describe(event));
    })?;
    Ok(match outcome {
        Outcome::Done { .. } => ExitCode::SUCCESS,
        Outcome::GaveUp { .. } => ExitCode::FAILURE,
        Outcome::PreflightFailed(_) => ExitCode::from(3),
        Outcome::Interrupted { signal } => ExitCode::from(128u8.saturating_add(signal as u8)),
    })
}

fn describe(event: &Event) -> String {
    match event {
        Event::Preflight { passed: true, .. } => "node checks passed".into(),
        Event::Preflight { failed, .. } => {
            format!("node checks FAILED, not starting: {}", failed.join("; "))
        }
        Event::CheckpointSkipped { path, problem, .. } => {
            format!("skipping checkpoint {}: {problem}", path.display())
        }
        Event::Start {
            restart_count,
            pid,
            resume_step,
        } => match resume_step {
            Some(step) => {
                format!("started pid {pid} (restart {restart_count}), resuming from step {step}")
            }
            None => format!("started pid {pid} (restart {restart_count}), fresh start"),
        },
        Event::Exit {
            pid,
            code,
            signal,
            runtime_s,
            ..
        } => match (code, signal) {
            (Some(code), _) => format!("pid {pid} exited with code {code} after {runtime_s:.1} s"),
            (_, Some(signal)) => {
                format!("pid {pid} killed by signal {signal} after {runtime_s:.1} s")
            }
            _ => format!("pid {pid} ended after {runtime_s:.1} s"),
        },
        Event::Hang { pid, silent_s, .. } => {
            format!("pid {pid} hung: no heartbeat for {silent_s:.1} s, killing its process group")
        }
        Event::Restart {
            restart_count,
            reason,
            backoff_ms,
        } => format!("{reason}; restart {restart_count} in {backoff_ms} ms"),
        Event::GiveUp { restarts, reason } => {
            format!("giving up after {restarts} restart(s): {reason}")
        }
        Event::Done {
            restarts,
            runtime_s,
        } => {
            format!("trainer finished after {restarts} restart(s), {runtime_s:.1} s in all")
        }
        Event::Signal { signal } => {
            format!("got signal {signal}, forwarding it to the trainer and stopping")
        }
    }
}
