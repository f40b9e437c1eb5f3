//! `train-policy`: a small policy trained on reel-loader batches with reel-muon (Muon for
//! the weight matrices, AdamW for the biases), on CPU, checkpointed so reel-supervise can
//! restart it exactly where it stopped.
//!
//! It predicts the 50-step action chunk from the current joint state and each camera's
//! latest frame pooled to 8×6, reports held-out loss before and after, steps/s and the
//! share of step time spent waiting for data, and prints a JSON summary on stdout.
//!
//! Under reel-supervise it reads `REEL_CHECKPOINT_DIR` and `REEL_RESUME_STEP`, touches
//! `REEL_HEARTBEAT_FILE` every step, and resumes loader, optimizer and parameters from
//! the checkpoint: an interrupted run ends with the parameters of an uninterrupted one.

mod model;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Parser;
use reel_cache::{BlockCache, CacheConfig};
use reel_io::Store;
use reel_loader::{
    Batch, LOADER_CHECKPOINT_FILE, Loader, LoaderOptions, LoaderState, MixtureSource, ResumeCheck,
    SampleSpec, SavedState, Shuffle, Sources,
};
use reel_manifest::{node_manifest_dir, open_uri};
use reel_muon::state::OptimizerState;
use reel_muon::{AdamWConfig, Muon, MuonConfig};
use reel_resilience::checkpoint::CheckpointDir;
use reel_resilience::supervise::{ENV_CHECKPOINT_DIR, ENV_HEARTBEAT_FILE, ENV_RESUME_STEP};
use serde::{Deserialize, Serialize};

use crate::model::{Mlp, examples};

#[derive(Debug, Parser)]
#[command(about)]
struct Args {
    /// Training manifest.
    #[arg(long)]
    manifest: String,
    /// Held-out manifest (episodes never trained on).
    #[arg(long)]
    heldout: String,
    /// Sample spec (TOML); its cameras, `state` and `action` feed the policy.
    #[arg(long)]
    spec: PathBuf,
    /// Store the manifests' URIs are relative to.
    #[arg(long)]
    store: String,
    /// Read through the node's block cache in this folder.
    #[arg(long)]
    cache: Option<PathBuf>,
    #[arg(long, default_value_t = 200)]
    steps: u64,
    #[arg(long, default_value_t = 16)]
    batch_size: usize,
    #[arg(long, default_value_t = 2)]
    workers: usize,
    #[arg(long, default_value_t = 128)]
    hidden: usize,
    /// Muon's learning rate. With a few episodes, higher rates fit the training episodes
    /// (through their frames) and lose on held-out ones.
    #[arg(long, default_value_t = 0.005)]
    muon_lr: f32,
    #[arg(long, default_value_t = 1e-3)]
    adamw_lr: f32,
    /// Held-out batches evaluated before and after training.
    #[arg(long, default_value_t = 8)]
    eval_batches: usize,
    /// Checkpoint every N steps (needs a checkpoint folder).
    #[arg(long, default_value_t = 25)]
    checkpoint_every: u64,
    /// Checkpoint folder (REEL_CHECKPOINT_DIR when run under reel-supervise).
    #[arg(long)]
    checkpoints: Option<PathBuf>,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Exit abruptly after this step on the first start (restart testing).
    #[arg(long)]
    crash_after: Option<u64>,
    /// Also write the JSON summary to this file.
    #[arg(long)]
    summary: Option<PathBuf>,
}

/// What a checkpoint holds besides parameters, optimizer state and the loader's state
/// (`loader.json`, which names its run: a checkpoint of another run is refused, and
/// `reel inspect lineage` follows it to the episodes).
#[derive(Debug, Serialize, Deserialize)]
struct TrainerState {
    step: u64,
    heldout_before: f32,
    #[serde(skip)]
    loader: Option<SavedState>,
}

#[derive(Debug, Serialize)]
struct Summary {
    steps: u64,
    resumed_from: Option<u64>,
    steps_per_s: f64,
    samples_per_s: f64,
    data_wait_share: f64,
    train_loss_first: f32,
    train_loss_last: f32,
    heldout_loss_before: f32,
    heldout_loss_after: f32,
    params_hash: String,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    reel_video::quiet_ffmpeg_logs();
    let spec = SampleSpec::from_toml_file(&args.spec)?;
    let cameras: Vec<String> = spec.cameras.iter().map(|c| c.name.clone()).collect();
    let store = Store::open(&args.store)?;
    let sources = match &args.cache {
        Some(dir) => Sources::Cache(Arc::new(BlockCache::for_store(
            CacheConfig::new(dir, 4 << 30),
            &store,
        )?)),
        None => Sources::Store(store),
    };
    let options = LoaderOptions {
        batch_size: args.batch_size,
        workers: args.workers,
        seed: args.seed,
        shuffle: Shuffle::Locality { run: 4 },
        drop_last: true,
        ..LoaderOptions::default()
    };
    // Its URI goes into each saved state, for the checkpoint's lineage.
    let train = Loader::mixture(
        vec![MixtureSource {
            manifest: open_uri(&args.manifest, &node_manifest_dir())?,
            sources: sources.clone(),
            weight: 1.0,
            location: Some(args.manifest.clone()),
        }],
        &spec,
        options.clone(),
    )?;
    let heldout = Loader::new(
        open_uri(&args.heldout, &node_manifest_dir())?,
        &spec,
        sources,
        LoaderOptions {
            shuffle: Shuffle::Global,
            workers: 1,
            ..options
        },
    )?;
    let heldout_batches: Vec<Batch> = heldout
        .epoch(0)?
        .take(args.eval_batches)
        .collect::<Result<_, _>>()?;
    if heldout_batches.is_empty() {
        bail!("{}: no held-out batch", args.heldout);
    }

    // Size the model from one batch.
    let first = examples(&heldout_batches[0], &cameras)?;
    let inputs = first.inputs.len() / first.n.max(1);
    let outputs = first.targets.len() / first.n.max(1);
    let mut mlp = Mlp::new(inputs, args.hidden, outputs, args.seed);
    let muon = MuonConfig {
        lr: args.muon_lr,
        weight_decay: 0.0,
        ..MuonConfig::default()
    };
    let adamw = AdamWConfig {
        lr: args.adamw_lr,
        weight_decay: 0.0,
        ..AdamWConfig::default()
    };
    let mut optimizer = Muon::new(mlp.specs(), muon, adamw)?;
    let heldout_loss = |mlp: &Mlp| -> anyhow::Result<f32> {
        let mut sum = 0.0;
        for b in &heldout_batches {
            sum += mlp.loss(&examples(b, &cameras)?, None);
        }
        Ok(sum / heldout_batches.len() as f32)
    };

    // Resume from the supervisor's checkpoint, if any.
    let checkpoint_root = args
        .checkpoints
        .clone()
        .or_else(|| std::env::var_os(ENV_CHECKPOINT_DIR).map(PathBuf::from));
    let checkpoints = checkpoint_root.map(CheckpointDir::open).transpose()?;
    let heartbeat = std::env::var_os(ENV_HEARTBEAT_FILE).map(PathBuf::from);
    let resume_step: Option<u64> = std::env::var(ENV_RESUME_STEP)
        .ok()
        .map(|s| s.parse())
        .transpose()
        .context(ENV_RESUME_STEP)?;
    let mut state = TrainerState {
        step: 0,
        loader: Some(train.saved_state(LoaderState::default())),
        heldout_before: heldout_loss(&mlp)?,
    };
    if let (Some(dir), Some(step)) = (&checkpoints, resume_step) {
        let checkpoint = dir.load(step)?;
        let file = |name: &str| {
            checkpoint
                .file(name)
                .ok_or_else(|| anyhow::anyhow!("checkpoint {step} has no {name}"))
        };
        state = serde_json::from_slice(file("trainer.json")?)?;
        state.loader = SavedState::from_checkpoint_json(file(LOADER_CHECKPOINT_FILE)?)?
            .into_iter()
            .next();
        mlp.params = decode_params(file("params.bin")?, &mlp)?;
        let scratch = tempfile::tempdir()?;
        let path = scratch.path().join("optimizer.safetensors");
        std::fs::write(&path, file("optimizer.safetensors")?)?;
        optimizer.import_state(&OptimizerState::load(&path)?)?;
        eprintln!("train-policy: resumed at step {step}");
    }
    let resumed_from = resume_step.filter(|_| checkpoints.is_some());

    let started = Instant::now();
    let (mut first_loss, mut last_loss) = (None, 0.0f32);
    let mut grads: Vec<Vec<f32>> = Vec::new();
    let mut waited = Duration::ZERO;
    let mut samples = 0u64;
    let start_step = state.step;
    let mut batches = train.epochs(train.restore(state.loader.as_slice(), ResumeCheck::SameRun)?);
    while state.step < args.steps {
        let asked = Instant::now();
        let Some(batch) = batches.next() else { break };
        let batch = batch.map_err(|e| match e {
            reel_loader::LoaderError::NoBatches { .. } => anyhow::anyhow!(
                "the training manifest gives no full batch of {}",
                args.batch_size
            ),
            e => e.into(),
        })?;
        waited += asked.elapsed();
        let ex = examples(&batch, &cameras)?;
        samples += ex.n as u64;
        let loss = mlp.loss(&ex, Some(&mut grads));
        optimizer.step(&mut mlp.params, &grads)?;
        first_loss.get_or_insert(loss);
        last_loss = loss;
        state.step += 1;
        state.loader = Some(train.saved_state(batches.state()));
        if let Some(path) = &heartbeat {
            std::fs::write(path, state.step.to_string())?;
        }
        if state.step.is_multiple_of(20) || state.step == args.steps {
            eprintln!("step {:>5}  loss {loss:.4}", state.step);
        }
        if let Some(dir) = &checkpoints
            && state.step.is_multiple_of(args.checkpoint_every)
        {
            save(dir, &state, &mlp, &optimizer)?;
        }
        if args.crash_after == Some(state.step) && resumed_from.is_none() {
            eprintln!("train-policy: crashing after step {} as asked", state.step);
            std::process::exit(3);
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    let steps_run = state.step - start_step;
    let summary = Summary {
        steps: state.step,
        resumed_from,
        steps_per_s: steps_run as f64 / elapsed,
        samples_per_s: samples as f64 / elapsed,
        data_wait_share: waited.as_secs_f64() / elapsed,
        train_loss_first: first_loss.unwrap_or(f32::NAN),
        train_loss_last: last_loss,
        heldout_loss_before: state.heldout_before,
        heldout_loss_after: heldout_loss(&mlp)?,
        params_hash: params_hash(&mlp.params),
    };
    eprintln!(
        "train-policy: {} steps, {:.1} steps/s, {:.0}% of step time waiting for data; \
         held-out loss {:.4} -> {:.4}",
        summary.steps,
        summary.steps_per_s,
        100.0 * summary.data_wait_share,
        summary.heldout_loss_before,
        summary.heldout_loss_after
    );
    let line = serde_json::to_string(&summary)?;
    if let Some(path) = &args.summary {
        std::fs::write(path, &line).with_context(|| format!("{}", path.display()))?;
    }
    println!("{line}");
    Ok(())
}

fn save(
    dir: &CheckpointDir,
    state: &TrainerState,
    mlp: &Mlp,
    optimizer: &Muon,
) -> anyhow::Result<()> {
    let scratch = tempfile::tempdir()?;
    let path = scratch.path().join("optimizer.safetensors");
    optimizer.export_state().save(&path, optimizer.specs())?;
    let optimizer_bytes = std::fs::read(&path)?;
    let params = encode_params(&mlp.params);
    let trainer = serde_json::to_vec(state)?;
    let loader = SavedState::to_checkpoint_json(state.loader.as_slice());
    dir.save(
        state.step,
        &[
            ("params.bin", &params),
            ("optimizer.safetensors", &optimizer_bytes),
            ("trainer.json", &trainer),
            (LOADER_CHECKPOINT_FILE, &loader),
        ],
    )?;
    dir.prune(3)?;
    Ok(())
}

fn encode_params(params: &[Vec<f32>]) -> Vec<u8> {
    params
        .iter()
        .flat_map(|p| p.iter().flat_map(|v| v.to_le_bytes()))
        .collect()
}

fn decode_params(bytes: &[u8], like: &Mlp) -> anyhow::Result<Vec<Vec<f32>>> {
    let total: usize = like.params.iter().map(Vec::len).sum();
    if bytes.len() != total * 4 {
        bail!(
            "params.bin holds {} bytes, the model {}",
            bytes.len(),
            total * 4
        );
    }
    let mut values = bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]));
    Ok(like
        .params
        .iter()
        .map(|p| values.by_ref().take(p.len()).collect())
        .collect())
}

/// A hash of the parameters' bytes: equal hashes, bit-identical parameters.
fn params_hash(params: &[Vec<f32>]) -> String {
    format!(
        "{:016x}",
        twox_hash::XxHash3_64::oneshot(&encode_params(params))
    )
}
