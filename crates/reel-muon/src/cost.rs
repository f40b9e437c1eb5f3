//! Step-time model of sharded Muon, and the run-time choice between global and hybrid sharding.
//!
//! Per step, leaving out the gradient all-reduce (the same under both strategies), with `g` devices per
//! node, `n` nodes, `R` the achieved GEMM rate, `P` the bytes one all-gather delivers to its group:
//!
//! * hybrid: `T_H = F_H/R + (g−1)/g·P/B_nvl + (g−1)·α_nvl`
//! * global: `T_G = F_G/R + max((g−1)/g·P/B_nvl, (n−1)/n·P/B_node) + (ng−1)·α_ib`
//!
//! `F_H` and `F_G` are the Newton–Schulz FLOPs of the busiest owner under the actual largest-first
//! balance (ideally `F/g` and `F/(gn)`; a job with more ranks than matrices cannot split further).
//! `B_nvl` is NVLink per GPU per direction, `B_node` the node's InfiniBand (NICs × 50 GB/s for NDR),
//! `α` the per-hop latency of a ring. `P` is every parameter's f32 master weights, which is what
//! [`crate::ShardedMuon`] gathers; averaged over ranks, the in-process communicator counts exactly
//! `(s−1)/s·P` received per rank for a group of `s`.

use std::path::Path;

use crate::comm::Topology;
use crate::error::{MuonError, Result};
use crate::optimizer::{ParamKind, ParamSpec};
use crate::shard::{Strategy, balance};

/// GPU presets: the achieved bf16 GEMM rate is an assumption to be replaced by a measurement
/// (`scripts/gpu-check` prints one); link figures are the vendors' per-direction numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Gpu {
    /// NVIDIA H100 SXM: NVLink 4, 450 GB/s per direction.
    H100,
    /// NVIDIA H200 SXM: H100 compute, NVLink 4.
    H200,
    /// NVIDIA B200: NVLink 5, 900 GB/s per direction.
    B200,
}

impl std::str::FromStr for Gpu {
    type Err = MuonError;

    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "h100" => Ok(Self::H100),
            "h200" => Ok(Self::H200),
            "b200" => Ok(Self::B200),
            other => Err(MuonError::Config(format!(
                "unknown GPU `{other}` (h100, h200, b200)"
            ))),
        }
    }
}

/// NDR InfiniBand: 400 Gb/s per NIC.
pub const NDR_NIC_BYTES_PER_S: f64 = 50e9;

/// Rates and latencies the model needs.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Hardware {
    /// Achieved GEMM rate of Newton–Schulz per device, FLOP/s.
    pub gemm_flops: f64,
    /// NVLink bandwidth per device per direction, bytes/s.
    pub nvlink_bytes_per_s: f64,
    /// InfiniBand bandwidth of a whole node, bytes/s.
    pub node_bytes_per_s: f64,
    /// Latency per ring hop inside a node, seconds.
    pub nvlink_hop_s: f64,
    /// Latency per ring hop across nodes, seconds.
    pub ib_hop_s: f64,
}

impl Gpu {
    /// Preset rates for a node of these GPUs with `nics` NDR NICs.
    pub fn hardware(self, nics: usize) -> Hardware {
        let (gemm_tflops, nvlink_gb) = match self {
            Self::H100 => (600.0, 450.0),
            Self::H200 => (650.0, 450.0),
            Self::B200 => (1200.0, 900.0),
        };
        Hardware {
            gemm_flops: gemm_tflops * 1e12,
            nvlink_bytes_per_s: nvlink_gb * 1e9,
            node_bytes_per_s: nics as f64 * NDR_NIC_BYTES_PER_S,
            nvlink_hop_s: 3e-6,
            ib_hop_s: 8e-6,
        }
    }
}

/// What the model predicts for one strategy.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Prediction {
    /// The strategy.
    pub strategy: Strategy,
    /// Newton–Schulz FLOPs of the busiest owner.
    pub busiest_flops: f64,
    /// Compute time, seconds.
    pub compute_s: f64,
    /// Bandwidth time of the all-gather, seconds.
    pub transfer_s: f64,
    /// Ring latency, seconds.
    pub latency_s: f64,
    /// Step time, seconds.
    pub step_s: f64,
    /// Bytes one all-gather delivers to its group (`P`).
    pub gathered_bytes: f64,
    /// Bytes each rank receives on average, `(s−1)/s·P` for a group of `s`.
    pub received_per_rank: f64,
    /// Bytes each node receives over InfiniBand, `(n−1)/n·P` (global only).
    pub inter_node_per_node: f64,
}

/// Both predictions and the choice.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Choice {
    /// Global sharding.
    pub global: Prediction,
    /// Hybrid sharding.
    pub hybrid: Prediction,
    /// The faster one (global on a tie: it keeps less state per rank).
    pub strategy: Strategy,
}

/// Bytes gathered per parameter element: f32 master weights.
const GATHER_BYTES_PER_ELEMENT: f64 = 4.0;

/// Predicts one strategy's step on `topology`.
pub fn predict(
    specs: &[ParamSpec],
    topology: Topology,
    hw: &Hardware,
    strategy: Strategy,
    ns_steps: usize,
) -> Prediction {
    let group = match strategy {
        Strategy::Single => 1,
        Strategy::Global => topology.world_size(),
        Strategy::Hybrid => topology.per_node,
    };
    let costs: Vec<f64> = specs.iter().map(|s| s.update_flops(ns_steps)).collect();
    let assignment = balance(&costs, group);
    let mut flops = vec![0.0; group];
    for (cost, &member) in costs.iter().zip(&assignment) {
        flops[member] += cost;
    }
    let busiest_flops = flops.iter().copied().fold(0.0, f64::max);
    let elements: usize = specs.iter().map(ParamSpec::numel).sum();
    let gathered = if group > 1 {
        elements as f64 * GATHER_BYTES_PER_ELEMENT
    } else {
        0.0
    };
    let (g, n) = (topology.per_node as f64, topology.nodes as f64);
    let intra = (g - 1.0) / g * gathered / hw.nvlink_bytes_per_s;
    let (transfer_s, latency_s, inter_node_per_node) = match strategy {
        Strategy::Single => (0.0, 0.0, 0.0),
        Strategy::Hybrid => (intra, (g - 1.0) * hw.nvlink_hop_s, 0.0),
        Strategy::Global => {
            let inter_bytes = (n - 1.0) / n * gathered;
            let latency = if topology.nodes > 1 {
                (g * n - 1.0) * hw.ib_hop_s
            } else {
                (g - 1.0) * hw.nvlink_hop_s
            };
            (
                intra.max(inter_bytes / hw.node_bytes_per_s),
                latency,
                inter_bytes,
            )
        }
    };
    let compute_s = busiest_flops / hw.gemm_flops;
    Prediction {
        strategy,
        busiest_flops,
        compute_s,
        transfer_s,
        latency_s,
        step_s: compute_s + transfer_s + latency_s,
        gathered_bytes: gathered,
        received_per_rank: if group > 1 {
            gathered * (group as f64 - 1.0) / group as f64
        } else {
            0.0
        },
        inter_node_per_node,
    }
}

/// Predicts both strategies and picks the faster.
pub fn choose(specs: &[ParamSpec], topology: Topology, hw: &Hardware, ns_steps: usize) -> Choice {
    let global = predict(specs, topology, hw, Strategy::Global, ns_steps);
    let hybrid = predict(specs, topology, hw, Strategy::Hybrid, ns_steps);
    let strategy = if hybrid.step_s < global.step_s {
        Strategy::Hybrid
    } else {
        Strategy::Global
    };
    Choice {
        global,
        hybrid,
        strategy,
    }
}

/// The smallest node count in `1..=max_nodes` at which hybrid sharding is predicted faster.
pub fn crossover(
    specs: &[ParamSpec],
    per_node: usize,
    hw: &Hardware,
    ns_steps: usize,
    max_nodes: usize,
) -> Option<usize> {
    (1..=max_nodes).find(|&nodes| {
        Topology::new(nodes, per_node)
            .is_ok_and(|t| choose(specs, t, hw, ns_steps).strategy == Strategy::Hybrid)
    })
}

/// A model's parameter shapes, as listed in a shapes TOML file.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelShapes {
    /// The model's name.
    pub name: String,
    /// Every parameter, repeats expanded.
    pub params: Vec<ParamSpec>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ShapesFile {
    name: String,
    param: Vec<ShapeEntry>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ShapeEntry {
    name: String,
    shape: Vec<usize>,
    kind: ParamKind,
    /// Copies, one per layer; `{layer}` in the name becomes the layer index.
    #[serde(default = "one")]
    repeat: usize,
}

fn one() -> usize {
    1
}

impl ModelShapes {
    /// Parses a shapes file:
    ///
    /// ```toml
    /// name = "transformer-small"
    /// [[param]]
    /// name = "layers.{layer}.attn.q"
    /// shape = [512, 512]
    /// kind = "muon"        # or "adamw"
    /// repeat = 8           # optional, default 1
    /// ```
    pub fn parse(text: &str, path: &Path) -> Result<Self> {
        let file: ShapesFile =
            toml::from_str(text).map_err(|e| MuonError::bad_file(path, e.to_string()))?;
        let mut params = Vec::new();
        for entry in file.param {
            if entry.repeat > 1 && !entry.name.contains("{layer}") {
                return Err(MuonError::bad_file(
                    path,
                    format!("`{}` repeats but has no {{layer}} in its name", entry.name),
                ));
            }
            for layer in 0..entry.repeat {
                let spec = ParamSpec {
                    name: entry.name.replace("{layer}", &layer.to_string()),
                    shape: entry.shape.clone(),
                    kind: entry.kind,
                };
                spec.validate()
                    .map_err(|e| MuonError::bad_file(path, e.to_string()))?;
                params.push(spec);
            }
        }
        if params.is_empty() {
            return Err(MuonError::bad_file(path, "no [[param]] entries"));
        }
        Ok(Self {
            name: file.name,
            params,
        })
    }

    /// Reads and parses a shapes file.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| MuonError::io(path, e))?;
        Self::parse(&text, path)
    }

    /// Total elements.
    pub fn numel(&self) -> usize {
        self.params.iter().map(ParamSpec::numel).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn square_model(d: usize, count: usize) -> Vec<ParamSpec> {
        (0..count)
            .map(|i| ParamSpec::muon(format!("w{i}"), [d, d]))
            .collect()
    }

    #[test]
    fn ideal_split_matches_the_formula() {
        let specs = square_model(1024, 64);
        let hw = Gpu::H100.hardware(8);
        let topology = Topology::new(2, 8).expect("topology");
        let total: f64 = specs.iter().map(|s| s.update_flops(5)).sum();
        let global = predict(&specs, topology, &hw, Strategy::Global, 5);
        let hybrid = predict(&specs, topology, &hw, Strategy::Hybrid, 5);
        assert_eq!(global.busiest_flops, total / 16.0);
        assert_eq!(hybrid.busiest_flops, total / 8.0);
        let p = 64.0 * 1024.0 * 1024.0 * 4.0;
        assert_eq!(hybrid.gathered_bytes, p);
        let expected_h = total / 8.0 / hw.gemm_flops
            + 7.0 / 8.0 * p / hw.nvlink_bytes_per_s
            + 7.0 * hw.nvlink_hop_s;
        assert!((hybrid.step_s - expected_h).abs() < 1e-12);
        let expected_g = total / 16.0 / hw.gemm_flops
            + (7.0 / 8.0 * p / hw.nvlink_bytes_per_s).max(0.5 * p / hw.node_bytes_per_s)
            + 15.0 * hw.ib_hop_s;
        assert!((global.step_s - expected_g).abs() < 1e-12);
    }

    #[test]
    fn global_cannot_split_below_one_matrix() {
        let specs = square_model(512, 4);
        let hw = Gpu::B200.hardware(8);
        let global = predict(
            &specs,
            Topology::new(4, 8).expect("topology"),
            &hw,
            Strategy::Global,
            5,
        );
        assert_eq!(global.busiest_flops, specs[0].update_flops(5));
    }

    #[test]
    fn fewer_nics_move_the_crossover_earlier() {
        let specs = square_model(2048, 96);
        let hw1 = Gpu::H100.hardware(1);
        let hw8 = Gpu::H100.hardware(8);
        let one = crossover(&specs, 8, &hw1, 5, 512).expect("one NIC: hybrid wins somewhere");
        assert!(one >= 2);
        assert!(crossover(&specs, 8, &hw8, 5, 512).is_none_or(|eight| eight > one));
        // One node: global and hybrid are the same group; global wins ties.
        let single_node = choose(&specs, Topology::new(1, 8).expect("topology"), &hw1, 5);
        assert_eq!(single_node.strategy, Strategy::Global);
    }

    #[test]
    fn shapes_file_errors_name_the_file() {
        let path = Path::new("bad.toml");
        let err = ModelShapes::parse(
            "name = \"x\"\n[[param]]\nname = \"a\"\nshape = [4]\nkind = \"muon\"\n",
            path,
        )
        .expect_err("1-D muon");
        assert!(err.to_string().contains("bad.toml"), "{err}");
        assert!(ModelShapes::parse("name = 3", path).is_err());
        let ok = ModelShapes::parse(
            "name = \"x\"\n[[param]]\nname = \"l.{layer}.w\"\nshape = [4, 8]\nkind = \"muon\"\nrepeat = 3\n",
            path,
        )
        .expect("valid");
        assert_eq!(ok.params.len(), 3);
        assert_eq!(ok.params[2].name, "l.2.w");
    }
}
