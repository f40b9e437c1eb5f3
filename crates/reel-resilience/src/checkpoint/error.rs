//! What goes wrong with checkpoint directories: the errors of their operations, and the
//! problems that make one checkpoint unusable (which readers report and skip).

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::names::MARKER;

/// Errors of checkpoint directories. Every variant names the path involved.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CheckpointError {
    /// A filesystem operation failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A file name a checkpoint cannot hold.
    #[error("invalid checkpoint file name `{name}`: {reason}")]
    InvalidName {
        /// The name as given.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The checkpoint of a step does not exist.
    #[error("{path}: no checkpoint of step {step}")]
    NotFound {
        /// Where it was looked for.
        path: PathBuf,
        /// The step asked for.
        step: u64,
    },
    /// The checkpoint exists but is incomplete or damaged.
    #[error("{path}: {problem}")]
    Invalid {
        /// The checkpoint directory.
        path: PathBuf,
        /// What is wrong.
        problem: Problem,
    },
    /// `prune` was asked to keep no checkpoint at all.
    #[error("prune must keep at least one checkpoint")]
    KeepNone,
}

/// A filesystem failure keeps its I/O kind; a missing step is the environment's; a
/// damaged checkpoint, or a name or request it cannot take, is bad input.
impl reel_io::Kinded for CheckpointError {
    fn kind(&self) -> reel_io::ErrorKind {
        use reel_io::ErrorKind;
        match self {
            Self::Io { source, .. } => ErrorKind::of_io(source),
            Self::NotFound { .. } => ErrorKind::Environment,
            Self::InvalidName { .. } | Self::Invalid { .. } | Self::KeepNone => ErrorKind::BadInput,
        }
    }
}

impl CheckpointError {
    pub(super) fn io(path: &Path, source: std::io::Error) -> Self {
        Self::Io {
            path: path.to_owned(),
            source,
        }
    }
}

/// Why a checkpoint directory cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Problem {
    /// A temporary directory left by a save that never finished.
    #[error("partial checkpoint (a save that did not finish)")]
    Partial,
    /// No completion marker.
    #[error("no {MARKER} marker")]
    NoMarker,
    /// The marker cannot be read or parsed, or describes another step.
    #[error("bad {MARKER} marker: {reason}")]
    BadMarker {
        /// What is wrong with it.
        reason: String,
    },
    /// A listed file is missing or unreadable.
    #[error("file `{file}` is missing or unreadable: {reason}")]
    Unreadable {
        /// The file name.
        file: String,
        /// The I/O error.
        reason: String,
    },
    /// A listed file has another size than recorded.
    #[error("file `{file}` has {actual} bytes, the marker says {expected}")]
    SizeMismatch {
        /// The file name.
        file: String,
        /// Size in the marker.
        expected: u64,
        /// Size on disk.
        actual: u64,
    },
    /// A listed file's content does not match its checksum.
    #[error("file `{file}` does not match its checksum")]
    ChecksumMismatch {
        /// The file name.
        file: String,
    },
}
