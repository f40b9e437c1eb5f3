//! Shared helpers of the integration tests: seeded random matrices and a small transformer's shapes.
#![allow(dead_code)] // Each test module uses a part of them.

use faer::Mat;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};
use reel_muon::ParamSpec;

/// A row-major matrix of standard normal entries.
pub fn gaussian(rows: usize, cols: usize, seed: u64) -> Vec<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..rows * cols)
        .map(|_| StandardNormal.sample(&mut rng))
        .collect()
}

/// A random `n × n` orthogonal matrix (Q of a QR), row-major, in f64.
pub fn orthogonal(n: usize, seed: u64) -> Vec<f64> {
    let g = gaussian(n, n, seed);
    let m = Mat::<f64>::from_fn(n, n, |i, j| f64::from(g[i * n + j]));
    let q = m.qr().compute_Q();
    (0..n * n).map(|k| q[(k / n, k % n)]).collect()
}

/// `U·diag(s)·Vᵀ` for random orthogonal `U` (rows × rows) and `V` (cols × cols), row-major f32.
pub fn with_singular_values(rows: usize, cols: usize, s: &[f64], seed: u64) -> Vec<f32> {
    let u = orthogonal(rows, seed);
    let v = orthogonal(cols, seed + 1);
    let mut out = vec![0.0f32; rows * cols];
    for i in 0..rows {
        for j in 0..cols {
            let sum: f64 = s
                .iter()
                .enumerate()
                .map(|(k, &sk)| u[i * rows + k] * sk * v[j * cols + k])
                .sum();
            out[i * cols + j] = sum as f32;
        }
    }
    out
}

/// Row-major product of `a` (r × k) and `b` (k × c), in f64.
pub fn matmul_f64(a: &[f64], b: &[f64], r: usize, k: usize, c: usize) -> Vec<f64> {
    let mut out = vec![0.0; r * c];
    for i in 0..r {
        for l in 0..k {
            let x = a[i * k + l];
            for j in 0..c {
                out[i * c + j] += x * b[l * c + j];
            }
        }
    }
    out
}

/// The parameters of a tiny transformer: embeddings and head on AdamW, hidden matrices on Muon, norms
/// on AdamW, and one conv weight (flattened by Muon).
pub fn tiny_transformer(d: usize, layers: usize, vocab: usize) -> Vec<ParamSpec> {
    let mut specs = vec![
        ParamSpec::adamw("embed", [vocab, d]),
        ParamSpec::muon("stem.conv", [d, 3, 2, 2]),
    ];
    for l in 0..layers {
        for name in ["q", "k", "v", "o"] {
            specs.push(ParamSpec::muon(format!("layers.{l}.attn.{name}"), [d, d]));
        }
        specs.push(ParamSpec::muon(format!("layers.{l}.mlp.up"), [4 * d, d]));
        specs.push(ParamSpec::muon(format!("layers.{l}.mlp.down"), [d, 4 * d]));
        specs.push(ParamSpec::adamw(format!("layers.{l}.norm"), [d]));
    }
    specs.push(ParamSpec::adamw("head", [vocab, d]));
    specs
}

/// Runs `rank_main` on every rank of an in-process cluster, one thread each; results in rank order.
pub fn run_ranks<T: Send>(
    topology: reel_muon::Topology,
    rank_main: impl Fn(reel_muon::InProcessComm) -> T + Sync,
) -> Vec<T> {
    let rank_main = &rank_main;
    std::thread::scope(|scope| {
        let handles: Vec<_> = reel_muon::in_process_cluster(topology)
            .into_iter()
            .map(|comm| scope.spawn(move || rank_main(comm)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("rank thread"))
            .collect()
    })
}

/// The optimizer settings the sharding and state tests share.
pub fn test_config() -> (reel_muon::MuonConfig, reel_muon::AdamWConfig) {
    (
        reel_muon::MuonConfig {
            lr: 0.02,
            ..reel_muon::MuonConfig::default()
        },
        reel_muon::AdamWConfig {
            lr: 3e-3,
            ..reel_muon::AdamWConfig::default()
        },
    )
}

/// One Gaussian tensor per parameter, seeded `seed + i`.
pub fn seeded_tensors(specs: &[ParamSpec], seed: u64) -> Vec<Vec<f32>> {
    specs
        .iter()
        .enumerate()
        .map(|(i, s)| gaussian(1, s.numel(), seed + i as u64))
        .collect()
}
