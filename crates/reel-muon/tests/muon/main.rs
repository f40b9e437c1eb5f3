//! reel-muon's integration tests, one binary: Newton–Schulz and the optimizer against the
//! exact SVD oracle, sharded strategies on simulated clusters, optimizer state, and the
//! CUDA backend (built with feature `cuda`).

mod common;
mod cuda;
mod newton_schulz;
mod sharding;
mod state;
