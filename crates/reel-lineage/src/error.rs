//! Errors of a lineage walk.

use std::path::PathBuf;

/// What stops a lineage walk. A changed or missing object is not an error: it is
/// reported in its record.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LineageError {
    /// The path is neither a checkpoint, a folder of checkpoints nor a manifest.
    #[error("{path}: {reason}")]
    NotLineage { path: PathBuf, reason: String },
    #[error(transparent)]
    Checkpoint(#[from] reel_resilience::checkpoint::CheckpointError),
    #[error(transparent)]
    Loader(#[from] reel_loader::LoaderError),
    #[error(transparent)]
    Manifest(#[from] reel_manifest::ManifestError),
    #[error(transparent)]
    Io(#[from] reel_io::Error),
    /// An episode could not be read for another reason than its bytes (an outage).
    #[error(transparent)]
    Episode(#[from] reel_mcap::Error),
    /// Writing a record failed (the consumer's error).
    #[error("writing the lineage: {0}")]
    Output(#[from] std::io::Error),
}

/// The wrapped error's kind; a path that holds no lineage is bad input; an output that
/// cannot be written keeps its I/O kind.
impl reel_io::Kinded for LineageError {
    fn kind(&self) -> reel_io::ErrorKind {
        use reel_io::ErrorKind;
        match self {
            Self::NotLineage { .. } => ErrorKind::BadInput,
            Self::Checkpoint(e) => e.kind(),
            Self::Loader(e) => e.kind(),
            Self::Manifest(e) => e.kind(),
            Self::Io(e) => e.kind(),
            Self::Episode(e) => e.kind(),
            Self::Output(e) => ErrorKind::of_io(e),
        }
    }
}
