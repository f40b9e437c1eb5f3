//! What can go wrong generating or writing an episode.

use std::path::PathBuf;

/// Errors from generating or writing an episode.
#[derive(Debug, thiserror::Error)]
pub enum SynthError {
    #[error("invalid synthesis config: {0}")]
    Config(String),
    #[error("MCAP writer failed: {0}")]
    Mcap(#[from] mcap::McapError),
    #[error("JPEG encoding failed: {0}")]
    Jpeg(#[from] jpeg_encoder::EncodingError),
    #[error("cannot write {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot serialize the fault log: {0}")]
    Json(#[from] serde_json::Error),
}
