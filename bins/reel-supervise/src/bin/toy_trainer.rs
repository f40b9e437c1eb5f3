//! reel-toy-trainer: a deterministic stand-in for a trainer, for trying supervision.
//!
//! It updates a small state vector once per step from a hash of the step, touches the
//! heartbeat file (`REEL_HEARTBEAT_FILE`) every step, saves a checkpoint (the state and a
//! loader cursor) every `--checkpoint-every` steps through `reel-resilience`'s checkpoint
//! module, resumes from `REEL_RESUME_STEP`, and prints its final state. Whatever crashes
//! and restarts happen on the way, the final state equals that of an uninterrupted run.
//!
//! Faults on request: `--crashes C` makes the first C runs (by `REEL_RESTART_COUNT`) die
//! at a pseudo-random step derived from `--seed` and the restart count, alternately by
//! `exit(17)` and by `SIGABRT`; `--hang-at S` makes the first run stop at step S without
//! exiting or touching the heartbeat again.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Parser;
use reel_resilience::checkpoint::CheckpointDir;
use reel_resilience::supervise::{
    ENV_CHECKPOINT_DIR, ENV_HEARTBEAT_FILE, ENV_RESTART_COUNT, ENV_RESUME_STEP,
};

#[derive(Debug, Parser)]
#[command(name = "reel-toy-trainer", version, about)]
struct Args {
    /// Steps to run, numbered 1 to N.
    #[arg(long, default_value_t = 100)]
    steps: u64,
    /// Save a checkpoint after every K-th step.
    #[arg(long, default_value_t = 10)]
    checkpoint_every: u64,
    /// Checkpoints to keep.
    #[arg(long, default_value_t = 3)]
    keep: usize,
    /// Checkpoint folder (default: REEL_CHECKPOINT_DIR).
    #[arg(long)]
    checkpoints: Option<PathBuf>,
    /// Seed of the initial state and of the crash steps.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Crash in each of the first C runs.
    #[arg(long, default_value_t = 0)]
    crashes: u32,
    /// Hang at this step in the first run.
    #[arg(long)]
    hang_at: Option<u64>,
    /// Sleep per step in milliseconds (so steps take time, like real ones).
    #[arg(long, default_value_t = 0)]
    step_ms: u64,
    /// Also write the final state to this file (JSON).
    #[arg(long)]
    result: Option<PathBuf>,
}

const STATE_WORDS: usize = 4;

fn main() -> ExitCode {
    reel_cli::run_main(run)
}

fn run(args: Args) -> Result<ExitCode> {
    let restart: u32 = env_number(ENV_RESTART_COUNT)?.unwrap_or(0) as u32;
    let resume: Option<u64> = env_number(ENV_RESUME_STEP)?;
    let heartbeat = std::env::var_os(ENV_HEARTBEAT_FILE).map(PathBuf::from);
    let root = args
        .checkpoints
        .clone()
        .or_else(|| std::env::var_os(ENV_CHECKPOINT_DIR).map(PathBuf::from))
        .context("no checkpoint folder: pass --checkpoints or set REEL_CHECKPOINT_DIR")?;
    let checkpoints = CheckpointDir::open(&root)?;

    let (mut state, first) = match resume {
        Some(step) => (restore(&checkpoints, step)?, step + 1),
        None => (initial_state(args.seed), 1),
    };
    let crash_at = (restart < args.crashes && first <= args.steps)
        .then(|| first + mix(args.seed ^ mix(u64::from(restart) + 1)) % (args.steps - first + 1));

    for step in first..=args.steps {
        if crash_at == Some(step) {
            eprintln!("toy trainer: crashing at step {step} (run {restart})");
            if restart.is_multiple_of(2) {
                std::process::exit(17);
            }
            std::process::abort();
        }
        if restart == 0 && args.hang_at == Some(step) {
            eprintln!("toy trainer: hanging at step {step}");
            loop {
                std::thread::sleep(Duration::from_secs(1));
            }
        }
        advance(&mut state, step);
        if args.step_ms > 0 {
            std::thread::sleep(Duration::from_millis(args.step_ms));
        }
        if let Some(file) = &heartbeat {
            std::fs::write(file, format!("{step}\n"))
                .with_context(|| format!("writing the heartbeat {}", file.display()))?;
        }
        if step % args.checkpoint_every.max(1) == 0 || step == args.steps {
            let words: Vec<u8> = state.iter().flat_map(|w| w.to_le_bytes()).collect();
            let cursor = (step + 1).to_le_bytes();
            checkpoints.save(step, &[("state", &words), ("loader", &cursor)])?;
            checkpoints.prune(args.keep.max(1))?;
        }
    }

    let hex: Vec<String> = state.iter().map(|w| format!("{w:016x}")).collect();
    println!("final state after {} steps: {}", args.steps, hex.join(" "));
    if let Some(path) = &args.result {
        let json = serde_json::json!({ "steps": args.steps, "state": hex });
        write_atomic(path, json.to_string().as_bytes())?;
    }
    Ok(ExitCode::SUCCESS)
}

fn restore(checkpoints: &CheckpointDir, step: u64) -> Result<[u64; STATE_WORDS]> {
    let checkpoint = checkpoints.load(step)?;
    let words = checkpoint
        .file("state")
        .context("checkpoint without `state`")?;
    let cursor = checkpoint
        .file("loader")
        .context("checkpoint without `loader`")?;
    if words.len() != 8 * STATE_WORDS || cursor != (step + 1).to_le_bytes() {
        bail!("checkpoint of step {step} does not hold this trainer's state");
    }
    let mut state = [0u64; STATE_WORDS];
    for (word, bytes) in state.iter_mut().zip(words.chunks_exact(8)) {
        let mut le = [0u8; 8];
        le.copy_from_slice(bytes);
        *word = u64::from_le_bytes(le);
    }
    Ok(state)
}

fn initial_state(seed: u64) -> [u64; STATE_WORDS] {
    std::array::from_fn(|i| mix(seed.wrapping_mul(31).wrapping_add(i as u64)))
}

/// One training step: every word absorbs a hash of the step and its neighbour, so the
/// result depends on every step having run exactly once, in order.
fn advance(state: &mut [u64; STATE_WORDS], step: u64) {
    for i in 0..STATE_WORDS {
        let next = state[(i + 1) % STATE_WORDS];
        state[i] = mix(state[i] ^ mix(step.wrapping_mul(STATE_WORDS as u64) + i as u64))
            ^ next.rotate_left(17);
    }
}

/// splitmix64's finaliser.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn env_number(name: &str) -> Result<Option<u64>> {
    match std::env::var(name) {
        Ok(text) => {
            Ok(Some(text.parse().with_context(|| {
                format!("{name}={text} is not a number")
            })?))
        }
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {name}")),
    }
}

fn write_atomic(path: &Path, data: &[u8]) -> Result<()> {
    let temp = path.with_extension(format!("tmp-{}", std::process::id()));
    std::fs::write(&temp, data).with_context(|| format!("writing {}", temp.display()))?;
    std::fs::rename(&temp, path).with_context(|| format!("renaming to {}", path.display()))?;
    Ok(())
}
