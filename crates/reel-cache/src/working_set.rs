//! The working set of a job: the objects it reads whole, how much of them a cache already
//! holds, and the name its pin list gets.
//!
//! Callers list the objects (a training manifest's distinct episode files, say) as paths
//! and sizes, so the cache stays independent of what the objects contain.

use std::collections::HashSet;
use std::path::Path;

use crate::coverage::cached_coverage;
use crate::warm::WarmItem;
use crate::{CacheConfig, Result};

/// One object of a [`WorkingSet`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkingSetObject {
    /// Path in the remote store.
    pub path: String,
    /// Size in bytes, as the caller lists it (a manifest's `bytes` column).
    pub bytes: u64,
}

/// Objects a job reads whole, in the order first listed, each once.
///
/// ```
/// use reel_cache::{CacheConfig, WarmItem, WorkingSet};
///
/// // Two episodes, one of them listed twice (two samples of one file).
/// let set = WorkingSet::new([
///     ("canonical/ep-0.mcap", 300_000),
///     ("canonical/ep-1.mcap", 200_000),
///     ("canonical/ep-0.mcap", 300_000),
/// ]);
/// assert_eq!(set.len(), 2);
/// assert_eq!(set.total_bytes(), 500_000);
/// assert_eq!(set.warm_items()[1], WarmItem::whole("canonical/ep-1.mcap"));
///
/// // A cache that has never seen them holds none of it.
/// let dir = tempfile::tempdir()?;
/// let coverage = set.coverage(&CacheConfig::new(dir.path(), 1 << 30))?;
/// assert_eq!(coverage.cached_bytes, 0);
/// assert_eq!(coverage.missing_bytes(), 500_000);
/// assert_eq!(coverage.cached_percent(), 0.0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkingSet {
    objects: Vec<WorkingSetObject>,
}

impl WorkingSet {
    /// The set of `objects` (path, size in bytes); a path listed again is counted once,
    /// with the size it was first listed with.
    pub fn new<P: Into<String>>(objects: impl IntoIterator<Item = (P, u64)>) -> Self {
        let mut seen = HashSet::new();
        let objects = objects
            .into_iter()
            .map(|(path, bytes)| WorkingSetObject {
                path: path.into(),
                bytes,
            })
            .filter(|object| seen.insert(object.path.clone()))
            .collect();
        Self { objects }
    }

    /// The objects, in the order first listed.
    pub fn objects(&self) -> &[WorkingSetObject] {
        &self.objects
    }

    /// Number of objects.
    pub fn len(&self) -> usize {
        self.objects.len()
    }

    /// Whether the set has no object.
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// Bytes of every object together.
    pub fn total_bytes(&self) -> u64 {
        self.objects.iter().map(|object| object.bytes).sum()
    }

    /// What [`BlockCache::plan_warm`](crate::BlockCache::plan_warm) takes to fetch every
    /// object whole.
    pub fn warm_items(&self) -> Vec<WarmItem> {
        self.objects
            .iter()
            .map(|object| WarmItem::whole(object.path.as_str()))
            .collect()
    }

    /// How much of the set the cache described by `config` holds, read from its folders
    /// alone (see [`cached_coverage`]): no remote request, nothing written.
    pub fn coverage(&self, config: &CacheConfig) -> Result<WorkingSetCoverage> {
        let mut coverage = WorkingSetCoverage {
            objects: self.len(),
            total_bytes: self.total_bytes(),
            ..WorkingSetCoverage::default()
        };
        for object in &self.objects {
            if let Some(cached) = cached_coverage(config, &object.path)? {
                // The cache may hold a longer version than the caller lists; count no
                // more than the listed size.
                coverage.cached_bytes += cached.cached_bytes.min(object.bytes);
                coverage.whole_objects += usize::from(cached.cached_blocks == cached.blocks);
            }
        }
        Ok(coverage)
    }
}

/// How much of a [`WorkingSet`] a cache holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkingSetCoverage {
    /// Objects in the set.
    pub objects: usize,
    /// Objects every block of which is cached.
    pub whole_objects: usize,
    /// Bytes of the set.
    pub total_bytes: u64,
    /// Bytes of the set the cache holds.
    pub cached_bytes: u64,
}

impl WorkingSetCoverage {
    /// Bytes of the set still to fetch.
    pub fn missing_bytes(&self) -> u64 {
        self.total_bytes - self.cached_bytes
    }

    /// Share of the set's bytes cached, in percent; an empty set is wholly cached.
    pub fn cached_percent(&self) -> f64 {
        if self.total_bytes == 0 {
            100.0
        } else {
            100.0 * self.cached_bytes as f64 / self.total_bytes as f64
        }
    }
}

/// The default pin list name for the working set listed in the file at `list` (a training
/// manifest): the file's stem, reduced to characters safe in a file name, and a hash of its
/// absolute path, so two lists with one file name in different folders pin apart while
/// every warm of one list reuses its pin.
///
/// ```
/// use std::path::Path;
///
/// let name = reel_cache::default_pin_name(Path::new("/runs/42/train set.arrow"));
/// assert!(name.starts_with("train_set-"));
/// assert_ne!(name, reel_cache::default_pin_name(Path::new("/runs/43/train set.arrow")));
/// ```
pub fn default_pin_name(list: &Path) -> String {
    let absolute = std::path::absolute(list).unwrap_or_else(|_| list.to_owned());
    let stem: String = list
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    let hash = twox_hash::XxHash3_64::oneshot(absolute.to_string_lossy().as_bytes());
    format!("{stem}-{hash:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeats_keep_the_first_size_and_order() {
        let set = WorkingSet::new([("b", 2), ("a", 1), ("b", 5)]);
        let paths: Vec<&str> = set.objects().iter().map(|o| o.path.as_str()).collect();
        assert_eq!(paths, ["b", "a"]);
        assert_eq!(set.total_bytes(), 3);
    }

    #[test]
    fn an_empty_set_is_wholly_cached() {
        let coverage = WorkingSetCoverage::default();
        assert_eq!(coverage.cached_percent(), 100.0);
        assert_eq!(coverage.missing_bytes(), 0);
    }
}
