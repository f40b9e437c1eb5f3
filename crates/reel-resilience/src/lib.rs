//! Job resilience for long training runs: check a node before it joins, checkpoint
//! atomically, and restart a crashed or hung trainer from the last complete checkpoint.
//!
//! A run that holds a fleet for weeks only moves while every rank is healthy, and when
//! it goes down it loses everything since its last checkpoint. Bad nodes rarely raise an
//! alert, so Reel assumes some part of the fleet is broken at any time:
//!
//! - [`preflight`] measures a node before the job starts (cache disk writable and fast
//!   enough, room for the working set, how much of it is already cached, memory, clocks,
//!   GPU error counters) and says which check failed and why.
//! - [`checkpoint`] saves named byte blobs as one directory that appears whole or not at
//!   all, with a completion marker holding every file's checksum, and finds the newest
//!   checkpoint that verifies.
//! - [`supervise`] runs the trainer in its own process group, kills it when it crashes or
//!   its heartbeat stops, and starts it again from the newest verified checkpoint with
//!   exponential backoff, telling it where to resume through the environment.
//!
//! The library never prints; `reel-preflight` and `reel-supervise` are its command lines.
//!
//! ```
//! use reel_resilience::checkpoint::{CheckpointDir, MARKER};
//!
//! let root = tempfile::tempdir()?;
//! let dir = CheckpointDir::open(root.path())?;
//! dir.save(100, &[("model", b"weights at 100"), ("loader", b"cursor 6400")])?;
//! let newest = dir.save(200, &[("model", b"weights at 200"), ("loader", b"cursor 12800")])?;
//!
//! // A disk that lost the end of a write: the newest checkpoint no longer verifies.
//! std::fs::write(newest.path.join("model"), b"weights at 2")?;
//! let latest = dir.latest()?;
//! assert_eq!(latest.checkpoint.map(|c| c.step), Some(100));
//! assert_eq!(latest.skipped[0].step, Some(200));
//! assert_eq!(dir.load(100)?.file("loader"), Some(&b"cursor 6400"[..]));
//! assert!(root.path().join("step-0000000100").join(MARKER).exists());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod checkpoint;
pub mod preflight;
mod process_tree;
pub mod supervise;
