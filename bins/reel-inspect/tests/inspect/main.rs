//! reel-inspect's integration tests, one binary: the layout report and lineage, and
//! `doctor` and `cat`, on canonical episodes and landing logs.

#![allow(clippy::unwrap_used)] // Tests fail loudly by design.

mod cli;
mod doctor;
