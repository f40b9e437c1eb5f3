//! Muon, the orthogonalised-momentum optimizer, with a CPU reference, a CUDA backend (feature `cuda`),
//! and sharding across ranks chosen at run time between *global* and *intra-node (hybrid)* owners.
//!
//! * [`Muon`]: Muon for hidden matrices plus AdamW for embeddings, heads and 1-D parameters, with
//!   `torch.optim.Muon`'s definitions (EMA momentum, Nesterov, five quintic Newton–Schulz steps,
//!   shape-dependent learning rate, decoupled weight decay).
//! * [`spectral`]: the exact f64 SVD oracle every Newton–Schulz implementation is tested against.
//! * [`ShardedMuon`] over a [`Communicator`] ([`in_process_cluster`] for tests, NCCL with `cuda`): each
//!   parameter has one owner per gather group; all strategies give bit-identical parameters.

//!
//! ```
//! use reel_muon::{AdamWConfig, Muon, MuonConfig, ParamSpec};
//!
//! let specs = vec![ParamSpec::muon("w", [4, 6]), ParamSpec::adamw("bias", [4])];
//! let mut optimizer = Muon::new(specs, MuonConfig::default(), AdamWConfig::default())?;
//! let mut params = vec![vec![0.5f32; 24], vec![0.0f32; 4]];
//! let grads = vec![(0..24).map(|i| i as f32 - 11.5).collect::<Vec<f32>>(), vec![1.0f32; 4]];
//! optimizer.step(&mut params, &grads)?;
//! assert!(params[0].iter().any(|&p| p != 0.5));
//! assert!(params[1].iter().all(|&p| p < 0.0));
//! # Ok::<(), reel_muon::MuonError>(())
//! ```

mod bf16;
pub mod comm;
pub mod cost;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod error;
pub mod newton_schulz;
pub mod optimizer;
pub mod shard;
pub mod spectral;
pub mod state;

pub use comm::{ByteCount, Communicator, Group, InProcessComm, Topology, in_process_cluster};
pub use error::{MuonError, Result};
pub use newton_schulz::{DEFAULT_COEFFICIENTS, NewtonSchulz, NsPrecision};
pub use optimizer::{AdamWConfig, AdjustLr, Muon, MuonConfig, ParamKind, ParamSpec, ParamState};
pub use shard::{ShardPlan, ShardedMuon, Strategy};
