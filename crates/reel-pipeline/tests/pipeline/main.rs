//! reel-pipeline's integration tests, one binary: the DAG engine on a local store, the
//! quality checks against reel-synth's ground truth, reproducible canonical bytes, and
//! rosbag2 recordings in the landing store.

mod engine;
mod qc_vs_sidecar;
mod reproducible;
mod rosbag2;
