//! Atomic checkpoint directories.
//!
//! A checkpoint is `<root>/step-<NNNNNNNNNN>/` holding named byte blobs (the trainer's
//! weights, the loader state, the optimizer state: this module does not care what they
//! are) and a completion marker, [`MARKER`], listing every file with its size and xxh3-128
//! checksum. A save writes everything into a hidden temporary directory, fsyncs each
//! file, writes the marker last, fsyncs the directory, renames it into place and fsyncs
//! the root. A reader therefore sees either no `step-…` directory or a whole one, and a
//! crash at any point leaves at most a temporary directory behind, which readers ignore.
//!
//! Readers still check: [`CheckpointDir::latest`] walks the checkpoints from the newest
//! and returns the first whose marker parses and whose files all have the recorded size
//! and checksum, reporting every one it skipped and why (a disk that lost a write, a
//! marker deleted by hand, a half-copied directory).
//!
//! Files: `names` (the directory and marker names on disk), `error` (what goes wrong, and
//! why a checkpoint cannot be used), `marker` (the completion marker: its content, read
//! back and checked against the files), `durable` (fsynced writes and tolerant removals)
//! and `dir` (the folder of checkpoints: save, latest, load, prune).

mod dir;
mod durable;
mod error;
mod marker;
mod names;

pub use dir::{
    Checkpoint, CheckpointDir, CheckpointInfo, Latest, PruneReport, Skipped, latest_complete,
};
pub use error::{CheckpointError, Problem};
pub use marker::{FORMAT, FileEntry, Marker};
pub use names::{MARKER, step_dir_name, step_of_dir_name};
