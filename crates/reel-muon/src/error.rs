//! Typed errors of the optimizer, the communicators, state files and shape files.

use std::path::PathBuf;

/// Everything that can go wrong in `reel-muon`.
#[derive(Debug, thiserror::Error)]
pub enum MuonError {
    /// A parameter, gradient or state tensor has the wrong number of elements or dimensions.
    #[error("parameter `{name}`: {what}")]
    Shape {
        /// The parameter's name.
        name: String,
        /// What does not match.
        what: String,
    },
    /// A configuration value is out of range.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// A collective failed or its peers disagreed.
    #[error("communicator: {0}")]
    Comm(String),
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating-system error.
        source: std::io::Error,
    },
    /// A state or shapes file is malformed.
    #[error("{path}: {what}")]
    BadFile {
        /// The file.
        path: PathBuf,
        /// What is wrong in it.
        what: String,
    },
    /// The CUDA backend failed or is unavailable.
    #[error("cuda: {0}")]
    Cuda(String),
}

/// Result alias used throughout the crate.
pub type Result<T, E = MuonError> = std::result::Result<T, E>;

impl MuonError {
    pub(crate) fn shape(name: &str, what: impl Into<String>) -> Self {
        Self::Shape {
            name: name.to_owned(),
            what: what.into(),
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn bad_file(path: impl Into<PathBuf>, what: impl Into<String>) -> Self {
        Self::BadFile {
            path: path.into(),
            what: what.into(),
        }
    }
}
