//! Benchmarks of the CPU reference, printed as JSON lines (one per figure):
//!
//! * `muon_step`: one Muon step over the hidden matrices of the small transformer in
//!   `testdata/shapes-small.toml` (d_model 512, 8 layers), Newton–Schulz in f32 and in bf16 — the same
//!   work `benches/peers/torch_muon.py` times for `torch.optim.Muon`.
//! * `newton_schulz_vs_gemm`: Newton–Schulz GFLOP/s (dense count `5·(4m²n + 2m³)`) beside faer's plain
//!   GEMM GFLOP/s on the same shape, one thread.
//! * `bytes_per_step`: bytes each rank receives per step for every strategy, counted by the in-process
//!   communicator, beside the cost model.
//!
//! `cargo bench -p reel-muon --bench muon_step` (threads: `RAYON_NUM_THREADS`, default all cores).

use std::path::Path;
use std::time::Instant;

use faer::linalg::matmul::matmul;
use faer::{Accum, Mat, Par};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};
use reel_muon::cost::{Gpu, ModelShapes, predict};
use reel_muon::newton_schulz::ns_flops;
use reel_muon::{
    AdamWConfig, Muon, MuonConfig, NewtonSchulz, NsPrecision, ParamKind, ShardedMuon, Strategy,
    Topology, in_process_cluster,
};
use serde_json::json;

fn gaussian(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n).map(|_| StandardNormal.sample(&mut rng)).collect()
}

/// Median of `reps` timings of `f`, after one warm-up call.
fn median_seconds(reps: usize, mut f: impl FnMut()) -> f64 {
    f();
    let mut times: Vec<f64> = (0..reps)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64()
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

fn main() {
    // `cargo bench` passes `--bench`; a filter word selects a group.
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let wanted = |name: &str| filter.is_empty() || filter.iter().any(|f| name.contains(f.as_str()));
    let shapes_path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/shapes-small.toml");
    let model = match ModelShapes::load(&shapes_path) {
        Ok(model) => model,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let threads = rayon::current_num_threads();

    if wanted("muon_step") {
        let specs: Vec<_> = model
            .params
            .iter()
            .filter(|p| p.kind == ParamKind::Muon)
            .cloned()
            .collect();
        let flops: f64 = specs.iter().map(|s| s.update_flops(5)).sum();
        for precision in [NsPrecision::F32, NsPrecision::Bf16] {
            let muon = MuonConfig {
                lr: 0.02,
                newton_schulz: NewtonSchulz {
                    precision,
                    ..NewtonSchulz::default()
                },
                ..MuonConfig::default()
            };
            let Ok(mut optimizer) = Muon::new(specs.clone(), muon, AdamWConfig::default()) else {
                eprintln!("invalid shapes");
                std::process::exit(1);
            };
            let mut params: Vec<Vec<f32>> = specs
                .iter()
                .enumerate()
                .map(|(i, s)| gaussian(s.numel(), i as u64))
                .collect();
            let grads: Vec<Vec<f32>> = specs
                .iter()
                .enumerate()
                .map(|(i, s)| gaussian(s.numel(), 1000 + i as u64))
                .collect();
            let seconds = median_seconds(5, || {
                if let Err(e) = optimizer.step(&mut params, &grads) {
                    eprintln!("{e}");
                    std::process::exit(1);
                }
            });
            println!(
                "{}",
                json!({"bench": "muon_step", "model": model.name, "matrices": specs.len(), "precision": precision,
                       "threads": threads, "ms": seconds * 1e3, "gflops_dense_count": flops / seconds / 1e9})
            );
        }
    }

    if wanted("newton_schulz_vs_gemm") {
        for (rows, cols) in [(512, 512), (512, 2048), (1024, 1024)] {
            let g = gaussian(rows * cols, 7);
            let ns = NewtonSchulz::default();
            let ns_s = median_seconds(5, || {
                std::hint::black_box(ns.orthogonalize(&g, rows, cols, Par::Seq));
            });
            let ns_gflops = ns_flops(rows, cols, 5) / ns_s / 1e9;
            let ns_bf16 = NewtonSchulz {
                precision: NsPrecision::Bf16,
                ..ns
            };
            let bf16_s = median_seconds(5, || {
                std::hint::black_box(ns_bf16.orthogonalize(&g, rows, cols, Par::Seq));
            });
            let bf16_gflops = ns_flops(rows, cols, 5) / bf16_s / 1e9;
            let (m, n) = (rows.min(cols), rows.max(cols));
            let a = Mat::<f32>::from_fn(m, n, |i, j| g[i * n + j]);
            let b = Mat::<f32>::from_fn(n, m, |i, j| g[j * n + i]);
            let mut c = Mat::<f32>::zeros(m, m);
            let gemm_s = median_seconds(9, || {
                matmul(
                    c.as_mut(),
                    Accum::Replace,
                    a.as_ref(),
                    b.as_ref(),
                    1.0,
                    Par::Seq,
                )
            });
            let gemm_gflops = 2.0 * (m * m * n) as f64 / gemm_s / 1e9;
            let mut sq = Mat::<f32>::zeros(n, n);
            let sq_a = Mat::<f32>::from_fn(n, n, |i, j| g[(i * n + j) % g.len()]);
            let square_s = median_seconds(5, || {
                matmul(
                    sq.as_mut(),
                    Accum::Replace,
                    sq_a.as_ref(),
                    sq_a.as_ref(),
                    1.0,
                    Par::Seq,
                )
            });
            let square_gflops = 2.0 * (n as f64).powi(3) / square_s / 1e9;
            println!(
                "{}",
                json!({"bench": "newton_schulz_vs_gemm", "shape": [rows, cols], "threads": 1,
                       "ns_gflops_dense_count": ns_gflops, "ns_bf16_gflops_dense_count": bf16_gflops,
                       "gemm_gflops_m_n_m": gemm_gflops,
                       "gemm_gflops_square": square_gflops, "ratio_vs_gemm_m_n_m": ns_gflops / gemm_gflops})
            );
        }
    }

    if wanted("bytes_per_step") {
        let hw = Gpu::H100.hardware(8);
        for (nodes, per_node) in [(1, 4), (2, 4), (4, 2)] {
            let Ok(topology) = Topology::new(nodes, per_node) else {
                continue;
            };
            for strategy in [Strategy::Global, Strategy::Hybrid] {
                let specs = model.params.clone();
                let received: Vec<_> = std::thread::scope(|scope| {
                    let handles: Vec<_> = in_process_cluster(topology)
                        .into_iter()
                        .map(|comm| {
                            let specs = specs.clone();
                            scope.spawn(move || {
                                let mut params: Vec<Vec<f32>> =
                                    specs.iter().map(|s| vec![0.01; s.numel()]).collect();
                                let grads: Vec<Vec<f32>> =
                                    specs.iter().map(|s| vec![0.02; s.numel()]).collect();
                                let muon = MuonConfig::default();
                                let mut optimizer = ShardedMuon::new(
                                    specs,
                                    strategy,
                                    comm,
                                    muon,
                                    AdamWConfig::default(),
                                )
                                .map_err(|e| e.to_string())?;
                                optimizer
                                    .step(&mut params, &grads)
                                    .map_err(|e| e.to_string())?;
                                Ok::<_, String>(optimizer.comm().bytes_received())
                            })
                        })
                        .collect();
                    handles
                        .into_iter()
                        .filter_map(|h| h.join().ok())
                        .filter_map(Result::ok)
                        .collect()
                });
                let mean = |f: fn(&reel_muon::ByteCount) -> u64| {
                    received.iter().map(f).sum::<u64>() as f64 / received.len().max(1) as f64
                };
                let prediction = predict(&model.params, topology, &hw, strategy, 5);
                println!(
                    "{}",
                    json!({"bench": "bytes_per_step", "model": model.name, "nodes": nodes, "gpus_per_node": per_node,
                           "strategy": strategy, "counted_mean_per_rank": mean(|b| b.total()),
                           "counted_intra_node_per_rank": mean(|b| b.intra_node),
                           "counted_inter_node_per_rank": mean(|b| b.inter_node),
                           "model_received_per_rank": prediction.received_per_rank,
                           "model_inter_node_per_node": prediction.inter_node_per_node,
                           "model_gathered_bytes": prediction.gathered_bytes})
                );
            }
        }
    }
}
