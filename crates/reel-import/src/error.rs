//! What can go wrong importing a dataset, and what kind of failure each is.

use reel_io::{ErrorKind, Kinded};

/// An import failure. Each names the file (or dataset) it is about.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A dataset file that is missing, malformed or inconsistent with the others.
    #[error("{path}: {reason}")]
    Dataset {
        /// The file (or folder) at fault.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A dataset file that cannot be read from disk.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Writing an exported dataset's file failed.
    #[error("{path}: {source}")]
    Write {
        /// The file.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The manifest an export reads is unreadable.
    #[error(transparent)]
    Manifest(#[from] reel_manifest::ManifestError),
    /// A video file that does not read or decode.
    #[error(transparent)]
    Video(#[from] reel_video::Error),
    /// Writing a landing log failed.
    #[error(transparent)]
    Mcap(#[from] reel_mcap::Error),
    /// Reading or writing the store failed.
    #[error(transparent)]
    Store(#[from] reel_io::Error),
    /// Ingesting the landed episodes failed.
    #[error(transparent)]
    Pipeline(#[from] reel_pipeline::Error),
}

/// Whether the input is at fault (set that episode aside, go on) or the run's environment
/// (fail loudly).
impl Kinded for Error {
    fn kind(&self) -> ErrorKind {
        match self {
            Self::Dataset { .. } => ErrorKind::BadInput,
            Self::Read { source, .. } | Self::Write { source, .. } => ErrorKind::of_io(source),
            Self::Manifest(e) => e.kind(),
            Self::Video(e) => e.kind(),
            Self::Mcap(e) => e.kind(),
            Self::Store(e) => e.kind(),
            Self::Pipeline(e) => e.kind(),
        }
    }
}

impl Error {
    pub(crate) fn dataset(path: impl std::fmt::Display, reason: impl Into<String>) -> Self {
        Self::Dataset {
            path: path.to_string(),
            reason: reason.into(),
        }
    }
}

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
