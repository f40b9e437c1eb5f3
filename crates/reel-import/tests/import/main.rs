//! reel-import's integration tests, one binary: LeRobot datasets, HDF5 episodes, RLDS builds and
//! Zarr replay buffers imported into a store, and canonical episodes exported back out as LeRobot datasets.

#![allow(clippy::unwrap_used)] // Tests fail loudly by design.

mod common;
mod export;
mod hdf5;
mod lerobot;
mod rlds;
mod zarr;
