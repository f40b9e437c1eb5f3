//! Thresholds and settings of every check, loaded from TOML.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Thresholds and settings of every check; any field left out of a TOML file keeps its
/// default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct PreflightConfig {
    pub io: IoConfig,
    pub space: SpaceConfig,
    pub cache: CacheCoverageConfig,
    pub memory: MemoryConfig,
    pub clock: ClockConfig,
    pub gpu: GpuConfig,
}

/// Sequential throughput of the cache folder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IoConfig {
    /// Size of the test file written and read back, in MiB.
    pub test_mib: u64,
    /// Slowest acceptable write (including the final fsync), MiB/s.
    pub min_write_mib_s: f64,
    /// Slowest acceptable read of data not in the page cache, MiB/s.
    pub min_read_mib_s: f64,
}

impl Default for IoConfig {
    fn default() -> Self {
        Self {
            test_mib: 256,
            min_write_mib_s: 200.0,
            min_read_mib_s: 400.0,
        }
    }
}

/// Free space on the cache filesystem.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SpaceConfig {
    /// Space to keep free beyond the part of the working set not yet cached, MiB.
    pub headroom_mib: u64,
}

impl Default for SpaceConfig {
    fn default() -> Self {
        Self { headroom_mib: 1024 }
    }
}

/// How the cache is laid out and how much of the working set it should hold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CacheCoverageConfig {
    /// Block size the cache was warmed with (`reel-warm --block-size`), bytes.
    pub block_size: u64,
    /// Checksum page size of the cache, bytes.
    pub page_size: u32,
    /// Warn when less than this share of the working set is cached, %.
    pub warn_below_pct: f64,
    /// Fail when less than this share is cached, %. 0 never fails: training then reads
    /// misses from the remote store, slower but correct.
    pub fail_below_pct: f64,
}

impl Default for CacheCoverageConfig {
    fn default() -> Self {
        Self {
            block_size: reel_cache::DEFAULT_BLOCK_SIZE,
            page_size: reel_cache::DEFAULT_PAGE_SIZE,
            warn_below_pct: 100.0,
            fail_below_pct: 0.0,
        }
    }
}

/// Available memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MemoryConfig {
    /// Least `MemAvailable` (from `/proc/meminfo`), MiB.
    pub min_available_mib: u64,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        Self {
            min_available_mib: 2048,
        }
    }
}

/// Clock sanity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClockConfig {
    /// The wall clock must read later than this (seconds since the Unix epoch; default
    /// 2025-01-01T00:00:00Z). A node whose clock is earlier lost its time source.
    pub not_before_unix_s: u64,
    /// A folder on a shared filesystem whose server stamps file times (NFS, Lustre):
    /// the check writes a file there and compares the modification time the server
    /// gave it with the local clock. On a local filesystem the local kernel stamps the
    /// time, so the skew is always about zero. `None` skips the check.
    pub reference_dir: Option<PathBuf>,
    /// Largest acceptable skew against the reference, seconds.
    pub max_skew_s: f64,
}

impl Default for ClockConfig {
    fn default() -> Self {
        Self {
            not_before_unix_s: 1_735_689_600,
            reference_dir: None,
            max_skew_s: 2.0,
        }
    }
}

/// GPU health through `nvidia-smi` (skipped when it is not on `PATH`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GpuConfig {
    /// GPUs the node must show; `None` accepts any number, zero included (with a warning).
    pub expected_count: Option<u32>,
    /// Most uncorrected ECC errors since the driver loaded, summed over GPUs.
    pub max_uncorrected_ecc: u64,
    /// How long `nvidia-smi` may take before the GPU check fails (a hung query is itself
    /// a symptom of a GPU that fell off the bus).
    pub timeout_s: f64,
}

impl Default for GpuConfig {
    fn default() -> Self {
        Self {
            expected_count: None,
            max_uncorrected_ecc: 0,
            timeout_s: 30.0,
        }
    }
}

/// Errors of loading a configuration.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file cannot be read.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file is not a valid configuration.
    #[error("{path}: {source}")]
    Parse {
        path: PathBuf,
        #[source]
        source: toml::de::Error,
    },
}

/// A configuration is the run's setting: one that does not parse is the environment's,
/// as in every Reel crate; one that cannot be read keeps its I/O kind.
impl reel_io::Kinded for ConfigError {
    fn kind(&self) -> reel_io::ErrorKind {
        match self {
            Self::Io { source, .. } => reel_io::ErrorKind::of_io(source),
            Self::Parse { .. } => reel_io::ErrorKind::Environment,
        }
    }
}

impl PreflightConfig {
    /// Reads a TOML file; fields not given keep their defaults, unknown fields are errors.
    pub fn from_toml_file(path: impl AsRef<Path>) -> Result<Self, ConfigError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
            path: path.to_owned(),
            source,
        })?;
        Self::from_toml(path, &text)
    }

    /// Parses TOML text read from `name` (a path or a store URI, used in errors); fields
    /// not given keep their defaults, unknown fields are errors.
    pub fn from_toml(name: impl AsRef<Path>, text: &str) -> Result<Self, ConfigError> {
        toml::from_str(text).map_err(|source| ConfigError::Parse {
            path: name.as_ref().to_owned(),
            source,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // Tests fail loudly by design.

    use super::*;

    #[test]
    fn config_reads_partial_toml_and_refuses_unknown_fields() {
        let config: PreflightConfig =
            toml::from_str("[io]\nmin_write_mib_s = 50.0\n[gpu]\nexpected_count = 8\n").unwrap();
        assert_eq!(config.io.min_write_mib_s, 50.0);
        assert_eq!(config.io.test_mib, IoConfig::default().test_mib);
        assert_eq!(config.gpu.expected_count, Some(8));
        assert!(toml::from_str::<PreflightConfig>("[io]\nmin_write = 1\n").is_err());
    }
}
