//! The completion marker: what it records (every file with its size and xxh3-128
//! checksum), reading it back, and checking a checkpoint's files against it.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use serde::{Deserialize, Serialize};
use twox_hash::XxHash3_128;

use super::error::{CheckpointError, Problem};
use super::names::MARKER;

/// Format tag stored in every marker.
pub const FORMAT: &str = "reel-checkpoint/1";
/// Buffer for hashing files while verifying.
const HASH_CHUNK: usize = 1 << 20;

/// One file of a checkpoint as its marker records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    /// File name inside the checkpoint directory.
    pub name: String,
    /// Size in bytes.
    pub bytes: u64,
    /// xxh3-128 of the content, 32 lowercase hex digits.
    pub xxh3_128: String,
}

/// The completion marker's content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Marker {
    /// Always [`FORMAT`].
    pub format: String,
    /// The training step the checkpoint holds.
    pub step: u64,
    /// Seconds since the Unix epoch when the save finished (informational).
    pub saved_at_unix_s: u64,
    /// Every file of the checkpoint.
    pub files: Vec<FileEntry>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Depth {
    Sizes,
    Checksums,
}

pub(super) fn check_name(name: &str) -> Result<(), CheckpointError> {
    let reason = if name.is_empty() {
        Some("empty")
    } else if name == MARKER {
        Some("reserved for the completion marker")
    } else if name.starts_with('.') {
        Some("starts with a dot")
    } else if name.contains('/') || name.contains('\0') {
        Some("contains a path separator or NUL")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(CheckpointError::InvalidName {
            name: name.to_owned(),
            reason,
        }),
        None => Ok(()),
    }
}

pub(super) fn read_marker(dir: &Path, step: u64) -> Result<Marker, Problem> {
    let path = dir.join(MARKER);
    let text = match std::fs::read(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Problem::NoMarker),
        Err(e) => {
            return Err(Problem::BadMarker {
                reason: e.to_string(),
            });
        }
    };
    let marker: Marker = serde_json::from_slice(&text).map_err(|e| Problem::BadMarker {
        reason: e.to_string(),
    })?;
    if marker.format != FORMAT {
        return Err(Problem::BadMarker {
            reason: format!("format `{}`, expected `{FORMAT}`", marker.format),
        });
    }
    if marker.step != step {
        return Err(Problem::BadMarker {
            reason: format!(
                "marker is for step {}, directory for step {step}",
                marker.step
            ),
        });
    }
    if let Some(entry) = marker.files.iter().find(|f| check_name(&f.name).is_err()) {
        return Err(Problem::BadMarker {
            reason: format!("invalid file name `{}`", entry.name),
        });
    }
    Ok(marker)
}

pub(super) fn verify(dir: &Path, step: u64, depth: Depth) -> Result<Marker, Problem> {
    let marker = read_marker(dir, step)?;
    for entry in &marker.files {
        let unreadable = |e: std::io::Error| Problem::Unreadable {
            file: entry.name.clone(),
            reason: e.to_string(),
        };
        let mut file = File::open(dir.join(&entry.name)).map_err(unreadable)?;
        let actual = file.metadata().map_err(unreadable)?.len();
        if actual != entry.bytes {
            return Err(Problem::SizeMismatch {
                file: entry.name.clone(),
                expected: entry.bytes,
                actual,
            });
        }
        if depth == Depth::Checksums {
            let mut hasher = XxHash3_128::new();
            let mut buf = vec![0u8; HASH_CHUNK];
            loop {
                let n = file.read(&mut buf).map_err(unreadable)?;
                if n == 0 {
                    break;
                }
                hasher.write(&buf[..n]);
            }
            if hex128(hasher.finish_128()) != entry.xxh3_128 {
                return Err(Problem::ChecksumMismatch {
                    file: entry.name.clone(),
                });
            }
        }
    }
    Ok(marker)
}

pub(super) fn hex128(value: u128) -> String {
    format!("{value:032x}")
}
