//! GPU check of the CUDA backend: bf16 Newton–Schulz against the f64 SVD oracle and the CPU bf16 path,
//! a CUDA Muon step against the CPU optimizer, the sharded optimizer's gather (pack/unpack between
//! optimizers, and a one-rank NCCL gather), a one-rank NCCL round trip, and Newton–Schulz throughput
//! beside cuBLAS's bf16 GEMM rate. Prints JSON lines; exits non-zero when a check fails.
//!
//! `cargo run --release -p reel-muon --features cuda --example gpu_check`

use std::process::ExitCode;
use std::time::Instant;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};
use reel_muon::cuda::{
    CudaDevice, CudaMuon, NcclCommunicator, ShardedCudaMuon, available, nccl_available,
    nccl_unique_id,
};
use reel_muon::newton_schulz::ns_flops;
use reel_muon::spectral::{newton_schulz_oracle, relative_error};
use reel_muon::{
    AdamWConfig, Communicator, DEFAULT_COEFFICIENTS, Group, Muon, MuonConfig, MuonError,
    NewtonSchulz, NsPrecision, ParamSpec, Strategy, Topology,
};
use serde_json::json;

/// bf16 keeps 8 significant bits; five iterations of it land near 1e-2 relative error.
const BF16_TOLERANCE: f64 = 2e-2;

fn gaussian(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n).map(|_| StandardNormal.sample(&mut rng)).collect()
}

fn main() -> ExitCode {
    if !available() {
        eprintln!("gpu_check: CUDA driver, cuBLAS or NVRTC not found");
        return ExitCode::FAILURE;
    }
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("gpu_check: a check failed");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("gpu_check: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<bool, MuonError> {
    let device = CudaDevice::new(0)?;
    let mut ok = true;
    let ns = NewtonSchulz::default();
    let cpu_bf16 = NewtonSchulz {
        precision: NsPrecision::Bf16,
        ..ns
    };

    // 1. Accuracy of batched bf16 Newton–Schulz.
    for (batch, rows, cols) in [(4, 256, 256), (3, 256, 1024), (3, 1024, 256), (2, 512, 640)] {
        let per = rows * cols;
        let host = gaussian(batch * per, (rows * 31 + cols) as u64);
        let input = device.upload(&host)?;
        let out = device.newton_schulz(&ns, &input, batch, rows, cols)?;
        let out = device.download(&device.bf16_to_f32(&out)?)?;
        for k in 0..batch {
            let g = &host[k * per..(k + 1) * per];
            let got = &out[k * per..(k + 1) * per];
            let exact = newton_schulz_oracle(g, rows, cols, DEFAULT_COEFFICIENTS, ns.steps)?;
            let err_oracle = relative_error(got, &exact);
            let cpu: Vec<f64> = cpu_bf16
                .orthogonalize(g, rows, cols, faer::Par::Seq)
                .iter()
                .map(|&x| f64::from(x))
                .collect();
            let err_cpu_bf16 = relative_error(got, &cpu);
            let pass = err_oracle <= BF16_TOLERANCE;
            ok &= pass;
            println!(
                "{}",
                json!({"check": "newton_schulz_accuracy", "shape": [rows, cols], "matrix": k,
                       "rel_err_vs_oracle": err_oracle, "rel_err_vs_cpu_bf16": err_cpu_bf16, "pass": pass})
            );
        }
    }

    // 2. A CUDA Muon step against the CPU optimizer on a small transformer's shapes.
    let mut specs = vec![ParamSpec::adamw("embed", [1024, 256])];
    for l in 0..4 {
        for w in ["q", "k", "v", "o"] {
            specs.push(ParamSpec::muon(format!("layers.{l}.{w}"), [256, 256]));
        }
        specs.push(ParamSpec::muon(format!("layers.{l}.up"), [1024, 256]));
        specs.push(ParamSpec::muon(format!("layers.{l}.down"), [256, 1024]));
        specs.push(ParamSpec::adamw(format!("layers.{l}.norm"), [256]));
    }
    let params: Vec<Vec<f32>> = specs
        .iter()
        .enumerate()
        .map(|(i, s)| gaussian(s.numel(), 100 + i as u64))
        .collect();
    let muon = MuonConfig {
        lr: 0.02,
        ..MuonConfig::default()
    };
    let adamw = AdamWConfig::default();
    let mut cpu = Muon::new(specs.clone(), muon, adamw)?;
    let mut cpu_params = params.clone();
    let mut gpu = CudaMuon::new(device, specs.clone(), &params, muon, adamw)?;
    for step in 0..3u64 {
        let grads: Vec<Vec<f32>> = specs
            .iter()
            .enumerate()
            .map(|(i, s)| gaussian(s.numel(), 10_000 * (step + 1) + i as u64))
            .collect();
        cpu.step(&mut cpu_params, &grads)?;
        gpu.step(&grads)?;
    }
    let gpu_params = gpu.download_params()?;
    let mut worst: f64 = 0.0;
    for ((p0, c), g) in params.iter().zip(&cpu_params).zip(&gpu_params) {
        // Compare what the steps changed, not the parameters, which are dominated by their start.
        let cpu_delta: Vec<f64> = c.iter().zip(p0).map(|(a, b)| f64::from(a - b)).collect();
        let gpu_delta: Vec<f32> = g.iter().zip(p0).map(|(a, b)| a - b).collect();
        worst = worst.max(relative_error(&gpu_delta, &cpu_delta));
    }
    let pass = worst <= BF16_TOLERANCE;
    ok &= pass;
    println!(
        "{}",
        json!({"check": "muon_step_vs_cpu", "steps": 3, "worst_rel_err_of_update": worst, "pass": pass})
    );
    // 3. Sharding on the GPU. One device cannot hold two NCCL ranks, so the gather's two halves are
    //    checked apart: an optimizer owning every other parameter, refilled from one owning all
    //    (pack → unpack, device to device), must equal it; and a one-rank ShardedCudaMuon (its
    //    NCCL gather end to end) must equal CudaMuon.
    let owned: Vec<bool> = (0..specs.len()).map(|i| i % 2 == 0).collect();
    let others: Vec<usize> = (0..specs.len()).filter(|&i| !owned[i]).collect();
    let mut full = CudaMuon::new(CudaDevice::new(0)?, specs.clone(), &params, muon, adamw)?;
    let mut half = CudaMuon::with_owned(
        CudaDevice::new(0)?,
        specs.clone(),
        &params,
        &owned,
        muon,
        adamw,
    )?;
    let grads: Vec<Vec<f32>> = specs
        .iter()
        .enumerate()
        .map(|(i, s)| gaussian(s.numel(), 777 + i as u64))
        .collect();
    full.step(&grads)?;
    half.step(&grads)?;
    let numel: usize = others.iter().map(|&i| specs[i].numel()).sum();
    let mut buffer = full.device().upload(&vec![0.0; numel])?;
    full.pack_params(&others, &mut buffer.as_view_mut())?;
    full.device().synchronize()?;
    half.unpack_params(&others, &buffer.as_view())?;
    let (a, b) = (full.download_params()?, half.download_params()?);
    let worst = a
        .iter()
        .zip(&b)
        .map(|(x, y)| relative_error(y, &x.iter().map(|&v| f64::from(v)).collect::<Vec<_>>()))
        .fold(0.0f64, f64::max);
    let pass = worst <= BF16_TOLERANCE;
    ok &= pass;
    println!(
        "{}",
        json!({"check": "sharded_pack_unpack", "bit_identical": a == b, "worst_rel_err": worst, "pass": pass})
    );
    let device = CudaDevice::new(0)?;

    // 4. NCCL on a world of one (one GPU): the collectives run end to end.
    if nccl_available() {
        let topology = Topology::new(1, 1)?;
        let (world_id, node_id) = (nccl_unique_id()?, nccl_unique_id()?);
        let mut comm =
            NcclCommunicator::new(device.stream().clone(), 0, topology, &world_id, &node_id)?;
        let mut buf = vec![1.0f32, 2.0, 3.0];
        comm.all_reduce(Group::World, &mut buf)?;
        let mut gathered = vec![0.0f32; 3];
        comm.all_gather(Group::Node, &[4.0, 5.0, 6.0], &[3], &mut gathered)?;
        comm.barrier(Group::World)?;
        let pass = buf == [1.0, 2.0, 3.0] && gathered == [4.0, 5.0, 6.0];
        ok &= pass;
        println!("{}", json!({"check": "nccl_single_rank", "pass": pass}));

        let sharded_device = CudaDevice::new(0)?;
        let (world_id, node_id) = (nccl_unique_id()?, nccl_unique_id()?);
        let comm = NcclCommunicator::new(
            sharded_device.stream().clone(),
            0,
            topology,
            &world_id,
            &node_id,
        )?;
        let mut sharded = ShardedCudaMuon::new(
            sharded_device,
            specs.clone(),
            &params,
            Strategy::Global,
            comm,
            muon,
            adamw,
        )?;
        let mut single = CudaMuon::new(CudaDevice::new(0)?, specs.clone(), &params, muon, adamw)?;
        sharded.step(&grads)?;
        single.step(&grads)?;
        let (a, b) = (single.download_params()?, sharded.download_params()?);
        let pass = a == b;
        ok &= pass;
        println!(
            "{}",
            json!({"check": "sharded_cuda_single_rank", "bit_identical": pass, "pass": pass})
        );
    } else {
        println!(
            "{}",
            json!({"check": "nccl_single_rank", "skipped": "libnccl not found"})
        );
    }

    // 5. Throughput: Newton–Schulz on same-shape stacks beside cuBLAS's bf16 GEMM rate.
    let peak = device.gemm_rate(8192, 20)?;
    println!(
        "{}",
        json!({"bench": "cublas_bf16_gemm", "n": 8192, "tflops": peak / 1e12})
    );
    for (batch, rows, cols, model) in [
        (32, 512, 512, "small: q,k,v,o"),
        (8, 2048, 512, "small: mlp up"),
        (96, 2048, 2048, "1.2b: q,k,v,o"),
        (24, 8192, 2048, "1.2b: mlp up"),
        (32, 10240, 2560, "2.5b: mlp up"),
    ] {
        let input = device.upload(&gaussian(batch * rows * cols, 7))?;
        device.newton_schulz(&ns, &input, batch, rows, cols)?;
        device.synchronize()?;
        let reps = 5;
        let start = Instant::now();
        for _ in 0..reps {
            device.newton_schulz(&ns, &input, batch, rows, cols)?;
        }
        device.synchronize()?;
        let seconds = start.elapsed().as_secs_f64() / reps as f64;
        let rate = batch as f64 * ns_flops(rows, cols, ns.steps) / seconds;
        println!(
            "{}",
            json!({"bench": "newton_schulz_bf16", "shapes": model, "batch": batch, "shape": [rows, cols],
                   "ms": seconds * 1e3, "tflops": rate / 1e12, "fraction_of_gemm": rate / peak})
        );
    }
    Ok(ok)
}
