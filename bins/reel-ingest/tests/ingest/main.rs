//! reel-ingest's integration tests, one binary: the process SIGKILLed and resumed and run
//! concurrently against one store, the Kubernetes recipe without a cluster, and the Slurm
//! recipe on a one-node cluster.

mod common;
mod kubernetes;
mod reliability;
mod slurm;
