//! reel-muon-plan: predicts sharded Muon step times for global and hybrid sharding and picks one.
//!
//! Prints one JSON line on stdout (both predictions and the choice) and a summary on stderr.
//! The `reel-muon-plan` binary and `reel muon-plan` both run [`run`].

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use reel_muon::Topology;
use reel_muon::cost::{Gpu, ModelShapes, choose, crossover};

const EXAMPLES: &str = "\
Examples:
  reel-muon-plan --shapes testdata/shapes-small.toml --nodes 4 --gpus-per-node 8
  reel-muon-plan --shapes shapes.toml --nodes 64 --gpus-per-node 8 --gpu h200 --crossover-up-to 256";

/// Predict the optimizer step of global vs hybrid (intra-node) Muon sharding, and choose.
#[derive(Debug, Parser)]
#[command(name = "reel-muon-plan", version, after_help = EXAMPLES)]
pub struct Args {
    /// Shapes TOML file, a path or store URI (see testdata/shapes-*.toml).
    #[arg(long)]
    shapes: String,
    /// Nodes in the job.
    #[arg(long)]
    nodes: usize,
    /// GPUs per node.
    #[arg(long)]
    gpus_per_node: usize,
    /// GPU preset: h100, h200 or b200.
    #[arg(long, default_value = "h100")]
    gpu: Gpu,
    /// NDR InfiniBand NICs per node (50 GB/s each).
    #[arg(long, default_value_t = 8)]
    nics: usize,
    /// Achieved Newton–Schulz GEMM rate per GPU in TFLOP/s (measured, e.g. by scripts/gpu-check);
    /// defaults to the preset's assumption.
    #[arg(long)]
    gemm_tflops: Option<f64>,
    /// NVLink bandwidth per GPU per direction in GB/s; defaults to the preset.
    #[arg(long)]
    nvlink_gbps: Option<f64>,
    /// Newton–Schulz iterations.
    #[arg(long, default_value_t = 5)]
    ns_steps: usize,
    /// Also report the smallest node count (up to this many) at which hybrid wins.
    #[arg(long)]
    crossover_up_to: Option<usize>,
}

/// Predicts both strategies and prints the choice.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let model = ModelShapes::parse(
        &reel_cli::read_text_input(&args.shapes)?,
        Path::new(&args.shapes),
    )?;
    let topology = Topology::new(args.nodes, args.gpus_per_node)?;
    let mut hw = args.gpu.hardware(args.nics);
    if let Some(tflops) = args.gemm_tflops {
        hw.gemm_flops = tflops * 1e12;
    }
    if let Some(gbps) = args.nvlink_gbps {
        hw.nvlink_bytes_per_s = gbps * 1e9;
    }
    let choice = choose(&model.params, topology, &hw, args.ns_steps);
    let first_hybrid = args
        .crossover_up_to
        .map(|max| crossover(&model.params, args.gpus_per_node, &hw, args.ns_steps, max));

    eprintln!(
        "{}: {} parameters on {} nodes × {} {:?} ({} NICs)",
        model.name,
        model.numel(),
        args.nodes,
        args.gpus_per_node,
        args.gpu,
        args.nics
    );
    for p in [&choice.global, &choice.hybrid] {
        eprintln!(
            "  {:<6} {:>9.3} ms  (compute {:.3} ms, transfer {:.3} ms, latency {:.3} ms)",
            p.strategy.to_string(),
            p.step_s * 1e3,
            p.compute_s * 1e3,
            p.transfer_s * 1e3,
            p.latency_s * 1e3
        );
    }
    eprintln!("  choice: {}", choice.strategy);
    if let Some(first) = first_hybrid {
        match first {
            Some(n) => eprintln!("  hybrid wins from {n} nodes"),
            None => eprintln!(
                "  hybrid never wins up to {} nodes",
                args.crossover_up_to.unwrap_or_default()
            ),
        }
    }

    let line = serde_json::json!({
        "model": model.name,
        "parameters": model.numel(),
        "nodes": args.nodes,
        "gpus_per_node": args.gpus_per_node,
        "gpu": args.gpu,
        "nics": args.nics,
        "hardware": hw,
        "global": choice.global,
        "hybrid": choice.hybrid,
        "choice": choice.strategy,
        "hybrid_from_nodes": first_hybrid.flatten(),
    });
    println!(
        "{}",
        serde_json::to_string(&line).context("encoding the prediction")?
    );
    Ok(ExitCode::SUCCESS)
}
