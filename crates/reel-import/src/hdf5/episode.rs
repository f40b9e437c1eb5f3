//! The episodes a set of HDF5 files holds: each file's layout (ALOHA, robomimic or mapped)
//! and each episode's place, id and rate.

use std::path::{Path, PathBuf};

use super::file::open;
use crate::{Error, Result};

/// How an HDF5 file lays out its episodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// One episode per file, ALOHA's datasets.
    Aloha,
    /// Demos under `data/`, robomimic's datasets.
    Robomimic,
    /// Any layout, as a [`Mapping`](super::mapping::Mapping) describes it.
    Mapped,
}

impl Layout {
    /// The layout a file has: `data/` holding demos is robomimic, `/observations` ALOHA.
    pub fn detect(path: &Path) -> Result<Self> {
        let file = open(path)?;
        if file.link_exists("data") {
            Ok(Self::Robomimic)
        } else if file.link_exists("observations") {
            Ok(Self::Aloha)
        } else {
            Err(Error::dataset(
                path.display(),
                "neither the ALOHA layout (/observations) nor robomimic's (/data)",
            ))
        }
    }

    /// `aloha` or `robomimic`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Aloha => "aloha",
            Self::Robomimic => "robomimic",
            Self::Mapped => "mapped",
        }
    }
}

/// One episode of a set of HDF5 files.
#[derive(Debug, Clone)]
pub(super) struct Episode {
    pub(super) file: PathBuf,
    pub(super) layout: Layout,
    /// The episode's group (a robomimic demo, a mapping's episode group), or none (the
    /// file is the episode).
    pub(super) demo: Option<String>,
    pub(super) id: String,
    pub(super) fps: f64,
}

impl Episode {
    /// The number ending the episode's group name (`demo_12`) or, for a file that is one
    /// episode, its file name (`episode_3.hdf5`): how these layouts number episodes.
    pub(super) fn index(&self) -> Option<i64> {
        let name = match &self.demo {
            Some(group) => group.rsplit('/').next().unwrap_or(group).to_owned(),
            None => self.file.file_stem()?.to_string_lossy().into_owned(),
        };
        let prefix = name.trim_end_matches(|c: char| c.is_ascii_digit());
        name[prefix.len()..].parse().ok()
    }
}

/// An episode id from two parts, as one path segment.
pub(super) fn episode_id(a: &str, b: &str) -> String {
    format!("{a}_{b}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect()
}
