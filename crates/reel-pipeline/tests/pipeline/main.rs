//! reel-pipeline's integration tests, one binary: the as-recorded profile, the DAG engine
//! on a local store, the quality checks against reel-synth's ground truth, reproducible
//! canonical bytes, rosbag2 recordings in the landing store, and topic rules.

mod as_recorded;
mod engine;
mod qc_vs_sidecar;
mod reproducible;
mod rosbag2;
mod topics;
